// SPDX-License-Identifier: Apache-2.0
//
// Section "sessions": the workers' NAPT sessions, listed through their paging protocol and closed
// through their flush requests (worker_requests.h); the control thread never touches a table.
#include <rte_byteorder.h>
#include <rte_cycles.h>

#include <algorithm>
#include <bitset>
#include <charconv>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "config/config.h"
#include "config/ip.h"
#include "control/cli/handlers.h"
#include "control/cli/table.h"
#include "control/cli/worker_requests.h"
#include "control/status/session_format.h"
#include "control/policy/policy_builder.h"
#include "control/runtime/runtime.h"

namespace egw::cli {

namespace {

using nlohmann::json;

constexpr unsigned kDefaultLimit = 100;
constexpr uint8_t kProtos[] = {6, 17, 1};
constexpr uint8_t kProtos6[] = {6, 17, 58};  // ICMPv6 echo identifiers come from the same block

uint8_t proto_number(const std::string& name) {
    return name == "tcp" ? 6 : name == "udp" ? 17 : name == "icmpv6" ? 58 : 1;
}

uint32_t to_u32(const std::string& s) {
    uint32_t v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
}

// An address of either family as the sessions of that family hold it.
net::IpAddr address_of(const dp::Session& s) {
    return net::IpAddr::from_v4(rte_be_to_cpu_32(s.nat_ip));
}
net::IpAddr address_of(const dp::Session6& s) {
    return net::IpAddr::from_v6(s.nat_ip.b);
}

bool same_address(uint32_t ip_be, const net::IpAddr& want) {
    return want.is_v4() && rte_be_to_cpu_32(ip_be) == want.v4();
}
bool same_address(const dp::Ip6& ip, const net::IpAddr& want) {
    return want.is_v6() && std::equal(want.bytes().begin(), want.bytes().end(), ip.b);
}

// The Service id of a key, or an error naming it.
bool service_id(Context& ctx, const std::string& key, uint32_t& id, Reply& error) {
    auto it = ctx.host.policy.ids().find(key);
    if (it == ctx.host.policy.ids().end()) {
        error = fail("no EgressService \"" + key + "\" (show services lists them)");
        return false;
    }
    id = it->second;
    return true;
}

Reply flush(Context& ctx, uint32_t id, const std::string& what) {
    FlushResult r = flush_sessions(ctx.host.runtime.workers(), id);
    uint64_t total = 0;
    std::string per_worker;
    for (size_t i = 0; i < r.closed.size(); ++i) {
        total += r.closed[i];
        per_worker += (i ? ", " : "") + std::to_string(r.closed[i]);
    }
    std::string text = "closed " + std::to_string(total) + " session(s)" + (what.empty() ? "" : " " + what);
    if (r.closed.size() > 1) text += " (per worker: " + per_worker + ")";
    if (!r.error.empty()) return fail(text + "; " + r.error);
    return ok(text, json{{"closed", total}, {"per_worker", r.closed}});
}

}  // namespace

Reply show_sessions(Context& ctx, const Args& a) {
    uint32_t want_service = 0;
    bool by_service = a.has("service");
    Reply err;
    if (by_service && !service_id(ctx, a.get("service"), want_service, err)) return err;
    auto port_be = [&](const char* key) { return rte_cpu_to_be_16(static_cast<uint16_t>(to_u32(a.get(key)))); };
    bool by_saddr = a.has("saddr"), by_daddr = a.has("daddr"), by_sport = a.has("sport"), by_dport = a.has("dport");
    bool by_proto = a.has("proto");
    // The address filters take either family (the grammar checked them); each matches the
    // sessions of its own family only.
    net::IpAddr saddr = by_saddr ? *net::parse_ip(a.get("saddr")) : net::IpAddr{};
    net::IpAddr daddr = by_daddr ? *net::parse_ip(a.get("daddr")) : net::IpAddr{};
    uint16_t sport = by_sport ? port_be("sport") : 0, dport = by_dport ? port_be("dport") : 0;
    uint8_t proto = by_proto ? proto_number(a.get("proto")) : 0;
    uint32_t limit = a.has("limit") ? to_u32(a.get("limit")) : kDefaultLimit;

    std::map<uint32_t, std::string> id_to_key;
    for (const auto& [k, id] : ctx.host.policy.ids())
        id_to_key[id] = k;
    std::map<uint16_t, std::string> port_names;
    for (const auto* list : {&ctx.host.runtime.ports(), &ctx.host.runtime.vlan_ports()})
        for (const auto& p : *list)
            port_names[p.id] = p.name;
    uint64_t hz = rte_get_tsc_hz();

    Table t({"worker", "proto", "inside", "outside", "remote", "service", "port", "vrf", "state", "idle-ms"});
    json rows = json::array();
    bool truncated = false;
    std::string error = for_each_session(ctx.host.runtime.workers(), [&](const dp::Worker& w,
                                                                         const dp::SessionRecord& r) {
        auto mismatch = [&](const auto& x) {
            return (by_saddr && !same_address(x.pod_ip, saddr)) || (by_daddr && !same_address(x.remote_ip, daddr)) ||
                   (by_sport && x.pod_port != sport) || (by_dport && x.remote_port != dport);
        };
        if (r.v6 ? mismatch(r.session6) : mismatch(r.session)) return true;
        const control::SessionRow s = control::session_row(r);
        if ((by_service && s.service_id != want_service) ||
            (by_proto && s.proto_number != proto && !(proto == 1 && s.proto_number == 58)))
            return true;
        if (rows.size() == limit) {
            truncated = true;
            return false;
        }
        auto key = id_to_key.find(s.service_id);
        std::string service = s.service_id && key != id_to_key.end() ? key->second : "";
        std::string port = port_names.count(s.out_port) ? port_names[s.out_port] : "";
        uint64_t idle_ms = hz ? r.idle_ticks * 1000 / hz : 0;
        json j = {
            {"worker", w.index},  {"proto", s.proto},   {"inside", s.inside}, {"outside", s.outside},
            {"remote", s.remote}, {"service", service}, {"port", port},       {"vrf", ctx.host.policy.vrf_name(s.vrf)},
            {"state", s.state},   {"idle_ms", idle_ms}};
        t.row({num(w.index), s.proto, s.inside, s.outside, s.remote, or_dash(service), or_dash(port),
               or_dash(jstr(j["vrf"])), or_dash(s.state), num(idle_ms)});
        rows.push_back(std::move(j));
        return true;
    });
    if (!error.empty()) return fail("cannot list the sessions: " + error);
    std::string text = t.render();
    text += std::to_string(rows.size()) + " session(s)";
    if (truncated) text += "; more match: raise the limit (limit " + std::to_string(limit) + ")";
    return ok(text + "\n", json{{"sessions", rows}, {"truncated", truncated}});
}

Reply show_snat_pools(Context& ctx, const Args&) {
    // The pools: every served ingress IP of either family (LoadBalancerIP mode) and every outside
    // port address (masquerade), with what uses them. IPv4 addresses sort before IPv6 ones.
    std::map<net::IpAddr, std::set<std::string>> users;
    for (const auto& v : ctx.host.policy.views()) {
        if (v.state.mode != model::Mode::load_balancer_ip) continue;
        if (v.programmed && v.state.ingress_ipv4)
            users[net::IpAddr::from_v4(*v.state.ingress_ipv4)].insert(v.state.key);
        if (v.programmed6 && v.state.ingress_ipv6) users[*v.state.ingress_ipv6].insert(v.state.key);
    }
    for (const auto& p : ctx.host.config.ports)
        if (p.role == config::PortRole::outside)
            for (const auto& addr : p.addresses)
                users[addr.addr].insert("masquerade on " + p.name);

    // NAT ports in use: distinct ports per (address, protocol, worker), from the sessions.
    struct Use {
        std::unique_ptr<std::bitset<65536>> ports = std::make_unique<std::bitset<65536>>();
        uint64_t sessions = 0;
    };
    std::map<std::tuple<net::IpAddr, uint8_t, unsigned>, Use> use;
    std::string error =
        for_each_session(ctx.host.runtime.workers(), [&](const dp::Worker& w, const dp::SessionRecord& r) {
            auto count = [&](const auto& s) {
                Use& u = use[{address_of(s), s.proto, w.index}];
                u.ports->set(rte_be_to_cpu_16(s.nat_port));
                ++u.sessions;
            };
            if (r.v6)
                count(r.session6);
            else
                count(r.session);
            return true;
        });
    if (!error.empty()) return fail("cannot list the sessions: " + error);
    for (const auto& [k, u] : use)
        if (!users.count(std::get<0>(k))) users[std::get<0>(k)].insert("(no longer configured)");

    Table t({"address", "used-by", "proto", "worker", "ports-in-use", "capacity", "use", "sessions"});
    json rows = json::array();
    for (const auto& [addr, by] : users) {
        std::string used_by;
        for (const auto& u : by)
            used_by += (used_by.empty() ? "" : ", ") + u;
        const std::string text = net::to_string(addr);
        for (uint8_t proto : addr.is_v4() ? kProtos : kProtos6) {
            for (const dp::Worker* w : ctx.host.runtime.workers()) {
                auto it = use.find({addr, proto, w->index});
                uint64_t in_use = it == use.end() ? 0 : it->second.ports->count();
                uint64_t sessions = it == use.end() ? 0 : it->second.sessions;
                uint64_t capacity = uint64_t{w->nat_port_hi} - w->nat_port_lo + 1;
                t.row({text, used_by, control::session_proto_name(proto), num(w->index), num(in_use), num(capacity),
                       percent(in_use, capacity), num(sessions)});
                rows.push_back({{"address", text},
                                {"family", net::to_string(addr.family())},
                                {"used_by", by},
                                {"proto", control::session_proto_name(proto)},
                                {"worker", w->index},
                                {"port_min", w->nat_port_lo},
                                {"port_max", w->nat_port_hi},
                                {"ports_in_use", in_use},
                                {"capacity", capacity},
                                {"sessions", sessions}});
            }
        }
    }
    std::string text = t.render();
    text +=
        "Ports are endpoint-dependent: one NAT port serves many remote address/port pairs, so sessions may\n"
        "exceed ports in use; capacity is the worker's block of the NAT port range per remote endpoint.\n";
    return ok(text, rows);
}

Reply clear_sessions_service(Context& ctx, const Args& a) {
    uint32_t id = 0;
    Reply err;
    if (!service_id(ctx, a.get("SERVICE"), id, err)) return err;
    return flush(ctx, id, "of " + a.get("SERVICE"));
}

Reply clear_sessions_all(Context& ctx, const Args&) {
    return flush(ctx, dp::kFlushAll, "");
}

}  // namespace egw::cli
