// SPDX-License-Identifier: Apache-2.0
//
// The Kubernetes objects egw reads, reduced to the fields it uses (docs/kubernetes.md, "The
// EgressService contract", lists them).
//
// parse_object() turns one object, as the API server or a manifest file gives it in JSON, into one
// of the structs below. It checks apiVersion and kind, then the type and value of every field egw
// reads; fields it does not read are ignored, as a client of the API should. JSON null is treated
// as an absent field everywhere. Both state sources (the manifest directory and the API client)
// share this parser, so an object means the same thing whichever way it arrived.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/ip.h"

namespace egw::model {

struct ObjectMeta {
    std::string namespace_;  // empty for cluster-scoped kinds (Node)
    std::string name;
    std::string uid;
    std::string resource_version;
    std::map<std::string, std::string> labels;
    bool operator==(const ObjectMeta&) const = default;
};

struct LabelSelectorRequirement {
    std::string key;
    std::string op;  // "In", "NotIn", "Exists", "DoesNotExist"
    std::vector<std::string> values;
    bool operator==(const LabelSelectorRequirement&) const = default;
};

// metav1.LabelSelector. Empty (no labels, no expressions) selects everything.
struct LabelSelector {
    std::map<std::string, std::string> match_labels;
    std::vector<LabelSelectorRequirement> match_expressions;
    bool empty() const { return match_labels.empty() && match_expressions.empty(); }
    bool operator==(const LabelSelector&) const = default;
};

// k8s.ovn.org/v1 EgressService.
struct EgressService {
    ObjectMeta meta;
    std::string source_ip_by;  // as written: "", "LoadBalancerIP" or "Network"
    LabelSelector node_selector;
    std::string network;      // routing table name or number, "" = default table
    std::string status_host;  // status.host as last written by whoever owns it
    bool has_status = false;  // the object carries a status object
    bool operator==(const EgressService&) const = default;
};

// One entry of status.loadBalancer.ingress, in the order the API gives them.
struct LoadBalancerIngress {
    std::string ip;  // may be empty when only a hostname is given
    std::string hostname;
    bool operator==(const LoadBalancerIngress&) const = default;
};

// One entry of spec.ports: the port the Service listens on, by protocol.
struct ServicePort {
    std::string protocol;  // "TCP" (the API default), "UDP" or "SCTP"
    uint16_t port = 0;
    bool operator==(const ServicePort&) const = default;
};

// v1 Service.
struct Service {
    ObjectMeta meta;
    std::string type;                      // "ClusterIP" (the API default), "NodePort", "LoadBalancer", "ExternalName"
    std::vector<std::string> cluster_ips;  // spec.clusterIPs, or spec.clusterIP when only that is set
    std::vector<LoadBalancerIngress> ingress;
    std::string external_traffic_policy;   // "", "Cluster" or "Local"
    std::vector<std::string> ip_families;  // spec.ipFamilies: "IPv4"/"IPv6", at most one of each, in order
    std::string ip_family_policy;          // "", "SingleStack", "PreferDualStack" or "RequireDualStack"
    std::vector<ServicePort> ports;        // spec.ports, in order
    bool operator==(const Service&) const = default;
};

struct Endpoint {
    std::vector<std::string> addresses;
    std::optional<std::string> node_name;
    bool operator==(const Endpoint&) const = default;
};

// discovery.k8s.io/v1 EndpointSlice.
struct EndpointSlice {
    ObjectMeta meta;
    std::string service_name;  // label kubernetes.io/service-name, "" when absent
    std::string address_type;  // "IPv4", "IPv6" or "FQDN"
    std::vector<Endpoint> endpoints;
    bool operator==(const EndpointSlice&) const = default;
};

// v1 Node.
struct Node {
    ObjectMeta meta;
    bool ready = false;                     // condition Ready has status "True"
    std::vector<std::string> internal_ips;  // status.addresses of type InternalIP, in order
    bool operator==(const Node&) const = default;
};

// coordination.k8s.io/v1 Lease (leader election and per-instance liveness).
struct Lease {
    ObjectMeta meta;
    std::string holder_identity;
    int32_t lease_duration_seconds = 0;  // 0 when absent
    std::string renew_time;              // RFC 3339 MicroTime as written, "" when absent
    std::string acquire_time;
    int32_t lease_transitions = 0;
    // metadata.annotations: egw's liveness Leases carry the gateway's EgressIP facts there
    // (control/k8s_source/gateway_facts.h).
    std::map<std::string, std::string> annotations;
    bool operator==(const Lease&) const = default;
};

// One entry of an EgressIP's status.items: which node an egress IP is assigned to.
struct EgressIPStatusItem {
    std::string node;
    net::IpAddr egress_ip;
    bool operator==(const EgressIPStatusItem&) const = default;
};

// k8s.ovn.org/v1 EgressIP (cluster-scoped). Its selectors are checked when parsed (an operator's
// values, label syntax): a selector Kubernetes would reject never reaches selection.
struct EgressIP {
    ObjectMeta meta;
    std::vector<net::IpAddr> egress_ips;  // spec.egressIPs, either family, in order, each once
    LabelSelector namespace_selector;     // spec.namespaceSelector (required)
    // spec.podSelector; absent and {} alike select every pod of the matched namespaces.
    LabelSelector pod_selector;
    std::vector<EgressIPStatusItem> status_items;  // status.items, in order
    bool operator==(const EgressIP&) const = default;
};

// v1 Namespace: only its labels matter (namespaceSelector).
struct Namespace {
    ObjectMeta meta;
    bool operator==(const Namespace&) const = default;
};

enum class PodPhase : uint8_t { pending, running, succeeded, failed, unknown };

const char* to_string(PodPhase p);  // "Pending", "Running", ...

// v1 Pod, reduced to what EgressIP selection reads: labels, addresses, node, phase and whether it
// is on the host's network. metadata.uid is not kept (nothing looks a pod up by it), so a pod
// costs its names, labels and addresses (docs/kubernetes.md, "EgressIP", gives the measured size).
struct Pod {
    ObjectMeta meta;
    std::vector<net::IpAddr> ips;  // status.podIPs (status.podIP when only that is set), in order
    std::string node;              // spec.nodeName, "" while unscheduled
    PodPhase phase = PodPhase::pending;
    bool host_network = false;  // spec.hostNetwork: its addresses are the node's
    bool operator==(const Pod&) const = default;
};

// k8s.ovn.org/v1 EgressFirewall (namespaced); what its rules mean is in egress_firewall.h.
enum class FirewallAction : uint8_t { allow, deny };

const char* to_string(FirewallAction a);  // "Allow", "Deny"

// One entry of ports[]: an IP protocol number (6 TCP, 17 UDP, 132 SCTP) and a destination port,
// 0 standing for every port of the protocol (the port field left out).
struct FirewallPort {
    uint8_t protocol = 0;
    uint16_t port = 0;
    bool operator==(const FirewallPort&) const = default;
};

// to.dnsName, lower-cased and without a final dot. `wildcard` when it began with "*." (which
// stands for exactly one more label); `name` keeps the "*." then.
struct FirewallDnsName {
    std::string name;
    bool wildcard = false;
    bool operator==(const FirewallDnsName&) const = default;
};

// Exactly one of to.cidrSelector (kept as its network, host bits cleared), to.dnsName and
// to.nodeSelector.
using FirewallDestination = std::variant<net::IpPrefix, FirewallDnsName, LabelSelector>;

struct FirewallRule {
    FirewallAction action = FirewallAction::allow;
    FirewallDestination to;
    std::vector<FirewallPort> ports;  // empty: every protocol and port
    bool operator==(const FirewallRule&) const = default;
};

struct EgressFirewall {
    ObjectMeta meta;
    std::vector<FirewallRule> rules;  // spec.egress, in order
    bool operator==(const EgressFirewall&) const = default;
};

using Object =
    std::variant<EgressService, Service, EndpointSlice, Node, Lease, EgressIP, Namespace, Pod, EgressFirewall>;

enum class Kind { egress_service, service, endpoint_slice, node, lease, egress_ip, namespace_, pod, egress_firewall };

// "EgressService", "Service", "EndpointSlice", "Node", "Lease", "EgressIP", "Namespace", "Pod",
// "EgressFirewall".
const char* to_string(Kind k);
// The kind named by a `kind` string as above; nullopt for anything else.
std::optional<Kind> kind_from_string(std::string_view kind);
// The apiVersion egw reads for the kind ("k8s.ovn.org/v1", "v1", "discovery.k8s.io/v1", ...).
const char* api_version_of(Kind k);
// Whether the kind is namespaced (everything but Node, EgressIP and Namespace).
bool is_namespaced(Kind k);

Kind kind_of(const Object& o);
const ObjectMeta& meta_of(const Object& o);
ObjectMeta& meta_of(Object& o);
// "namespace/name" for namespaced kinds, "name" for cluster-scoped ones: the key of ObjectSet's maps.
std::string key_of(const ObjectMeta& meta);
std::string key_of(const Object& o);

// Thrown by parse_object. path() is the JSON path of the offending value ("$.spec.sourceIPBy"),
// message() says what was expected; what() reads "<path>: <message>".
class ObjectError : public std::runtime_error {
public:
    ObjectError(std::string path, std::string message);
    const std::string& path() const { return path_; }
    const std::string& message() const { return message_; }

private:
    std::string path_;
    std::string message_;
};

// True for exactly the apiVersion/kind pairs parse_object accepts.
bool is_supported_kind(std::string_view api_version, std::string_view kind);

// Parses one object. `path` is the JSON path of `j` in its document ("$", or "$.items[3]" inside a
// list) and prefixes every path in an error. Throws ObjectError on an unknown kind, a wrong
// apiVersion, or a field egw uses that has the wrong type or a bad value. The namespace is taken as
// written (a manifest reader applies "default" itself); for a Node it is dropped.
Object parse_object(const nlohmann::json& j, const std::string& path = "$");

// Parses a metav1.LabelSelector that must be one Kubernetes accepts (operators and their values,
// label syntax), as EgressIP's selectors are; `path` names it in an error. For kinds parsed
// outside parse_object (EgressQoS).
LabelSelector parse_label_selector(const nlohmann::json& s, const std::string& path);

// Everything a state source knows, keyed like key_of().
struct ObjectSet {
    std::map<std::string, EgressService> egress_services;
    std::map<std::string, Service> services;
    std::map<std::string, EndpointSlice> endpoint_slices;
    std::map<std::string, Node> nodes;
    std::map<std::string, Lease> leases;
    std::map<std::string, EgressIP> egress_ips;
    std::map<std::string, Namespace> namespaces;
    std::map<std::string, Pod> pods;
    std::map<std::string, EgressFirewall> egress_firewalls;

    // Inserts or replaces the object under its key.
    void upsert(Object o);
    // Removes the object; false when there was none.
    bool erase(Kind kind, const std::string& key);
    // Same, with the kind as written in a manifest ("Service"); false for an unknown kind.
    bool erase(std::string_view kind, const std::string& key);
    bool contains(Kind kind, const std::string& key) const;
    size_t size() const;
    bool operator==(const ObjectSet&) const = default;
};

}  // namespace egw::model
