// SPDX-License-Identifier: Apache-2.0
//
// EgressFirewall: parsing, which objects count, and first-match evaluation
// (control/model/egress_firewall.h).
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "control/model/egress_firewall.h"

using namespace egw::model;
using egw::net::IpAddr;
using egw::net::IpPrefix;
using nlohmann::json;

namespace {

json object(json egress, const std::string& name = "default", const std::string& ns = "web") {
    return json{{"apiVersion", "k8s.ovn.org/v1"},
                {"kind", "EgressFirewall"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec", {{"egress", std::move(egress)}}}};
}

// The ObjectError's path and message for an object, or "" when it parses.
std::string error_of(const json& j) {
    try {
        (void)parse_egress_firewall(j);
    } catch (const ObjectError& e) {
        return e.what();
    }
    return "";
}

IpAddr ip(const std::string& s) {
    return *egw::net::parse_ip(s);
}

IpPrefix cidr(const std::string& s) {
    return *egw::net::parse_prefix(s);
}

FirewallRule rule(FirewallAction action, FirewallDestination to, std::vector<FirewallPort> ports = {}) {
    return FirewallRule{action, std::move(to), std::move(ports)};
}

constexpr auto allow = FirewallAction::allow;
constexpr auto deny = FirewallAction::deny;

FirewallFlow flow(const std::string& dst, uint8_t protocol = IPPROTO_TCP, uint16_t port = 443) {
    return FirewallFlow{ip(dst), protocol, port};
}

Node node(const std::string& name, std::map<std::string, std::string> labels, std::vector<std::string> ips) {
    Node n;
    n.meta.name = name;
    n.meta.labels = std::move(labels);
    n.internal_ips = std::move(ips);
    return n;
}

}  // namespace

TEST(EgressFirewallParse, ReadsEveryDestinationKindAndPorts) {
    EgressFirewall fw = parse_egress_firewall(object(json::parse(R"([
        {"type": "Allow", "to": {"cidrSelector": "10.1.2.3/16"}, "ports": [{"protocol": "TCP", "port": 443},
                                                                          {"protocol": "UDP"}, {"protocol": "SCTP", "port": 9}]},
        {"type": "Deny", "to": {"cidrSelector": "2001:db8::1/32"}},
        {"type": "Allow", "to": {"dnsName": "WWW.Example.com."}},
        {"type": "Deny", "to": {"dnsName": "*.example.org"}},
        {"type": "Allow", "to": {"nodeSelector": {"matchLabels": {"role": "db"},
                                                   "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}}
    ])")));
    EXPECT_EQ(fw.meta.namespace_, "web");
    EXPECT_EQ(fw.meta.name, "default");
    ASSERT_EQ(fw.rules.size(), 5u);
    EXPECT_EQ(fw.rules[0], rule(allow, cidr("10.1.0.0/16"), {{IPPROTO_TCP, 443}, {IPPROTO_UDP, 0}, {IPPROTO_SCTP, 9}}));
    EXPECT_EQ(fw.rules[1], rule(deny, cidr("2001:db8::/32")));
    EXPECT_EQ(fw.rules[2], rule(allow, FirewallDnsName{"www.example.com", false}));
    EXPECT_EQ(fw.rules[3], rule(deny, FirewallDnsName{"*.example.org", true}));
    LabelSelector sel;
    sel.match_labels = {{"role", "db"}};
    sel.match_expressions = {{"zone", "In", {"a"}}};
    EXPECT_EQ(fw.rules[4], rule(allow, sel));
}

TEST(EgressFirewallParse, EmptyEgressIsNoRules) {
    EXPECT_TRUE(parse_egress_firewall(object(json::array())).rules.empty());
}

TEST(EgressFirewallParse, ErrorsNameTheFieldAndWhatWasExpected) {
    struct Case {
        json obj;
        std::string error;
    };
    const json ok_to = {{"cidrSelector", "0.0.0.0/0"}};
    std::vector<Case> cases = {
        {json{{"apiVersion", "k8s.ovn.org/v2"}, {"kind", "EgressFirewall"}},
         "$.apiVersion: expected \"k8s.ovn.org/v1\" for kind EgressFirewall, got \"k8s.ovn.org/v2\""},
        {json{{"apiVersion", "k8s.ovn.org/v1"}, {"kind", "EgressQoS"}},
         "$.kind: expected \"EgressFirewall\", got \"EgressQoS\""},
        {json{{"apiVersion", "k8s.ovn.org/v1"}, {"kind", "EgressFirewall"}, {"metadata", {{"name", "default"}}}},
         "$.spec: required field is missing"},
        {json{{"apiVersion", "k8s.ovn.org/v1"},
              {"kind", "EgressFirewall"},
              {"metadata", {{"name", "default"}}},
              {"spec", json::object()}},
         "$.spec.egress: required field is missing"},
        {object(json{{"egress", 1}}), "$.spec.egress: expected an array, got an object"},
        {object(json::array({{{"to", ok_to}}})), "$.spec.egress[0].type: required field is missing"},
        {object(json::array({{{"type", "allow"}, {"to", ok_to}}})),
         "$.spec.egress[0].type: expected one of Allow, Deny, got \"allow\""},
        {object(json::array({{{"type", "Allow"}}})), "$.spec.egress[0].to: required field is missing"},
        {object(json::array({{{"type", "Allow"}, {"to", json::object()}}})),
         "$.spec.egress[0].to: expected exactly one of cidrSelector, dnsName, nodeSelector"},
        {object(json::array({{{"type", "Allow"}, {"to", {{"cidrSelector", "10.0.0.0/8"}, {"dnsName", "a.b"}}}}})),
         "$.spec.egress[0].to: expected exactly one of cidrSelector, dnsName, nodeSelector"},
        {object(json::array(
             {json{{"type", "Deny"}, {"to", ok_to}}, {{"type", "Deny"}, {"to", {{"cidrSelector", "10.0.0.0/33"}}}}})),
         "$.spec.egress[1].to.cidrSelector: expected an IPv4 or IPv6 CIDR, got \"10.0.0.0/33\""},
        {object(json::array({{{"type", "Deny"}, {"to", {{"cidrSelector", 10}}}}})),
         "$.spec.egress[0].to.cidrSelector: expected a string, got 10"},
        {object(json::array({{{"type", "Deny"}, {"to", {{"dnsName", "a..b"}}}}})),
         "$.spec.egress[0].to.dnsName: expected a DNS name, optionally starting with \"*.\", got \"a..b\""},
        {object(json::array({{{"type", "Deny"}, {"to", {{"dnsName", "a.*.b"}}}}})),
         "$.spec.egress[0].to.dnsName: expected a DNS name, optionally starting with \"*.\", got \"a.*.b\""},
        {object(json::array({{{"type", "Deny"}, {"to", {{"dnsName", "a_b.com"}}}}})),
         "$.spec.egress[0].to.dnsName: expected a DNS name, optionally starting with \"*.\", got \"a_b.com\""},
        {object(json::array({{{"type", "Deny"}, {"to", {{"dnsName", std::string(64, 'a') + ".com"}}}}})),
         "$.spec.egress[0].to.dnsName: expected a DNS name, optionally starting with \"*.\", got \"" +
             std::string(61, 'a') + "...\""},
        {object(
             json::array({{{"type", "Deny"},
                           {"to", {{"nodeSelector", {{"matchExpressions", {{{"key", "a"}, {"operator", "In"}}}}}}}}}})),
         "$.spec.egress[0].to.nodeSelector: matchExpressions[0].values: operator In needs at least one value"},
        {object(json::array({{{"type", "Deny"}, {"to", {{"nodeSelector", {{"matchLabels", {{"a", 1}}}}}}}}})),
         "$.spec.egress[0].to.nodeSelector.matchLabels.a: expected a string, got 1"},
        {object(json::array({{{"type", "Deny"}, {"to", ok_to}, {"ports", {{{"port", 80}}}}}})),
         "$.spec.egress[0].ports[0].protocol: required field is missing"},
        {object(json::array({{{"type", "Deny"}, {"to", ok_to}, {"ports", {{{"protocol", "ICMP"}}}}}})),
         "$.spec.egress[0].ports[0].protocol: expected one of TCP, UDP, SCTP, got \"ICMP\""},
        {object(json::array({{{"type", "Deny"}, {"to", ok_to}, {"ports", {{{"protocol", "TCP"}, {"port", 0}}}}}})),
         "$.spec.egress[0].ports[0].port: expected an integer 1-65535, got 0"},
        {object(json::array({{{"type", "Deny"}, {"to", ok_to}, {"ports", {{{"protocol", "TCP"}, {"port", 65536}}}}}})),
         "$.spec.egress[0].ports[0].port: expected an integer 1-65535, got 65536"},
        {object(json::array({{{"type", "Deny"}, {"to", ok_to}, {"ports", {{{"protocol", "TCP"}, {"port", "80"}}}}}})),
         "$.spec.egress[0].ports[0].port: expected an integer 1-65535, got \"80\""},
    };
    for (const Case& c : cases)
        EXPECT_EQ(error_of(c.obj), c.error) << c.obj.dump();
}

// A long refused value is quoted cut short; a cut that fell inside a UTF-8 character made the
// error's own JSON dump throw (json::type_error), not the ObjectError that names the field.
TEST(EgressFirewallParse, ALongRefusedValueIsCutAtACharacterBoundary) {
    const std::string cidr = std::string(60, 'a') + "\xc3\xa9" + std::string(10, 'b');  // bytes 60-61: one character
    const std::string error = error_of(object(json::array({{{"type", "Deny"}, {"to", {{"cidrSelector", cidr}}}}})));
    EXPECT_NE(error.find("got \"" + std::string(60, 'a') + "...\""), std::string::npos) << error;
    EXPECT_EQ(error.rfind("$.spec.egress[0].to.cidrSelector: ", 0), 0u) << error;
}

TEST(EgressFirewallSelect, OnlyDefaultWithinTheRuleLimitApplies) {
    std::map<std::string, EgressFirewall> objects;
    auto add = [&](const std::string& ns, const std::string& name, size_t rules) {
        EgressFirewall fw;
        fw.meta.namespace_ = ns;
        fw.meta.name = name;
        fw.rules.assign(rules, rule(deny, cidr("0.0.0.0/0")));
        objects[ns + "/" + name] = fw;
    };
    add("a", "default", 1);
    add("a", "extra", 1);
    add("b", "default", kMaxEgressFirewallRules);
    add("c", "default", kMaxEgressFirewallRules + 1);
    EgressFirewallSelection s = select_egress_firewalls(objects);
    ASSERT_EQ(s.by_namespace.size(), 2u);
    EXPECT_EQ(s.by_namespace.at("a"), &objects.at("a/default"));
    EXPECT_EQ(s.by_namespace.at("b"), &objects.at("b/default"));
    EXPECT_EQ(s.ignored, (std::vector<std::string>{
                             "a/extra: ignored: only the EgressFirewall named \"default\" applies in a namespace",
                             "c/default: ignored: too many rules (8001, at most 8000)"}));
}

TEST(EgressFirewallResolve, CidrsNamesAndNodes) {
    std::vector<FirewallRule> rules = {
        rule(allow, cidr("10.0.0.0/8")),
        rule(allow, FirewallDnsName{"www.example.com", false}),
        rule(allow, FirewallDnsName{"unresolved.example.com", false}),
        rule(deny, LabelSelector{{{"role", "db"}}, {}}),
    };
    std::map<std::string, std::vector<IpAddr>> dns = {{"www.example.com", {ip("192.0.2.7"), ip("2001:db8::7")}}};
    std::map<std::string, Node> nodes = {{"n1", node("n1", {{"role", "db"}}, {"172.18.0.2", "fd00::2", "bogus"})},
                                         {"n2", node("n2", {{"role", "web"}}, {"172.18.0.3"})}};
    FirewallResolution r = resolve_egress_firewall(rules, dns, nodes);
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(r[0], (std::vector<IpPrefix>{cidr("10.0.0.0/8")}));
    EXPECT_EQ(r[1], (std::vector<IpPrefix>{cidr("192.0.2.7/32"), cidr("2001:db8::7/128")}));
    EXPECT_TRUE(r[2].empty());
    EXPECT_EQ(r[3], (std::vector<IpPrefix>{cidr("172.18.0.2/32"), cidr("fd00::2/128")}));
}

TEST(EgressFirewallEvaluate, TableOfRulesAndFlows) {
    const std::vector<FirewallRule> rules = {
        rule(allow, cidr("192.0.2.0/28"), {{IPPROTO_TCP, 443}}),                 // 0
        rule(deny, cidr("192.0.2.0/24")),                                        // 1
        rule(allow, cidr("2001:db8::/48"), {{IPPROTO_UDP, 0}}),                  // 2
        rule(deny, cidr("2001:db8::/32"), {{IPPROTO_SCTP, 9}}),                  // 3
        rule(deny, FirewallDnsName{"blocked.example.com", false}),               // 4
        rule(deny, FirewallDnsName{"unresolved.example.com", false}),            // 5
        rule(deny, LabelSelector{{{"role", "db"}}, {}}, {{IPPROTO_TCP, 5432}}),  // 6
        rule(allow, cidr("198.51.100.0/24")),                                    // 7
        rule(deny, cidr("0.0.0.0/0")),                                           // 8
    };
    const std::map<std::string, std::vector<IpAddr>> dns = {{"blocked.example.com", {ip("2001:db9::53")}}};
    const std::map<std::string, Node> nodes = {{"n1", node("n1", {{"role", "db"}}, {"198.51.100.9"})}};
    const FirewallResolution r = resolve_egress_firewall(rules, dns, nodes);

    struct Case {
        const char* what;
        FirewallFlow flow;
        FirewallVerdict verdict;
    };
    const std::vector<Case> cases = {
        {"first match: the /28 allow on 443 before the /24 deny", flow("192.0.2.5", IPPROTO_TCP, 443), {allow, 0}},
        {"port mismatch falls through to the /24 deny", flow("192.0.2.5", IPPROTO_TCP, 80), {deny, 1}},
        {"protocol mismatch falls through", flow("192.0.2.5", IPPROTO_UDP, 443), {deny, 1}},
        {"outside the /28, inside the /24", flow("192.0.2.200", IPPROTO_TCP, 443), {deny, 1}},
        {"IPv6: a protocol without port matches every port", flow("2001:db8::1", IPPROTO_UDP, 53), {allow, 2}},
        {"IPv6: port given", flow("2001:db8:1::1", IPPROTO_SCTP, 9), {deny, 3}},
        {"IPv6: other port of the protocol", flow("2001:db8:1::1", IPPROTO_SCTP, 10), {allow, std::nullopt}},
        {"resolved name", flow("2001:db9::53", IPPROTO_ICMPV6, 0), {deny, 4}},
        {"node selector with port", flow("198.51.100.9", IPPROTO_TCP, 5432), {deny, 6}},
        {"node selector, other port, then the allow", flow("198.51.100.9", IPPROTO_TCP, 5433), {allow, 7}},
        {"catch-all deny", flow("203.0.113.1", IPPROTO_UDP, 53), {deny, 8}},
        {"an IPv4 catch-all does not match IPv6", flow("2001:dba::1"), {allow, std::nullopt}},
    };
    for (const Case& c : cases)
        EXPECT_EQ(evaluate_egress_firewall(rules, r, c.flow), c.verdict) << c.what;
}

TEST(EgressFirewallEvaluate, DefaultAllowAndUnresolvedNamesMatchNothing) {
    EXPECT_EQ(evaluate_egress_firewall({}, {}, flow("192.0.2.1")), (FirewallVerdict{allow, std::nullopt}));
    const std::vector<FirewallRule> rules = {rule(deny, FirewallDnsName{"gone.example.com", false})};
    const FirewallResolution r = resolve_egress_firewall(rules, {}, {});
    EXPECT_EQ(evaluate_egress_firewall(rules, r, flow("0.0.0.0")), (FirewallVerdict{allow, std::nullopt}));
    EXPECT_EQ(evaluate_egress_firewall(rules, r, flow("::")), (FirewallVerdict{allow, std::nullopt}));
}
