// SPDX-License-Identifier: Apache-2.0
//
// The EgressService rules for a cluster of egw gateways (docs/kubernetes.md, "The EgressService
// contract" and "The decisions", after OVN-Kubernetes' cluster manager), as pure functions of the
// objects:
//
//   - liveness: which nodes run a live egwd (their Lease was seen to change within its duration,
//     on this egwd's monotonic clock);
//   - decide_host(): what the leader writes to status.host, with stickiness and re-election
//     through "" (the cluster manager's syncEgressService);
//   - restore_allocations(): what a new leader keeps of the hosts it finds (the repair at start);
//   - serving_state(): what one gateway programs, from status.host alone (every egwd, leader or
//     not, and in the external mode);
//   - label_patches(): which node carries egress-service.k8s.ovn.org/<namespace>-<name> and which
//     stale labels with that prefix go.
//
// None of them talks to the API server; control/k8s_source/controller.h applies their results.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "control/model/objects.h"
#include "control/model/rules.h"

namespace egw::k8s_source {

// Leases named <prefix><node> are the liveness Leases of egwd instances; holderIdentity is the node.
inline constexpr const char* kLivenessLeasePrefix = "egw-node-";
// The leader Lease.
inline constexpr const char* kLeaderLeaseName = "egw-leader";

using Clock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

// What this egwd saw of the Leases, on its own monotonic clock. A Lease's renewTime is never
// compared with the local clock: after an API outage, or while Lease writes were refused, every
// renewTime is old although every gateway was alive all along.
struct LeaseObservations {
    std::map<std::string, SteadyClock::time_point> changed;  // Lease key -> when it was last seen to change
    SteadyClock::time_point view_since{};                    // since when the Lease watch has been unbroken
    // When the latest Lease write of this egwd that the API accepted was sent. A Lease that ran out
    // is judged expired only once a write sent after it ran out was accepted: then its holder could
    // have renewed too. nullopt: not known (every Lease that ran out is expired).
    std::optional<SteadyClock::time_point> write_accepted_sent;
};

// When the Lease stops being live as this egwd sees it: leaseDurationSeconds after the later of its
// last observed change and the start of the unbroken view (a Lease never seen to change counts from
// there). nullopt when it has no holder (given up) or no duration.
std::optional<SteadyClock::time_point> observed_expiry(const model::Lease& lease, const LeaseObservations& seen);

struct Liveness {
    std::set<std::string> live;                          // nodes whose egwd renewed its Lease in time
    std::optional<SteadyClock::time_point> next_change;  // the earliest expiry among the live ones
};
// The liveness Leases are the Leases named `prefix` + node. A Lease counts for the node in its
// name while it is live by observed_expiry() (clearing the holder gives it up at once), and after
// that until seen.write_accepted_sent confirms that the API accepted writes after it ran out.
Liveness liveness(const model::ObjectSet& objects, const LeaseObservations& seen, SteadyClock::time_point now,
                  const std::string& prefix = kLivenessLeasePrefix);

// The leader's record of which node hosts which LoadBalancerIP EgressService.
class Allocations {
public:
    // The host of `key`, or nullptr.
    const std::string* host_of(const std::string& key) const;
    // How many EgressServices the node hosts.
    size_t load(const std::string& node) const;
    void assign(const std::string& key, const std::string& node);
    void release(const std::string& key);
    void clear();
    const std::map<std::string, std::string>& hosts() const { return hosts_; }  // key -> node
    bool operator==(const Allocations&) const = default;

private:
    std::map<std::string, std::string> hosts_;
    std::map<std::string, size_t> load_;
};

// What the leader sees of the cluster in one pass.
struct ClusterView {
    const model::ObjectSet& objects;
    const model::SliceIndex& slices;          // model::index_endpoint_slices(objects)
    const std::set<std::string>& live_nodes;  // liveness(objects, now).live
    const std::vector<net::IpPrefix>& pod_cidrs;
    // status.host values written but not seen in `objects` yet (the watch lags the write), by key.
    const std::map<std::string, std::string>* written = nullptr;
};

struct HostDecision {
    std::string key;
    bool exists = false;  // the EgressService exists; when not, nothing is written and its label goes
    model::Mode mode = model::Mode::load_balancer_ip;
    std::string host;      // what status.host must say: a node, "ALL" or ""
    std::string reason;    // why host is "" (empty otherwise)
    bool reelect = false;  // the previous host stopped being eligible: host is "" for now and
                           // the key must be decided again once that is written
    bool operator==(const HostDecision&) const = default;
};

// Whether `node` can host LoadBalancerIP EgressService `facts` now: it exists, is Ready, matches
// the nodeSelector, hosts an endpoint when externalTrafficPolicy is Local, and runs a live egwd.
// The selector must be valid. On false, *why (when given) says which condition failed.
bool node_eligible(const ClusterView& view, const model::ServiceFacts& facts, const std::string& node,
                   std::string* why = nullptr);

// The leader's decision for one EgressService, given what is allocated now (the cluster manager's
// syncEgressService):
//   - EgressService gone: exists = false, host "";
//   - no Service: ""; sourceIPBy Network: "ALL";
//   - not type LoadBalancer, no ingress IP, no endpoint in the pod network, invalid nodeSelector: "";
//   - the current host is still eligible: it stays (no rebalancing);
//   - the current host is no longer eligible: "" with reelect = true (failover passes through "");
//   - nothing allocated but status.host names a node (a new leader, a manual edit): that node
//     when it is eligible, else "" with reelect = true;
//   - otherwise the eligible node with the fewest allocations (a free node first; ties by name),
//     or "" when there is none.
// The caller records the result in `alloc` (assign for a node, release otherwise).
HostDecision decide_host(const ClusterView& view, const std::string& key, const Allocations& alloc);

// Records a decision: a node is assigned, anything else releases the key.
void apply(Allocations& alloc, const HostDecision& d);

// The allocations a new leader keeps: every LoadBalancerIP EgressService whose status.host names a
// node that is still eligible for it (the repair at start-up; a restart reshuffles nothing).
Allocations restore_allocations(const ClusterView& view);

// What this gateway programs for EgressService `facts`, from status.host alone (the node
// controller's rule): its own name with a LoadBalancer Service that has an ingress IP -> translate
// to the ingress IP; "ALL" with the same conditions -> route and masquerade in the network;
// anything else -> not served, with the reason. status_host is the observed status.host. mode
// follows status.host ("ALL" = Network, a node = LoadBalancerIP) and spec.sourceIPBy when it is "".
model::ServiceState serving_state(model::ServiceFacts facts, const std::string& self_node);

// One merge patch of a node's labels: a value sets a label, nullopt removes it.
struct LabelPatch {
    std::string node;
    std::map<std::string, std::optional<std::string>> labels;
    bool operator==(const LabelPatch&) const = default;
};

// Labels every node must carry: node_label_for(key) = "" on the host of each allocation, except keys
// that are not valid label keys (model::label_key_problem), which no node can carry.
std::map<std::string, std::set<std::string>> desired_labels(const Allocations& alloc);

// The patches that bring `node`'s labels with the prefix egress-service.k8s.ovn.org/ to exactly
// `wanted`: missing ones (or ones with a value other than "") are set to "", the others removed.
// Labels without the prefix are never touched. nullopt when nothing is to change.
std::optional<LabelPatch> label_patch(const model::Node& node, const std::set<std::string>& wanted);

// label_patch() for every node of `objects`, in node order. Nodes named by an allocation that do
// not exist are skipped (there is nothing to label).
std::vector<LabelPatch> label_patches(const model::ObjectSet& objects, const Allocations& alloc);

}  // namespace egw::k8s_source
