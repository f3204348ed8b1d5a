// SPDX-License-Identifier: Apache-2.0
#include "control/cli/packet_trace.h"

#include <rte_pause.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "config/ip.h"
#include "dataplane/burst.h"

namespace egw::cli {

using nlohmann::json;

PacketTrace::~PacketTrace() {
    take_back(nullptr);
}

// Clears the workers' pointers; with `shared`'s RCU, waits until every worker has passed a
// quiescent state since, so that none can still write the buffers freed next.
void PacketTrace::take_back(dp::DataplaneShared* shared) {
    for (dp::Worker* w : workers_)
        w->trace.store(nullptr, std::memory_order_release);
    if (shared && shared->qsbr && !workers_.empty()) {
        // As publish_policy() waits (dataplane/publish.h), with the checks inline for TSan.
        uint64_t token = rte_rcu_qsbr_start(shared->qsbr);
        while (!rte_rcu_qsbr_check(shared->qsbr, token, false))
            std::this_thread::yield();
    }
    active_ = false;
}

void PacketTrace::start(dp::DataplaneShared& shared, const std::vector<dp::Worker*>& workers,
                        const dp::TraceMatch& match, uint32_t limit, uint64_t now_tsc) {
    take_back(&shared);
    buffers_.clear();
    storage_.clear();
    shared_ = &shared;
    workers_ = workers;
    trace_ = std::make_unique<dp::TraceShared>();
    trace_->match = match;
    trace_->limit = limit;
    trace_->start_tsc = now_tsc;
    for (size_t i = 0; i < workers_.size(); ++i) {
        storage_.push_back(std::make_unique<dp::TracePacket[]>(limit));
        auto b = std::make_unique<dp::TraceBuffer>();
        b->shared = trace_.get();
        b->capacity = limit;
        b->packets = storage_.back().get();
        buffers_.push_back(std::move(b));
    }
    // The release stores publish the buffers and the match to each worker's acquire load.
    for (size_t i = 0; i < workers_.size(); ++i)
        workers_[i]->trace.store(buffers_[i].get(), std::memory_order_release);
    active_ = true;
}

void PacketTrace::stop() {
    for (dp::Worker* w : workers_)
        w->trace.store(nullptr, std::memory_order_release);
    active_ = false;
}

std::vector<PacketTrace::Entry> PacketTrace::entries() const {
    std::vector<Entry> out;
    for (size_t i = 0; i < buffers_.size(); ++i) {
        uint32_t n = buffers_[i]->published.load(std::memory_order_acquire);
        for (uint32_t k = 0; k < n; ++k)
            out.push_back({workers_[i]->index, &buffers_[i]->packets[k]});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const Entry& a, const Entry& b) { return a.packet->tsc < b.packet->tsc; });
    return out;
}

namespace {

std::string hex16(uint16_t v) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%04x", v);
    return buf;
}

std::string mac(const uint8_t* m) {
    char buf[18];
    std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return buf;
}

std::string address(const uint8_t* a, bool v6) {
    if (v6) return net::to_string(net::IpAddr::from_v6(a));
    return net::to_string(
        net::IpAddr::from_v4(uint32_t{a[0]} << 24 | uint32_t{a[1]} << 16 | uint32_t{a[2]} << 8 | a[3]));
}

std::string tcp_flags(uint8_t f) {
    std::string s;
    const char* names = "FSRPAUEC";
    for (int k = 0; k < 8; ++k)
        if (f >> k & 1) s += names[k];
    return s.empty() ? "none" : s;
}

bool has_ports(const dp::FrameSummary& f) {
    return f.l4 && (f.proto == 6 || f.proto == 17);
}

std::string port_name(const TraceView& v, uint16_t port) {
    auto it = v.port_names.find(port);
    return it == v.port_names.end() ? std::to_string(port) : it->second;
}

const char* stage_name(uint8_t s) {
    return s < dp::kProfiledStages ? dp::kProfiledStageNames[s] : "?";
}

const char* next_name(uint8_t n) {
    static constexpr const char* kNames[] = {"handoff",    "nat_lookup", "nat_fast", "nat_slow", "icmp_error", "local",
                                             "ip_forward", "icmp_reply", "output",   "transmit", "drop",       "gone"};
    static_assert(std::size(kNames) == static_cast<size_t>(dp::Next::count));
    return n < std::size(kNames) ? kNames[n] : "?";
}

const char* reason_name(uint8_t r) {
    return r < dp::kDropReasonCount ? dp::kDropReasonNames[r] : "?";
}

const char* session_word(uint8_t c) {
    switch (static_cast<dp::TraceSession>(c)) {
    case dp::TraceSession::found:
        return "found";
    case dp::TraceSession::created:
        return "created";
    case dp::TraceSession::closed:
        return "closed";
    default:
        return "none";
    }
}

const char* outcome_key(uint8_t o) {
    switch (static_cast<dp::TraceOutcome>(o)) {
    case dp::TraceOutcome::dropped:
        return "dropped";
    case dp::TraceOutcome::queued:
        return "queued";
    case dp::TraceOutcome::not_queued:
        return "not_queued";
    case dp::TraceOutcome::handed_off:
        return "handed_off";
    case dp::TraceOutcome::held:
        return "held";
    default:
        return "gone";
    }
}

const char* outcome_name(uint8_t o) {
    switch (static_cast<dp::TraceOutcome>(o)) {
    case dp::TraceOutcome::dropped:
        return "dropped";
    case dp::TraceOutcome::queued:
        return "queued for transmit";
    case dp::TraceOutcome::not_queued:
        return "left output unqueued (cut into fragments, or sent with a full transmit buffer)";
    case dp::TraceOutcome::held:
        return "held for the next hop's ARP or NS (in the control thread)";
    case dp::TraceOutcome::handed_off:
        return "handed off to its owning worker";
    default:
        return "given away (held for reassembly, or to the control thread)";
    }
}

std::string tuple_of(const dp::TraceStep& s) {
    bool ports = s.proto == 6 || s.proto == 17;
    return address(s.src, s.v6) + (ports ? "." + std::to_string(s.sport) : "") + " > " + address(s.dst, s.v6) +
           (ports ? "." + std::to_string(s.dport) : "") + " ttl " + std::to_string(s.ttl);
}

bool same_tuple(const dp::TraceStep& a, const dp::TraceStep& b) {
    return a.proto == b.proto && a.has_tuple == b.has_tuple && std::equal(a.src, a.src + 16, b.src) &&
           std::equal(a.dst, a.dst + 16, b.dst) && a.sport == b.sport && a.dport == b.dport && a.ttl == b.ttl;
}

// The step's decision in words, and the same as JSON.
std::string describe_step(const dp::TraceStep& s, const dp::TraceStep* tuple_before, const TraceView& v, json& j) {
    auto next = static_cast<dp::Next>(s.next);
    std::string line = std::string(stage_name(s.stage)) + " -> " + next_name(s.next);
    j = {{"stage", stage_name(s.stage)}, {"next", next_name(s.next)}};
    if (next == dp::Next::drop) {
        line += std::string(", drop ") + reason_name(s.reason);
        j["drop_reason"] = reason_name(s.reason);
    }
    if (next == dp::Next::icmp_reply) {
        const char* icmp = s.icmp < dp::kIcmpErrorCount ? dp::kIcmpErrorNames[s.icmp] : "?";
        line += std::string(", answered with ICMP ") + icmp + " (" + reason_name(s.reason) + ")";
        j["icmp"] = icmp;
        j["reason"] = reason_name(s.reason);
    }
    if (static_cast<dp::ProfiledStage>(s.stage) == dp::ProfiledStage::icmp_reply &&
        (next == dp::Next::transmit || next == dp::Next::output)) {
        line += ", ICMP error built";
        j["icmp_generated"] = true;
    }
    if (s.session != dp::SessionTable::kNone || s.session_change != 0) {
        if (s.session != dp::SessionTable::kNone) {
            line += ", session " + std::to_string(s.session) + " " + session_word(s.session_change);
            j["session"] = s.session;
        } else {
            line += std::string(", session ") + session_word(s.session_change);
        }
        j["session_change"] = session_word(s.session_change);
    }
    if (next == dp::Next::handoff) {
        line += ", to worker " + std::to_string(s.owner);
        j["owner"] = s.owner;
    }
    if (next == dp::Next::ip_forward) {
        line += s.via_ingress ? ", toward the ingress next hop" : ", vrf table " + std::to_string(s.vrf);
        j["vrf"] = s.vrf;
        j["via_ingress"] = s.via_ingress;
    }
    // The stage that chose the egress port and next hop says both; output repeats the port.
    bool routed = next == dp::Next::output && static_cast<dp::ProfiledStage>(s.stage) != dp::ProfiledStage::output;
    if (next == dp::Next::output || next == dp::Next::transmit) {
        line += ", port " + port_name(v, s.out_port);
        j["port"] = port_name(v, s.out_port);
    }
    if (routed) {
        std::string nh = address(s.next_hop, s.v6);
        line += " via " + nh;
        j["next_hop"] = nh;
    }
    if (s.has_tuple) {
        json t = {{"src", address(s.src, s.v6)}, {"dst", address(s.dst, s.v6)}, {"proto", s.proto}, {"ttl", s.ttl}};
        if (s.proto == 6 || s.proto == 17) {
            t["sport"] = s.sport;
            t["dport"] = s.dport;
        }
        j["headers"] = t;
        if (!tuple_before || !same_tuple(*tuple_before, s)) line += "; now " + tuple_of(s);
    }
    return line;
}

}  // namespace

std::string describe_frame(const uint8_t* frame, unsigned len) {
    dp::FrameSummary f = dp::summarize_frame(frame, len);
    if (len < 14) return "(" + std::to_string(len) + " bytes, no Ethernet header)";
    std::string s = mac(f.src_mac) + " > " + mac(f.dst_mac);
    if (f.vlan >= 0) s += ", vlan " + std::to_string(f.vlan);
    if (!f.l3) {
        s += ", ethertype " + hex16(f.ethertype) + (f.ethertype == 0x0806 ? " (ARP)" : "");
        return s;
    }
    s += f.v6 ? ", IPv6 " : ", IPv4 ";
    s += address(f.src, f.v6) + (has_ports(f) ? "." + std::to_string(f.sport) : "") + " > " + address(f.dst, f.v6) +
         (has_ports(f) ? "." + std::to_string(f.dport) : "") + ": ";
    switch (f.proto) {
    case 6:
        s += "TCP";
        if (f.l4) s += " [" + tcp_flags(f.tcp_flags) + "]";
        break;
    case 17:
        s += "UDP";
        break;
    case 1:
    case 58:
        s += f.proto == 1 ? "ICMP" : "ICMPv6";
        if (f.l4)
            s += " type " + std::to_string(f.icmp_type) + " code " + std::to_string(f.icmp_code) + " id " +
                 std::to_string(f.icmp_id);
        break;
    default:
        s += "proto " + std::to_string(f.proto);
    }
    s += (f.v6 ? " hlim " : " ttl ") + std::to_string(f.ttl);
    if (!f.v6) s += " id " + std::to_string(f.ip_id);
    s += " len " + std::to_string(f.ip_len);
    if (f.fragment) s += " frag";
    if (!f.v6) s += " ipsum " + hex16(f.ip_checksum);
    if (f.l4) s += " sum " + hex16(f.l4_checksum);
    return s;
}

json frame_json(const uint8_t* frame, unsigned len) {
    dp::FrameSummary f = dp::summarize_frame(frame, len);
    json j = {{"bytes", len}};
    if (len < 14) return j;
    j["src_mac"] = mac(f.src_mac);
    j["dst_mac"] = mac(f.dst_mac);
    j["ethertype"] = hex16(f.ethertype);
    if (f.vlan >= 0) j["vlan"] = f.vlan;
    if (!f.l3) return j;
    j["family"] = f.v6 ? "ipv6" : "ipv4";
    j["src"] = address(f.src, f.v6);
    j["dst"] = address(f.dst, f.v6);
    j["proto"] = f.proto;
    j["ttl"] = f.ttl;
    j["length"] = f.ip_len;
    j["fragment"] = f.fragment;
    if (!f.v6) {
        j["id"] = f.ip_id;
        j["ip_checksum"] = hex16(f.ip_checksum);
    }
    if (!f.l4) return j;
    j["l4_checksum"] = hex16(f.l4_checksum);
    if (has_ports(f)) {
        j["sport"] = f.sport;
        j["dport"] = f.dport;
    }
    if (f.proto == 6) j["tcp_flags"] = tcp_flags(f.tcp_flags);
    if (f.proto == 1 || f.proto == 58) {
        j["icmp_type"] = f.icmp_type;
        j["icmp_code"] = f.icmp_code;
        j["icmp_id"] = f.icmp_id;
    }
    return j;
}

std::string render_trace(const std::vector<PacketTrace::Entry>& entries, const TraceView& view) {
    json j = trace_json(entries, view);
    std::string out;
    for (const json& p : j) {
        char when[32];
        std::snprintf(when, sizeof when, "%.3f", p["ms_after_start"].get<double>());
        out += "packet " + std::to_string(p["packet"].get<unsigned>()) + ", worker " +
               std::to_string(p["worker"].get<unsigned>()) + ", port " + p["port"].get<std::string>() + ", " + when +
               " ms after start, " + std::to_string(p["frame_bytes"].get<unsigned>()) + " bytes\n";
        for (const json& s : p["steps"])
            out += "  " + s["text"].get<std::string>() + "\n";
        out += "  outcome: " + p["outcome_text"].get<std::string>() + "\n";
        out += "  before: " + p["before_text"].get<std::string>() + "\n";
        out += "  after:  " + p["after_text"].get<std::string>() + "\n";
    }
    out += std::to_string(j.size()) + " packet(s) traced\n";
    return out;
}

json trace_json(const std::vector<PacketTrace::Entry>& entries, const TraceView& view) {
    json rows = json::array();
    unsigned number = 0;
    for (const auto& e : entries) {
        const dp::TracePacket& tp = *e.packet;
        double ms = view.tsc_hz && tp.tsc >= view.start_tsc
                        ? static_cast<double>(tp.tsc - view.start_tsc) * 1000.0 / static_cast<double>(view.tsc_hz)
                        : 0.0;
        json steps = json::array();
        const dp::TraceStep* tuple_before = nullptr;
        dp::TraceStep first{};
        dp::FrameSummary in = dp::summarize_frame(tp.before, tp.before_len);
        if (in.l3) {
            // The tuple as received, so that a first step that changes nothing prints nothing.
            first.has_tuple = true;
            first.v6 = in.v6;
            std::copy(in.src, in.src + 16, first.src);
            std::copy(in.dst, in.dst + 16, first.dst);
            bool icmp = in.proto == 1 || in.proto == 58;
            first.sport = icmp ? in.icmp_id : in.sport;
            first.dport = icmp ? in.icmp_id : in.dport;
            first.ttl = in.ttl;
            first.proto = in.proto;
            tuple_before = &first;
        }
        for (unsigned k = 0; k < tp.n_steps && k < dp::kTraceMaxSteps; ++k) {
            json sj;
            std::string text = describe_step(tp.steps[k], tuple_before, view, sj);
            sj["text"] = text;
            steps.push_back(std::move(sj));
            if (tp.steps[k].has_tuple) tuple_before = &tp.steps[k];
        }
        bool has_after = tp.after_len > 0;
        rows.push_back({{"packet", ++number},
                        {"worker", e.worker},
                        {"port", port_name(view, tp.rx_port)},
                        {"ms_after_start", ms},
                        {"frame_bytes", tp.frame_len},
                        {"steps", steps},
                        {"outcome", outcome_key(tp.outcome)},
                        {"outcome_text", outcome_name(tp.outcome)},
                        {"before", frame_json(tp.before, tp.before_len)},
                        {"before_text", describe_frame(tp.before, tp.before_len)},
                        {"after", has_after ? frame_json(tp.after, tp.after_len) : json(nullptr)},
                        {"after_text", has_after ? describe_frame(tp.after, tp.after_len) : std::string("-")}});
    }
    return rows;
}

}  // namespace egw::cli
