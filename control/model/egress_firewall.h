// SPDX-License-Identifier: Apache-2.0
//
// k8s.ovn.org/v1 EgressFirewall: the object, its parser, which objects count, and what the rules
// decide for a flow (docs/kubernetes.md, "EgressFirewall").
//
// A namespace's rules are spec.egress in order; the first rule whose destination and ports match
// a flow decides it, and a flow no rule matches is allowed. Only the object named "default" counts
// in a namespace, and one with more than kMaxEgressFirewallRules rules is not applied at all, as
// OVN-Kubernetes does.
//
// Names and node selectors stand for addresses that change while the rules do not; the rules are
// therefore evaluated against a FirewallResolution (what each rule's destination is right now), so
// that evaluate_egress_firewall() stays a pure function of its arguments. A DNS name with no
// resolved address matches nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/ip.h"
#include "control/model/objects.h"

namespace egw::model {

// Upstream's limit: 10,000 ACL priorities less the 2,000 it keeps for itself.
inline constexpr size_t kMaxEgressFirewallRules = 8000;
// The only object name that counts in a namespace.
inline constexpr const char* kEgressFirewallName = "default";

// FirewallAction, FirewallPort, FirewallDnsName, FirewallDestination, FirewallRule and
// EgressFirewall are in objects.h, beside the other kinds a state source reads.

// Parses one EgressFirewall as the API server or a manifest gives it. `path` prefixes every JSON
// path in an error. Throws ObjectError for a wrong apiVersion or kind and for any field egw reads
// that is missing, of the wrong type or out of range (spec.egress[2].to: "expected exactly one of
// cidrSelector, dnsName, nodeSelector"). The rule count is not limited here: an object over the
// limit is valid and is refused by select_egress_firewalls(), which can say why.
EgressFirewall parse_egress_firewall(const nlohmann::json& j, const std::string& path = "$");

// The rules that apply, by namespace, and one line for every object left out and why.
struct EgressFirewallSelection {
    std::map<std::string, const EgressFirewall*> by_namespace;  // points into the argument
    std::vector<std::string> ignored;                           // "ns/name: ignored: ..."
};

// From all EgressFirewall objects, keyed "namespace/name": keeps the one named "default" of each
// namespace when it has at most kMaxEgressFirewallRules rules.
EgressFirewallSelection select_egress_firewalls(const std::map<std::string, EgressFirewall>& objects);

// What each rule of one namespace's list points at now, index for index: a CIDR is itself, a DNS
// name is its resolved addresses (as host prefixes), a node selector is the InternalIP addresses
// of the nodes it matches. An empty list matches nothing.
using FirewallResolution = std::vector<std::vector<net::IpPrefix>>;

// `dns` holds the current addresses of each name, keyed by FirewallDnsName::name; a name that is
// not there is unresolved. `nodes` is keyed like ObjectSet::nodes. Node addresses that do not
// parse are left out.
FirewallResolution resolve_egress_firewall(const std::vector<FirewallRule>& rules,
                                           const std::map<std::string, std::vector<net::IpAddr>>& dns,
                                           const std::map<std::string, Node>& nodes);

// A flow as the firewall sees it: destination address, IP protocol and destination port (0 for
// protocols without ports).
struct FirewallFlow {
    net::IpAddr dst;
    uint8_t protocol = 0;
    uint16_t dst_port = 0;
};

struct FirewallVerdict {
    FirewallAction action = FirewallAction::allow;
    std::optional<uint32_t> rule;  // the index of the deciding rule; nullopt: none matched
    bool operator==(const FirewallVerdict&) const = default;
};

// First match wins, default allow. `resolution` must come from resolve_egress_firewall() for the
// same rules (a shorter one is read as "the rest match nothing").
FirewallVerdict evaluate_egress_firewall(const std::vector<FirewallRule>& rules, const FirewallResolution& resolution,
                                         const FirewallFlow& flow);

}  // namespace egw::model
