// SPDX-License-Identifier: Apache-2.0
//
// Turns the configuration and the evaluated EgressServices into the next PolicySnapshot.
//
// Runs on the control thread. It keeps what must survive from one snapshot to the next: the
// dense id of every Service (ids index the workers' counters, so they are stable while the
// Service exists and are only reused after it is gone) and each Service's translation version
// (bumped only when the translation really changes, so a no-op reconcile keeps every session).
//
// Two kinds of tables, built by what they are made from:
// - what the configuration alone decides (ConfigTables: ports, routes of both families, cluster
//   ranges, ingress next hops) is made only when the configuration changes, kept, and copied
//   into each snapshot; the CLI reads the routes from it (config_tables()).
// - what the Services decide (the Service table, and for each family the endpoint map, the NAT
//   addresses and the ingress ports) is kept by the builder and patched for the Services whose
//   state changed: their old endpoints, ingress IPs and ports are unclaimed, their new ones
//   claimed, and only the keys they touched are looked up again (claims.h says who owns a key).
// So the cost of a snapshot is proportional to what changed, for IPv4 and IPv6 alike, plus a copy
// of flat arrays (a few MiB at 100,000 endpoints). No walk over every Service happens but when a
// VRF changes (every Service is then resolved again) or the configuration does (the NAT
// addresses are made again from the ingress IPs: the ports answering for them may move). The result is the same as
// building everything from scratch with the same history (tests/unit/policy/test_policy_builder.cpp checks that after
// every step of random changes, both families, configuration changes too).
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
#include "control/policy/claims.h"
#include "control/policy/config_tables.h"
#include "control/policy/egress_qos_table.h"
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
    // of config.ports[i]. `cfg` is compared at every build with what the configuration tables
    // were made from: ports, routes and VRFs may change.
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
    // What the configuration decided at the last build (nullptr before the first).
    const ConfigTables* config_tables() const { return config_.get(); }
    std::string vrf_name(uint8_t index) const { return index < cfg_.vrfs.size() ? cfg_.vrfs[index].name : ""; }
    // The EgressQoS table (egress_qos_table.h) every snapshot built from now on carries; the
    // sessions of earlier ones take it up when the next snapshot makes them check their policy.
    void set_egress_qos(dp::EgressQosTable table) { egress_qos_ = std::move(table); }
    const dp::EgressQosTable& egress_qos() const { return egress_qos_; }
    // What `show egressqos` and the status file say of the objects the table came from.
    void set_egress_qos_views(std::vector<EgressQosView> views) { egress_qos_views_ = std::move(views); }
    const std::vector<EgressQosView>& egress_qos_views() const { return egress_qos_views_; }

    // The EgressFirewall policy every snapshot from the next build on carries (null: none). It is
    // shared, not copied: snapshots of one firewall version point at one table.
    void set_egress_firewall(std::shared_ptr<const dp::EgressFirewallPolicy> fw) { egress_firewall_ = std::move(fw); }

private:
    // One Service to re-resolve: its new state, or nullptr when it is gone.
    struct Work {
        const std::string* key;
        const model::ServiceState* next;
    };
    // What a commit touched: the keys whose owner or flags must be looked up again.
    struct Touched {
        std::vector<uint32_t> pods;
        std::vector<bool> pods_served;  // before the commit, parallel to pods
        std::vector<Key6> pods6;
        std::vector<bool> pods6_served;
        std::vector<uint32_t> nat;
        std::vector<Key6> nat6;
        std::vector<Key6> ingress6;  // scope: protocol << 16 | port
    };
    // A Service resolved: its policy and what its view says.
    struct Resolved {
        dp::ServicePolicy pol;
        std::string vrf;
        std::string problem;
    };

    std::unique_ptr<dp::PolicySnapshot> commit(std::vector<Work> work);
    bool refresh_config();
    void add_unchanged_to_resolve(std::vector<Work>& work, std::vector<model::ServiceState>& again);
    void touch_pods(const std::vector<Work>& work);
    void release_gone(const std::vector<Work>& work, std::vector<size_t>& gone);
    void resolve(const model::ServiceState& s, std::vector<ServiceView>& added);
    Resolved resolve_policy(const model::ServiceState& s) const;
    void merge_views(const std::vector<size_t>& gone, std::vector<ServiceView>& added);
    void program(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id);
    void unprogram(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id);
    void settle_pods();
    void settle_nat(bool reconfigured);
    void settle_ingress6();
    std::unique_ptr<dp::PolicySnapshot> assemble();
    uint32_t id_for(const std::string& key);
    std::vector<ServiceView>::iterator find_view(const std::string& key);
    bool earlier(uint32_t a, uint32_t b) const { return *key_of_[a] < *key_of_[b]; }
    bool served(uint32_t ip) const;
    bool served6(const Key6& ip) const;
    uint32_t nat_flags(uint32_t ip) const;
    uint32_t nat_flags6(const Key6& ip) const;
    void rebuild_nat();
    void rebuild_nat6();
    // A Service translating to its ingress IP claims (ingress IP, protocol, port) for each of
    // its ports; the first claimant by key gets the ingress (two Services sharing an ingress IP
    // and a port is a conflict Kubernetes does not prevent).
    void claim_ingress_ports(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id);
    void unclaim_ingress_ports(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id);
    void claim_ingress_ports6(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id, bool claim);

    const config::Config& cfg_;
    std::vector<uint16_t> port_ids_;
    std::vector<std::array<uint8_t, 6>> port_macs_;
    std::unique_ptr<ConfigTables> config_;  // made from the configuration in force
    std::map<std::string, uint32_t> ids_;
    std::vector<const std::string*> key_of_;  // by id: the key in ids_, nullptr when free
    std::vector<uint32_t> free_ids_;
    uint32_t next_id_ = 1;
    uint32_t next_version_ = 1;
    std::set<std::string> idless_;              // Services that got no id (over the limit)
    std::vector<ServiceView> views_;            // sorted by key
    std::vector<config::VrfConfig> vrfs_seen_;  // what the Services were resolved against
    Touched touched_;                           // of the commit under way

    // The last snapshot's Service-dependent tables, patched by each build and copied into the next.
    std::vector<dp::ServicePolicy> services_ = std::vector<dp::ServicePolicy>(dp::kMaxServices);
    dp::FlatMap endpoints_;  // pod -> owning Service id
    dp::FlatMap nat_;        // NAT address -> flags
    dp::Ip6Map endpoints6_;
    dp::Ip6Map nat6_;
    std::array<dp::Ip6Map, 2> ingress_ports6_;  // [UDP?] (ingress IP, port) -> Service id
    // Every Service (with an id) that lists a pod, and for IPv6 every one translating to an
    // ingress IP and port.
    Claims<uint64_t, dp::FlatMap> pods_;
    Claims<Key6, HashFirst<Key6, Key6Hash>, Key6Hash> pods6_;
    Claims<Key6, HashFirst<Key6, Key6Hash>, Key6Hash> ingress6_claims_;
    // ingress IP -> the VRF of each Service translating to it (one entry per Service), per family
    std::unordered_map<uint32_t, std::vector<uint8_t>> ingress_refs_;
    std::unordered_map<Key6, std::vector<uint8_t>, Key6Hash> ingress_refs6_;
    dp::FlatMap ingress_ports_;  // PolicySnapshot::ingress_key -> the Service id it goes to
    std::unordered_map<uint64_t, std::vector<uint32_t>> ingress_port_claims_;  // key -> every claimant
    uint32_t default_version_ = 1;
    std::optional<config::DefaultAction> last_default_action_;  // of the last snapshot
    uint64_t generation_ = 0;
    // The generation since which the routes are unchanged (PolicySnapshot::route_generation).
    uint64_t route_generation_ = 0;
    dp::EgressQosTable egress_qos_;
    std::vector<EgressQosView> egress_qos_views_;
    std::shared_ptr<const dp::EgressFirewallPolicy> egress_firewall_;
};

}  // namespace egw::control
