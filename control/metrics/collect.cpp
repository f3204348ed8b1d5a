// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/collect.h"

#include <algorithm>

namespace egw::metrics {

namespace {

// --- build and process ------------------------------------------------------------------------

constexpr Family kBuildInfo{
    "build_info", Type::gauge, "Always 1; the labels say which egw and DPDK this is", {"version", "dpdk_version"}};
constexpr Family kStartTime{"start_time_seconds", Type::gauge, "When egwd started, in seconds since the Unix epoch"};
constexpr Family kTscHz{"tsc_hertz", Type::gauge,
                        "Frequency of the time-stamp counter the lcore cycle counters are measured in, in hertz"};

void write_process(Writer& w, const ProcessInfo& p) {
    w.family(kBuildInfo);
    w.sample(kBuildInfo, {p.version, p.dpdk_version}, uint64_t{1});
    w.family(kStartTime);
    w.sample(kStartTime, {}, p.start_unix);
    w.family(kTscHz);
    w.sample(kTscHz, {}, p.tsc_hz);
}

// --- configuration publication ----------------------------------------------------------------

constexpr Family kGeneration{"config_generation", Type::gauge,
                             "Generation of the policy tables the workers use (0 before the first publication)"};
constexpr Family kPublishDuration{
    "config_publish_duration_seconds", Type::histogram,
    "Time from handing a new policy snapshot to the workers until the previous one is freed (RCU grace period)"};
constexpr Family kLastPublish{"config_last_publish_timestamp_seconds", Type::gauge,
                              "When the last policy generation was published, in seconds since the Unix epoch"};

void write_config(Writer& w, const ControlView& v) {
    w.family(kGeneration);
    w.sample(kGeneration, {}, v.generation);
    w.family(kPublishDuration);
    w.histogram(kPublishDuration, {}, v.publish_duration);
    w.family(kLastPublish);
    if (v.generation > 0) w.sample(kLastPublish, {}, v.last_publish_unix);
}

// --- per Service ------------------------------------------------------------------------------

constexpr Family kServiceInfo{"service_info",
                              Type::gauge,
                              "Always 1 for every EgressService this gateway programs or should program; the labels "
                              "give its mode, VRF and host",
                              {"namespace", "service", "source_ip_by", "vrf", "status_host"}};
constexpr Family kServiceProgrammed{"service_programmed",
                                    Type::gauge,
                                    "1 when this gateway translates the Service's traffic now, 0 otherwise",
                                    {"namespace", "service"}};
constexpr Family kServiceEndpoints{"service_endpoints",
                                   Type::gauge,
                                   "Cluster-networked IPv4 endpoints (pods) of the Service",
                                   {"namespace", "service"}};
constexpr Family kServiceFamilyEndpoints{"service_family_endpoints",
                                         Type::gauge,
                                         "Cluster-networked endpoints (pods) of the Service by address family",
                                         {"namespace", "service", "family"}};
constexpr Family kServiceFamilyTranslated{"service_family_translated",
                                          Type::gauge,
                                          "1 when this gateway translates the Service's endpoints of that address "
                                          "family now",
                                          {"namespace", "service", "family"}};
constexpr Family kServiceSessions{
    "service_sessions_active", Type::gauge, "NAT sessions of the Service open now", {"namespace", "service"}};

// The families of the per-Service counters (EGW_SERVICE_COUNTERS), per Service and for the
// default action: a direction label on those that share their family with others. Counters
// without a family get a placeholder that is never written.
consteval Family service_family(const dp::ServiceCounterInfo& c) {
    std::string_view name = *c.metric ? c.metric : "unexported_total";
    if (*c.direction) return Family{name, Type::counter, c.help, {"namespace", "service", "direction"}};
    return Family{name, Type::counter, c.help, {"namespace", "service"}};
}

consteval Family default_family(const dp::ServiceCounterInfo& c) {
    std::string_view name = *c.default_metric ? c.default_metric : "unexported_total";
    std::string_view help = *c.default_help ? c.default_help : c.help;
    if (*c.direction) return Family{name, Type::counter, help, {"direction"}};
    return Family{name, Type::counter, help};
}

constexpr Family kServiceFamilies[dp::kServiceCounterCount] = {
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) \
    service_family(dp::kServiceCounterInfo[static_cast<unsigned>(dp::ServiceCounter::name)]),
    EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
};

constexpr Family kDefaultFamilies[dp::kServiceCounterCount] = {
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) \
    default_family(dp::kServiceCounterInfo[static_cast<unsigned>(dp::ServiceCounter::name)]),
    EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
};

// Calls f(i) for the first counter of each family of one part, in the list's order.
template <class F>
void for_each_service_family(dp::ServiceCounterPart part, F&& f) {
    for (unsigned i = 0; i < dp::kServiceCounterCount; ++i) {
        const dp::ServiceCounterInfo& c = dp::kServiceCounterInfo[i];
        if (c.part != part || !*c.metric) continue;
        bool first = true;
        for (unsigned j = 0; j < i && first; ++j)
            first = std::string_view(dp::kServiceCounterInfo[j].metric) != c.metric;
        if (first) f(i);
    }
}

// The counters of one family, starting at its first one.
template <class F>
void for_each_in_family(unsigned first, F&& f) {
    for (unsigned j = first; j < dp::kServiceCounterCount; ++j)
        if (std::string_view(dp::kServiceCounterInfo[j].metric) == dp::kServiceCounterInfo[first].metric)
            f(static_cast<dp::ServiceCounter>(j), dp::kServiceCounterInfo[j].direction);
}

constexpr Family kServicesKnown{"services_known", Type::gauge,
                                "EgressServices egwd knows, served by this gateway or not"};
constexpr Family kServicesServed{"services_served", Type::gauge,
                                 "EgressServices this gateway programs or should program (status.host is this node "
                                 "or ALL): the Services with per-Service series"};

// Per-Service series only for the Services this gateway programs, or should program and does not
// (a problem worth seeing): with 10,000 EgressServices spread over a fleet, every gateway
// exporting every Service made each scrape 120,000 series (docs/metrics.md).
bool exported(const ServiceEntry& s) {
    return s.programmed || s.serve_here;
}

void write_service_counters(Writer& w, const ControlView& v, const Readings& r, dp::ServiceCounterPart part) {
    for_each_service_family(part, [&](unsigned first) {
        const Family& f = kServiceFamilies[first];
        w.family(f);
        for (size_t i = 0; i < v.services.size(); ++i) {
            const ServiceEntry& s = v.services[i];
            if (!exported(s)) continue;
            for_each_in_family(first, [&](dp::ServiceCounter c, const char* direction) {
                if (*direction)
                    w.sample(f, {s.ns, s.name, direction}, r.services[i][c]);
                else
                    w.sample(f, {s.ns, s.name}, r.services[i][c]);
            });
        }
    });
}

void write_services(Writer& w, const ControlView& v, const Readings& r) {
    size_t served = 0;
    for (const ServiceEntry& s : v.services)
        served += exported(s);
    w.family(kServicesKnown);
    w.sample(kServicesKnown, {}, uint64_t{v.services.size()});
    w.family(kServicesServed);
    w.sample(kServicesServed, {}, uint64_t{served});
    w.family(kServiceInfo);
    for (const ServiceEntry& s : v.services)
        if (exported(s)) w.sample(kServiceInfo, {s.ns, s.name, s.source_ip_by, s.vrf, s.status_host}, uint64_t{1});
    w.family(kServiceProgrammed);
    for (const ServiceEntry& s : v.services)
        if (exported(s)) w.sample(kServiceProgrammed, {s.ns, s.name}, uint64_t{s.programmed});
    w.family(kServiceEndpoints);
    for (const ServiceEntry& s : v.services)
        if (exported(s)) w.sample(kServiceEndpoints, {s.ns, s.name}, uint64_t{s.endpoints});
    w.family(kServiceFamilyEndpoints);
    for (const ServiceEntry& s : v.services)
        if (exported(s)) {
            w.sample(kServiceFamilyEndpoints, {s.ns, s.name, "IPv4"}, uint64_t{s.endpoints});
            w.sample(kServiceFamilyEndpoints, {s.ns, s.name, "IPv6"}, uint64_t{s.endpoints_ipv6});
        }
    w.family(kServiceFamilyTranslated);
    for (const ServiceEntry& s : v.services)
        if (exported(s)) {
            w.sample(kServiceFamilyTranslated, {s.ns, s.name, "IPv4"}, uint64_t{s.programmed});
            w.sample(kServiceFamilyTranslated, {s.ns, s.name, "IPv6"}, uint64_t{s.ipv6_translated});
        }
    write_service_counters(w, v, r, dp::ServiceCounterPart::traffic);
    w.family(kServiceSessions);
    for (size_t i = 0; i < v.services.size(); ++i)
        if (exported(v.services[i]))
            w.sample(kServiceSessions, {v.services[i].ns, v.services[i].name}, r.services_active[i]);
    write_service_counters(w, v, r, dp::ServiceCounterPart::sessions);
    write_service_counters(w, v, r, dp::ServiceCounterPart::failures);
}

// --- traffic of no EgressService (the default action) ------------------------------------------

constexpr Family kDefaultSessions{"default_action_sessions_active", Type::gauge,
                                  "NAT sessions of the default action open now"};
void write_default_counters(Writer& w, const ServiceCounters& c, dp::ServiceCounterPart part) {
    for_each_service_family(part, [&](unsigned first) {
        const Family& f = kDefaultFamilies[first];
        w.family(f);
        for_each_in_family(first, [&](dp::ServiceCounter which, const char* direction) {
            if (*direction)
                w.sample(f, {direction}, c[which]);
            else
                w.sample(f, {}, c[which]);
        });
    });
}

void write_default_action(Writer& w, const Readings& r) {
    const ServiceCounters& c = r.default_action;
    write_default_counters(w, c, dp::ServiceCounterPart::traffic);
    w.family(kDefaultSessions);
    w.sample(kDefaultSessions, {}, c.sessions_active());
    write_default_counters(w, c, dp::ServiceCounterPart::sessions);
    write_default_counters(w, c, dp::ServiceCounterPart::failures);
}

// --- NAT addresses ----------------------------------------------------------------------------

constexpr Family kSnatSessions{"snat_sessions",
                               Type::gauge,
                               "NAT sessions translated to the address, each holding one port toward its destination "
                               "(the SESSIONS column of egwctl show snat pools, summed); absent when masquerading "
                               "traffic could leave through several addresses (see docs/metrics.md)",
                               {"address", "kind", "family"}};
constexpr Family kSnatCapacity{"snat_ports_capacity",
                               Type::gauge,
                               "NAT ports of the address available toward one destination (sessions.port_min.."
                               "port_max)",
                               {"address", "kind", "family"}};

void write_nat_addresses(Writer& w, const ControlView& v, const Readings& r) {
    w.family(kSnatSessions);
    for (const NatAddressEntry& a : v.nat_addresses)
        if (a.exact)
            w.sample(kSnatSessions, {net::to_string(a.ip), a.kind, net::to_string(a.ip.family())},
                     sessions_on(a, v, r));
    w.family(kSnatCapacity);
    for (const NatAddressEntry& a : v.nat_addresses)
        w.sample(kSnatCapacity, {net::to_string(a.ip), a.kind, net::to_string(a.ip.family())}, uint64_t{v.nat_ports});
}

// --- drops ------------------------------------------------------------------------------------

#define EGW_DROP_HELP(name, help) " " #name ": " help ";"
constexpr Family kDrops{
    "drops_total", Type::counter, "Packets dropped, by reason:" EGW_DROP_REASONS(EGW_DROP_HELP), {"reason"}};
#undef EGW_DROP_HELP

void write_drops(Writer& w, const Readings& r) {
    w.family(kDrops);
    for (unsigned i = 0; i < dp::kDropReasonCount; ++i)
        w.sample(kDrops, {dp::kDropReasonNames[i]}, r.drops[i]);
}

// --- the gateway's own ICMP errors ------------------------------------------------------------

#define EGW_ICMP_HELP(name, type, code, help) " " #name ": " help ";"
constexpr Family kIcmpSent{"icmp_errors_sent_total",
                           Type::counter,
                           "ICMP errors the gateway sent itself, by type (each in place of the packet it "
                           "answers, which is then not a drop):" EGW_ICMP_ERRORS(EGW_ICMP_HELP),
                           {"type"}};
#undef EGW_ICMP_HELP
void write_icmp(Writer& w, const Readings& r) {
    w.family(kIcmpSent);
    for (unsigned i = 0; i < dp::kIcmpErrorCount; ++i)
        w.sample(kIcmpSent, {dp::kIcmpErrorNames[i]}, r.icmp_sent[i]);
}

// --- the workers' counters (EGW_WORKER_COUNTERS) --------------------------------------------------

// The family of a counter of the list: an lcore label on per-worker ones, a direction label on
// those that share their family with others. Counters without a family get a placeholder that
// is never written.
consteval Family worker_family(const dp::WorkerCounterInfo& c) {
    std::string_view name = *c.metric ? c.metric : "unexported_total";
    bool lcore = c.scope == dp::CounterScope::lcore, direction = *c.direction;
    if (lcore && direction) return Family{name, Type::counter, c.help, {"lcore", "direction"}};
    if (lcore) return Family{name, Type::counter, c.help, {"lcore"}};
    if (direction) return Family{name, Type::counter, c.help, {"direction"}};
    return Family{name, Type::counter, c.help};
}

constexpr Family kWorkerFamilies[dp::kWorkerCounterCount] = {
#define EGW_X(name, scope, group, key, metric, direction, help) worker_family(dp::info(dp::WorkerCounter::name)),
    EGW_WORKER_COUNTERS(EGW_X)
#undef EGW_X
};

// Every family of the list's counters of one scope, in the list's order; a shared family once,
// at its first counter, with the samples of all its counters.
void write_worker_counters(Writer& w, const Readings& r, dp::CounterScope scope) {
    for (unsigned i = 0; i < dp::kWorkerCounterCount; ++i) {
        const dp::WorkerCounterInfo& c = dp::kWorkerCounterInfo[i];
        if (c.scope != scope || !*c.metric) continue;
        bool first = true;
        for (unsigned j = 0; j < i && first; ++j)
            first = std::string_view(dp::kWorkerCounterInfo[j].metric) != c.metric;
        if (!first) continue;
        const Family& f = kWorkerFamilies[i];
        w.family(f);
        for (unsigned j = i; j < dp::kWorkerCounterCount; ++j) {
            const dp::WorkerCounterInfo& d = dp::kWorkerCounterInfo[j];
            if (std::string_view(d.metric) != c.metric) continue;
            if (scope == dp::CounterScope::total) {
                if (*d.direction)
                    w.sample(f, {d.direction}, r.totals[j]);
                else
                    w.sample(f, {}, r.totals[j]);
                continue;
            }
            for (const LcoreReading& l : r.lcores) {
                std::string lcore = std::to_string(l.lcore);
                if (*d.direction)
                    w.sample(f, {lcore, d.direction}, l.counters[j]);
                else
                    w.sample(f, {lcore}, l.counters[j]);
            }
        }
    }
}

// --- sessions ---------------------------------------------------------------------------------

constexpr Family kSessionsActive{
    "sessions_active", Type::gauge, "NAT sessions open now, per worker lcore and address family", {"lcore", "family"}};
constexpr Family kSessionsCapacity{
    "sessions_capacity",
    Type::gauge,
    "Most NAT sessions the gateway holds per address family (sessions.max, sessions.max_ipv6; all workers together)",
    {"family"}};
void write_sessions(Writer& w, const ControlView& v, const Readings& r) {
    w.family(kSessionsActive);
    for (const LcoreReading& l : r.lcores) {
        const uint64_t all = l.sessions_active(), v6 = std::min(l.sessions_active_ipv6(), all);
        w.sample(kSessionsActive, {std::to_string(l.lcore), "IPv4"}, all - v6);
        w.sample(kSessionsActive, {std::to_string(l.lcore), "IPv6"}, v6);
    }
    w.family(kSessionsCapacity);
    w.sample(kSessionsCapacity, {"IPv4"}, v.max_sessions);
    w.sample(kSessionsCapacity, {"IPv6"}, v.max_sessions_ipv6);
}

// --- VLANs ------------------------------------------------------------------------------------

constexpr Family kVlanInfo{"vlan_info",
                           Type::gauge,
                           "Always 1 for every configured VLAN sub-port; labels give its parent port, VLAN id, "
                           "role and VRF",
                           {"port", "parent", "vlan", "role", "vrf"}};
constexpr Family kVlanPackets{"vlan_packets_total",
                              Type::counter,
                              "Tagged frames of the VLAN: received (taken off its parent's device to the VLAN) "
                              "and transmitted (tagged for it)",
                              {"port", "direction"}};
constexpr Family kVlanTxRefused{"vlan_tx_refused_total",
                                Type::counter,
                                "Frames of the VLAN its parent's transmit queues refused; each is also a tx_full drop",
                                {"port"}};

}  // namespace

namespace {

constexpr Family kEgressQosRules{"egress_qos_rules",
                                 Type::gauge,
                                 "Rules of the namespace's applied EgressQoS (the one named default)",
                                 {"namespace"}};
constexpr Family kEgressQosPods{"egress_qos_pods",
                                Type::gauge,
                                "Pods of the namespace some rule of its EgressQoS selects: their sessions are marked",
                                {"namespace"}};
constexpr Family kEgressQosIgnored{
    "egress_qos_ignored", Type::gauge, "EgressQoS objects ignored (not named default)", {}};

}  // namespace

void write_egress_qos(Writer& w, const std::vector<EgressQosEntry>& objects) {
    w.family(kEgressQosRules);
    for (const EgressQosEntry& q : objects)
        if (q.applied) w.sample(kEgressQosRules, {q.ns}, q.rules);
    w.family(kEgressQosPods);
    for (const EgressQosEntry& q : objects)
        if (q.applied) w.sample(kEgressQosPods, {q.ns}, q.pods);
    uint64_t ignored = 0;
    for (const EgressQosEntry& q : objects)
        ignored += !q.applied;
    w.family(kEgressQosIgnored);
    w.sample(kEgressQosIgnored, {}, ignored);
}

void write_vlans(Writer& w, const std::vector<VlanReading>& vlans) {
    w.family(kVlanInfo);
    for (const VlanReading& v : vlans)
        w.sample(kVlanInfo, {v.name, v.parent, std::to_string(v.vlan), v.role, v.vrf}, uint64_t{1});
    w.family(kVlanPackets);
    for (const VlanReading& v : vlans) {
        w.sample(kVlanPackets, {v.name, "rx"}, v.rx_packets);
        w.sample(kVlanPackets, {v.name, "tx"}, v.tx_packets);
    }
    w.family(kVlanTxRefused);
    for (const VlanReading& v : vlans)
        w.sample(kVlanTxRefused, {v.name}, v.tx_refused);
}

namespace {

// --- ports ------------------------------------------------------------------------------------

constexpr Family kPortInfo{"port_info",
                           Type::gauge,
                           "Always 1 for every configured port; labels give its device, "
                           "role and VRF",
                           {"port", "device", "role", "vrf"}};
constexpr Family kPortUp{"port_up", Type::gauge, "1 when the port's link is up", {"port"}};
constexpr Family kPortRxPackets{"port_rx_packets_total", Type::counter, "Packets the port received", {"port"}};
constexpr Family kPortTxPackets{"port_tx_packets_total", Type::counter, "Packets the port transmitted", {"port"}};
constexpr Family kPortRxBytes{"port_rx_bytes_total", Type::counter, "Bytes the port received", {"port"}};
constexpr Family kPortTxBytes{"port_tx_bytes_total", Type::counter, "Bytes the port transmitted", {"port"}};
constexpr Family kPortRxMissed{"port_rx_missed_total",
                               Type::counter,
                               "Packets the NIC dropped because the receive queue was full (workers too slow)",
                               {"port"}};
constexpr Family kPortRxErrors{"port_rx_errors_total", Type::counter, "Erroneous packets the port received", {"port"}};
constexpr Family kPortTxErrors{"port_tx_errors_total", Type::counter, "Packets the port failed to transmit", {"port"}};
constexpr Family kPortTxRefused{"port_tx_refused_total",
                                Type::counter,
                                "Frames the port's transmit queues refused (queue full); each is also a tx_full drop",
                                {"port"}};
static_assert(dp::kTxStallMs == 200, "the help of port_tx_stalls_total names the time");
constexpr Family kPortTxStalls{"port_tx_stalls_total",
                               Type::counter,
                               "Times a transmit queue of the port accepted no frame for 200 ms while frames waited "
                               "(the driver or the kernel behind it stopped taking them)",
                               {"port"}};
constexpr Family kPortTxStalled{"port_tx_stalled_queues",
                                Type::gauge,
                                "Transmit queues of the port (one per worker) stalled now: refusing every frame "
                                "since their stall was counted",
                                {"port"}};
constexpr Family kPortRxNombuf{
    "port_rx_nombuf_total", Type::counter, "Receive failures for want of an mbuf (raise mempool.mbufs)", {"port"}};

void write_ports(Writer& w, const ControlView& v, const std::vector<PortReading>& ports) {
    auto each = [&](const Family& f, auto field) {
        w.family(f);
        for (size_t i = 0; i < v.ports.size() && i < ports.size(); ++i)
            if (ports[i].ok) w.sample(f, {v.ports[i].name}, field(ports[i]));
    };
    w.family(kPortInfo);
    for (const PortEntry& p : v.ports)
        w.sample(kPortInfo, {p.name, p.device, p.role, p.vrf}, uint64_t{1});
    w.family(kPortUp);
    for (size_t i = 0; i < v.ports.size() && i < ports.size(); ++i)
        w.sample(kPortUp, {v.ports[i].name}, uint64_t{ports[i].link_up});
    each(kPortRxPackets, [](const PortReading& p) { return p.rx_packets; });
    each(kPortTxPackets, [](const PortReading& p) { return p.tx_packets; });
    each(kPortRxBytes, [](const PortReading& p) { return p.rx_bytes; });
    each(kPortTxBytes, [](const PortReading& p) { return p.tx_bytes; });
    each(kPortRxMissed, [](const PortReading& p) { return p.rx_missed; });
    each(kPortRxErrors, [](const PortReading& p) { return p.rx_errors; });
    each(kPortTxErrors, [](const PortReading& p) { return p.tx_errors; });
    each(kPortRxNombuf, [](const PortReading& p) { return p.rx_nombuf; });
    // egw's own counters: there whether or not ethdev answered.
    auto own = [&](const Family& f, auto field) {
        w.family(f);
        for (size_t i = 0; i < v.ports.size() && i < ports.size(); ++i)
            w.sample(f, {v.ports[i].name}, field(ports[i]));
    };
    own(kPortTxRefused, [](const PortReading& p) { return p.tx_refused; });
    own(kPortTxStalls, [](const PortReading& p) { return p.tx_stalls; });
    own(kPortTxStalled, [](const PortReading& p) { return p.tx_stalled_queues; });
}

}  // namespace

void write_metrics(Writer& w, const ControlView& view, const Readings& r, const std::vector<PortReading>& ports,
                   const ProcessInfo& process) {
    write_process(w, process);
    write_config(w, view);
    write_services(w, view, r);
    write_default_action(w, r);
    write_nat_addresses(w, view, r);
    write_drops(w, r);
    write_icmp(w, r);
    write_worker_counters(w, r, dp::CounterScope::total);
    write_sessions(w, view, r);
    write_worker_counters(w, r, dp::CounterScope::lcore);
    write_ports(w, view, ports);
}

}  // namespace egw::metrics
