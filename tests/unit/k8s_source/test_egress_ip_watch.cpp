// SPDX-License-Identifier: Apache-2.0
//
// The EgressIP sources (control/k8s_source/egress_ip_watch.h) against the test API server:
// EgressIPs, Namespaces and Pods listed and watched by the real reflectors, and the selection
// following relabels, additions, removals and a relist after compacted history; EgressFirewalls
// watched beside them, with the pods of their namespaces.
#include <gtest/gtest.h>

#include "control/k8s_source/controller.h"
#include "control/k8s_source/egress_ip_watch.h"
#include "tests/unit/k8s/apiserver_process.h"

namespace egw::k8s_source {
namespace {

using namespace std::chrono_literals;
using k8s::testing::ApiServerProcess;
using k8s::testing::eventually;
using nlohmann::json;

json namespace_(const std::string& name, const json& labels = json::object()) {
    return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}, {"labels", labels}}}};
}

json pod(const std::string& ns, const std::string& name, const json& labels, const std::string& ip,
         const std::string& phase = "Running") {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"namespace", ns}, {"name", name}, {"labels", labels}}},
            {"spec", {{"nodeName", "worker-1"}}},
            {"status", {{"phase", phase}, {"podIP", ip}, {"podIPs", json::array({{{"ip", ip}}})}}}};
}

json egress_ip(const std::string& name, const json& ns_selector, const json& pod_selector = nullptr) {
    json j = {{"apiVersion", "k8s.ovn.org/v1"},
              {"kind", "EgressIP"},
              {"metadata", {{"name", name}}},
              {"spec", {{"egressIPs", {"192.0.2.10", "2001:db8::10"}}, {"namespaceSelector", ns_selector}}}};
    if (!pod_selector.is_null()) j["spec"]["podSelector"] = pod_selector;
    return j;
}

std::vector<std::string> text(const std::vector<net::IpAddr>& ips) {
    std::vector<std::string> out;
    for (const auto& ip : ips)
        out.push_back(net::to_string(ip));
    return out;
}

class EgressIPWatchTest : public ::testing::Test {
protected:
    void SetUp() override {
        server_ = std::make_unique<ApiServerProcess>(std::vector<std::string>{"--bookmark-interval", "0"});
    }
    void TearDown() override {
        watch_.reset();
        server_.reset();
    }
    void start() {
        k8s::Credentials c;
        c.server = server_->url();
        c.source = "test";
        k8s::ClientOptions o;
        o.reflector.backoff_initial = 50ms;
        o.reflector.backoff_max = 400ms;
        watch_ = std::make_unique<EgressIPWatch>(c, o);
        watch_->start();
        ASSERT_TRUE(eventually([&] { return watch_->stats().synced; }));
    }
    bool selects(const std::string& eip, std::vector<std::string> want) {
        return eventually([&] { return text(watch_->selected_ips(eip)) == want; });
    }
    void upsert(const json& o) { server_->control("upsert", o); }
    void remove(const std::string& kind, const std::string& ns, const std::string& name) {
        server_->control("delete", {{"kind", kind}, {"namespace", ns}, {"name", name}});
    }

    k8s::testing::LogCapture log_;
    std::unique_ptr<ApiServerProcess> server_;
    std::unique_ptr<EgressIPWatch> watch_;
};

TEST_F(EgressIPWatchTest, ListsWatchesAndFollowsRelabels) {
    upsert(json::array(
        {namespace_("shop", {{"env", "prod"}}), namespace_("lab", {{"env", "test"}}),
         pod("shop", "web-1", {{"app", "web"}}, "10.128.0.5"), pod("shop", "db-1", {{"app", "db"}}, "10.128.0.6"),
         pod("lab", "web-2", {{"app", "web"}}, "10.128.1.5"),
         egress_ip("prod-web", {{"matchLabels", {{"env", "prod"}}}}, {{"matchLabels", {{"app", "web"}}}}),
         egress_ip("all-prod", {{"matchLabels", {{"env", "prod"}}}})}));
    start();
    EXPECT_TRUE(selects("prod-web", {"10.128.0.5"}));
    EXPECT_TRUE(selects("all-prod", {"10.128.0.5", "10.128.0.6"}));
    const EgressIPWatchStats st = watch_->stats();
    EXPECT_EQ(st.egress_ip_objects, 2u);
    EXPECT_EQ(st.namespaces, 2u);
    EXPECT_EQ(st.pods, 3u);
    ASSERT_EQ(st.selected.size(), 2u);
    EXPECT_EQ(st.selected[1].name, "prod-web");
    EXPECT_EQ(st.selected[1].egress_ips, (std::vector<std::string>{"192.0.2.10", "2001:db8::10"}));
    EXPECT_EQ(watch_->client().status().size(), 4u);  // EgressIP, Namespace, Pod, EgressFirewall
    auto logged = [&](const std::string& line) {
        return eventually([&] { return log_.sink().count(spdlog::level::info, line) == 1; });
    };
    EXPECT_TRUE(logged("k8s: EgressIP sources listed: 2 EgressIP(s), 2 namespace(s), 3 pod(s)"));
    EXPECT_TRUE(logged("k8s: EgressIP prod-web (192.0.2.10, 2001:db8::10) selects 1 pod(s) in 1 namespace(s)"));

    // The namespace is relabelled in, then a pod out, then the EgressIP's selector changes.
    upsert(namespace_("lab", {{"env", "prod"}}));
    EXPECT_TRUE(selects("prod-web", {"10.128.0.5", "10.128.1.5"}));
    upsert(pod("shop", "web-1", {{"app", "cache"}}, "10.128.0.5"));
    EXPECT_TRUE(selects("prod-web", {"10.128.1.5"}));
    upsert(egress_ip("prod-web", {{"matchLabels", {{"env", "prod"}}}}, {{"matchLabels", {{"app", "db"}}}}));
    EXPECT_TRUE(selects("prod-web", {"10.128.0.6"}));
    EXPECT_TRUE(logged("k8s: EgressIP prod-web (192.0.2.10, 2001:db8::10) selects 1 pod(s) in 2 namespace(s)"));
    // A pod that completes selects nothing; one deleted is gone; so is a deleted EgressIP.
    upsert(pod("shop", "db-1", {{"app", "db"}}, "10.128.0.6", "Succeeded"));
    EXPECT_TRUE(selects("prod-web", {}));
    remove("Pod", "lab", "web-2");
    EXPECT_TRUE(selects("all-prod", {"10.128.0.5"}));
    remove("EgressIP", "", "all-prod");
    EXPECT_TRUE(eventually([&] { return watch_->stats().egress_ip_objects == 1; }));
    EXPECT_TRUE(logged("k8s: EgressIP all-prod is gone"));
    EXPECT_TRUE(watch_->selected_ips("all-prod").empty());
}

TEST_F(EgressIPWatchTest, RelistAfterCompactedHistoryConverges) {
    upsert(json::array({namespace_("a", {{"team", "x"}}), pod("a", "p", json::object(), "10.0.0.1"),
                        egress_ip("eip", {{"matchLabels", {{"team", "x"}}}})}));
    start();
    ASSERT_TRUE(selects("eip", {"10.0.0.1"}));
    // Changes while every watch is cut and history is compacted: the reflectors must relist (410)
    // and the selection must come out as if built from the new lists.
    server_->control("faults", {{"delays", json::array({{{"count", 3}, {"ms", 1500}, {"verb", "watch"}}})}});
    server_->control("close-watches", {{"abort", true}});
    upsert(json::array({pod("a", "q", json::object(), "10.0.0.2"), namespace_("b", {{"team", "x"}}),
                        pod("b", "r", json::object(), "10.0.0.3")}));
    remove("Pod", "a", "p");
    server_->control("compact");
    EXPECT_TRUE(selects("eip", {"10.0.0.2", "10.0.0.3"}));
    uint64_t expired = 0, lists = 0;
    for (const auto& r : watch_->client().status()) {
        expired += r.expired;
        lists += r.lists;
    }
    EXPECT_GE(expired, 1u);
    EXPECT_GT(lists, 3u);  // at least one kind listed again
}

TEST_F(EgressIPWatchTest, AnInvalidEgressIPIsLoggedAndSelectsNothing) {
    json bad = egress_ip("bad", {{"matchExpressions", json::array({{{"key", "env"}, {"operator", "In"}}})}});
    upsert(json::array({namespace_("a"), pod("a", "p", json::object(), "10.0.0.1"), bad}));
    start();
    EXPECT_EQ(watch_->stats().egress_ip_objects, 0u);
    EXPECT_EQ(watch_->client().cache().invalid_objects(), 1u);
    EXPECT_GE(log_.sink().count(spdlog::level::warn, "EgressIP bad (resourceVersion"), 1u);
    EXPECT_GE(
        log_.sink().count(spdlog::level::warn,
                          "$.spec.namespaceSelector.matchExpressions[0].values: operator In needs at least one value"),
        1u);
    // Fixed, it is taken.
    upsert(egress_ip("bad", {{"matchExpressions", json::array({{{"key", "env"}, {"operator", "DoesNotExist"}}})}}));
    EXPECT_TRUE(selects("bad", {"10.0.0.1"}));
}

}  // namespace
}  // namespace egw::k8s_source

namespace egw::k8s_source {
namespace {

// egwd's kubernetes source watches EgressIP beside the EgressService kinds, and stops cleanly.
TEST_F(EgressIPWatchTest, AControllerWatchesThemAndStops) {
    upsert(json::array({namespace_("a", {{"team", "x"}}), pod("a", "p", json::object(), "10.0.0.1"),
                        egress_ip("eip", {{"matchLabels", {{"team", "x"}}}})}));
    k8s::Credentials c;
    c.server = server_->url();
    c.source = "test";
    ControllerOptions o;
    o.node_name = "gw-1";
    o.lease_namespace = "egw";
    o.watch_egress_ips = true;
    k8s::ClientOptions co;
    co.reflector.backoff_initial = 50ms;
    auto controller = std::make_unique<Controller>(c, o, co);
    controller->start();
    ASSERT_NE(controller->egress_ips(), nullptr);
    EXPECT_TRUE(eventually(
        [&] { return text(controller->egress_ips()->selected_ips("eip")) == std::vector<std::string>{"10.0.0.1"}; }));
    controller->stop();
    controller.reset();
}

// EgressFirewalls are listed and watched on the same client: copy_firewall_objects() gives every
// one and the pods of their namespaces only, and firewall_changes() moves with either.
TEST_F(EgressIPWatchTest, EgressFirewallsAndThePodsOfTheirNamespaces) {
    json fw = {{"apiVersion", "k8s.ovn.org/v1"},
               {"kind", "EgressFirewall"},
               {"metadata", {{"namespace", "shop"}, {"name", "default"}}},
               {"spec", {{"egress", json::array({{{"type", "Deny"}, {"to", {{"cidrSelector", "192.0.2.0/24"}}}}})}}}};
    upsert(json::array({namespace_("shop"), namespace_("lab"), pod("shop", "web-1", json::object(), "10.128.0.5"),
                        pod("lab", "web-2", json::object(), "10.128.1.5"), fw}));
    start();
    model::ObjectSet objs;
    ASSERT_TRUE(eventually([&] {
        watch_->copy_firewall_objects(objs);
        return objs.egress_firewalls.size() == 1 && objs.pods.size() == 1;
    }));
    EXPECT_EQ(objs.egress_firewalls.at("shop/default").rules.size(), 1u);
    EXPECT_EQ(objs.pods.count("shop/web-1"), 1u) << "the pods of namespaces with a firewall only";
    const uint64_t before = watch_->firewall_changes();
    upsert(pod("shop", "web-3", json::object(), "10.128.0.7"));
    EXPECT_TRUE(eventually([&] { return watch_->firewall_changes() > before; }));
    EXPECT_TRUE(eventually([&] {
        watch_->copy_firewall_objects(objs);
        return objs.pods.size() == 2;
    }));
    remove("EgressFirewall", "shop", "default");
    EXPECT_TRUE(eventually([&] {
        watch_->copy_firewall_objects(objs);
        return objs.egress_firewalls.empty() && objs.pods.empty();
    }));
}

}  // namespace
}  // namespace egw::k8s_source
