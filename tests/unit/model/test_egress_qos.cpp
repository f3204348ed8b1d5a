// SPDX-License-Identifier: Apache-2.0
//
// EgressQoS: parsing with its errors, which objects count, and first-match DSCP selection
// (control/model/egress_qos.h).
#include <gtest/gtest.h>

#include "control/model/egress_qos.h"

using namespace egw::model;
using nlohmann::json;

namespace {

json object(json egress, const std::string& name = "default", const std::string& ns = "web") {
    return json{{"apiVersion", "k8s.ovn.org/v1"},
                {"kind", "EgressQoS"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec", {{"egress", std::move(egress)}}}};
}

// The ObjectError's what() for an object, or "" when it parses.
std::string error_of(const json& j) {
    try {
        (void)parse_egress_qos(j);
    } catch (const ObjectError& e) {
        return e.what();
    }
    return "";
}

egw::net::IpAddr ip(const std::string& s) {
    return *egw::net::parse_ip(s);
}

egw::net::IpPrefix cidr(const std::string& s) {
    return *egw::net::parse_prefix(s);
}

using Labels = std::map<std::string, std::string>;

}  // namespace

TEST(EgressQosParse, ReadsEveryField) {
    EgressQoS q = parse_egress_qos(object(json::parse(R"([
        {"dscp": 46, "dstCIDR": "203.0.113.7/24", "podSelector": {"matchLabels": {"app": "voice"}}},
        {"dscp": 0, "dstCIDR": "2001:db8::1/48"},
        {"dscp": 63, "podSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["batch"]},
                                                           {"key": "gpu", "operator": "DoesNotExist"}]}},
        {"dscp": 10, "podSelector": {}},
        {"dscp": 12, "dstCIDR": null, "podSelector": null}
    ])")));
    EXPECT_EQ(q.meta.namespace_, "web");
    EXPECT_EQ(q.meta.name, "default");
    ASSERT_EQ(q.rules.size(), 5u);
    LabelSelector voice;
    voice.match_labels = {{"app", "voice"}};
    EXPECT_EQ(q.rules[0], (QosRule{46, cidr("203.0.113.0/24"), voice}));
    EXPECT_EQ(q.rules[1], (QosRule{0, cidr("2001:db8::/48"), {}}));
    LabelSelector exprs;
    exprs.match_expressions = {{"tier", "NotIn", {"batch"}}, {"gpu", "DoesNotExist", {}}};
    EXPECT_EQ(q.rules[2], (QosRule{63, std::nullopt, exprs}));
    EXPECT_EQ(q.rules[3], (QosRule{10, std::nullopt, {}}));
    EXPECT_EQ(q.rules[4], (QosRule{12, std::nullopt, {}}));
}

TEST(EgressQosParse, AnEmptyRuleListIsValid) {
    EXPECT_TRUE(parse_egress_qos(object(json::array())).rules.empty());
}

TEST(EgressQosParse, ErrorsNameThePathAndWhatWasExpected) {
    struct Case {
        json object;
        std::string error;
    };
    const std::vector<Case> cases = {
        {object(json::parse(R"([{"dscp": 64}])")), "$.spec.egress[0].dscp: expected an integer 0-63, got 64"},
        {object(json::parse(R"([{"dscp": -1}])")), "$.spec.egress[0].dscp: expected an integer 0-63, got -1"},
        {object(json::parse(R"([{"dscp": 1.5}])")), "$.spec.egress[0].dscp: expected an integer 0-63, got 1.5"},
        {object(json::parse(R"([{"dscp": "46"}])")), "$.spec.egress[0].dscp: expected an integer 0-63, got \"46\""},
        {object(json::parse(R"([{"dscp": 1}, {"dstCIDR": "10.0.0.0/8"}])")),
         "$.spec.egress[1].dscp: required field is missing"},
        {object(json::parse(R"([{"dscp": 1, "dstCIDR": "10.0.0.0/33"}])")),
         "$.spec.egress[0].dstCIDR: expected an IPv4 or IPv6 CIDR, got \"10.0.0.0/33\""},
        {object(json::parse(R"([{"dscp": 1, "dstCIDR": "example.com"}])")),
         "$.spec.egress[0].dstCIDR: expected an IPv4 or IPv6 CIDR, got \"example.com\""},
        {object(json::parse(R"([{"dscp": 1, "dstCIDR": 10}])")), "$.spec.egress[0].dstCIDR: expected a string, got 10"},
        {object(json::parse(R"([{"dscp": 1, "podSelector": []}])")),
         "$.spec.egress[0].podSelector: expected an object, got an array"},
        {object(json::parse(R"([{"dscp": 1, "podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}])")),
         "$.spec.egress[0].podSelector.matchExpressions[0].values: operator In needs at least one value"},
        {object(
             json::parse(R"([{"dscp": 1, "podSelector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}}])")),
         "$.spec.egress[0].podSelector.matchExpressions[0].operator"},
        {object(json::parse(R"([{"dscp": 1, "podSelector": {"matchLabels": {"a": 1}}}])")),
         "$.spec.egress[0].podSelector.matchLabels.a"},
        {object(json::parse(R"([7])")), "$.spec.egress[0]: expected an object, got 7"},
        {object(json::object()), "$.spec.egress: expected an array, got an object"},
        {json{{"apiVersion", "k8s.ovn.org/v1"}, {"kind", "EgressQoS"}, {"metadata", {{"name", "default"}}}},
         "$.spec: required field is missing"},
        {json{{"apiVersion", "k8s.ovn.org/v2"}, {"kind", "EgressQoS"}},
         "$.apiVersion: expected \"k8s.ovn.org/v1\" for kind EgressQoS, got \"k8s.ovn.org/v2\""},
        {json{{"apiVersion", "k8s.ovn.org/v1"}, {"kind", "EgressFirewall"}},
         "$.kind: expected \"EgressQoS\", got \"EgressFirewall\""},
        {object(json::array(), ""), "$.metadata.name: must not be empty"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.object.dump());
        const std::string err = error_of(c.object);
        EXPECT_EQ(err.substr(0, c.error.size()), c.error) << err;
    }
}

TEST(EgressQosParse, ThePathPrefixIsTheCallers) {
    try {
        (void)parse_egress_qos(object(json::parse(R"([{"dscp": 99}])")), "$.items[3]");
        FAIL() << "parsed";
    } catch (const ObjectError& e) {
        EXPECT_EQ(e.path(), "$.items[3].spec.egress[0].dscp");
    }
}

TEST(EgressQosSelect, OnlyDefaultCountsAndTheOthersAreReported) {
    std::map<std::string, EgressQoS> objects;
    objects["web/default"] = parse_egress_qos(object(json::parse(R"([{"dscp": 46}])")));
    objects["web/extra"] = parse_egress_qos(object(json::parse(R"([{"dscp": 8}])"), "extra"));
    objects["db/default"] = parse_egress_qos(object(json::parse(R"([{"dscp": 10}])"), "default", "db"));
    EgressQosSelection sel = select_egress_qos(objects);
    ASSERT_EQ(sel.by_namespace.size(), 2u);
    EXPECT_EQ(sel.by_namespace.at("web"), &objects.at("web/default"));
    EXPECT_EQ(sel.by_namespace.at("db"), &objects.at("db/default"));
    ASSERT_EQ(sel.ignored.size(), 1u);
    EXPECT_EQ(sel.ignored[0], "web/extra: ignored: only the EgressQoS named \"default\" applies in a namespace");
}

// First match over destination and pod labels, both families, absent fields matching all.
TEST(EgressQosEvaluate, FirstRuleMatchingDestinationAndPodWins) {
    std::map<std::string, EgressQoS> objects;
    objects["web/default"] = parse_egress_qos(object(json::parse(R"([
        {"dscp": 46, "dstCIDR": "203.0.113.0/24", "podSelector": {"matchLabels": {"app": "voice"}}},
        {"dscp": 34, "dstCIDR": "203.0.113.128/25"},
        {"dscp": 26, "dstCIDR": "2001:db8::/32", "podSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]}]}},
        {"dscp": 18, "podSelector": {"matchExpressions": [{"key": "bulk", "operator": "Exists"}]}}
    ])")));
    objects["web/other"] = parse_egress_qos(object(json::parse(R"([{"dscp": 1}])"), "other"));
    const EgressQosSelection sel = select_egress_qos(objects);
    struct Case {
        std::string ns;
        Labels labels;
        std::string dst;
        std::optional<uint8_t> dscp;
    };
    const std::vector<Case> cases = {
        {"web", {{"app", "voice"}}, "203.0.113.200", 46},  // rule 0 before the narrower rule 1
        {"web", {{"app", "video"}}, "203.0.113.200", 34},  // rule 0's selector fails, rule 1 has none
        {"web", {{"app", "video"}}, "203.0.113.1", std::nullopt},
        {"web", {}, "203.0.113.129", 34},
        {"web", {{"tier", "gold"}}, "2001:db8:1::1", 26},
        {"web", {{"tier", "bronze"}}, "2001:db8:1::1", std::nullopt},
        {"web", {{"tier", "bronze"}, {"bulk", ""}}, "2001:db8:1::1", 18},  // no dstCIDR: every destination
        {"web", {{"bulk", "yes"}}, "198.51.100.1", 18},
        {"web", {{"bulk", "yes"}}, "::ffff:198.51.100.1", 18},
        {"web", {{"app", "voice"}}, "2001:db8::1", std::nullopt},   // an IPv4 CIDR holds no IPv6 address
        {"db", {{"app", "voice"}}, "203.0.113.200", std::nullopt},  // no EgressQoS in the namespace
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.ns + " " + c.dst);
        EXPECT_EQ(egress_qos_dscp(sel, c.ns, c.labels, ip(c.dst)), c.dscp);
        // The per-pod reduction the data path's table is built from decides the same.
        auto it = sel.by_namespace.find(c.ns);
        if (it != sel.by_namespace.end()) {
            EXPECT_EQ(pod_dscp(rules_for_pod(it->second->rules, c.labels), ip(c.dst)), c.dscp);
        }
    }
}

TEST(EgressQosEvaluate, RulesForPodKeepOrderAndDropUnselected) {
    EgressQoS q = parse_egress_qos(object(json::parse(R"([
        {"dscp": 1, "podSelector": {"matchLabels": {"a": "1"}}},
        {"dscp": 2, "dstCIDR": "10.0.0.0/8"},
        {"dscp": 3, "podSelector": {"matchLabels": {"a": "2"}}},
        {"dscp": 4, "dstCIDR": "fd00::/8", "podSelector": {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["3"]}]}}
    ])")));
    EXPECT_EQ(rules_for_pod(q.rules, {{"a", "1"}}),
              (std::vector<PodQosRule>{{std::nullopt, 1}, {cidr("10.0.0.0/8"), 2}, {cidr("fd00::/8"), 4}}));
    EXPECT_EQ(rules_for_pod(q.rules, {{"a", "3"}}), (std::vector<PodQosRule>{{cidr("10.0.0.0/8"), 2}}));
    EXPECT_TRUE(pod_dscp({}, ip("10.0.0.1")) == std::nullopt);
}
