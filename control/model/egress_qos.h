// SPDX-License-Identifier: Apache-2.0
//
// k8s.ovn.org/v1 EgressQoS: the object, its parser, which objects count, and which DSCP the rules
// give a pod's traffic to a destination (docs/kubernetes.md, "EgressQoS").
//
// A namespace's rules are spec.egress in order; the first rule whose dstCIDR contains the
// destination (no dstCIDR: every destination) and whose podSelector matches the pod's labels (no
// podSelector: every pod of the namespace) gives the DSCP. Traffic no rule matches keeps the DSCP
// it arrived with. Only the object named "default" counts in a namespace, as OVN-Kubernetes has it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/ip.h"
#include "control/model/objects.h"

namespace egw::model {

// The only object name that counts in a namespace.
inline constexpr const char* kEgressQosName = "default";
// The six DSCP bits of the IPv4 TOS and IPv6 traffic class octets.
inline constexpr uint8_t kMaxDscp = 63;

struct QosRule {
    uint8_t dscp = 0;                  // 0-63
    std::optional<net::IpPrefix> dst;  // dstCIDR as its network (host bits cleared); nullopt: every destination
    // podSelector; absent and {} alike select every pod of the namespace.
    LabelSelector pods;
    bool operator==(const QosRule&) const = default;
};

struct EgressQoS {
    ObjectMeta meta;
    std::vector<QosRule> rules;  // spec.egress, in order
    bool operator==(const EgressQoS&) const = default;
};

// Parses one EgressQoS as the API server or a manifest gives it. `path` prefixes every JSON path in
// an error. Throws ObjectError for a wrong apiVersion or kind and for any field egw reads that is
// missing, of the wrong type or out of range (spec.egress[1].dscp: "expected an integer 0-63").
EgressQoS parse_egress_qos(const nlohmann::json& j, const std::string& path = "$");

// The rules that apply, by namespace, and one line for every object left out and why.
struct EgressQosSelection {
    std::map<std::string, const EgressQoS*> by_namespace;  // points into the argument
    std::vector<std::string> ignored;                      // "ns/name: ignored: ..."
};

// From all EgressQoS objects, keyed "namespace/name": keeps the one named "default" of each
// namespace.
EgressQosSelection select_egress_qos(const std::map<std::string, EgressQoS>& objects);

// One rule as it applies to one pod: its destination and DSCP (the selector already matched).
struct PodQosRule {
    std::optional<net::IpPrefix> dst;  // nullopt: every destination
    uint8_t dscp = 0;
    bool operator==(const PodQosRule&) const = default;
};

// The rules of `rules` whose podSelector matches `pod_labels`, in order: what the data path needs
// to know about one pod, without labels.
std::vector<PodQosRule> rules_for_pod(const std::vector<QosRule>& rules,
                                      const std::map<std::string, std::string>& pod_labels);

// The DSCP of the first of a pod's rules whose destination contains `dst`; nullopt when none does.
std::optional<uint8_t> pod_dscp(const std::vector<PodQosRule>& rules, const net::IpAddr& dst);

// The DSCP for traffic of a pod (its namespace and labels) to `dst`: the first rule of the
// namespace's selected EgressQoS that matches both; nullopt for a namespace without one, or when
// no rule matches.
std::optional<uint8_t> egress_qos_dscp(const EgressQosSelection& selection, const std::string& pod_namespace,
                                       const std::map<std::string, std::string>& pod_labels, const net::IpAddr& dst);

}  // namespace egw::model
