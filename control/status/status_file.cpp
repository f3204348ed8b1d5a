// SPDX-License-Identifier: Apache-2.0
#include "control/status/status_file.h"

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_pause.h>

#include <cstdio>
#include <fstream>

#include "control/neighbor/neighbor_resolver.h"
#include "control/policy/policy_builder.h"
#include "control/runtime/runtime.h"
#include "control/runtime/tx_stall.h"
#include "control/status/session_format.h"

namespace egw::control {

namespace {

// Worker counters are plain per-lcore increments; an atomic load on this side is enough to read
// them whole on every platform DPDK runs on.
inline uint64_t rd(const uint64_t& v) {
    return __atomic_load_n(&v, __ATOMIC_RELAXED);
}

}  // namespace

nlohmann::json collect_status(const StatusInputs& in) {
    using nlohmann::json;
    Runtime& rt = in.runtime;
    auto& workers = rt.workers();
    json doc;
    doc["generation"] = in.policy.generation();
    doc["ready"] = in.ready;

    std::map<uint32_t, std::string> id_to_key;
    for (auto& [k, id] : in.policy.ids())
        id_to_key[id] = k;

    json services = json::array();
    for (const auto& v : in.policy.views()) {
        const auto& s = v.state;
        json j;
        j["key"] = s.key;
        j["status_host"] = s.status_host;
        j["reason"] = v.problem.empty() ? s.reason : v.problem;
        j["serve_here"] = s.serve_here;
        j["mode"] = model::to_string(s.mode);
        j["ingress_ip"] = s.ingress_ipv4 ? config::format_ipv4(*s.ingress_ipv4) : "";
        j["ingress_ipv6"] = s.ingress_ipv6 ? net::to_string(*s.ingress_ipv6) : "";
        j["ip_families"] = s.ip_families;
        j["ip_family_policy"] = s.ip_family_policy;
        j["ipv4"] = v.ipv4;
        j["ipv6"] = v.ipv6;
        j["endpoints_ipv6"] = s.endpoint_ipv6s.size();
        j["network"] = s.network;
        j["vrf"] = v.vrf;
        j["endpoints"] = s.endpoint_ipv4s.size();
        j["programmed"] = v.programmed;
        j["programmed_ipv6"] = v.programmed6;
        // The list's counters with a status key, summed over the workers, and the open sessions.
        uint64_t sums[dp::kServiceCounterCount] = {};
        for (auto* w : workers) {
            const dp::ServiceCounters& c = w->service_counters[v.id];
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) \
    sums[static_cast<unsigned>(dp::ServiceCounter::name)] += rd(c.name);
            EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
        }
        for (unsigned i = 0; i < dp::kServiceCounterCount; ++i)
            if (*dp::kServiceCounterInfo[i].status) j[dp::kServiceCounterInfo[i].status] = sums[i];
        const uint64_t created = sums[static_cast<unsigned>(dp::ServiceCounter::sessions_created)];
        const uint64_t closed = sums[static_cast<unsigned>(dp::ServiceCounter::sessions_closed)];
        j["sessions_active"] = created >= closed ? created - closed : 0;
        services.push_back(j);
    }
    doc["services"] = services;

    json ports = json::array();
    for (const auto& p : rt.ports()) {
        rte_eth_stats st{};
        rte_eth_stats_get(p.id, &st);
        PortTx tx = read_port_tx(workers, p.id);
        ports.push_back({{"name", p.name},
                         {"device", p.device},
                         {"rx_packets", st.ipackets},
                         {"tx_packets", st.opackets},
                         {"rx_bytes", st.ibytes},
                         {"tx_bytes", st.obytes},
                         {"rx_missed", st.imissed},
                         {"rx_errors", st.ierrors},
                         {"tx_errors", st.oerrors},
                         {"tx_refused", tx.refused},
                         {"tx_stalls", tx.stalls},
                         {"tx_stalled_queues", tx.stalled_queues}});
    }
    doc["ports"] = ports;

    // VLAN sub-ports: their frames are counted by their parent's device too (the ports above).
    json vlans = json::array();
    for (const auto& p : rt.vlan_ports()) {
        uint64_t rx = 0, tx = 0;
        for (auto* w : workers) {
            rx += rd(w->counters.vlan_rx_packets[p.id]);
            tx += rd(w->counters.vlan_tx_packets[p.id]);
        }
        PortTx ptx = read_port_tx(workers, p.id);
        vlans.push_back({{"name", p.name},
                         {"id", p.id},
                         {"parent", p.parent},
                         {"vlan", p.vlan},
                         {"rx_packets", rx},
                         {"tx_packets", tx},
                         {"tx_refused", ptx.refused},
                         {"tx_stalls", ptx.stalls}});
    }
    doc["vlans"] = vlans;

    // EgressQoS, where egw owns policy (the files source): upstream's status string per object.
    json qos = json::array();
    for (const EgressQosView& v : in.policy.egress_qos_views())
        qos.push_back({{"key", v.key}, {"status", v.status}, {"rules", v.rules}, {"pods", v.pods}});
    doc["egress_qos"] = qos;

    json drops = json::object();
    for (unsigned r = 0; r < dp::kDropReasonCount; ++r) {
        uint64_t n = 0;
        for (auto* w : workers)
            n += rd(w->counters.drops[r]);
        drops[dp::kDropReasonNames[r]] = n;
    }
    drops["neighbor_unresolved"] = drops["neighbor_unresolved"].get<uint64_t>() + in.neighbors.held_dropped();
    doc["drops"] = drops;

    json icmp_sent = json::object();
    for (unsigned e = 0; e < dp::kIcmpErrorCount; ++e) {
        uint64_t n = 0;
        for (auto* w : workers)
            n += rd(w->counters.icmp_sent[e]);
        icmp_sent[dp::kIcmpErrorNames[e]] = n;
    }
    doc["icmp"]["sent"] = icmp_sent;

    // The workers' scalar counters (EGW_WORKER_COUNTERS): every one per worker in workers[] or
    // summed in its group.
    json wjs = json::array();
    for (auto* w : workers)
        wjs.push_back({{"index", w->index}});
    for (unsigned i = 0; i < dp::kWorkerCounterCount; ++i) {
        const dp::WorkerCounterInfo& c = dp::kWorkerCounterInfo[i];
        uint64_t sum = 0;
        for (size_t k = 0; k < workers.size(); ++k) {
            uint64_t v = rd(workers[k]->counters.*dp::kWorkerCounterField[i]);
            sum += v;
            if (c.scope == dp::CounterScope::lcore) wjs[k][c.key] = v;
        }
        if (c.scope == dp::CounterScope::total) doc[c.group][c.key] = sum;
    }
    doc["workers"] = wjs;

    std::map<uint16_t, std::string> port_names;
    for (const auto* list : {&rt.ports(), &rt.vlan_ports()})
        for (const auto& p : *list)
            port_names[p.id] = p.name;
    if (in.max_sessions == 0) {
        doc["sessions"] = json::array();
    } else {
        uint64_t hz = rte_get_tsc_hz();
        json listing =
            list_sessions(workers, in.max_sessions, in.listing_timeout_ms, in.workers_stopped,
                          [&](const dp::Worker& w, const dp::SessionRecord& r) {
                              const SessionRow s = session_row(r);
                              auto it = id_to_key.find(s.service_id);
                              return json{{"worker", w.index},
                                          {"proto", s.proto},
                                          {"inside", s.inside},
                                          {"outside", s.outside},
                                          {"remote", s.remote},
                                          {"service", s.service_id && it != id_to_key.end() ? it->second : ""},
                                          {"port", port_names.count(s.out_port) ? port_names[s.out_port] : ""},
                                          {"vrf", in.policy.vrf_name(s.vrf)},
                                          {"state", s.state},
                                          {"idle_ms", r.idle_ticks * 1000 / hz}};
                          });
        doc["sessions"] = std::move(listing["sessions"]);
        doc["session_listing"] = std::move(listing["session_listing"]);
    }

    json neighbors = json::array();
    for (const auto& n : in.neighbors.list())
        neighbors.push_back({{"port", n.port},
                             {"ip", net::to_string(n.ip)},
                             {"mac", n.mac},
                             {"state", n.state},
                             {"router", n.router},
                             {"held", n.held}});
    doc["neighbors"] = neighbors;

    const auto& garp = in.neighbors.announcer().stats();
    const auto& una = in.neighbors.announcer().stats6();
    json announcing = json::array();
    for (const auto& a : in.neighbors.announcing())
        announcing.push_back({{"port", a.port},
                              {"ip", net::to_string(a.ip)},
                              {"what", a.what},
                              {"left", a.left},
                              {"next_ms", a.next_ms}});
    doc["arp"] = {{"requests_sent", in.neighbors.requests_sent()},
                  {"solicitations_sent", in.neighbors.solicitations_sent()},
                  {"neighbors6", in.neighbors.entries_in_table6()},
                  {"probes_sent", in.neighbors.probes_sent()},
                  {"invalidated", in.neighbors.invalidated()},
                  {"freed", in.neighbors.freed()},
                  {"recycled", in.neighbors.recycled()},
                  {"routers_lost", in.neighbors.routers_lost()},
                  {"neighbors", in.neighbors.entries_in_table()},
                  {"announcements_sent", garp.sent},
                  {"announcements_failed", garp.failed},
                  {"addresses_announced", garp.started},
                  {"ndp_announcements_sent", una.sent},
                  {"ndp_announcements_failed", una.failed},
                  {"ndp_addresses_announced", una.started},
                  {"announcing", announcing}};
    return doc;
}

nlohmann::json list_sessions(const std::vector<dp::Worker*>& workers, unsigned max_sessions, unsigned timeout_ms,
                             bool workers_stopped,
                             const std::function<nlohmann::json(const dp::Worker&, const dp::SessionRecord&)>& row) {
    using nlohmann::json;
    const uint64_t deadline = rte_rdtsc() + rte_get_tsc_hz() * timeout_ms / 1000;
    auto answered = [](const dp::Worker& w, uint32_t want) {
        return w.dump_done.load(std::memory_order_acquire) == want;
    };
    auto wait = [&](const dp::Worker& w, uint32_t want) {
        while (!answered(w, want) && rte_rdtsc() < deadline)
            rte_pause();
        return answered(w, want);
    };
    // Requests go to every worker before any answer is waited for, so they scan side by side.
    // A worker still busy with an earlier request (one whose answer came too late) finishes that
    // one first: its paging fields are the worker's until it answers.
    std::vector<uint32_t> want(workers.size(), 0);
    std::vector<bool> asked(workers.size(), false);
    auto ask = [&](size_t i) {
        dp::Worker& w = *workers[i];
        w.dump_start = 0;
        w.dump_scan = 0;
        want[i] = w.dump_request.fetch_add(1, std::memory_order_release) + 1;
        asked[i] = true;
        if (workers_stopped) dp::worker_finish_dump(w);
    };
    for (size_t i = 0; i < workers.size(); ++i) {
        dp::Worker& w = *workers[i];
        if (workers_stopped) dp::worker_finish_dump(w);
        if (answered(w, w.dump_request.load(std::memory_order_relaxed))) ask(i);
    }
    for (size_t i = 0; i < workers.size(); ++i)
        if (!asked[i] && wait(*workers[i], workers[i]->dump_request.load(std::memory_order_relaxed))) ask(i);

    json sessions = json::array();
    json missing = json::array();
    std::string reason;
    uint64_t active = 0;
    bool complete = true;
    for (size_t i = 0; i < workers.size(); ++i) {
        const dp::Worker& w = *workers[i];
        uint64_t created = __atomic_load_n(&w.counters.sessions_created, __ATOMIC_RELAXED);
        uint64_t closed = __atomic_load_n(&w.counters.sessions_closed, __ATOMIC_RELAXED);
        active += created >= closed ? created - closed : 0;
        if (!asked[i] || !wait(w, want[i])) {
            complete = false;
            missing.push_back(w.index);
            if (reason.empty())
                reason = "worker " + std::to_string(w.index) + " did not answer within " + std::to_string(timeout_ms) +
                         " ms; its sessions are not listed";
            continue;
        }
        uint32_t n = w.dump_count;
        if (n == w.dump_capacity && w.dump_next < dp::dump_slots(w)) {
            complete = false;
            if (reason.empty())
                reason = "worker " + std::to_string(w.index) + " listed its first " + std::to_string(n) +
                         " sessions only (its listing buffer)";
        }
        for (uint32_t k = 0; k < n; ++k) {
            if (sessions.size() >= max_sessions) {
                complete = false;
                if (reason.empty()) reason = "the listing stops at " + std::to_string(max_sessions) + " sessions";
                break;
            }
            sessions.push_back(row(w, w.dump_buffer[k]));
        }
    }
    json out;
    out["session_listing"] = {{"complete", complete},
                              {"active", active},
                              {"listed", sessions.size()},
                              {"missing_workers", missing},
                              {"reason", reason}};
    out["sessions"] = std::move(sessions);
    return out;
}

bool write_status_file(const std::string& path, const nlohmann::json& doc) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        if (!f) return false;
        f << doc.dump(1) << '\n';
        if (!f) return false;
    }
    return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace egw::control
