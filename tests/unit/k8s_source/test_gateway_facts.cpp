// SPDX-License-Identifier: Apache-2.0
//
// The EgressIP facts a gateway publishes on its liveness Lease (control/k8s_source/gateway_facts.h):
// what it writes, that it reads back the same, what bad annotations do; and assigned_to(), the
// addresses status.items gives one node.
#include <gtest/gtest.h>

#include "control/k8s_source/egress_ip_watch.h"
#include "control/k8s_source/gateway_facts.h"

namespace egw::k8s_source {
namespace {

net::IpPrefix prefix(const std::string& text) {
    auto p = net::parse_prefix(text);
    if (!p) throw std::invalid_argument("bad prefix in a test: " + text);
    return *p;
}

net::IpAddr ip(const std::string& text) {
    auto a = net::parse_ip(text);
    if (!a) throw std::invalid_argument("bad address in a test: " + text);
    return *a;
}

using Annotations = std::map<std::string, std::string>;

TEST(GatewayFacts, PublishesNetworksSortedOnceAndTheCapacity) {
    // Interface addresses as configured: host bits set, both families, a VLAN's subnet twice.
    GatewayFacts f = gateway_facts(
        {prefix("10.1.0.7/24"), prefix("2001:db8:1::7/64"), prefix("192.0.2.9/28"), prefix("10.1.0.8/24")}, 12);
    EXPECT_EQ(encode_gateway_facts(f),
              (Annotations{{kOutsideSubnetsAnnotation, "10.1.0.0/24,192.0.2.0/28,2001:db8:1::/64"},
                           {kEgressIPCapacityAnnotation, "12"}}));
    DecodedGatewayFacts back = decode_gateway_facts(encode_gateway_facts(f));
    EXPECT_EQ(back.error, "");
    EXPECT_EQ(back.facts, f);
    EXPECT_TRUE(back.facts.subnets[0].contains(ip("10.1.0.200")));
    EXPECT_FALSE(back.facts.subnets[0].contains(ip("10.1.1.1")));
}

TEST(GatewayFacts, UnlimitedHasNoCapacityAnnotationAndNoSubnetsIsEmpty) {
    GatewayFacts f = gateway_facts({}, std::nullopt);
    EXPECT_EQ(encode_gateway_facts(f), (Annotations{{kOutsideSubnetsAnnotation, ""}}));
    DecodedGatewayFacts back = decode_gateway_facts(encode_gateway_facts(f));
    EXPECT_EQ(back.error, "");
    EXPECT_EQ(back.facts, f);
    EXPECT_EQ(back.facts.capacity, std::nullopt);
}

TEST(GatewayFacts, AbsentAnnotationsAreNoError) {
    DecodedGatewayFacts d = decode_gateway_facts({{"other.example.com/x", "y"}});
    EXPECT_EQ(d.error, "");
    EXPECT_TRUE(d.facts.subnets.empty());
    EXPECT_EQ(d.facts.capacity, std::nullopt);
}

TEST(GatewayFacts, CapacityZeroIsKept) {
    DecodedGatewayFacts d = decode_gateway_facts({{kEgressIPCapacityAnnotation, "0"}});
    EXPECT_EQ(d.error, "");
    EXPECT_EQ(d.facts.capacity, 0u);
}

struct BadCase {
    const char* test_name;
    Annotations annotations;
    std::string error;
};

class BadAnnotations : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadAnnotations, NameTheAnnotationAndHostNothing) {
    const BadCase& c = GetParam();
    // A good subnet beside the bad value: none of it may be used.
    Annotations a = c.annotations;
    a.emplace(kOutsideSubnetsAnnotation, "10.1.0.0/24");
    DecodedGatewayFacts d = decode_gateway_facts(a);
    EXPECT_EQ(d.error, c.error);
    EXPECT_TRUE(d.facts.subnets.empty());
    EXPECT_EQ(d.facts.capacity, 0u);
}

const std::string kSubnetsWhat =
    "annotation egw.io/outside-subnets: expected comma-separated networks like \"10.1.0.0/24,2001:db8:1::/64\", got ";
const std::string kCapacityWhat =
    "annotation egw.io/egress-ip-capacity: expected a count of addresses like \"12\", got ";

INSTANTIATE_TEST_SUITE_P(
    GatewayFacts, BadAnnotations,
    ::testing::Values(
        BadCase{"CapacityNegative", {{kEgressIPCapacityAnnotation, "-1"}}, kCapacityWhat + "\"-1\""},
        BadCase{"CapacityEmpty", {{kEgressIPCapacityAnnotation, ""}}, kCapacityWhat + "\"\""},
        BadCase{"CapacityTrailing", {{kEgressIPCapacityAnnotation, "12 "}}, kCapacityWhat + "\"12 \""},
        BadCase{"CapacityOverflow",
                {{kEgressIPCapacityAnnotation, "99999999999999999999999"}},
                kCapacityWhat + "\"99999999999999999999999\""},
        BadCase{"SubnetNoLength", {{kOutsideSubnetsAnnotation, "10.1.0.0"}}, kSubnetsWhat + "\"10.1.0.0\""},
        BadCase{"SubnetTooLong", {{kOutsideSubnetsAnnotation, "10.1.0.0/33"}}, kSubnetsWhat + "\"10.1.0.0/33\""},
        BadCase{"SubnetSpace",
                {{kOutsideSubnetsAnnotation, "10.1.0.0/24, 10.2.0.0/24"}},
                kSubnetsWhat + "\"10.1.0.0/24, 10.2.0.0/24\""},
        BadCase{"SubnetEmptyItem",
                {{kOutsideSubnetsAnnotation, "10.1.0.0/24,,10.2.0.0/24"}},
                kSubnetsWhat + "\"10.1.0.0/24,,10.2.0.0/24\""},
        BadCase{
            "SubnetTrailingComma", {{kOutsideSubnetsAnnotation, "10.1.0.0/24,"}}, kSubnetsWhat + "\"10.1.0.0/24,\""},
        BadCase{"SubnetLongValueCut",
                {{kOutsideSubnetsAnnotation, std::string(100, 'x')}},
                kSubnetsWhat + "\"" + std::string(80, 'x') + "...\""}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return i.param.test_name; });

TEST(GatewayFacts, TooManySubnetsAreRefused) {
    std::string many;
    for (int i = 0; i < 257; ++i) {
        // Appended piece by piece: `const char* + std::string` makes gcc 12 warn (-Wrestrict, a
        // false positive).
        if (!many.empty()) many += ',';
        many += "10.";
        many += std::to_string(i / 256);
        many += '.';
        many += std::to_string(i % 256);
        many += ".0/24";
    }
    DecodedGatewayFacts d = decode_gateway_facts({{kOutsideSubnetsAnnotation, many}});
    EXPECT_NE(d.error, "");
    EXPECT_TRUE(d.facts.subnets.empty());
}

model::EgressIP egress_ip(const std::string& name, std::vector<std::string> ips,
                          std::vector<std::pair<std::string, std::string>> items) {
    model::EgressIP e;
    e.meta.name = name;
    for (const auto& i : ips)
        e.egress_ips.push_back(ip(i));
    for (const auto& [node, addr] : items)
        e.status_items.push_back(model::EgressIPStatusItem{node, ip(addr)});
    return e;
}

TEST(AssignedTo, TheNodesAddressesFromStatusItemsOnly) {
    model::ObjectSet objs;
    objs.egress_ips["b"] =
        egress_ip("b", {"10.1.0.5", "2001:db8:1::5"}, {{"gw-1", "2001:db8:1::5"}, {"gw-2", "10.1.0.5"}});
    // An item for an address no longer in spec, and a second item for one address: neither counts.
    objs.egress_ips["a"] =
        egress_ip("a", {"10.1.0.4"}, {{"gw-2", "10.1.0.4"}, {"gw-1", "10.1.0.4"}, {"gw-1", "10.9.9.9"}});
    objs.egress_ips["c"] = egress_ip("c", {"10.1.0.6"}, {});
    EXPECT_EQ(assigned_to(objs, "gw-1"), (std::vector<AssignedEgressIP>{{"b", ip("2001:db8:1::5")}}));
    EXPECT_EQ(assigned_to(objs, "gw-2"), (std::vector<AssignedEgressIP>{{"a", ip("10.1.0.4")}, {"b", ip("10.1.0.5")}}));
    EXPECT_TRUE(assigned_to(objs, "gw-3").empty());
}

}  // namespace
}  // namespace egw::k8s_source
