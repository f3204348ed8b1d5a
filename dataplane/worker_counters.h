// SPDX-License-Identifier: Apache-2.0
//
// The workers' scalar counters, named once. One list makes the fields of WorkerCounters
// (worker.h), the status file (its workers[] and its summary objects), egwctl (which shows the
// status file), the Prometheus families and the telemetry's /egw/lcores, so that none of them
// can list a counter the others lack or name it differently.
//
// X(name, scope, group, key, metric, direction, help):
//   name       the field of WorkerCounters, and the counter's name in the per-worker listings
//   scope      lcore: shown per worker (status file workers[].name, /egw/lcores, metrics with an
//              `lcore` label); total: shown summed over the workers only
//   group, key where the status file holds it: doc[group][key] for a total; "workers" and the
//              name for an lcore counter (in every element of workers[])
//   metric     the Prometheus family without the egw_ prefix (a counter, so ending in _total);
//              "" when it has none (sessions_created/closed and sessions6_created/closed make
//              egw_sessions_active{family} instead)
//   direction  the value of the family's `direction` label when several counters share one
//              family; "" when the family has no such label
//   help       the family's HELP text (the same on every counter of a shared family), or what the
//              counter counts when it has no family
//
// Counters that are arrays (drops by reason, ICMP errors by kind, per-port transmit state) have
// their own lists (drop_reason.h, gateway_icmp_error_kinds.h) or readers (control/runtime/tx_stall.h).
// docs/developing.md says how to add one.
#pragma once

#include <cstdint>
#include <string_view>

#define EGW_LCORE_PACKETS_HELP "Packets the worker lcore received (rx) from its queues and transmitted (tx)"
#define EGW_INGRESS_PACKETS_HELP                                                                            \
    "Packets of connections to the ingress IPs this gateway serves, on their Services' ports: direction "   \
    "\"in\" routed from outside into the cluster toward ingress.via, \"out\" the cluster's answers routed " \
    "untranslated in the Service's network"

#define EGW_WORKER_COUNTERS(X)                                                                                        \
    X(rx_packets, lcore, "workers", "rx_packets", "lcore_packets_total", "rx", EGW_LCORE_PACKETS_HELP)                \
    X(tx_packets, lcore, "workers", "tx_packets", "lcore_packets_total", "tx", EGW_LCORE_PACKETS_HELP)                \
    X(handed_off, lcore, "workers", "handed_off", "lcore_handoffs_total", "",                                         \
      "Packets the worker lcore passed to the worker owning their session")                                           \
    X(held, lcore, "workers", "held", "lcore_held_total", "",                                                         \
      "Packets the worker lcore gave to the control thread to wait for ARP")                                          \
    X(to_control, lcore, "workers", "to_control", "", "", "ARP replies the worker gave to the control thread")        \
    X(sessions_created, lcore, "workers", "sessions_created", "", "", "NAT sessions the worker created")              \
    X(sessions_closed, lcore, "workers", "sessions_closed", "", "", "NAT sessions the worker closed, for any reason") \
    X(sessions6_created, lcore, "workers", "sessions6_created", "", "",                                               \
      "IPv6 NAT sessions the worker created (also in sessions_created)")                                              \
    X(sessions6_closed, lcore, "workers", "sessions6_closed", "", "",                                                 \
      "IPv6 NAT sessions the worker closed, for any reason (also in sessions_closed)")                                \
    X(sessions_expired, lcore, "workers", "sessions_expired", "sessions_expired_total", "",                           \
      "NAT sessions closed because they were idle past their timeout")                                                \
    X(routed, lcore, "workers", "routed", "lcore_routed_total", "",                                                   \
      "Packets the worker lcore forwarded untranslated (cluster destinations, default route)")                        \
    X(busy_cycles, lcore, "workers", "busy_cycles", "lcore_busy_cycles_total", "",                                    \
      "TSC cycles the worker lcore spent in poll-loop iterations that moved packets")                                 \
    X(total_cycles, lcore, "workers", "total_cycles", "lcore_cycles_total", "",                                       \
      "TSC cycles the worker lcore spent in its poll loop; busy/total is its real load")                              \
    X(iterations, lcore, "workers", "iterations", "lcore_iterations_total", "",                                       \
      "Poll-loop iterations of the worker lcore (/livez fails when it stops advancing)")                              \
    X(icmp_rate_limited, total, "icmp", "rate_limited", "icmp_errors_rate_limited_total", "",                         \
      "ICMP errors not sent because the worker's token bucket (icmp.errors_per_second, icmp.burst) was empty; "       \
      "their packets count as drops of their reason")                                                                 \
    X(fragmented, total, "fragments", "fragmented", "ip_datagrams_fragmented_total", "",                              \
      "Datagrams cut into fragments: IPv4 larger than the egress port's MTU, IPv6 put together here and larger "      \
      "than the largest fragment it came in")                                                                         \
    X(fragments_out, total, "fragments", "sent", "ip_fragments_sent_total", "",                                       \
      "Fragments those datagrams were cut into, handed to the ports")                                                 \
    X(fragments_in, total, "fragments", "received", "ip_fragments_received_total", "",                                \
      "IPv4 and IPv6 fragments received and taken into a worker's reassembly table (one the table refuses at "        \
      "once is only a drop, reason fragment)")                                                                        \
    X(reassembled, total, "fragments", "reassembled", "ip_datagrams_reassembled_total", "",                           \
      "IPv4 and IPv6 datagrams put together from fragments, each then translated as one packet")                      \
    X(ingress_in, total, "ingress", "forwarded_in", "ingress_packets_total", "in", EGW_INGRESS_PACKETS_HELP)          \
    X(ingress_out, total, "ingress", "replies_out", "ingress_packets_total", "out", EGW_INGRESS_PACKETS_HELP)

namespace egw::dp {

enum class CounterScope : uint8_t { lcore, total };

enum class WorkerCounter : uint8_t {
#define EGW_X(name, scope, group, key, metric, direction, help) name,
    EGW_WORKER_COUNTERS(EGW_X)
#undef EGW_X
        count
};

inline constexpr unsigned kWorkerCounterCount = static_cast<unsigned>(WorkerCounter::count);

struct WorkerCounterInfo {
    const char* name;
    CounterScope scope;
    const char* group;
    const char* key;
    const char* metric;
    const char* direction;
    const char* help;
};

inline constexpr WorkerCounterInfo kWorkerCounterInfo[kWorkerCounterCount] = {
#define EGW_X(name, scope, group, key, metric, direction, help) \
    {#name, CounterScope::scope, group, key, metric, direction, help},
    EGW_WORKER_COUNTERS(EGW_X)
#undef EGW_X
};

inline constexpr const WorkerCounterInfo& info(WorkerCounter c) {
    return kWorkerCounterInfo[static_cast<unsigned>(c)];
}

// What the readers rely on: an lcore counter sits in workers[] under its name; a total outside
// workers[]; a family is a counter; counters sharing a family share its scope and HELP text and
// tell themselves apart by distinct directions.
consteval bool worker_counters_consistent() {
    using sv = std::string_view;
    for (unsigned i = 0; i < kWorkerCounterCount; ++i) {
        const WorkerCounterInfo& a = kWorkerCounterInfo[i];
        if ((a.scope == CounterScope::lcore) != (sv(a.group) == "workers")) return false;
        if (a.scope == CounterScope::lcore && sv(a.key) != sv(a.name)) return false;
        if (sv(a.help).empty() || (!sv(a.metric).empty() && !sv(a.metric).ends_with("_total"))) return false;
        for (unsigned j = 0; j < kWorkerCounterCount; ++j) {
            const WorkerCounterInfo& b = kWorkerCounterInfo[j];
            if (i == j || sv(a.metric).empty() || sv(a.metric) != sv(b.metric)) continue;
            if (a.scope != b.scope || sv(a.help) != sv(b.help) || sv(a.direction).empty() ||
                sv(a.direction) == sv(b.direction))
                return false;
        }
    }
    return true;
}
static_assert(worker_counters_consistent(), "EGW_WORKER_COUNTERS: see the rules above");

}  // namespace egw::dp
