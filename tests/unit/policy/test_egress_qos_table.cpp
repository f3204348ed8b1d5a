// SPDX-License-Identifier: Apache-2.0
//
// The data path's EgressQoS table made from the selected objects and the pods
// (control/policy/egress_qos_table.h): which pods get an entry, each address family's rules in
// order, and the marks the slow path reads back (dataplane/tables/egress_qos.h).
#include <gtest/gtest.h>

#include "control/policy/egress_qos_table.h"

using namespace egw;

namespace {

uint32_t v4(const char* s) {
    return net::parse_ip(s)->v4();
}

std::array<uint8_t, 16> v6(const char* s) {
    return net::parse_ip(s)->bytes();
}

model::Pod pod(const std::string& ns, const std::string& name, std::map<std::string, std::string> labels,
               std::vector<const char*> ips) {
    model::Pod p;
    p.meta.namespace_ = ns;
    p.meta.name = name;
    p.meta.labels = std::move(labels);
    p.phase = model::PodPhase::running;
    for (const char* ip : ips)
        p.ips.push_back(*net::parse_ip(ip));
    return p;
}

}  // namespace

TEST(EgressQosTable, EachPodGetsItsSelectedRulesPerFamilyInOrder) {
    const auto qos = model::parse_egress_qos(nlohmann::json::parse(R"({
        "apiVersion": "k8s.ovn.org/v1", "kind": "EgressQoS", "metadata": {"name": "default", "namespace": "web"},
        "spec": {"egress": [
            {"dscp": 46, "dstCIDR": "192.0.2.0/24", "podSelector": {"matchLabels": {"app": "voice"}}},
            {"dscp": 34, "dstCIDR": "2001:db8::/32"},
            {"dscp": 0, "dstCIDR": "192.0.2.128/25"},
            {"dscp": 8}]}})"));
    const std::map<std::string, model::EgressQoS> objects{{"web/default", qos}};
    std::map<std::string, model::Pod> pods;
    pods["web/voice"] = pod("web", "voice", {{"app", "voice"}}, {"10.0.0.1", "fd00::1"});
    pods["web/other"] = pod("web", "other", {}, {"10.0.0.2"});
    pods["web/host"] = pod("web", "host", {{"app", "voice"}}, {"172.18.0.2"});
    pods["web/host"].host_network = true;
    pods["web/done"] = pod("web", "done", {{"app", "voice"}}, {"10.0.0.3"});
    pods["web/done"].phase = model::PodPhase::succeeded;
    pods["db/x"] = pod("db", "x", {{"app", "voice"}}, {"10.0.0.4"});  // no EgressQoS in db
    const dp::EgressQosTable t = control::build_egress_qos_table(model::select_egress_qos(objects), pods);

    EXPECT_EQ(t.pods4.size(), 2u);  // voice and other
    EXPECT_EQ(t.pods6.size(), 1u);
    struct Case {
        const char* pod;
        const char* dst;
        uint8_t mark;
    };
    for (const Case& c : std::vector<Case>{
             {"10.0.0.1", "192.0.2.200", dp::dscp_mark(46)},  // rule 0 before the narrower rule 2
             {"10.0.0.1", "198.51.100.1", dp::dscp_mark(8)},
             {"10.0.0.2", "192.0.2.200", dp::dscp_mark(0)},  // DSCP 0 is a mark, not "none"
             {"10.0.0.2", "192.0.2.1", dp::dscp_mark(8)},
             {"172.18.0.2", "192.0.2.1", 0},
             {"10.0.0.3", "192.0.2.1", 0},
             {"10.0.0.4", "192.0.2.1", 0},
             {"10.0.0.9", "192.0.2.1", 0},
         }) {
        SCOPED_TRACE(std::string(c.pod) + " -> " + c.dst);
        EXPECT_EQ(t.mark4(v4(c.pod), v4(c.dst)), c.mark);
    }
    EXPECT_EQ(t.mark6(v6("fd00::1").data(), v6("2001:db8:1::1").data()), dp::dscp_mark(34));
    EXPECT_EQ(t.mark6(v6("fd00::1").data(), v6("2001:db9::1").data()), dp::dscp_mark(8));
    EXPECT_EQ(t.mark6(v6("fd00::2").data(), v6("2001:db8::1").data()), 0);
    // The IPv4 rules never reach the IPv6 list: voice's has rules 1 and 3 only.
    ASSERT_EQ(t.spans6.size(), 1u);
    EXPECT_EQ(t.spans6[0].count, 2u);
    EXPECT_EQ(dp::dscp_of_mark(dp::dscp_mark(63)), 63);
}

TEST(EgressQosTable, PrefixLengthsThatAreNotWholeBytes) {
    dp::QosRule6 r;
    const auto net = v6("2001:db8:8000::");
    std::memcpy(r.network, net.data(), 16);
    r.len = 33;
    EXPECT_TRUE(dp::EgressQosTable::prefix_holds(r, v6("2001:db8:ffff::1").data()));
    EXPECT_FALSE(dp::EgressQosTable::prefix_holds(r, v6("2001:db8:7fff::1").data()));
    r.len = 0;
    EXPECT_TRUE(dp::EgressQosTable::prefix_holds(r, v6("::1").data()));
}

TEST(EgressQosTable, ViewsSayAppliedOrWhyIgnored) {
    auto object = [](const std::string& name, const char* egress) {
        return model::parse_egress_qos(nlohmann::json{{"apiVersion", "k8s.ovn.org/v1"},
                                                      {"kind", "EgressQoS"},
                                                      {"metadata", {{"name", name}, {"namespace", "web"}}},
                                                      {"spec", {{"egress", nlohmann::json::parse(egress)}}}});
    };
    const std::map<std::string, model::EgressQoS> objects{
        {"web/default", object("default", R"([{"dscp": 46, "dstCIDR": "192.0.2.9/24",
                                              "podSelector": {"matchLabels": {"app": "voice"},
                                                              "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
                                             {"dscp": 0}])")},
        {"web/extra", object("extra", R"([{"dscp": 8}])")}};
    std::map<std::string, model::Pod> pods;
    pods["web/a"] = pod("web", "a", {}, {"10.0.0.1"});
    pods["web/b"] = pod("web", "b", {}, {"10.0.0.2"});
    pods["web/b"].host_network = true;
    pods["db/c"] = pod("db", "c", {}, {"10.0.0.3"});
    const auto views = control::egress_qos_views(objects, pods);
    ASSERT_EQ(views.size(), 2u);
    EXPECT_EQ(views[0].key, "web/default");
    EXPECT_EQ(views[0].status, "EgressQoS Rules applied");
    EXPECT_EQ(views[0].rules, (std::vector<std::string>{"dscp 46 to 192.0.2.0/24 pods app=voice,tier In a|b",
                                                        "dscp 0 to any pods all"}));
    EXPECT_EQ(views[0].pods, 1u);  // a: b is on the host network, c in another namespace
    EXPECT_EQ(views[1].key, "web/extra");
    EXPECT_EQ(views[1].status, "ignored: only the EgressQoS named \"default\" applies in a namespace");
    EXPECT_EQ(views[1].pods, 0u);
}
