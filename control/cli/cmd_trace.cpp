// SPDX-License-Identifier: Apache-2.0
//
// Section "trace": the packet trace (dataplane/trace.h, control/cli/packet_trace.h). `trace start`
// hands each worker a buffer for the next N matching packets, `show trace` reads what they
// published, `trace stop` takes the buffers back from the workers and keeps the records.
#include <rte_cycles.h>

#include <charconv>

#include "config/ip.h"
#include "control/cli/handlers.h"
#include "control/cli/packet_trace.h"
#include "control/runtime/runtime.h"

namespace egw::cli {

namespace {

using nlohmann::json;

constexpr uint32_t kDefaultTracePackets = 50;

uint32_t to_u32(const std::string& s) {
    uint32_t v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
}

void set_address(const std::string& text, bool& by, bool& v6, uint8_t (&to)[16]) {
    net::IpAddr a = *net::parse_ip(text);
    by = true;
    v6 = !a.is_v4();
    if (v6) {
        std::copy(a.bytes().begin(), a.bytes().end(), to);
    } else {
        uint32_t h = a.v4();
        to[0] = static_cast<uint8_t>(h >> 24);
        to[1] = static_cast<uint8_t>(h >> 16);
        to[2] = static_cast<uint8_t>(h >> 8);
        to[3] = static_cast<uint8_t>(h);
    }
}

std::string describe_match(const Args& a) {
    std::string s;
    for (const char* k : {"port", "proto", "saddr", "daddr", "sport", "dport"})
        if (a.has(k)) s += std::string(s.empty() ? "" : " ") + k + " " + a.get(k);
    return s.empty() ? "every packet" : s;
}

}  // namespace

Reply trace_start(Context& ctx, const Args& a) {
    uint32_t limit = a.has("N") ? to_u32(a.get("N")) : kDefaultTracePackets;
    if (limit > dp::kTraceMaxPackets)
        return fail("bad N \"" + a.get("N") + "\": a trace takes at most " + std::to_string(dp::kTraceMaxPackets) +
                    " packets");
    dp::TraceMatch m;
    if (a.has("port")) {
        const control::PortInfo* p = ctx.find_port(a.get("port"));
        if (!p) return fail("no port \"" + a.get("port") + "\" (show port info all lists them)");
        m.by_port = true;
        m.port = p->id;
    }
    if (a.has("proto")) {
        const std::string& p = a.get("proto");
        m.proto = p == "tcp" ? 6 : p == "udp" ? 17 : p == "icmpv6" ? 58 : 1;
    }
    if (a.has("saddr")) set_address(a.get("saddr"), m.by_saddr, m.saddr_v6, m.saddr);
    if (a.has("daddr")) set_address(a.get("daddr"), m.by_daddr, m.daddr_v6, m.daddr);
    if (a.has("sport")) {
        m.by_sport = true;
        m.sport = static_cast<uint16_t>(to_u32(a.get("sport")));
    }
    if (a.has("dport")) {
        m.by_dport = true;
        m.dport = static_cast<uint16_t>(to_u32(a.get("dport")));
    }
    if (!ctx.host.trace) ctx.host.trace = std::make_shared<PacketTrace>();
    ctx.host.trace->start(ctx.host.runtime.shared(), ctx.host.runtime.workers(), m, limit, rte_rdtsc());
    std::string what = describe_match(a);
    return ok("tracing the next " + std::to_string(limit) + " packet(s) of " + what + " on " +
                  std::to_string(ctx.host.runtime.workers().size()) + " worker(s)\n",
              json{{"tracing", true}, {"limit", limit}, {"match", what}});
}

Reply trace_stop(Context& ctx, const Args&) {
    if (!ctx.host.trace || !ctx.host.trace->active()) return ok("no trace running\n", json{{"tracing", false}});
    ctx.host.trace->stop();
    size_t n = ctx.host.trace->entries().size();
    return ok("trace stopped: " + std::to_string(n) + " packet(s) recorded (show trace)\n",
              json{{"tracing", false}, {"packets", n}});
}

Reply show_trace(Context& ctx, const Args&) {
    if (!ctx.host.trace || !ctx.host.trace->started())
        return ok("no trace yet (trace start)\n", json{{"tracing", false}, {"packets", json::array()}});
    const PacketTrace& t = *ctx.host.trace;
    TraceView view;
    for (const auto& p : ctx.host.runtime.ports())
        view.port_names[p.id] = p.name;
    view.tsc_hz = rte_get_tsc_hz();
    view.start_tsc = t.start_tsc();
    auto entries = t.entries();
    std::string head = std::string(t.active() ? "tracing" : "stopped") + ": " + std::to_string(entries.size()) +
                       " of " + std::to_string(t.limit()) + " packet(s)\n";
    return ok(head + render_trace(entries, view),
              json{{"tracing", t.active()}, {"limit", t.limit()}, {"packets", trace_json(entries, view)}});
}

}  // namespace egw::cli
