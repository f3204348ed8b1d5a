// SPDX-License-Identifier: Apache-2.0
//
// EgressIP, Namespace and Pod parsing (control/model/objects.h), label selector semantics as
// EgressIP uses them, and the incremental selection (control/model/egress_ip_selection.h).
#include <gtest/gtest.h>

#include "control/model/egress_ip_selection.h"
#include "control/model/objects.h"
#include "control/model/rules.h"

using egw::model::EgressIP;
using egw::model::EgressIPSelection;
using egw::model::Kind;
using egw::model::LabelSelector;
using egw::model::Namespace;
using egw::model::ObjectError;
using egw::model::ObjectSet;
using egw::model::parse_object;
using egw::model::Pod;
using egw::model::PodPhase;
using egw::net::IpAddr;
using egw::net::parse_ip;
using nlohmann::json;

namespace {

std::string error_of(const json& j) {
    try {
        parse_object(j, "$");
    } catch (const ObjectError& e) {
        return e.what();
    }
    return "no error";
}

json egress_ip_json(const std::string& name, json ns_selector, json pod_selector = nullptr,
                    json ips = json::array({"192.0.2.10", "2001:db8::10"})) {
    json j = {{"apiVersion", "k8s.ovn.org/v1"},
              {"kind", "EgressIP"},
              {"metadata", {{"name", name}, {"resourceVersion", "7"}}},
              {"spec", {{"egressIPs", ips}, {"namespaceSelector", ns_selector}}}};
    if (!pod_selector.is_null()) j["spec"]["podSelector"] = pod_selector;
    return j;
}

EgressIP egress_ip(const std::string& name, json ns_selector, json pod_selector = nullptr) {
    return std::get<EgressIP>(parse_object(egress_ip_json(name, ns_selector, pod_selector)));
}

Namespace namespace_(const std::string& name, std::map<std::string, std::string> labels) {
    Namespace n;
    n.meta.name = name;
    n.meta.labels = std::move(labels);
    return n;
}

Pod pod(const std::string& ns, const std::string& name, std::map<std::string, std::string> labels,
        std::vector<std::string> ips, PodPhase phase = PodPhase::running) {
    Pod p;
    p.meta.namespace_ = ns;
    p.meta.name = name;
    p.meta.labels = std::move(labels);
    for (const auto& s : ips)
        p.ips.push_back(*parse_ip(s));
    p.node = "worker-1";
    p.phase = phase;
    return p;
}

std::vector<IpAddr> ips(std::vector<std::string> s) {
    std::vector<IpAddr> out;
    for (const auto& a : s)
        out.push_back(*parse_ip(a));
    return out;
}

}  // namespace

// ---- parsing ----

TEST(EgressIPObjects, AllFields) {
    json j = egress_ip_json("eip-a",
                            {{"matchLabels", {{"env", "prod"}}},
                             {"matchExpressions", {{{"key", "tier"}, {"operator", "In"}, {"values", {"a", "b"}}}}}},
                            {{"matchLabels", {{"app", "web"}}}});
    j["metadata"]["uid"] = "u-1";
    j["status"] = {
        {"items", {{{"node", "gw-1"}, {"egressIP", "192.0.2.10"}}, {{"node", "gw-2"}, {"egressIP", "2001:db8::10"}}}}};
    j["spec"]["futureField"] = 1;  // fields egw does not read are ignored, as a client should
    const auto e = std::get<EgressIP>(parse_object(j));
    EXPECT_EQ(egw::model::key_of(e.meta), "eip-a");
    EXPECT_EQ(e.meta.namespace_, "");
    EXPECT_EQ(e.egress_ips, ips({"192.0.2.10", "2001:db8::10"}));
    EXPECT_EQ(e.namespace_selector.match_labels.at("env"), "prod");
    ASSERT_EQ(e.namespace_selector.match_expressions.size(), 1u);
    EXPECT_EQ(e.namespace_selector.match_expressions[0].values, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(e.pod_selector.match_labels.at("app"), "web");
    ASSERT_EQ(e.status_items.size(), 2u);
    EXPECT_EQ(e.status_items[0].node, "gw-1");
    EXPECT_EQ(e.status_items[1].egress_ip, *parse_ip("2001:db8::10"));
    EXPECT_FALSE(egw::model::is_namespaced(Kind::egress_ip));
}

TEST(EgressIPObjects, MissingPodSelectorIsEmpty) {
    const auto e = egress_ip("eip", json::object());
    EXPECT_TRUE(e.namespace_selector.empty());
    EXPECT_TRUE(e.pod_selector.empty());
}

TEST(EgressIPObjects, Errors) {
    struct Case {
        const char* what;
        json object;
        const char* error;
    };
    json no_spec = egress_ip_json("e", json::object());
    no_spec.erase("spec");
    json no_ips = egress_ip_json("e", json::object());
    no_ips["spec"].erase("egressIPs");
    json no_ns = egress_ip_json("e", json::object());
    no_ns["spec"].erase("namespaceSelector");
    json bad_status = egress_ip_json("e", json::object());
    bad_status["status"] = {{"items", {{{"node", "gw-1"}, {"egressIP", "gw-1"}}}}};
    json status_no_node = egress_ip_json("e", json::object());
    status_no_node["status"] = {{"items", {{{"egressIP", "192.0.2.10"}}}}};
    const std::vector<Case> cases = {
        {"spec is required", no_spec, "$.spec: required field is missing"},
        {"egressIPs is required", no_ips, "$.spec.egressIPs: required field is missing"},
        {"namespaceSelector is required", no_ns, "$.spec.namespaceSelector: required field is missing"},
        {"an address", egress_ip_json("e", json::object(), nullptr, {"192.0.2.1", "192.0.2.300"}),
         "$.spec.egressIPs[1]: expected an IPv4 or IPv6 address, got \"192.0.2.300\""},
        {"a prefix is not an address", egress_ip_json("e", json::object(), nullptr, {"192.0.2.0/24"}),
         "$.spec.egressIPs[0]: expected an IPv4 or IPv6 address, got \"192.0.2.0/24\""},
        {"each address once", egress_ip_json("e", json::object(), nullptr, {"2001:db8::1", "2001:DB8:0::1"}),
         "$.spec.egressIPs[1]: address 2001:db8::1 is listed twice"},
        {"a string list", egress_ip_json("e", json::object(), nullptr, "192.0.2.1"),
         "$.spec.egressIPs: expected an array, got \"192.0.2.1\""},
        {"unknown operator", egress_ip_json("e", {{"matchExpressions", {{{"key", "a"}, {"operator", "Near"}}}}}),
         "$.spec.namespaceSelector.matchExpressions[0].operator: expected one of In, NotIn, Exists, "
         "DoesNotExist, got \"Near\""},
        {"operator is required", egress_ip_json("e", {{"matchExpressions", {{{"key", "a"}}}}}),
         "$.spec.namespaceSelector.matchExpressions[0].operator: required field is missing"},
        {"In needs values",
         egress_ip_json("e", {{"matchExpressions", {{{"key", "a"}, {"operator", "In"}, {"values", json::array()}}}}}),
         "$.spec.namespaceSelector.matchExpressions[0].values: operator In needs at least one value"},
        {"NotIn needs values",
         egress_ip_json("e", json::object(), {{"matchExpressions", {{{"key", "a"}, {"operator", "NotIn"}}}}}),
         "$.spec.podSelector.matchExpressions[0].values: operator NotIn needs at least one value"},
        {"Exists takes no values",
         egress_ip_json(
             "e", json::object(),
             {{"matchExpressions",
               {{{"key", "x"}, {"operator", "Exists"}}, {{"key", "a"}, {"operator", "Exists"}, {"values", {"b"}}}}}}),
         "$.spec.podSelector.matchExpressions[1].values: operator Exists takes no values"},
        {"DoesNotExist takes no values",
         egress_ip_json("e", {{"matchExpressions", {{{"key", "a"}, {"operator", "DoesNotExist"}, {"values", {"b"}}}}}}),
         "$.spec.namespaceSelector.matchExpressions[0].values: operator DoesNotExist takes no values"},
        {"label key syntax", egress_ip_json("e", {{"matchLabels", {{"a:b", "c"}}}}),
         "$.spec.namespaceSelector: matchLabels key \"a:b\": name part must consist of alphanumeric characters, "
         "'-', '_' or '.', and must start and end with an alphanumeric character"},
        {"selector is an object", egress_ip_json("e", "env=prod"),
         "$.spec.namespaceSelector: expected an object, got \"env=prod\""},
        {"status address", bad_status, "$.status.items[0].egressIP: expected an IPv4 or IPv6 address, got \"gw-1\""},
        {"status node", status_no_node, "$.status.items[0].node: required field is missing"},
    };
    for (const auto& c : cases)
        EXPECT_EQ(error_of(c.object), c.error) << c.what;
}

TEST(EgressIPObjects, Namespace) {
    const auto n = std::get<Namespace>(parse_object(json::parse(R"({
      "apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "shop", "uid": "0b0e6a0c-2bb4-4e61-a0a2-7d1f0f9bb3a1", "labels": {"env": "prod"}},
      "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})")));
    EXPECT_EQ(egw::model::key_of(n.meta), "shop");
    EXPECT_EQ(n.meta.labels.at("env"), "prod");
    EXPECT_EQ(n.meta.uid, "");  // not kept
    EXPECT_EQ(error_of(json::parse(R"({"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "x", "labels": {"env": 1}}})")),
              "$.metadata.labels.env: expected a string, got 1 (quote it in YAML)");
}

TEST(EgressIPObjects, Pod) {
    const auto p = std::get<Pod>(parse_object(json::parse(R"({
      "apiVersion": "v1", "kind": "Pod",
      "metadata": {"namespace": "shop", "name": "web-1", "uid": "0b0e6a0c-2bb4-4e61-a0a2-7d1f0f9bb3a1",
                   "labels": {"app": "web"}},
      "spec": {"nodeName": "worker-3", "containers": [{"name": "c", "image": "x"}]},
      "status": {"phase": "Running", "podIP": "10.128.0.5",
                 "podIPs": [{"ip": "10.128.0.5"}, {"ip": "fd00:10:128::5"}]}})")));
    EXPECT_EQ(egw::model::key_of(p.meta), "shop/web-1");
    EXPECT_EQ(p.meta.uid, "");
    EXPECT_EQ(p.node, "worker-3");
    EXPECT_EQ(p.phase, PodPhase::running);
    EXPECT_FALSE(p.host_network);
    EXPECT_EQ(p.ips, ips({"10.128.0.5", "fd00:10:128::5"}));

    // Only podIP (an older kubelet); no status at all (just created).
    auto only = std::get<Pod>(parse_object(json::parse(R"({"apiVersion": "v1", "kind": "Pod",
      "metadata": {"namespace": "a", "name": "b"}, "spec": {"hostNetwork": true},
      "status": {"phase": "Succeeded", "podIP": "192.168.1.4"}})")));
    EXPECT_EQ(only.ips, ips({"192.168.1.4"}));
    EXPECT_TRUE(only.host_network);
    EXPECT_EQ(only.phase, PodPhase::succeeded);
    auto fresh = std::get<Pod>(parse_object(
        json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a", "name": "b"}})")));
    EXPECT_EQ(fresh.phase, PodPhase::pending);
    EXPECT_TRUE(fresh.ips.empty());

    EXPECT_EQ(error_of(json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a", "name": "b"},
      "status": {"podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0"}]}})")),
              "$.status.podIPs[1].ip: expected an IPv4 or IPv6 address, got \"10.0.0\"");
    EXPECT_EQ(error_of(json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a", "name": "b"},
      "status": {"phase": "Sleeping"}})")),
              "$.status.phase: expected one of Pending, Running, Succeeded, Failed, Unknown, got \"Sleeping\"");
    EXPECT_EQ(error_of(json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "a", "name": "b"},
      "spec": {"hostNetwork": "yes"}})")),
              "$.spec.hostNetwork: expected a boolean, got \"yes\"");
}

TEST(EgressIPObjects, ObjectSetKeepsTheNewKinds) {
    ObjectSet set;
    set.upsert(egress_ip("eip", json::object()));
    set.upsert(namespace_("shop", {}));
    set.upsert(pod("shop", "web", {}, {"10.0.0.1"}));
    EXPECT_EQ(set.size(), 3u);
    EXPECT_TRUE(set.contains(Kind::egress_ip, "eip"));
    EXPECT_TRUE(set.contains(Kind::namespace_, "shop"));
    EXPECT_TRUE(set.contains(Kind::pod, "shop/web"));
    EXPECT_TRUE(set.erase("Pod", "shop/web"));
    EXPECT_TRUE(set.erase(Kind::namespace_, "shop"));
    EXPECT_TRUE(set.erase(Kind::egress_ip, "eip"));
    EXPECT_EQ(set.size(), 0u);
}

// ---- label selectors, as Kubernetes evaluates them (labels.Selector) ----

TEST(EgressIPSelector, Semantics) {
    struct Case {
        const char* what;
        json selector;
        std::map<std::string, std::string> labels;
        bool matches;
    };
    const json in_ab = {{"matchExpressions", {{{"key", "k"}, {"operator", "In"}, {"values", {"a", "b"}}}}}};
    const json notin_ab = {{"matchExpressions", {{{"key", "k"}, {"operator", "NotIn"}, {"values", {"a", "b"}}}}}};
    const json exists = {{"matchExpressions", {{{"key", "k"}, {"operator", "Exists"}}}}};
    const json dne = {{"matchExpressions", {{{"key", "k"}, {"operator", "DoesNotExist"}}}}};
    const std::vector<Case> cases = {
        {"{} matches everything", json::object(), {{"x", "y"}}, true},
        {"{} matches no labels", json::object(), {}, true},
        {"matchLabels equal", {{"matchLabels", {{"k", "a"}}}}, {{"k", "a"}, {"x", "y"}}, true},
        {"matchLabels other value", {{"matchLabels", {{"k", "a"}}}}, {{"k", "b"}}, false},
        {"matchLabels missing key", {{"matchLabels", {{"k", "a"}}}}, {}, false},
        {"matchLabels empty value", {{"matchLabels", {{"k", ""}}}}, {{"k", ""}}, true},
        {"matchLabels empty value, key absent", {{"matchLabels", {{"k", ""}}}}, {}, false},
        {"matchLabels all keys", {{"matchLabels", {{"k", "a"}, {"j", "b"}}}}, {{"k", "a"}}, false},
        {"In value", in_ab, {{"k", "b"}}, true},
        {"In other value", in_ab, {{"k", "c"}}, false},
        {"In key absent", in_ab, {}, false},
        {"NotIn value", notin_ab, {{"k", "a"}}, false},
        {"NotIn other value", notin_ab, {{"k", "c"}}, true},
        {"NotIn key absent matches", notin_ab, {}, true},
        {"Exists", exists, {{"k", ""}}, true},
        {"Exists absent", exists, {{"j", "k"}}, false},
        {"DoesNotExist absent matches", dne, {{"j", "k"}}, true},
        {"DoesNotExist present", dne, {{"k", ""}}, false},
        {"matchLabels AND matchExpressions",
         {{"matchLabels", {{"env", "prod"}}}, {"matchExpressions", {{{"key", "k"}, {"operator", "Exists"}}}}},
         {{"env", "prod"}},
         false},
        {"matchLabels AND matchExpressions both hold",
         {{"matchLabels", {{"env", "prod"}}}, {"matchExpressions", {{{"key", "k"}, {"operator", "Exists"}}}}},
         {{"env", "prod"}, {"k", "1"}},
         true},
        {"expressions are ANDed",
         {{"matchExpressions",
           {{{"key", "k"}, {"operator", "In"}, {"values", {"a"}}},
            {{"key", "k"}, {"operator", "NotIn"}, {"values", {"a"}}}}}},
         {{"k", "a"}},
         false},
        {"prefixed keys",
         {{"matchLabels", {{"kubernetes.io/metadata.name", "shop"}}}},
         {{"kubernetes.io/metadata.name", "shop"}},
         true},
    };
    for (const auto& c : cases) {
        const auto e = egress_ip("eip", c.selector, c.selector);
        EXPECT_EQ(egw::model::selector_matches(e.namespace_selector, c.labels), c.matches) << c.what;
        EXPECT_EQ(egw::model::selector_matches(e.pod_selector, c.labels), c.matches) << c.what;
    }
}

// ---- selection ----

class Selection : public ::testing::Test {
protected:
    ObjectSet objs;
    EgressIPSelection sel;

    std::vector<std::string> put(egw::model::Object o) {
        Kind k = egw::model::kind_of(o);
        std::string key = egw::model::key_of(o);
        objs.upsert(std::move(o));
        return sel.apply(objs, k, key);
    }
    std::vector<std::string> remove(Kind k, const std::string& key) {
        objs.erase(k, key);
        return sel.apply(objs, k, key);
    }
    // The selection is what a rebuild from scratch gives: incremental updates lose nothing.
    void expect_consistent() {
        EgressIPSelection fresh;
        fresh.rebuild(objs);
        EXPECT_EQ(fresh.all(), sel.all());
    }
    std::vector<std::string> pods_of(const std::string& eip) {
        std::vector<std::string> out;
        if (const auto* s = sel.find(eip))
            for (const auto& [k, v] : s->pods)
                out.push_back(k);
        return out;
    }
    using Names = std::vector<std::string>;
};

TEST_F(Selection, NamespaceAndPodSelectors) {
    put(namespace_("shop", {{"env", "prod"}}));
    put(namespace_("lab", {{"env", "test"}}));
    put(pod("shop", "web-1", {{"app", "web"}}, {"10.128.0.5", "fd00::5"}));
    put(pod("shop", "db-1", {{"app", "db"}}, {"10.128.0.6"}));
    put(pod("lab", "web-2", {{"app", "web"}}, {"10.128.1.5"}));
    EXPECT_EQ(put(egress_ip("all-prod", {{"matchLabels", {{"env", "prod"}}}})), Names{"all-prod"});
    EXPECT_EQ(put(egress_ip("prod-web", {{"matchLabels", {{"env", "prod"}}}}, {{"matchLabels", {{"app", "web"}}}})),
              Names{"prod-web"});
    EXPECT_EQ(put(egress_ip("none", {{"matchLabels", {{"env", "staging"}}}})), Names{"none"});

    EXPECT_EQ(pods_of("all-prod"), (Names{"shop/db-1", "shop/web-1"}));
    EXPECT_EQ(sel.selected_ips("all-prod"), ips({"10.128.0.5", "10.128.0.6", "fd00::5"}));
    EXPECT_EQ(pods_of("prod-web"), Names{"shop/web-1"});
    EXPECT_EQ(sel.find("none")->namespaces.size(), 0u);
    EXPECT_TRUE(sel.selected_ips("none").empty());
    EXPECT_EQ(sel.find("missing"), nullptr);
    expect_consistent();
}

TEST_F(Selection, NamespaceRelabelStartsAndStops) {
    put(namespace_("shop", {}));
    put(pod("shop", "web-1", {{"app", "web"}}, {"10.128.0.5"}));
    put(pod("shopping", "web-9", {{"app", "web"}}, {"10.128.9.9"}));  // a namespace whose name extends "shop"
    put(namespace_("shopping", {}));
    put(egress_ip("eip", {{"matchLabels", {{"egress", "yes"}}}}));
    EXPECT_TRUE(pods_of("eip").empty());

    EXPECT_EQ(put(namespace_("shop", {{"egress", "yes"}})), Names{"eip"});
    EXPECT_EQ(pods_of("eip"), Names{"shop/web-1"});
    EXPECT_EQ(sel.find("eip")->namespaces, (std::set<std::string>{"shop"}));
    expect_consistent();

    // A label the selector does not read: no change reported.
    EXPECT_TRUE(put(namespace_("shop", {{"egress", "yes"}, {"team", "a"}})).empty());

    EXPECT_EQ(put(namespace_("shop", {{"egress", "no"}})), Names{"eip"});
    EXPECT_TRUE(pods_of("eip").empty());
    EXPECT_TRUE(sel.find("eip")->namespaces.empty());
    EXPECT_TRUE(put(pod("shop", "web-2", {}, {"10.128.0.9"})).empty());  // the namespace is out
    expect_consistent();

    // A matched namespace going away takes its pods with it.
    put(namespace_("shopping", {{"egress", "yes"}}));
    EXPECT_EQ(pods_of("eip"), Names{"shopping/web-9"});
    EXPECT_EQ(remove(Kind::namespace_, "shopping"), Names{"eip"});
    EXPECT_TRUE(pods_of("eip").empty());
    expect_consistent();
}

TEST_F(Selection, PodRelabelAddAndRemove) {
    put(namespace_("shop", {{"env", "prod"}}));
    put(egress_ip("eip", {{"matchLabels", {{"env", "prod"}}}},
                  {{"matchExpressions", {{{"key", "app"}, {"operator", "In"}, {"values", {"web", "api"}}}}}}));
    EXPECT_EQ(put(pod("shop", "web-1", {{"app", "web"}}, {"10.128.0.5"})), Names{"eip"});
    EXPECT_TRUE(put(pod("shop", "db-1", {{"app", "db"}}, {"10.128.0.6"})).empty());
    EXPECT_EQ(pods_of("eip"), Names{"shop/web-1"});

    EXPECT_EQ(put(pod("shop", "db-1", {{"app", "api"}}, {"10.128.0.6"})), Names{"eip"});     // relabelled in
    EXPECT_EQ(put(pod("shop", "web-1", {{"app", "cache"}}, {"10.128.0.5"})), Names{"eip"});  // relabelled out
    EXPECT_EQ(pods_of("eip"), Names{"shop/db-1"});
    EXPECT_EQ(put(pod("shop", "db-1", {{"app", "api"}}, {"10.128.0.7"})), Names{"eip"});  // new address
    EXPECT_EQ(sel.selected_ips("eip"), ips({"10.128.0.7"}));
    EXPECT_TRUE(put(pod("shop", "db-1", {{"app", "api"}, {"v", "2"}}, {"10.128.0.7"})).empty());
    expect_consistent();

    EXPECT_EQ(remove(Kind::pod, "shop/db-1"), Names{"eip"});
    EXPECT_TRUE(pods_of("eip").empty());
    EXPECT_TRUE(remove(Kind::pod, "shop/db-1").empty());  // twice: nothing more
    expect_consistent();
}

TEST_F(Selection, PodsThatSelectNothing) {
    put(namespace_("shop", {}));
    put(egress_ip("eip", json::object()));
    EXPECT_TRUE(put(pod("shop", "pending", {}, {})).empty());  // no address yet
    EXPECT_TRUE(put(pod("shop", "done", {}, {"10.128.0.7"}, PodPhase::succeeded)).empty());
    EXPECT_TRUE(put(pod("shop", "crashed", {}, {"10.128.0.8"}, PodPhase::failed)).empty());
    Pod host = pod("shop", "host", {}, {"192.168.0.11"});
    host.host_network = true;
    EXPECT_TRUE(put(host).empty());
    EXPECT_TRUE(pods_of("eip").empty());

    // The pending pod gets its address: selected; then it completes: no longer.
    EXPECT_EQ(put(pod("shop", "pending", {}, {"10.128.0.9"})), Names{"eip"});
    EXPECT_EQ(pods_of("eip"), Names{"shop/pending"});
    EXPECT_EQ(put(pod("shop", "pending", {}, {"10.128.0.9"}, PodPhase::succeeded)), Names{"eip"});
    EXPECT_TRUE(pods_of("eip").empty());
    expect_consistent();
}

TEST_F(Selection, EgressIPChangesAndRemoval) {
    put(namespace_("a", {{"team", "x"}}));
    put(namespace_("b", {{"team", "y"}}));
    put(pod("a", "p", {}, {"10.0.0.1"}));
    put(pod("b", "q", {}, {"10.0.0.2"}));
    put(egress_ip("eip", {{"matchLabels", {{"team", "x"}}}}));
    EXPECT_EQ(pods_of("eip"), Names{"a/p"});
    EXPECT_EQ(put(egress_ip("eip", {{"matchExpressions", {{{"key", "team"}, {"operator", "Exists"}}}}})), Names{"eip"});
    EXPECT_EQ(pods_of("eip"), (Names{"a/p", "b/q"}));
    // A new IP list does not change who is selected.
    auto moved = egress_ip("eip", {{"matchExpressions", {{{"key", "team"}, {"operator", "Exists"}}}}});
    moved.egress_ips = ips({"192.0.2.99"});
    EXPECT_TRUE(put(moved).empty());
    // Two objects selecting one pod both list it (which one serves it is decided later).
    put(egress_ip("other", {{"matchLabels", {{"team", "y"}}}}));
    EXPECT_EQ(put(pod("b", "q", {}, {"10.0.0.3"})), (Names{"eip", "other"}));
    EXPECT_EQ(remove(Kind::egress_ip, "eip"), Names{"eip"});
    EXPECT_EQ(sel.find("eip"), nullptr);
    EXPECT_EQ(pods_of("other"), Names{"b/q"});
    EXPECT_TRUE(put(pod("a", "p", {}, {"10.0.0.9"})).empty());  // no EgressIP matches "a" any more
    EXPECT_EQ(put(pod("b", "q", {}, {"10.0.0.4"})), Names{"other"});
    expect_consistent();
    // Other kinds do nothing.
    EXPECT_TRUE(sel.apply(objs, Kind::service, "a/p").empty());
}

TEST_F(Selection, RebuildReportsWhatDiffers) {
    put(namespace_("a", {}));
    put(pod("a", "p", {}, {"10.0.0.1"}));
    objs.upsert(egress_ip("one", json::object()));
    objs.upsert(egress_ip("two", {{"matchLabels", {{"x", "y"}}}}));
    EXPECT_EQ(sel.rebuild(objs), (Names{"one", "two"}));
    EXPECT_TRUE(sel.rebuild(objs).empty());
    objs.erase(Kind::egress_ip, "two");
    objs.upsert(pod("a", "r", {}, {"10.0.0.2"}));
    EXPECT_EQ(sel.rebuild(objs), (Names{"one", "two"}));
    EXPECT_EQ(pods_of("one"), (Names{"a/p", "a/r"}));
}
