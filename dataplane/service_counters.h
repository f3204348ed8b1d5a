// SPDX-License-Identifier: Apache-2.0
//
// The per-Service counters, named once, as the workers' own counters are (worker_counters.h).
// One list makes the fields of the workers' ServiceCounters (worker.h) and of their sums
// (control/metrics/state.h: summed over the workers, a reused id's baseline subtracted), the
// Service objects of the status file (which egwctl shows), the per-Service and default-action
// Prometheus families and the telemetry's /egw/service, so that none of them can list a counter
// the others lack or name it differently.
//
// X(name, part, status, telemetry, metric, direction, help, default_metric, default_help):
//   name            the field of ServiceCounters (both), in the order of the dataplane struct:
//                   what a translated packet and a session's creation or close bump comes first,
//                   in one cache line
//   part            traffic, sessions or failures: readers write the parts in that order, and the
//                   open sessions (created - closed, which no counter holds) between traffic
//                   and sessions
//   status          the key in the status file's services[] ("" when it shows none)
//   telemetry       the key in /egw/service ("" when it shows none)
//   metric          the per-Service Prometheus family without the egw_ prefix, a counter
//                   ("" when none: sessions_closed and the IPv6 session counts make the open
//                   sessions instead)
//   direction       the `direction` label's value when counters share a family, else ""
//   help            the per-Service family's HELP (the same on each counter of a family)
//   default_metric  the family of the same counter for traffic of no EgressService (id 0)
//   default_help    its HELP
// docs/developing.md says how to add one.
#pragma once

#include <cstdint>
#include <string_view>

#define EGW_SERVICE_PACKETS_HELP \
    "Packets translated for the Service; direction egress is pod to outside, reply is outside to pod"
#define EGW_SERVICE_BYTES_HELP "Bytes (whole Ethernet frames) translated for the Service, by direction"
#define EGW_DEFAULT_PACKETS_HELP                                                                                 \
    "Packets of pods that are endpoints of no served EgressService and were masqueraded by the default action, " \
    "by direction"
#define EGW_DEFAULT_BYTES_HELP "Bytes (whole Ethernet frames) masqueraded by the default action, by direction"

#define EGW_SERVICE_COUNTERS(X)                                                                                        \
    X(packets_out, traffic, "packets_out", "packets_egress", "service_packets_total", "egress",                        \
      EGW_SERVICE_PACKETS_HELP, "default_action_packets_total", EGW_DEFAULT_PACKETS_HELP)                              \
    X(bytes_out, traffic, "bytes_out", "bytes_egress", "service_bytes_total", "egress", EGW_SERVICE_BYTES_HELP,        \
      "default_action_bytes_total", EGW_DEFAULT_BYTES_HELP)                                                            \
    X(packets_in, traffic, "packets_in", "packets_reply", "service_packets_total", "reply", EGW_SERVICE_PACKETS_HELP,  \
      "default_action_packets_total", EGW_DEFAULT_PACKETS_HELP)                                                        \
    X(bytes_in, traffic, "bytes_in", "bytes_reply", "service_bytes_total", "reply", EGW_SERVICE_BYTES_HELP,            \
      "default_action_bytes_total", EGW_DEFAULT_BYTES_HELP)                                                            \
    X(sessions_created, sessions, "sessions_created", "sessions_created", "service_sessions_created_total", "",        \
      "NAT sessions created for the Service", "default_action_sessions_created_total",                                 \
      "NAT sessions created by the default action")                                                                    \
    X(sessions_closed, sessions, "", "", "", "", "NAT sessions of the Service closed, for any reason", "", "")         \
    X(sessions6_created, sessions, "", "", "", "",                                                                     \
      "IPv6 NAT sessions created for the Service (also in "                                                            \
      "sessions_created)",                                                                                             \
      "", "")                                                                                                          \
    X(sessions6_closed, sessions, "", "", "", "", "IPv6 NAT sessions of the Service closed (also in sessions_closed)", \
      "", "")                                                                                                          \
    X(port_alloc_failures, failures, "port_alloc_failures", "snat_allocation_failures",                                \
      "service_snat_allocation_failures_total", "",                                                                    \
      "New connections of the Service dropped because no NAT port was free toward their destination",                  \
      "default_action_snat_allocation_failures_total",                                                                 \
      "Connections of the default action dropped because no NAT port was free")

namespace egw::dp {

enum class ServiceCounterPart : uint8_t { traffic, sessions, failures };

enum class ServiceCounter : uint8_t {
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) name,
    EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
        count
};

inline constexpr unsigned kServiceCounterCount = static_cast<unsigned>(ServiceCounter::count);

struct ServiceCounterInfo {
    const char* name;
    ServiceCounterPart part;
    const char* status;
    const char* telemetry;
    const char* metric;
    const char* direction;
    const char* help;
    const char* default_metric;
    const char* default_help;
};

inline constexpr ServiceCounterInfo kServiceCounterInfo[kServiceCounterCount] = {
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) \
    {#name, ServiceCounterPart::part, status, telemetry, metric, direction, help, default_metric, default_help},
    EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
};

// What the readers rely on: the parts come in order; a counter has a per-Service family exactly
// when it has a default-action one; families are counters; counters sharing a family share its
// HELP and tell themselves apart by distinct directions.
consteval bool service_counters_consistent() {
    using sv = std::string_view;
    for (unsigned i = 0; i < kServiceCounterCount; ++i) {
        const ServiceCounterInfo& a = kServiceCounterInfo[i];
        if (i > 0 && a.part < kServiceCounterInfo[i - 1].part) return false;
        if (sv(a.metric).empty() != sv(a.default_metric).empty() || sv(a.help).empty()) return false;
        if (!sv(a.metric).empty() && (!sv(a.metric).ends_with("_total") || !sv(a.default_metric).ends_with("_total") ||
                                      sv(a.default_help).empty()))
            return false;
        for (unsigned j = 0; j < kServiceCounterCount; ++j) {
            const ServiceCounterInfo& b = kServiceCounterInfo[j];
            if (i == j || sv(a.metric).empty() || sv(a.metric) != sv(b.metric)) continue;
            if (sv(a.help) != sv(b.help) || sv(a.default_metric) != sv(b.default_metric) ||
                sv(a.default_help) != sv(b.default_help) || sv(a.direction).empty() ||
                sv(a.direction) == sv(b.direction))
                return false;
        }
    }
    return true;
}
static_assert(service_counters_consistent(), "EGW_SERVICE_COUNTERS: see the rules above");

}  // namespace egw::dp
