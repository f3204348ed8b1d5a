// SPDX-License-Identifier: Apache-2.0
//
// Parsing of the Kubernetes objects egw reads (control/model/objects.h).
#include <gtest/gtest.h>

#include "control/model/objects.h"

using egw::model::EgressService;
using egw::model::EndpointSlice;
using egw::model::Kind;
using egw::model::Lease;
using egw::model::Node;
using egw::model::Object;
using egw::model::ObjectError;
using egw::model::ObjectSet;
using egw::model::parse_object;
using egw::model::Service;
using nlohmann::json;

namespace {

// The message of the ObjectError that parsing `j` throws, or "no error".
std::string error_of(const json& j, const std::string& path = "$") {
    try {
        parse_object(j, path);
    } catch (const ObjectError& e) {
        return e.what();
    }
    return "no error";
}

json egress_service() {
    return json::parse(R"({
      "apiVersion": "k8s.ovn.org/v1", "kind": "EgressService",
      "metadata": {"namespace": "default", "name": "web", "uid": "u-1", "resourceVersion": "42",
                   "labels": {"app": "web"}, "annotations": {"x": "y"}},
      "spec": {
        "sourceIPBy": "LoadBalancerIP",
        "network": "blue",
        "nodeSelector": {
          "matchLabels": {"egw.example.com/gateway": "true"},
          "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "maintenance", "operator": "DoesNotExist"}
          ]
        },
        "futureField": {"ignored": true}
      },
      "status": {"host": "gw-1"}
    })");
}

}  // namespace

TEST(Objects, EgressServiceAllFields) {
    Object o = parse_object(egress_service(), "$");
    ASSERT_TRUE(std::holds_alternative<EgressService>(o));
    const auto& es = std::get<EgressService>(o);
    EXPECT_EQ(es.meta.namespace_, "default");
    EXPECT_EQ(es.meta.name, "web");
    EXPECT_EQ(es.meta.uid, "u-1");
    EXPECT_EQ(es.meta.resource_version, "42");
    EXPECT_EQ(es.meta.labels.at("app"), "web");
    EXPECT_EQ(es.source_ip_by, "LoadBalancerIP");
    EXPECT_EQ(es.network, "blue");
    EXPECT_EQ(es.node_selector.match_labels.at("egw.example.com/gateway"), "true");
    ASSERT_EQ(es.node_selector.match_expressions.size(), 2u);
    EXPECT_EQ(es.node_selector.match_expressions[0].key, "zone");
    EXPECT_EQ(es.node_selector.match_expressions[0].op, "In");
    EXPECT_EQ(es.node_selector.match_expressions[0].values, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(es.node_selector.match_expressions[1].op, "DoesNotExist");
    EXPECT_TRUE(es.node_selector.match_expressions[1].values.empty());
    EXPECT_TRUE(es.has_status);
    EXPECT_EQ(es.status_host, "gw-1");
    EXPECT_EQ(egw::model::kind_of(o), Kind::egress_service);
    EXPECT_EQ(egw::model::key_of(o), "default/web");
}

TEST(Objects, EgressServiceMinimalAndNulls) {
    auto j = json::parse(R"({"apiVersion": "k8s.ovn.org/v1", "kind": "EgressService",
                             "metadata": {"namespace": "ns", "name": "a", "labels": null}})");
    auto es = std::get<EgressService>(parse_object(j, "$"));
    EXPECT_EQ(es.source_ip_by, "");
    EXPECT_TRUE(es.node_selector.empty());
    EXPECT_EQ(es.network, "");
    EXPECT_FALSE(es.has_status);

    j["spec"] = json::parse(R"({"sourceIPBy": "", "nodeSelector": null, "network": null})");
    j["status"] = json::object();
    es = std::get<EgressService>(parse_object(j, "$"));
    EXPECT_EQ(es.source_ip_by, "");
    EXPECT_TRUE(es.node_selector.empty());
    EXPECT_TRUE(es.has_status);
    EXPECT_EQ(es.status_host, "");

    j["spec"]["sourceIPBy"] = "Network";
    EXPECT_EQ(std::get<EgressService>(parse_object(j, "$")).source_ip_by, "Network");
}

TEST(Objects, EgressServiceBadFieldsNameThePath) {
    auto j = egress_service();
    j["spec"]["nodeSelector"]["matchExpressions"][0]["operator"] = "Foo";
    EXPECT_EQ(error_of(j),
              "$.spec.nodeSelector.matchExpressions[0].operator: expected one of In, NotIn, "
              "Exists, DoesNotExist, got \"Foo\"");

    j = egress_service();
    j["spec"]["sourceIPBy"] = "Foo";
    EXPECT_EQ(error_of(j), "$.spec.sourceIPBy: expected one of LoadBalancerIP, Network, got \"Foo\"");

    j = egress_service();
    j["spec"]["network"] = 100;
    EXPECT_EQ(error_of(j), "$.spec.network: expected a string, got 100 (quote it in YAML)");

    j = egress_service();
    j["spec"]["nodeSelector"]["matchLabels"]["egw.example.com/gateway"] = true;
    EXPECT_EQ(error_of(j),
              "$.spec.nodeSelector.matchLabels[\"egw.example.com/gateway\"]: expected a string, "
              "got true (quote it in YAML)");

    j = egress_service();
    j["spec"]["nodeSelector"]["matchExpressions"][1].erase("key");
    EXPECT_EQ(error_of(j), "$.spec.nodeSelector.matchExpressions[1].key: required field is missing");

    j = egress_service();
    j["spec"]["nodeSelector"]["matchExpressions"][0]["values"] = "a";
    EXPECT_EQ(error_of(j), "$.spec.nodeSelector.matchExpressions[0].values: expected an array, got \"a\"");

    j = egress_service();
    j["spec"] = json::array();
    EXPECT_EQ(error_of(j), "$.spec: expected an object, got an array");

    j = egress_service();
    j["status"]["host"] = 3;
    EXPECT_EQ(error_of(j), "$.status.host: expected a string, got 3 (quote it in YAML)");
}

TEST(Objects, ErrorCarriesPathAndMessage) {
    auto j = egress_service();
    j["spec"]["sourceIPBy"] = "Foo";
    try {
        parse_object(j, "$.items[2]");
        FAIL() << "no error";
    } catch (const ObjectError& e) {
        EXPECT_EQ(e.path(), "$.items[2].spec.sourceIPBy");
        EXPECT_EQ(e.message(), "expected one of LoadBalancerIP, Network, got \"Foo\"");
        EXPECT_EQ(std::string(e.what()), e.path() + ": " + e.message());
    }
}

TEST(Objects, MetadataAndKindErrors) {
    auto j = egress_service();
    j["metadata"].erase("name");
    EXPECT_EQ(error_of(j), "$.metadata.name: required field is missing");
    j["metadata"]["name"] = "";
    EXPECT_EQ(error_of(j), "$.metadata.name: must not be empty");
    j.erase("metadata");
    EXPECT_EQ(error_of(j), "$.metadata: required field is missing");

    j = egress_service();
    j["metadata"]["labels"]["n"] = 5;
    EXPECT_EQ(error_of(j), "$.metadata.labels.n: expected a string, got 5 (quote it in YAML)");

    j = egress_service();
    j["apiVersion"] = "k8s.ovn.org/v2";
    EXPECT_EQ(error_of(j), "$.apiVersion: expected \"k8s.ovn.org/v1\" for kind EgressService, got \"k8s.ovn.org/v2\"");

    j = egress_service();
    j.erase("kind");
    EXPECT_EQ(error_of(j), "$.kind: required field is missing");

    j = json::parse(R"({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}})");
    EXPECT_EQ(error_of(j),
              "$.kind: unsupported kind \"Deployment\" (apiVersion \"apps/v1\"); egw reads "
              "EgressService, Service, EndpointSlice, Node, Lease, EgressIP, Namespace, Pod and EgressFirewall");

    EXPECT_EQ(error_of(json::array()), "$: expected a Kubernetes object, got an array");
}

TEST(Objects, SupportedKinds) {
    EXPECT_TRUE(egw::model::is_supported_kind("k8s.ovn.org/v1", "EgressService"));
    EXPECT_TRUE(egw::model::is_supported_kind("v1", "Service"));
    EXPECT_TRUE(egw::model::is_supported_kind("discovery.k8s.io/v1", "EndpointSlice"));
    EXPECT_TRUE(egw::model::is_supported_kind("v1", "Node"));
    EXPECT_TRUE(egw::model::is_supported_kind("coordination.k8s.io/v1", "Lease"));
    EXPECT_FALSE(egw::model::is_supported_kind("discovery.k8s.io/v1beta1", "EndpointSlice"));
    EXPECT_FALSE(egw::model::is_supported_kind("v1", "ConfigMap"));
    EXPECT_FALSE(egw::model::is_supported_kind("v1", "List"));
    EXPECT_TRUE(egw::model::is_supported_kind("k8s.ovn.org/v1", "EgressIP"));
    EXPECT_TRUE(egw::model::is_supported_kind("v1", "Namespace"));
    EXPECT_TRUE(egw::model::is_supported_kind("v1", "Pod"));
    EXPECT_TRUE(egw::model::is_supported_kind("k8s.ovn.org/v1", "EgressFirewall"));
    EXPECT_FALSE(egw::model::is_supported_kind("k8s.ovn.org/v1", "EgressQoS"));
    EXPECT_FALSE(egw::model::is_supported_kind("v1", "EgressIP"));
}

TEST(Objects, Service) {
    auto j = json::parse(R"({
      "apiVersion": "v1", "kind": "Service",
      "metadata": {"namespace": "default", "name": "web"},
      "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::10"],
               "externalTrafficPolicy": "Local",
               "ports": [{"port": 80}, {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"},
                         {"port": 9000, "protocol": "SCTP", "nodePort": 30900}],
               "ipFamilies": ["IPv6", "IPv4"], "ipFamilyPolicy": "RequireDualStack"},
      "status": {"loadBalancer": {"ingress": [
        {"ip": "192.0.2.50"}, {"hostname": "lb.example.com"}, {"ip": "2001:db8::1", "ipMode": "VIP"}]}}
    })");
    auto svc = std::get<Service>(parse_object(j, "$"));
    EXPECT_EQ(svc.meta.name, "web");
    EXPECT_EQ(svc.type, "LoadBalancer");
    EXPECT_EQ(svc.cluster_ips, (std::vector<std::string>{"10.96.0.10", "fd00::10"}));
    EXPECT_EQ(svc.external_traffic_policy, "Local");
    EXPECT_EQ(svc.ip_families, (std::vector<std::string>{"IPv6", "IPv4"}));
    EXPECT_EQ(svc.ip_family_policy, "RequireDualStack");
    EXPECT_EQ(svc.ports, (std::vector<egw::model::ServicePort>{{"TCP", 80}, {"UDP", 53}, {"SCTP", 9000}}));
    ASSERT_EQ(svc.ingress.size(), 3u);
    EXPECT_EQ(svc.ingress[0].ip, "192.0.2.50");
    EXPECT_EQ(svc.ingress[1].ip, "");
    EXPECT_EQ(svc.ingress[1].hostname, "lb.example.com");
    EXPECT_EQ(svc.ingress[2].ip, "2001:db8::1");
}

TEST(Objects, ServiceDefaultsAndErrors) {
    auto j = json::parse(R"({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "a", "name": "b"},
                             "spec": {"clusterIP": "10.96.0.1"}})");
    auto svc = std::get<Service>(parse_object(j, "$"));
    EXPECT_EQ(svc.type, "ClusterIP");  // the API's default
    EXPECT_EQ(svc.cluster_ips, (std::vector<std::string>{"10.96.0.1"}));
    EXPECT_TRUE(svc.ingress.empty());
    EXPECT_EQ(svc.external_traffic_policy, "");
    EXPECT_TRUE(svc.ip_families.empty());
    EXPECT_EQ(svc.ip_family_policy, "");
    EXPECT_TRUE(svc.ports.empty());

    j["spec"]["ports"] = json::parse(R"([{"port": 80}, {"port": 0}])");
    EXPECT_EQ(error_of(j), "$.spec.ports[1].port: expected 1-65535, got 0");
    j["spec"]["ports"] = json::parse(R"([{"port": 80, "protocol": "ICMP"}])");
    EXPECT_EQ(error_of(j), "$.spec.ports[0].protocol: expected one of TCP, UDP, SCTP, got \"ICMP\"");
    j["spec"]["ports"] = json::parse(R"([{"name": "http"}])");
    EXPECT_EQ(error_of(j), "$.spec.ports[0].port: required field is missing");
    j["spec"]["ports"] = json::parse(R"([80])");
    EXPECT_EQ(error_of(j), "$.spec.ports[0]: expected an object, got 80");
    j["spec"].erase("ports");

    j["spec"]["ipFamilies"] = {"IPv4", "IPv5"};
    EXPECT_EQ(error_of(j), "$.spec.ipFamilies[1]: expected \"IPv4\" or \"IPv6\", got \"IPv5\"");
    j["spec"]["ipFamilies"] = {"IPv6", "IPv6"};
    EXPECT_EQ(error_of(j), "$.spec.ipFamilies[1]: expected each family once, got \"IPv6\" twice");
    j["spec"]["ipFamilies"] = "IPv4";
    EXPECT_EQ(error_of(j), "$.spec.ipFamilies: expected an array, got \"IPv4\"");
    j["spec"].erase("ipFamilies");
    j["spec"]["ipFamilyPolicy"] = "DualStack";
    EXPECT_EQ(
        error_of(j),
        "$.spec.ipFamilyPolicy: expected one of SingleStack, PreferDualStack, RequireDualStack, got \"DualStack\"");
    j["spec"].erase("ipFamilyPolicy");

    j["spec"]["type"] = "Balancer";
    EXPECT_EQ(error_of(j),
              "$.spec.type: expected one of ClusterIP, NodePort, LoadBalancer, ExternalName, got \"Balancer\"");
    j["spec"]["type"] = "LoadBalancer";
    j["spec"]["externalTrafficPolicy"] = "Everywhere";
    EXPECT_EQ(error_of(j), "$.spec.externalTrafficPolicy: expected one of Cluster, Local, got \"Everywhere\"");
    j["spec"].erase("externalTrafficPolicy");
    j["status"] = json::parse(R"({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"ip": "192.0.2.300"}]}})");
    EXPECT_EQ(error_of(j),
              "$.status.loadBalancer.ingress[1].ip: expected an IPv4 or IPv6 address, got \"192.0.2.300\"");
    j["status"] = json::parse(R"({"loadBalancer": {"ingress": {"ip": "192.0.2.1"}}})");
    EXPECT_EQ(error_of(j), "$.status.loadBalancer.ingress: expected an array, got an object");
    j["status"] = json::parse(R"({"loadBalancer": {}})");
    EXPECT_EQ(error_of(j), "no error");
}

TEST(Objects, EndpointSlice) {
    auto j = json::parse(R"({
      "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
      "metadata": {"namespace": "default", "name": "web-abc12",
                   "labels": {"kubernetes.io/service-name": "web"}},
      "addressType": "IPv4",
      "endpoints": [
        {"addresses": ["10.244.1.10"], "nodeName": "worker-1", "conditions": {"ready": true}},
        {"addresses": ["10.244.1.11", "10.244.1.12"]}
      ],
      "ports": [{"port": 8080, "protocol": "TCP"}]
    })");
    auto s = std::get<EndpointSlice>(parse_object(j, "$"));
    EXPECT_EQ(s.meta.name, "web-abc12");
    EXPECT_EQ(s.service_name, "web");
    EXPECT_EQ(s.address_type, "IPv4");
    ASSERT_EQ(s.endpoints.size(), 2u);
    EXPECT_EQ(s.endpoints[0].addresses, (std::vector<std::string>{"10.244.1.10"}));
    EXPECT_EQ(s.endpoints[0].node_name, std::optional<std::string>("worker-1"));
    EXPECT_EQ(s.endpoints[1].addresses.size(), 2u);
    EXPECT_FALSE(s.endpoints[1].node_name.has_value());

    j["metadata"]["labels"].erase("kubernetes.io/service-name");
    j["endpoints"] = nullptr;
    s = std::get<EndpointSlice>(parse_object(j, "$"));
    EXPECT_EQ(s.service_name, "");
    EXPECT_TRUE(s.endpoints.empty());
}

TEST(Objects, EndpointSliceErrors) {
    auto j = json::parse(R"({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                             "metadata": {"namespace": "default", "name": "s"},
                             "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["fd00::1"]}]})");
    EXPECT_EQ(error_of(j), "$.endpoints[1].addresses[0]: expected an IPv4 address (addressType IPv4), got \"fd00::1\"");
    j["addressType"] = "IPv6";
    EXPECT_EQ(error_of(j),
              "$.endpoints[0].addresses[0]: expected an IPv6 address (addressType IPv6), got \"10.0.0.1\"");
    j["addressType"] = "FQDN";
    EXPECT_EQ(error_of(j), "no error");
    j["addressType"] = "IPX";
    EXPECT_EQ(error_of(j), "$.addressType: expected one of IPv4, IPv6, FQDN, got \"IPX\"");
    j.erase("addressType");
    EXPECT_EQ(error_of(j), "$.addressType: required field is missing");
    j["addressType"] = "IPv4";
    j["endpoints"] = json::parse(R"([{"nodeName": "w"}])");
    EXPECT_EQ(error_of(j), "$.endpoints[0].addresses: required field is missing");
    j["endpoints"] = json::parse(R"([{"addresses": ["10.0.0.1"], "nodeName": 7}])");
    EXPECT_EQ(error_of(j), "$.endpoints[0].nodeName: expected a string, got 7 (quote it in YAML)");
}

TEST(Objects, Node) {
    auto j = json::parse(R"({
      "apiVersion": "v1", "kind": "Node",
      "metadata": {"name": "gw-1", "namespace": "ignored", "labels": {"kubernetes.io/hostname": "gw-1"}},
      "status": {
        "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
        "addresses": [{"type": "Hostname", "address": "gw-1"}, {"type": "InternalIP", "address": "172.18.0.2"}]
      }
    })");
    auto n = std::get<Node>(parse_object(j, "$"));
    EXPECT_EQ(n.meta.name, "gw-1");
    EXPECT_EQ(n.meta.namespace_, "");  // cluster-scoped
    EXPECT_EQ(egw::model::key_of(n.meta), "gw-1");
    EXPECT_TRUE(n.ready);
    EXPECT_EQ(n.internal_ips, (std::vector<std::string>{"172.18.0.2"}));

    j["status"]["conditions"][1]["status"] = "Unknown";
    EXPECT_FALSE(std::get<Node>(parse_object(j, "$")).ready);
    j["status"].erase("conditions");
    EXPECT_FALSE(std::get<Node>(parse_object(j, "$")).ready);
    j["status"]["conditions"] = json::parse(R"([{"type": "Ready", "status": true}])");
    EXPECT_EQ(error_of(j), "$.status.conditions[0].status: expected a string, got true (quote it in YAML)");
}

TEST(Objects, Lease) {
    auto j = json::parse(R"({
      "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
      "metadata": {"namespace": "egw-system", "name": "egw-leader"},
      "spec": {"holderIdentity": "gw-1", "leaseDurationSeconds": 15,
               "renewTime": "2025-01-02T03:04:05.000000Z", "acquireTime": "2025-01-02T03:00:00.000000Z",
               "leaseTransitions": 3}
    })");
    auto l = std::get<Lease>(parse_object(j, "$"));
    EXPECT_EQ(l.meta.namespace_, "egw-system");
    EXPECT_EQ(l.holder_identity, "gw-1");
    EXPECT_EQ(l.lease_duration_seconds, 15);
    EXPECT_EQ(l.renew_time, "2025-01-02T03:04:05.000000Z");
    EXPECT_EQ(l.acquire_time, "2025-01-02T03:00:00.000000Z");
    EXPECT_EQ(l.lease_transitions, 3);

    j["spec"]["leaseDurationSeconds"] = 1.5;
    EXPECT_EQ(error_of(j), "$.spec.leaseDurationSeconds: expected an integer, got 1.5");
    j["spec"]["leaseDurationSeconds"] = 5000000000LL;
    EXPECT_EQ(error_of(j), "$.spec.leaseDurationSeconds: expected a 32-bit integer, got 5000000000");
}

TEST(Objects, ObjectSetUpsertEraseCompare) {
    ObjectSet a;
    a.upsert(parse_object(egress_service(), "$"));
    a.upsert(parse_object(json::parse(R"({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gw-1"}})"), "$"));
    EXPECT_EQ(a.size(), 2u);
    EXPECT_TRUE(a.contains(Kind::egress_service, "default/web"));
    EXPECT_TRUE(a.nodes.count("gw-1"));

    ObjectSet b = a;
    EXPECT_EQ(a, b);
    auto changed = egress_service();
    changed["spec"]["network"] = "red";
    b.upsert(parse_object(changed, "$"));
    EXPECT_EQ(b.size(), 2u);
    EXPECT_EQ(b.egress_services.at("default/web").network, "red");
    EXPECT_FALSE(a == b);

    EXPECT_TRUE(b.erase(Kind::egress_service, "default/web"));
    EXPECT_FALSE(b.erase(Kind::egress_service, "default/web"));
    EXPECT_FALSE(b.erase(std::string_view("Node"), "gw-2"));
    EXPECT_TRUE(b.erase(std::string_view("Node"), "gw-1"));
    EXPECT_FALSE(b.erase(std::string_view("Pod"), "gw-1"));
    EXPECT_EQ(b.size(), 0u);
    EXPECT_EQ(b, ObjectSet{});
}
