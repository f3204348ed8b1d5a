// SPDX-License-Identifier: Apache-2.0
//
// Label selectors and the single-gateway EgressService rules (control/model/rules.h).
#include <gtest/gtest.h>

#include "control/model/rules.h"

using namespace egw::model;
using egw::net::IpPrefix;

namespace {

constexpr uint32_t ip4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return a << 24 | b << 16 | c << 8 | d;
}

ObjectMeta meta(const std::string& ns, const std::string& name) {
    ObjectMeta m;
    m.namespace_ = ns;
    m.name = name;
    return m;
}

EgressService egress(const std::string& name, const std::string& by = "", LabelSelector sel = {}) {
    EgressService es;
    es.meta = meta("default", name);
    es.source_ip_by = by;
    es.node_selector = std::move(sel);
    return es;
}

Service lb_service(const std::string& name, std::vector<LoadBalancerIngress> ingress = {{"192.0.2.50", ""}},
                   const std::string& etp = "") {
    Service s;
    s.meta = meta("default", name);
    s.type = "LoadBalancer";
    s.cluster_ips = {"10.96.0.10"};
    s.ingress = std::move(ingress);
    s.external_traffic_policy = etp;
    return s;
}

EndpointSlice slice(const std::string& name, const std::string& svc, std::vector<Endpoint> eps,
                    const std::string& family = "IPv4") {
    EndpointSlice s;
    s.meta = meta("default", name);
    s.meta.labels["kubernetes.io/service-name"] = svc;
    s.service_name = svc;
    s.address_type = family;
    s.endpoints = std::move(eps);
    return s;
}

Endpoint ep(const std::string& addr, std::optional<std::string> node = "worker-1") {
    return Endpoint{{addr}, std::move(node)};
}

Node node(const std::string& name, std::map<std::string, std::string> labels, bool ready = true) {
    Node n;
    n.meta.name = name;
    n.meta.labels = std::move(labels);
    n.ready = ready;
    return n;
}

LabelSelectorRequirement req(const std::string& key, const std::string& op, std::vector<std::string> values = {}) {
    return LabelSelectorRequirement{key, op, std::move(values)};
}

LabelSelector match_labels(std::map<std::string, std::string> labels) {
    LabelSelector s;
    s.match_labels = std::move(labels);
    return s;
}

LabelSelector match_expressions(std::vector<LabelSelectorRequirement> reqs) {
    LabelSelector s;
    s.match_expressions = std::move(reqs);
    return s;
}

// A cluster with one qualifying LoadBalancer Service "web" and its EgressService; tests bend it.
struct RulesTest : ::testing::Test {
    ObjectSet objects;
    GatewayIdentity self{"gw-1", {{"egw.example.com/gateway", "true"}, {"kubernetes.io/hostname", "gw-1"}}};
    std::vector<IpPrefix> pods{IpPrefix::from_v4(ip4(10, 244, 0, 0), 16)};

    void SetUp() override {
        objects.upsert(egress("web"));
        objects.upsert(lb_service("web"));
        objects.upsert(slice("web-abc12", "web", {ep("10.244.1.11"), ep("10.244.1.10")}));
    }

    ServiceState only() {
        auto states = evaluate_single_gateway(objects, self, pods);
        EXPECT_EQ(states.size(), 1u);
        return states.empty() ? ServiceState{} : states.front();
    }

    void set_selector(LabelSelector sel) { objects.egress_services["default/web"].node_selector = std::move(sel); }
};

void expect_served(const ServiceState& st, const std::string& host = "gw-1") {
    EXPECT_EQ(st.status_host, host);
    EXPECT_TRUE(st.serve_here);
    EXPECT_EQ(st.reason, "");
}

void expect_unserved(const ServiceState& st, const std::string& reason) {
    EXPECT_EQ(st.status_host, "");
    EXPECT_FALSE(st.serve_here);
    EXPECT_EQ(st.reason, reason);
}

}  // namespace

// ---- selectors ----

TEST(Selector, EmptyMatchesEverything) {
    EXPECT_TRUE(selector_matches(LabelSelector{}, {}));
    EXPECT_TRUE(selector_matches(LabelSelector{}, {{"a", "b"}}));
    EXPECT_TRUE(selector_valid(LabelSelector{}));
}

TEST(Selector, MatchLabels) {
    auto sel = match_labels({{"egw.example.com/gateway", "true"}, {"zone", "a"}});
    EXPECT_TRUE(selector_matches(sel, {{"egw.example.com/gateway", "true"}, {"zone", "a"}, {"x", "y"}}));
    EXPECT_FALSE(selector_matches(sel, {{"egw.example.com/gateway", "true"}}));
    EXPECT_FALSE(selector_matches(sel, {{"egw.example.com/gateway", "false"}, {"zone", "a"}}));
}

TEST(Selector, Operators) {
    auto in = match_expressions({req("zone", "In", {"a", "b"})});
    EXPECT_TRUE(selector_matches(in, {{"zone", "b"}}));
    EXPECT_FALSE(selector_matches(in, {{"zone", "c"}}));
    EXPECT_FALSE(selector_matches(in, {}));

    auto notin = match_expressions({req("zone", "NotIn", {"a", "b"})});
    EXPECT_FALSE(selector_matches(notin, {{"zone", "a"}}));
    EXPECT_TRUE(selector_matches(notin, {{"zone", "c"}}));
    EXPECT_TRUE(selector_matches(notin, {}));  // absent key is not in the set

    auto exists = match_expressions({req("gpu", "Exists")});
    EXPECT_TRUE(selector_matches(exists, {{"gpu", ""}}));
    EXPECT_FALSE(selector_matches(exists, {{"cpu", ""}}));

    auto dne = match_expressions({req("maintenance", "DoesNotExist")});
    EXPECT_TRUE(selector_matches(dne, {{"zone", "a"}}));
    EXPECT_FALSE(selector_matches(dne, {{"maintenance", "yes"}}));

    // Requirements and labels are ANDed.
    auto both = match_expressions({req("zone", "In", {"a"}), req("maintenance", "DoesNotExist")});
    both.match_labels["role"] = "gw";
    EXPECT_TRUE(selector_matches(both, {{"zone", "a"}, {"role", "gw"}}));
    EXPECT_FALSE(selector_matches(both, {{"zone", "a"}, {"role", "gw"}, {"maintenance", ""}}));
    EXPECT_FALSE(selector_matches(both, {{"zone", "a"}}));

    EXPECT_FALSE(selector_matches(match_expressions({req("zone", "Near", {"a"})}), {{"zone", "a"}}));
}

TEST(Selector, Validation) {
    std::string why;
    EXPECT_TRUE(selector_valid(match_labels({{"egw.example.com/gateway", "true"}, {"a", ""}}), &why)) << why;
    EXPECT_TRUE(selector_valid(match_labels({{"kubernetes.io/hostname", "gw-1.example_x"}}), &why)) << why;
    EXPECT_TRUE(selector_valid(match_expressions({req("zone", "In", {"a"}), req("x", "Exists")}), &why)) << why;

    EXPECT_FALSE(selector_valid(match_labels({{"a:b", "c"}}), &why));
    EXPECT_EQ(why,
              "matchLabels key \"a:b\": name part must consist of alphanumeric characters, '-', '_' or '.', "
              "and must start and end with an alphanumeric character");
    EXPECT_FALSE(selector_valid(match_labels({{"Example.com/x", "c"}}), &why));
    EXPECT_EQ(why,
              "matchLabels key \"Example.com/x\": prefix part must be a lower-case DNS subdomain (e.g. example.com)");
    EXPECT_FALSE(selector_valid(match_labels({{"/x", "c"}}), &why));
    EXPECT_FALSE(selector_valid(match_labels({{"a/b/c", "c"}}), &why));
    EXPECT_FALSE(selector_valid(match_labels({{"a/", "c"}}), &why));
    EXPECT_FALSE(selector_valid(match_labels({{"", "c"}}), &why));
    EXPECT_FALSE(selector_valid(match_labels({{std::string(64, 'a'), "c"}}), &why));
    EXPECT_TRUE(selector_valid(match_labels({{std::string(63, 'a'), std::string(63, 'b')}}), &why));
    EXPECT_FALSE(selector_valid(match_labels({{"a", std::string(64, 'b')}}), &why));
    EXPECT_FALSE(selector_valid(match_labels({{"a", "-b"}}), &why));
    EXPECT_EQ(why,
              "matchLabels[\"a\"] value \"-b\": must consist of alphanumeric characters, '-', '_' or '.', "
              "and must start and end with an alphanumeric character");

    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "In")}), &why));
    EXPECT_EQ(why, "matchExpressions[0].values: operator In needs at least one value");
    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "NotIn")}), &why));
    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "Exists", {"a"})}), &why));
    EXPECT_EQ(why, "matchExpressions[0].values: operator Exists takes no values");
    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "DoesNotExist", {"a"})}), &why));
    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "In", {"a"}), req("a:b", "Exists")}), &why));
    EXPECT_EQ(why.rfind("matchExpressions[1].key \"a:b\": ", 0), 0u) << why;
    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "In", {"a b"})}), &why));
    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "Near", {"a"})}), &why));
    EXPECT_FALSE(selector_valid(match_expressions({req("zone", "Near", {"a"})})));  // why is optional
}

TEST(Selector, NodeLabel) {
    EXPECT_EQ(node_label_for("default/web"), "egress-service.k8s.ovn.org/default-web");
    EXPECT_EQ(node_label_for("a-b/c"), "egress-service.k8s.ovn.org/a-b-c");
}

TEST(Selector, NodeLabelKeysTheApiServerRefuses) {
    // The name part after the prefix may have 63 characters, not 64 (as kube-apiserver checks it).
    EXPECT_EQ(label_key_problem(node_label_for(std::string(31, 'a') + "/" + std::string(31, 'b'))), "");
    const std::string too_long = node_label_for(std::string(31, 'a') + "/" + std::string(32, 'b'));
    EXPECT_NE(label_key_problem(too_long).find("longer than 63 characters"), std::string::npos);
    EXPECT_EQ(label_key_problem("a.b/A_b.c-9"), "");
    EXPECT_NE(label_key_problem("a.b/-x"), "");
    EXPECT_NE(label_key_problem("a.b/x y"), "");
    EXPECT_NE(label_key_problem("a.b/"), "");
}

// ---- rules ----

TEST_F(RulesTest, QualifyingServiceIsServedHere) {
    auto st = only();
    EXPECT_EQ(st.key, "default/web");
    EXPECT_EQ(st.mode, Mode::load_balancer_ip);  // empty sourceIPBy
    expect_served(st);
    EXPECT_EQ(st.ingress_ipv4, std::optional<uint32_t>(ip4(192, 0, 2, 50)));
    EXPECT_FALSE(st.ingress_ipv6.has_value());
    EXPECT_EQ(st.endpoint_ipv4s, (std::vector<uint32_t>{ip4(10, 244, 1, 10), ip4(10, 244, 1, 11)}));
    EXPECT_TRUE(st.endpoint_ipv6s.empty());
    EXPECT_EQ(st.endpoint_nodes, (std::vector<std::string>{"worker-1"}));
    EXPECT_FALSE(st.etp_local);
    EXPECT_EQ(st.network, "");
}

// The Service's TCP and UDP ports, as protocol << 16 | port, sorted and unique: the ports its
// ingress IP takes connections on (dataplane/ingress.h). SCTP is not translated, so not listed.
TEST_F(RulesTest, ServicePortsAreKeptByProtocol) {
    EXPECT_TRUE(only().ports.empty());
    objects.services["default/web"].ports = {{"UDP", 53}, {"TCP", 443}, {"TCP", 80}, {"SCTP", 9}, {"TCP", 80}};
    EXPECT_EQ(only().ports, (std::vector<uint32_t>{6u << 16 | 80, 6u << 16 | 443, 17u << 16 | 53}));
}

TEST_F(RulesTest, ExplicitLoadBalancerIP) {
    objects.egress_services["default/web"].source_ip_by = "LoadBalancerIP";
    objects.egress_services["default/web"].network = "blue";
    auto st = only();
    EXPECT_EQ(st.mode, Mode::load_balancer_ip);
    expect_served(st);
    EXPECT_EQ(st.network, "blue");
}

TEST_F(RulesTest, NoService) {
    objects.services.clear();
    auto st = only();
    expect_unserved(st, "Service not found");
    EXPECT_FALSE(st.ingress_ipv4.has_value());
    EXPECT_TRUE(st.endpoint_ipv4s.empty());

    // Network mode needs the Service too.
    objects.egress_services["default/web"].source_ip_by = "Network";
    expect_unserved(only(), "Service not found");
}

TEST_F(RulesTest, NotLoadBalancer) {
    objects.services["default/web"].type = "ClusterIP";
    expect_unserved(only(), "Service is not type LoadBalancer");
}

TEST_F(RulesTest, NoIngress) {
    objects.services["default/web"].ingress.clear();
    expect_unserved(only(), "Service has no ingress IP");
    objects.services["default/web"].ingress = {{"", "lb.example.com"}};
    expect_unserved(only(), "Service has no ingress IP");
}

TEST_F(RulesTest, NoEndpoints) {
    objects.endpoint_slices.clear();
    expect_unserved(only(), "no endpoints in the pod network");
    // A slice with no endpoints, and one of another Service, change nothing.
    objects.upsert(slice("web-empty", "web", {}));
    objects.upsert(slice("db-1", "db", {ep("10.244.2.2")}));
    expect_unserved(only(), "no endpoints in the pod network");
}

TEST_F(RulesTest, HostNetworkedEndpointsNeverCount) {
    objects.endpoint_slices.clear();
    objects.upsert(slice("web-host", "web", {ep("172.18.0.3", "worker-2")}));
    auto st = only();
    expect_unserved(st, "no endpoints in the pod network");
    EXPECT_TRUE(st.endpoint_ipv4s.empty());

    // Next to a pod endpoint, the host-networked one is still not SNATed.
    objects.upsert(slice("web-pod", "web", {ep("10.244.3.3", "worker-3")}));
    st = only();
    expect_served(st);
    EXPECT_EQ(st.endpoint_ipv4s, (std::vector<uint32_t>{ip4(10, 244, 3, 3)}));
    EXPECT_EQ(st.endpoint_nodes, (std::vector<std::string>{"worker-2", "worker-3"}));
}

TEST_F(RulesTest, EndpointsAcrossSlicesSortedUniqueAndFiltered) {
    objects.upsert(slice("web-2", "web", {Endpoint{{"10.244.1.10", "10.244.0.1"}, std::nullopt}}));
    objects.upsert(slice("web-fqdn", "web", {Endpoint{{"pod.example.com"}, std::string("worker-9")}}, "FQDN"));
    objects.upsert(slice("web-v6", "web", {Endpoint{{"fd00:10:244::5"}, std::string("worker-6")}}, "IPv6"));
    EndpointSlice other_ns = slice("web-other", "web", {ep("10.244.7.7", "worker-7")});
    other_ns.meta.namespace_ = "other";
    objects.upsert(other_ns);
    auto st = only();
    expect_served(st);
    EXPECT_EQ(st.endpoint_ipv4s, (std::vector<uint32_t>{ip4(10, 244, 0, 1), ip4(10, 244, 1, 10), ip4(10, 244, 1, 11)}));
    EXPECT_EQ(st.endpoint_nodes, (std::vector<std::string>{"worker-1", "worker-6"}));
}

TEST_F(RulesTest, LastIngressOfEachFamily) {
    objects.services["default/web"].ingress = {
        {"192.0.2.1", ""}, {"2001:db8::1", ""}, {"192.0.2.2", ""}, {"2001:db8::2", ""}};
    auto st = only();
    expect_served(st);
    EXPECT_EQ(st.ingress_ipv4, std::optional<uint32_t>(ip4(192, 0, 2, 2)));
    EXPECT_EQ(st.ingress_ipv6, egw::net::parse_ip("2001:db8::2"));
}

TEST_F(RulesTest, HostnameOnlyEntryCountsAsNotIPv4) {
    objects.services["default/web"].ingress = {{"192.0.2.1", ""}, {"2001:db8::1", ""}, {"", "lb.example.com"}};
    auto st = only();
    expect_served(st);
    EXPECT_EQ(st.ingress_ipv4, std::optional<uint32_t>(ip4(192, 0, 2, 1)));
    EXPECT_FALSE(st.ingress_ipv6.has_value());  // overwritten by the hostname-only entry
}

TEST_F(RulesTest, IPv6OnlyIngressStillElects) {
    objects.services["default/web"].ingress = {{"2001:db8::1", ""}};
    auto st = only();
    expect_served(st);
    EXPECT_FALSE(st.ingress_ipv4.has_value());
    EXPECT_EQ(st.ingress_ipv6, egw::net::parse_ip("2001:db8::1"));
}

// A dual-stack Service: one EndpointSlice set per family, the IPv6 endpoints in the IPv6 pod CIDR
// counted (sorted, unique, canonical), the others (host network, wrong family for the slice) not.
TEST_F(RulesTest, DualStackEndpointsOnePerFamily) {
    pods.push_back(*egw::net::parse_prefix("fd00:10:244::/56"));
    objects.services["default/web"].ingress = {{"192.0.2.50", ""}, {"2001:db8::50", ""}};
    objects.services["default/web"].ip_families = {"IPv4", "IPv6"};
    objects.services["default/web"].ip_family_policy = "PreferDualStack";
    objects.upsert(slice("web-v6a", "web",
                         {Endpoint{{"fd00:10:244:1::11", "FD00:10:244:1::10"}, std::string("worker-1")},
                          ep("fd00:10:244:2::5", "worker-2"), ep("fc00::3", "worker-4")},
                         "IPv6"));
    objects.upsert(
        slice("web-v6b", "web", {ep("fd00:10:244:1::10", "worker-1"), ep("10.244.9.9", "worker-5")}, "IPv6"));
    auto st = only();
    expect_served(st);
    EXPECT_EQ(st.ingress_ipv4, std::optional<uint32_t>(ip4(192, 0, 2, 50)));
    EXPECT_EQ(st.ingress_ipv6, egw::net::parse_ip("2001:db8::50"));
    EXPECT_EQ(st.endpoint_ipv4s, (std::vector<uint32_t>{ip4(10, 244, 1, 10), ip4(10, 244, 1, 11)}));
    std::vector<std::string> v6;
    for (const auto& a : st.endpoint_ipv6s)
        v6.push_back(egw::net::to_string(a));
    EXPECT_EQ(v6, (std::vector<std::string>{"fd00:10:244:1::10", "fd00:10:244:1::11", "fd00:10:244:2::5"}));
    EXPECT_EQ(st.ip_families, (std::vector<std::string>{"IPv4", "IPv6"}));
    EXPECT_EQ(st.ip_family_policy, "PreferDualStack");
    EXPECT_TRUE(st.has_pod_endpoints());
}

// Endpoints of one family are enough to serve (the contract asks for an endpoint in the pod
// CIDRs, whatever its family: docs/kubernetes.md); without an IPv6 pod CIDR the same slice counts for nothing.
TEST_F(RulesTest, Ipv6OnlyEndpointsQualifyWhenInAnIpv6PodCidr) {
    objects.endpoint_slices.clear();
    objects.services["default/web"].ingress = {{"2001:db8::50", ""}};
    objects.upsert(slice("web-v6", "web", {ep("fd00:10:244:1::10")}, "IPv6"));
    expect_unserved(only(), "no endpoints in the pod network");
    pods.push_back(*egw::net::parse_prefix("fd00:10:244::/56"));
    auto st = only();
    expect_served(st);
    EXPECT_TRUE(st.endpoint_ipv4s.empty());
    ASSERT_EQ(st.endpoint_ipv6s.size(), 1u);
    EXPECT_EQ(egw::net::to_string(st.endpoint_ipv6s[0]), "fd00:10:244:1::10");
}

TEST_F(RulesTest, NetworkIsAll) {
    objects.egress_services["default/web"].source_ip_by = "Network";
    objects.egress_services["default/web"].network = "blue";
    set_selector(match_labels({{"nowhere", "x"}}));  // ignored in Network mode
    auto st = only();
    EXPECT_EQ(st.mode, Mode::network);
    expect_served(st, "ALL");
    EXPECT_EQ(st.network, "blue");

    // ALL even without endpoints (nothing to route, but still served).
    objects.endpoint_slices.clear();
    expect_served(only(), "ALL");
}

TEST_F(RulesTest, NetworkServedHereNeedsLoadBalancerWithIngress) {
    objects.egress_services["default/web"].source_ip_by = "Network";
    objects.services["default/web"].ingress.clear();
    auto st = only();
    EXPECT_EQ(st.status_host, "ALL");
    EXPECT_FALSE(st.serve_here);
    EXPECT_EQ(st.reason, "Service has no ingress IP");

    objects.services["default/web"].type = "NodePort";
    st = only();
    EXPECT_EQ(st.status_host, "ALL");
    EXPECT_FALSE(st.serve_here);
    EXPECT_EQ(st.reason, "Service is not type LoadBalancer");
}

TEST_F(RulesTest, NodeSelectorMatchLabels) {
    set_selector(match_labels({{"egw.example.com/gateway", "true"}}));
    expect_served(only());
    set_selector(match_labels({{"egw.example.com/gateway", "false"}}));
    expect_unserved(only(), "no eligible node: gw-1 does not match nodeSelector");
}

TEST_F(RulesTest, NodeSelectorOperators) {
    self.labels["zone"] = "a";
    set_selector(match_expressions({req("zone", "In", {"a", "b"})}));
    expect_served(only());
    set_selector(match_expressions({req("zone", "In", {"b"})}));
    expect_unserved(only(), "no eligible node: gw-1 does not match nodeSelector");

    set_selector(match_expressions({req("zone", "NotIn", {"b"})}));
    expect_served(only());
    set_selector(match_expressions({req("zone", "NotIn", {"a"})}));
    expect_unserved(only(), "no eligible node: gw-1 does not match nodeSelector");

    set_selector(match_expressions({req("zone", "Exists")}));
    expect_served(only());
    set_selector(match_expressions({req("rack", "Exists")}));
    expect_unserved(only(), "no eligible node: gw-1 does not match nodeSelector");

    set_selector(match_expressions({req("rack", "DoesNotExist")}));
    expect_served(only());
    set_selector(match_expressions({req("zone", "DoesNotExist")}));
    expect_unserved(only(), "no eligible node: gw-1 does not match nodeSelector");
}

TEST_F(RulesTest, InvalidSelector) {
    set_selector(match_labels({{"a:b", "c"}}));
    auto st = only();
    EXPECT_EQ(st.status_host, "");
    EXPECT_FALSE(st.serve_here);
    EXPECT_EQ(st.reason.rfind("invalid nodeSelector: matchLabels key \"a:b\": ", 0), 0u) << st.reason;

    set_selector(match_expressions({req("zone", "In")}));
    expect_unserved(only(), "invalid nodeSelector: matchExpressions[0].values: operator In needs at least one value");
}

TEST_F(RulesTest, NodeNotReady) {
    objects.upsert(node("gw-1", {{"egw.example.com/gateway", "true"}}, false));
    expect_unserved(only(), "no eligible node: gw-1 is not Ready");
    objects.nodes["gw-1"].ready = true;
    expect_served(only());
}

TEST_F(RulesTest, NoNodeObjectMeansReadyWithIdentityLabels) {
    set_selector(match_labels({{"egw.example.com/gateway", "true"}}));
    objects.upsert(node("worker-1", {}, false));  // another node's state is irrelevant
    expect_served(only());
}

TEST_F(RulesTest, NodeObjectLabelsOverrideIdentity) {
    set_selector(match_labels({{"egw.example.com/gateway", "true"}}));
    objects.upsert(node("gw-1", {{"egw.example.com/gateway", "false"}}));
    expect_unserved(only(), "no eligible node: gw-1 does not match nodeSelector");

    // Labels only the Node carries count, and identity labels the Node lacks stay.
    objects.nodes["gw-1"].meta.labels = {{"zone", "a"}};
    set_selector(match_labels({{"egw.example.com/gateway", "true"}, {"zone", "a"}}));
    expect_served(only());
}

TEST_F(RulesTest, ExternalTrafficPolicyLocal) {
    objects.services["default/web"].external_traffic_policy = "Local";
    auto st = only();
    EXPECT_TRUE(st.etp_local);
    expect_unserved(st, "no eligible node: gw-1 hosts no endpoint (externalTrafficPolicy Local)");

    objects.upsert(slice("web-local", "web", {ep("10.244.9.9", "gw-1")}));
    st = only();
    expect_served(st);
    EXPECT_EQ(st.endpoint_nodes, (std::vector<std::string>{"gw-1", "worker-1"}));

    // A host-networked endpoint on this node counts for locality once a pod endpoint exists anywhere.
    objects.endpoint_slices.erase("default/web-local");
    objects.upsert(slice("web-local", "web", {ep("172.18.0.2", "gw-1")}));
    expect_served(only());

    objects.services["default/web"].external_traffic_policy = "Cluster";
    objects.endpoint_slices.erase("default/web-local");
    st = only();
    EXPECT_FALSE(st.etp_local);
    expect_served(st);
}

TEST_F(RulesTest, ReasonOrder) {
    // Several failures at once: the first in the order of the reference controller is reported.
    objects.services["default/web"].ingress.clear();
    objects.endpoint_slices.clear();
    set_selector(match_labels({{"a:b", "c"}}));
    expect_unserved(only(), "Service has no ingress IP");
    objects.services["default/web"].ingress = {{"192.0.2.50", ""}};
    expect_unserved(only(), "no endpoints in the pod network");
}

TEST_F(RulesTest, OneEntryPerEgressServiceSortedByKey) {
    objects.upsert(egress("db", "Network"));
    EgressService other = egress("zzz");
    other.meta.namespace_ = "apps";
    objects.upsert(other);
    objects.upsert(lb_service("db", {{"192.0.2.60", ""}}));
    objects.upsert(lb_service("orphan"));  // a Service without EgressService is not listed

    auto states = evaluate_single_gateway(objects, self, pods);
    ASSERT_EQ(states.size(), 3u);
    EXPECT_EQ(states[0].key, "apps/zzz");
    EXPECT_EQ(states[0].reason, "Service not found");
    EXPECT_EQ(states[1].key, "default/db");
    EXPECT_EQ(states[1].status_host, "ALL");
    EXPECT_EQ(states[2].key, "default/web");
    EXPECT_EQ(states[2].status_host, "gw-1");

    // Pure: the same input gives the same output.
    EXPECT_EQ(states, evaluate_single_gateway(objects, self, pods));
}

// What the daemon hands to the PolicyBuilder after a rescan: only what differs.
TEST(ServiceDelta, DiffHasWhatIsNewDifferentOrGone) {
    auto state = [](const std::string& key, uint32_t ep) {
        ServiceState s;
        s.key = key;
        s.endpoint_ipv4s = {ep};
        return s;
    };
    std::map<std::string, ServiceState> before = {
        {"a/kept", state("a/kept", 1)}, {"a/moved", state("a/moved", 2)}, {"a/gone", state("a/gone", 3)}};
    std::vector<ServiceState> after = {state("a/kept", 1), state("a/moved", 4), state("a/new", 5)};
    ServiceDelta d = diff(before, after);
    ASSERT_EQ(d.changed.size(), 2u);
    EXPECT_EQ(d.changed[0], state("a/moved", 4));
    EXPECT_EQ(d.changed[1], state("a/new", 5));
    EXPECT_EQ(d.removed, std::vector<std::string>{"a/gone"});
    EXPECT_FALSE(d.empty());
    EXPECT_TRUE(diff(before, {state("a/kept", 1), state("a/moved", 2), state("a/gone", 3)}).empty());
}

TEST_F(RulesTest, NoPodCidrsMeansNoClusterEndpoints) {
    pods.clear();
    expect_unserved(only(), "no endpoints in the pod network");
}
