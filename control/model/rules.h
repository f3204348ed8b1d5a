// SPDX-License-Identifier: Apache-2.0
//
// The EgressService rules (docs/kubernetes.md, "The EgressService contract" and "The decisions"):
// label selectors, and what a deployment with a single egw gateway makes of each EgressService.
//
// evaluate_single_gateway() is a pure function of the objects: call it again after any change and
// diff the result. It decides both what status.host must say and whether this gateway programs
// the Service.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "control/model/objects.h"

namespace egw::model {

// Validates a selector the way Kubernetes does (metav1.LabelSelectorAsSelector): keys are
// qualified names with an optional DNS-subdomain prefix, values are label values, In and NotIn
// need at least one value, Exists and DoesNotExist take none. On failure, *why (if given) says
// what is wrong, naming the offending part ("matchExpressions[0].key \"a:b\": ...").
bool selector_valid(const LabelSelector& sel, std::string* why = nullptr);

// Whether the labels satisfy the selector. An empty selector matches everything. The selector is
// not validated here; an unknown operator matches nothing.
bool selector_matches(const LabelSelector& sel, const std::map<std::string, std::string>& labels);

enum class Mode { load_balancer_ip, network };

const char* to_string(Mode m);  // "LoadBalancerIP", "Network"

struct ServiceState {
    std::string key;                     // "namespace/name" of the EgressService (and of its Service)
    Mode mode = Mode::load_balancer_ip;  // an empty or missing sourceIPBy is LoadBalancerIP
    std::string status_host;             // what status.host must say: this node's name, "ALL" or ""
    std::string reason;                  // why status_host is "" or why this gateway does not serve it;
                                         // empty exactly when serve_here
    bool serve_here = false;             // this gateway programs the Service
    std::string network;                 // spec.network as written, "" = default table
    // The Service's addresses, filled whenever the Service exists, whatever the outcome (the CLI
    // shows them). In Network mode they are informational only: no load-balancer SNAT is done.
    std::optional<uint32_t> ingress_ipv4;  // host order; the last IPv4 ingress entry
    // The last non-IPv4 entry's ip; nullopt when there is none or when that entry has only a
    // hostname (OVN-Kubernetes counts such an entry as "not IPv4" and keeps nothing for IPv6).
    std::optional<net::IpAddr> ingress_ipv6;
    std::vector<uint32_t> endpoint_ipv4s;     // cluster-networked IPv4 endpoint addresses, sorted, unique
    std::vector<net::IpAddr> endpoint_ipv6s;  // cluster-networked IPv6 endpoint addresses (IPv6 slices), sorted, unique
    std::vector<std::string> ip_families;     // the Service's spec.ipFamilies, as written (informational)
    std::string ip_family_policy;             // spec.ipFamilyPolicy, "" when absent (informational)
    std::vector<std::string> endpoint_nodes;  // nodes hosting an endpoint (IPv4/IPv6 slices), sorted
    bool etp_local = false;                   // externalTrafficPolicy: Local
    // The Service's TCP and UDP ports (spec.ports) as IP protocol << 16 | port, sorted, unique:
    // connections from outside to the ingress IP on these are the Service's ingress traffic.
    std::vector<uint32_t> ports;
    // Some endpoint of either family is in the pod network (a precondition of the contract).
    bool has_pod_endpoints() const { return !endpoint_ipv4s.empty() || !endpoint_ipv6s.empty(); }
    bool operator==(const ServiceState&) const = default;
};

// What changed among the evaluated EgressServices since the last look: the states that are new
// or differ, and the keys that are gone. A key is in at most one of the two.
struct ServiceDelta {
    std::vector<ServiceState> changed;
    std::vector<std::string> removed;
    bool empty() const { return changed.empty() && removed.empty(); }
};

// From `before` to `after` (keys unique): `changed` in the order of `after`, `removed` by key.
ServiceDelta diff(const std::map<std::string, ServiceState>& before, const std::vector<ServiceState>& after);

struct GatewayIdentity {
    std::string node_name;
    std::map<std::string, std::string> labels;
};

// One entry per EgressService in `objects`, sorted by key, for a deployment whose only egw gateway
// is `self`. `pod_cidrs` tells cluster-networked endpoints (inside) from host-networked ones
// (outside, never counted or SNATed). When `objects` holds a Node named self.node_name, its labels
// (merged over self.labels) and its Ready condition are used; otherwise the node is taken as Ready
// with self.labels.
std::vector<ServiceState> evaluate_single_gateway(const ObjectSet& objects, const GatewayIdentity& self,
                                                  const std::vector<net::IpPrefix>& pod_cidrs);

// EndpointSlices grouped by the Service they belong to ("namespace/service-name", from the label
// kubernetes.io/service-name). Slices without that label are left out. The pointers point into
// `objects` and live as long as it does unchanged.
using SliceIndex = std::unordered_map<std::string, std::vector<const EndpointSlice*>>;
SliceIndex index_endpoint_slices(const ObjectSet& objects);

// What the objects say about EgressService `key` and its Service before anyone decides a host,
// computed exactly as evaluate_single_gateway does: `state` has key, mode (from spec.sourceIPBy),
// network, the ingress IPs, the endpoints and etp_local filled in; status_host, reason and
// serve_here are left empty for the caller. `slices` are the Service's EndpointSlices (null =
// none). The pointers point into `objects`.
struct ServiceFacts {
    ServiceState state;
    const EgressService* egress_service = nullptr;  // null when the EgressService does not exist
    const Service* service = nullptr;               // null when the Service does not exist
    bool load_balancer = false;                     // the Service is type LoadBalancer
    bool has_ingress_ip = false;                    // some status.loadBalancer.ingress entry has an ip
};
ServiceFacts service_facts(const ObjectSet& objects, const std::string& key,
                           const std::vector<const EndpointSlice*>* slices,
                           const std::vector<net::IpPrefix>& pod_cidrs);

// The node label that marks the chosen host: "egress-service.k8s.ovn.org/<namespace>-<name>" for
// key "<namespace>/<name>".
std::string node_label_for(const std::string& key);

// Why a label key cannot be written ("" when it can): the API server refuses a key whose name part
// (after the '/') is longer than 63 characters or not made of [A-Za-z0-9._-] starting and ending
// alphanumeric. node_label_for() makes such a key when "<namespace>-<name>" is longer than 63
// characters; OVN-Kubernetes neither shortens nor hashes it (its label patch fails and is retried),
// so egw does not write it either: the Service is still served, its host just carries no label.
std::string label_key_problem(const std::string& key);

// The prefix of those labels, "egress-service.k8s.ovn.org/".
inline constexpr const char* kNodeLabelPrefix = "egress-service.k8s.ovn.org/";

// status.host for sourceIPBy: Network.
inline constexpr const char* kHostAll = "ALL";

}  // namespace egw::model
