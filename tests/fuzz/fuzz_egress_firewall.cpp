// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the EgressFirewall parser (control/model/egress_firewall.h) on JSON text, then the
// rules it accepted resolved and evaluated as the firewall will on every publication.
//
// Invariants: a bad object comes back as an ObjectError and nothing else; an accepted object
// holds only what the parser promises (known protocols, CIDRs without host bits, lower-case
// names); a verdict names a rule that exists and carries that rule's action.
#include <netinet/in.h>

#include <string>

#include "control/model/egress_firewall.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace egw::model;
using egw::net::IpAddr;

void check_rules(const EgressFirewall& fw) {
    for (const FirewallRule& r : fw.rules) {
        for (const FirewallPort& p : r.ports) {
            if (p.protocol != IPPROTO_TCP && p.protocol != IPPROTO_UDP && p.protocol != IPPROTO_SCTP)
                egw::fuzz::fail("a port with protocol " + std::to_string(p.protocol));
        }
        if (const auto* c = std::get_if<egw::net::IpPrefix>(&r.to)) {
            if (c->addr != c->network()) egw::fuzz::fail("a CIDR with host bits: " + egw::net::to_string(*c));
        } else if (const auto* n = std::get_if<FirewallDnsName>(&r.to)) {
            for (char ch : n->name) {
                if (ch >= 'A' && ch <= 'Z') egw::fuzz::fail("a DNS name not lower-cased: " + n->name);
            }
            if (n->name.empty() || n->name.back() == '.') egw::fuzz::fail("a DNS name not normalized: " + n->name);
            if (n->wildcard != (n->name.rfind("*.", 0) == 0)) egw::fuzz::fail("wildcard flag wrong: " + n->name);
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
        return 0;
    }
    EgressFirewall fw;
    try {
        fw = parse_egress_firewall(j);
    } catch (const ObjectError&) {
        return 0;
    }
    check_rules(fw);

    // Every name resolves to one address of each family; one node with every label the rules name
    // would need is not constructible, so an unlabelled one shows empty-selector rules.
    std::map<std::string, std::vector<IpAddr>> dns;
    for (const FirewallRule& r : fw.rules) {
        if (const auto* n = std::get_if<FirewallDnsName>(&r.to))
            dns[n->name] = {*egw::net::parse_ip("192.0.2.1"), *egw::net::parse_ip("2001:db8::1")};
    }
    Node node;
    node.meta.name = "n1";
    node.internal_ips = {"172.18.0.2", "fd00::2"};
    const FirewallResolution res = resolve_egress_firewall(fw.rules, dns, {{"n1", node}});
    if (res.size() != fw.rules.size()) egw::fuzz::fail("resolution and rules differ in length");
    for (const char* dst : {"192.0.2.1", "2001:db8::1", "172.18.0.2", "fd00::2", "10.0.0.1", "::"}) {
        for (uint8_t proto :
             {uint8_t{IPPROTO_TCP}, uint8_t{IPPROTO_UDP}, uint8_t{IPPROTO_SCTP}, uint8_t{IPPROTO_ICMP}}) {
            FirewallFlow f{*egw::net::parse_ip(dst), proto, static_cast<uint16_t>(proto == IPPROTO_ICMP ? 0 : 443)};
            FirewallVerdict v = evaluate_egress_firewall(fw.rules, res, f);
            if (!v.rule) {
                if (v.action != FirewallAction::allow) egw::fuzz::fail("no rule matched but the verdict is Deny");
            } else if (*v.rule >= fw.rules.size() || fw.rules[*v.rule].action != v.action) {
                egw::fuzz::fail("the verdict does not carry its rule's action");
            }
        }
    }
    return 0;
}
