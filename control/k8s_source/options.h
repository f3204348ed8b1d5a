// SPDX-License-Identifier: Apache-2.0
//
// How the `kubernetes` state source is set up: what the Controller (controller.h) and its parts,
// the LeaseKeeper (lease_keeper.h) and the HostDecider (host_decider.h), are given.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "config/ip.h"

namespace egw::k8s_source {

enum class ElectionMode { leader, external };

const char* to_string(ElectionMode m);  // "leader", "external"

struct ControllerOptions {
    std::string node_name;        // this gateway's node (required)
    std::string identity;         // holder of the leader Lease; "" = node_name
    std::string lease_namespace;  // "" = the credentials' namespace, else "default"
    ElectionMode election = ElectionMode::leader;
    std::chrono::seconds lease_duration{2};          // of both Leases (leaseDurationSeconds)
    std::chrono::milliseconds renew_deadline{1500};  // a leader that has not renewed for this long stops
    std::chrono::milliseconds retry_period{500};     // Lease renewals and acquisition attempts
    std::chrono::milliseconds grace{0};              // fresh state before deciding; 0 = 2 retry periods
    std::vector<net::IpPrefix> pod_cidrs;            // cluster-networked endpoints (docs/kubernetes.md)
    bool release_on_stop = true;                     // stop() hands the leader Lease back (fast failover)
    unsigned write_concurrency = 4;                  // status PATCHes in flight at once (WriterPool)
    std::chrono::milliseconds write_backoff_initial{200};
    std::chrono::milliseconds write_backoff_max{10000};
    // Also list and watch EgressIPs, Namespaces and Pods (egress_ip_watch.h), with a client of
    // their own. egwd's kubernetes source sets it; the election's tests leave it off.
    bool watch_egress_ips = false;
    // With watch_egress_ips: this gateway's outside port and VLAN prefixes and its EgressIP capacity
    // (nullopt: unlimited), published on its liveness Lease for the leader (gateway_facts.h).
    std::vector<net::IpPrefix> outside_prefixes;
    std::optional<size_t> egress_ip_capacity;
};

}  // namespace egw::k8s_source
