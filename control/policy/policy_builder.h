// SPDX-License-Identifier: Apache-2.0
//
// Turns the configuration and the evaluated EgressServices into the next PolicySnapshot.
//
// Runs on the control thread. It keeps what must survive from one snapshot to the next: the
// dense id of every Service (ids index the workers' counters, so they are stable while the
// Service exists and are only reused after it is gone) and each Service's translation version
// (bumped only when the translation really changes, so a no-op reconcile keeps every session).
//
// The cost of a snapshot is proportional to what changed: the builder keeps its own copy of the
// Service table, the endpoint map and the NAT addresses of the last snapshot, re-resolves only
// the Services whose state changed and patches those copies; a new snapshot is then a copy of
// flat arrays (a few MiB at 100,000 endpoints) plus what the configuration alone decides (ports,
// routes), which is rebuilt every time because it is small and the configuration may change.
// The result is the same as building everything from scratch with the same history
// (tests/unit/policy/test_policy_builder.cpp checks that after every step of random changes).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "control/model/rules.h"
#include "dataplane/tables/policy.h"

namespace egw::control {

// What the control plane knows about a Service beyond the snapshot, for the status file, logs,
// the CLI and the metrics.
struct ServiceView {
    model::ServiceState state;
    uint32_t id = 0;
    bool programmed = false;   // translating on this gateway now (IPv4)
    bool programmed6 = false;  // the same for its IPv6 endpoints
    std::string vrf;           // resolved VRF name ("" when the network is unknown)
    std::string problem;       // why it is not programmed although served here (unknown network, ...)
    // Per address family, what this gateway does with the Service's endpoints of that family, in
    // one line for the CLI, the status file and the logs: "SNAT to 192.0.2.50", "masquerade to the
    // egress port's address" or "not translated: <why>".
    std::string ipv4;
    std::string ipv6;
};

// The two lines of ServiceView::ipv4 / ipv6 for a state and the policy made of it.
std::string ipv4_translation(const model::ServiceState& s, const dp::ServicePolicy& pol, const std::string& problem);
std::string ipv6_translation(const model::ServiceState& s, const dp::ServicePolicy& pol, const std::string& problem);

class PolicyBuilder {
public:
    // `port_macs[port id]` are the MACs the ports actually use. `port_ids[i]` is the DPDK port id
    // of config.ports[i]. `cfg` is read again on every build: ports, routes and VRFs may change.
    PolicyBuilder(const config::Config& cfg, std::vector<uint16_t> port_ids,
                  std::vector<std::array<uint8_t, 6>> port_macs);

    // Builds the snapshot for exactly these services (keys unique; a repeated key counts once,
    // the last one). Never fails: what cannot be programmed is left out and said in the views.
    // Costs a comparison of every state with the last build's; prefer apply() when the caller
    // knows what changed.
    std::unique_ptr<dp::PolicySnapshot> build(const std::vector<model::ServiceState>& services);
    // Builds the snapshot for the last build's services with `delta` applied: the states in
    // `delta.changed` replace or add theirs, the keys in `delta.removed` are gone. A state equal
    // to the one already known costs a comparison and changes nothing.
    std::unique_ptr<dp::PolicySnapshot> apply(const model::ServiceDelta& delta);

    // Every Service of the last build, sorted by key.
    const std::vector<ServiceView>& views() const { return views_; }
    // The view of one Service; nullptr when the last build had none of that key.
    const ServiceView* view(const std::string& key) const;
    const std::map<std::string, uint32_t>& ids() const { return ids_; }
    // VRF index of a network name or table number ("" = default); -1 when unknown.
    int resolve_vrf(const std::string& network) const;
    uint64_t generation() const { return generation_; }
    std::string vrf_name(uint8_t index) const { return index < cfg_.vrfs.size() ? cfg_.vrfs[index].name : ""; }

private:
    // One Service to re-resolve: its new state, or nullptr when it is gone.
    struct Work {
        const std::string* key;
        const model::ServiceState* next;
    };

    std::unique_ptr<dp::PolicySnapshot> commit(std::vector<Work> work);
    std::unique_ptr<dp::PolicySnapshot> assemble();
    uint32_t id_for(const std::string& key);
    std::vector<ServiceView>::iterator find_view(const std::string& key);
    void claim(uint32_t ip, uint32_t id);
    void unclaim(uint32_t ip, uint32_t id);
    uint32_t owner_of(uint32_t ip) const;
    bool served(uint32_t ip) const;
    uint32_t nat_flags(uint32_t ip) const;
    void rebuild_nat();
    // A Service translating to its ingress IP claims (ingress IP, protocol, port) for each of
    // its ports; the first claimant by key gets the ingress (two Services sharing an ingress IP
    // and a port is a conflict Kubernetes does not prevent).
    void claim_ingress_ports(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id);
    void unclaim_ingress_ports(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id);

    const config::Config& cfg_;
    std::vector<uint16_t> port_ids_;
    std::vector<std::array<uint8_t, 6>> port_macs_;
    std::map<std::string, uint32_t> ids_;
    std::vector<const std::string*> key_of_;  // by id: the key in ids_, nullptr when free
    std::vector<uint32_t> free_ids_;
    uint32_t next_id_ = 1;
    uint32_t next_version_ = 1;
    std::set<std::string> idless_;              // Services that got no id (over the limit)
    std::vector<ServiceView> views_;            // sorted by key
    std::vector<config::VrfConfig> vrfs_seen_;  // what the Services were resolved against

    // The last snapshot's Service-dependent tables, patched by each build and copied into the next.
    std::vector<dp::ServicePolicy> services_ = std::vector<dp::ServicePolicy>(dp::kMaxServices);
    dp::FlatMap endpoints_;  // pod -> owning Service id
    dp::FlatMap nat_;        // NAT address -> flags
    // Every Service (with an id) that lists a pod; the first by key owns it. One claim per pod
    // is the rule, so it lives in a flat map, and only pods claimed more than once have a list.
    dp::FlatMap first_claim_;                                          // pod -> one claimant
    std::unordered_map<uint32_t, std::vector<uint32_t>> more_claims_;  // pod -> the others
    // ingress IP -> the VRF of each Service translating to it (one entry per Service)
    std::unordered_map<uint32_t, std::vector<uint8_t>> ingress_refs_;
    dp::FlatMap ingress_ports_;  // PolicySnapshot::ingress_key -> the Service id it goes to
    std::unordered_map<uint64_t, std::vector<uint32_t>> ingress_port_claims_;  // key -> every claimant
    // Per VRF, the outside ports answering ARP for its Services' ingress IPs (bit n: port id n).
    std::vector<uint32_t> arp_ports_ = std::vector<uint32_t>(dp::kMaxVrfs);
    std::vector<uint32_t> port_nat_;  // outside ports' addresses, sorted
    uint32_t default_version_ = 1;
    std::vector<std::array<uint8_t, 16>> served6_;              // the IPv6 pods translated by a Service, sorted
    std::optional<config::DefaultAction> last_default_action_;  // of the last snapshot
    uint64_t generation_ = 0;
    // The routes of the last snapshot, as (key, port << 32 | gateway) pairs, and the generation
    // since which they are unchanged (PolicySnapshot::route_generation).
    std::vector<uint64_t> last_routes_;
    uint64_t route_generation_ = 0;
};

}  // namespace egw::control
