// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/egress_firewall.h"

namespace egw::metrics {

namespace {

constexpr Family kDenied{"egress_firewall_denied_total",
                         Type::counter,
                         "New flows of the namespace's pods that its EgressFirewall denied (dropped or answered "
                         "with administratively prohibited), and established flows a rule change cut",
                         {"namespace"}};
constexpr Family kAllowed{"egress_firewall_allowed_total",
                          Type::counter,
                          "New flows of the namespace's pods that its EgressFirewall allowed, by an Allow rule or "
                          "because no rule matched",
                          {"namespace"}};
constexpr Family kRules{
    "egress_firewall_rules", Type::gauge, "Rules of the namespace's EgressFirewall in force", {"namespace"}};

}  // namespace

void write_egress_firewall(Writer& w, const std::vector<FirewallNamespaceCounts>& namespaces) {
    // Namespaces past the bound share one series, so that the exposition stays bounded.
    FirewallNamespaceCounts rest;
    std::vector<const FirewallNamespaceCounts*> shown;
    for (size_t i = 0; i < namespaces.size(); ++i) {
        if (i < kMaxFirewallNamespaceSeries) {
            shown.push_back(&namespaces[i]);
            continue;
        }
        rest.denied += namespaces[i].denied;
        rest.allowed += namespaces[i].allowed;
        rest.rules += namespaces[i].rules;
    }
    if (namespaces.size() > kMaxFirewallNamespaceSeries) shown.push_back(&rest);
    w.family(kDenied);
    for (const auto* n : shown)
        w.sample(kDenied, {n->namespace_}, n->denied);
    w.family(kAllowed);
    for (const auto* n : shown)
        w.sample(kAllowed, {n->namespace_}, n->allowed);
    w.family(kRules);
    for (const auto* n : shown)
        w.sample(kRules, {n->namespace_}, n->rules);
}

}  // namespace egw::metrics
