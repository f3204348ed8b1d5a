// SPDX-License-Identifier: Apache-2.0
//
// From EgressFirewall rules, as the model holds them, to the ACL rules the data-plane classifier
// is built from (dataplane/tables/egress_firewall.h).
//
// Each namespace with rules gets a firewall id, 1 upwards in the order given; each model rule
// becomes one ACL rule per destination prefix its resolution holds and per entry of its ports
// (one "any protocol" rule when it has none), all with the model rule's index and action. A rule
// whose resolution is empty (an unresolved name, a selector matching no node) adds nothing, and
// so matches nothing, as evaluate_egress_firewall() has it.
#pragma once

#include <string>
#include <vector>

#include "control/model/egress_firewall.h"
#include "dataplane/tables/egress_firewall.h"

namespace egw::firewall {

struct NamespaceFirewall {
    std::string namespace_;
    const std::vector<model::FirewallRule>* rules = nullptr;
    model::FirewallResolution resolution;  // from model::resolve_egress_firewall() over *rules
};

// The ACL rules of all namespaces; namespaces[i] gets firewall id i + 1.
std::vector<dp::FirewallAclRule> expand_acl_rules(const std::vector<NamespaceFirewall>& namespaces);

}  // namespace egw::firewall
