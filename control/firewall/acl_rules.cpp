// SPDX-License-Identifier: Apache-2.0
//
// Expansion of EgressFirewall rules into ACL rules. See acl_rules.h.
#include "control/firewall/acl_rules.h"

#include <algorithm>

namespace egw::firewall {

std::vector<dp::FirewallAclRule> expand_acl_rules(const std::vector<NamespaceFirewall>& namespaces) {
    std::vector<dp::FirewallAclRule> out;
    for (size_t n = 0; n < namespaces.size(); ++n) {
        const std::vector<model::FirewallRule>& rules = *namespaces[n].rules;
        const model::FirewallResolution& resolution = namespaces[n].resolution;
        const size_t count = std::min(rules.size(), resolution.size());
        for (size_t i = 0; i < count; ++i) {
            for (const net::IpPrefix& prefix : resolution[i]) {
                dp::FirewallAclRule base;
                base.firewall = static_cast<uint32_t>(n + 1);
                base.rule_index = static_cast<uint32_t>(i);
                base.deny = rules[i].action == model::FirewallAction::deny;
                base.v6 = prefix.is_v6();
                base.prefix_len = prefix.len;
                const auto network = prefix.network().bytes();
                std::copy(network.begin(), network.end(), base.dst);
                if (rules[i].ports.empty()) {
                    out.push_back(base);
                    continue;
                }
                for (const model::FirewallPort& p : rules[i].ports) {
                    dp::FirewallAclRule r = base;
                    r.protocol = p.protocol;
                    r.port_min = p.port == 0 ? 0 : p.port;
                    r.port_max = p.port == 0 ? 65535 : p.port;
                    out.push_back(r);
                }
            }
        }
    }
    return out;
}

}  // namespace egw::firewall
