// SPDX-License-Identifier: Apache-2.0
//
// What the metrics endpoint and the telemetry commands read, and how it reaches their threads.
//
// Two kinds of state, two hand-overs:
//
// - ControlView: names and ids the control thread owns (Services with their dense id, ports, NAT
//   addresses, the configuration generation and how long publishing took). The control thread
//   builds a fresh immutable ControlView after every publication and swaps a shared_ptr to it
//   under a mutex (ViewBox); readers copy the shared_ptr under the same mutex and then read
//   without any lock. The mutex is only ever taken on the control side, never by a worker.
//
// - Counters: written by their worker alone with relaxed atomic stores (count() and store(),
//   dataplane/counter.h: a plain store racing with these loads would be a data race), read here
//   with relaxed atomic loads, as status_file.cpp does. Workers never wait for a reader and
//   never see one. Sums across workers are not a consistent cut, which counters do not need.
//
// Service ids are reused after a Service is gone, but the per-id counters are never reset (only
// the worker may write them). ControlView therefore carries a baseline per Service, taken when
// an id first appears under a new key, and Readings subtract it so that a new Service starts
// from zero. Active sessions are not baselined: sessions of the previous owner still open under
// that id are real sessions until they are closed.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/ip.h"
#include "control/metrics/exposition.h"
#include "dataplane/drop_reason.h"
#include "dataplane/worker.h"

namespace egw::metrics {

// One Service's counters summed over the workers: the list's (dataplane/service_counters.h).
struct ServiceCounters {
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) uint64_t name = 0;
    EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X

    // The counter `which`, for readers that go through the list (dataplane/service_counters.h).
    uint64_t& operator[](dp::ServiceCounter which);
    uint64_t operator[](dp::ServiceCounter which) const {
        return const_cast<ServiceCounters&>(*this)[which];
    }

    uint64_t sessions_active() const {
        return sessions_created >= sessions_closed ? sessions_created - sessions_closed : 0;
    }
    uint64_t sessions_active_ipv6() const {
        return std::min(sessions6_created >= sessions6_closed ? sessions6_created - sessions6_closed : 0,
                        sessions_active());
    }
    uint64_t sessions_active_ipv4() const {
        return sessions_active() - sessions_active_ipv6();
    }
    uint64_t sessions_active(net::Family f) const {
        return f == net::Family::v6 ? sessions_active_ipv6() : sessions_active_ipv4();
    }
};

struct ServiceEntry {
    uint32_t id = 0;  // dense id, indexes Worker::service_counters
    std::string key;  // "namespace/name"
    std::string ns;
    std::string name;
    std::string source_ip_by;  // "LoadBalancerIP" or "Network"
    std::string status_host;
    std::string reason;        // why not programmed here ("" when it is)
    std::string network;       // spec.network as written
    std::string vrf;           // resolved VRF name, "" when unknown
    std::string ingress_ip;    // dotted quad or ""
    std::string ingress_ipv6;  // the last IPv6 ingress IP or ""
    size_t endpoints = 0;
    size_t endpoints_ipv6 = 0;     // cluster-networked IPv6 endpoints
    bool ipv6_translated = false;  // its IPv6 endpoints are translated here now (ServiceView::programmed6)
    bool serve_here = false;
    bool programmed = false;
    uint32_t nat_address = 0;  // host order: the ingress IP it translates to; 0 when masquerading or idle
    std::optional<net::IpAddr> nat_address6;  // the IPv6 ingress IP its IPv6 endpoints translate to
    ServiceCounters baseline;                 // counters of the id's previous owner, see above
};

struct PortEntry {
    std::string name;  // egw's name (config)
    std::string device;
    std::string role;  // "inside" / "outside"
    std::string vrf;
    uint16_t id = 0;  // DPDK port id
};

// An address the gateway translates to, with the Services whose sessions of its family use it.
struct NatAddressEntry {
    net::IpAddr ip;                     // either family
    std::string kind;                   // "ingress_ip" (a Service's load-balancer IP) or "port" (masquerade)
    std::vector<uint32_t> service_ids;  // Services (0 = the default action) translating only to it
    // False when some masquerading traffic may or may not leave through this address (a VRF with
    // several outside ports, or one that falls through to the default table): then egwd cannot
    // tell how many sessions it holds and exports no "in use" value for it.
    bool exact = true;
};

struct WorkerEntry {
    unsigned index = 0;
    unsigned lcore = 0;
};

// One EgressQoS object as the files source gave it (control/policy/egress_qos_table.h's view).
struct EgressQosEntry {
    std::string ns;
    bool applied = false;  // the namespace's "default"; otherwise ignored
    uint64_t rules = 0;
    uint64_t pods = 0;  // pods its rules select
};

struct ControlView {
    uint64_t generation = 0;          // last published configuration generation; 0 = none yet
    double last_publish_seconds = 0;  // how long the last publication took
    double last_publish_unix = 0;     // when it finished (seconds since the epoch)
    Histogram publish_duration{{}};
    std::vector<ServiceEntry> services;          // sorted by key
    std::vector<PortEntry> ports;                // config order
    std::vector<NatAddressEntry> nat_addresses;  // sorted by address
    std::vector<WorkerEntry> workers;            // by worker index
    uint32_t nat_ports = 0;                      // size of sessions.port_min..port_max
    uint64_t max_sessions = 0;                   // sessions.max: the IPv4 tables, all workers together
    uint64_t max_sessions_ipv6 = 0;              // sessions.max_ipv6: the IPv6 tables
    std::string node;
    std::string default_action;              // "route", "masquerade" or "drop"
    std::vector<EgressQosEntry> egress_qos;  // sorted by namespace, then name

    const ServiceEntry* find_service(std::string_view key) const;
};

// The control thread's hand-over point.
class ViewBox {
public:
    void publish(std::shared_ptr<const ControlView> v) {
        std::lock_guard lock(mu_);
        view_ = std::move(v);
    }
    std::shared_ptr<const ControlView> get() const {
        std::lock_guard lock(mu_);
        return view_;
    }

private:
    mutable std::mutex mu_;
    std::shared_ptr<const ControlView> view_;
};

// Counters read for one scrape or one telemetry answer.
struct LcoreReading {
    unsigned index = 0;
    unsigned lcore = 0;
    std::array<uint64_t, dp::kWorkerCounterCount> counters{};  // every EGW_WORKER_COUNTERS entry

    uint64_t operator[](dp::WorkerCounter c) const { return counters[static_cast<unsigned>(c)]; }
    uint64_t sessions_active() const;       // both families
    uint64_t sessions_active_ipv6() const;  // the IPv6 ones of them
};

struct Readings {
    std::vector<ServiceCounters> services;   // parallel to ControlView::services, baselines subtracted
    std::vector<uint64_t> services_active;   // parallel, raw (not baselined)
    std::vector<uint64_t> services_active6;  // parallel, raw: the IPv6 ones of services_active
    ServiceCounters default_action;          // service id 0: traffic of no EgressService
    std::array<uint64_t, dp::kDropReasonCount> drops{};
    std::array<uint64_t, dp::kIcmpErrorCount> icmp_sent{};  // the gateway's own ICMP errors, by kind
    // Every EGW_WORKER_COUNTERS entry summed over the workers (lcore ones too).
    std::array<uint64_t, dp::kWorkerCounterCount> totals{};
    std::vector<LcoreReading> lcores;
    uint64_t sessions_active = 0;

    uint64_t operator[](dp::WorkerCounter c) const { return totals[static_cast<unsigned>(c)]; }
};

// Relaxed atomic load of a counter its worker bumps with relaxed atomic stores (count()).
inline uint64_t load_counter(const uint64_t& v) {
    return __atomic_load_n(&v, __ATOMIC_RELAXED);
}

ServiceCounters sum_service(std::span<dp::Worker* const> workers, uint32_t id);

// Reads every counter the view names. `neighbor_held_dropped` is the control thread's share of
// neighbor_unresolved drops (packets it held for ARP and gave up on).
Readings read_counters(const ControlView& view, std::span<dp::Worker* const> workers, uint64_t neighbor_held_dropped);

// Sessions attributed to a NAT address: those of its family of the Services translating to it
// (only meaningful when entry.exact).
uint64_t sessions_on(const NatAddressEntry& entry, const ControlView& view, const Readings& r);

std::string format_ipv4(uint32_t host_order);

}  // namespace egw::metrics
