// SPDX-License-Identifier: Apache-2.0
//
// The Controller's two parts on their own, against the test API server
// (tests/apiserver/apiserver.py): LeaseKeepers with a client each and no decider (one leader at a
// time, liveness given up while not serving, the leader Lease handed over at once), and a
// HostDecider that writes status.host only while its LeaseKeeper leads.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "control/k8s_source/host_decider.h"
#include "control/k8s_source/lease_keeper.h"
#include "tests/unit/k8s/apiserver_process.h"

namespace egw::k8s_source {
namespace {

using namespace std::chrono_literals;
using k8s::testing::ApiServerProcess;
using k8s::testing::eventually;
using nlohmann::json;

constexpr const char* kToken = "keeper-t0k3n";
constexpr const char* kLeaseNs = "egw";

ControllerOptions options(const std::string& node, ElectionMode mode) {
    ControllerOptions o;
    o.node_name = node;
    o.lease_namespace = kLeaseNs;
    o.election = mode;
    o.lease_duration = 2s;
    o.renew_deadline = 1500ms;
    o.retry_period = 250ms;
    o.grace = 500ms;
    o.pod_cidrs = {egw::net::IpPrefix::from_v4(0x0a800000, 14)};  // 10.128.0.0/14
    o.write_backoff_initial = 50ms;
    o.write_backoff_max = 500ms;
    return o;
}

// One gateway's client with its LeaseKeeper, and a HostDecider when asked, wired as the
// Controller wires them.
struct Gateway {
    std::unique_ptr<k8s::Client> client;
    std::unique_ptr<LeaseKeeper> keeper;
    std::unique_ptr<HostDecider> decider;
    std::atomic<unsigned> leadership_changes{0};
    std::atomic<const char*> serving_problem{""};

    Gateway(const ApiServerProcess& server, const std::string& node, ElectionMode mode, bool with_decider) {
        k8s::Credentials creds;
        creds.server = server.url();
        creds.token = kToken;
        creds.source = "test";
        k8s::ClientOptions co;
        co.reflector.backoff_initial = 50ms;
        co.reflector.backoff_max = 500ms;
        co.lease_namespace = kLeaseNs;
        client = std::make_unique<k8s::Client>(creds, co);
        keeper = std::make_unique<LeaseKeeper>(*client, options(node, mode), node, kLeaseNs, [this] {
            ++leadership_changes;
            if (decider) decider->wake();
        });
        keeper->set_serving_check([this] { return std::string(serving_problem.load()); });
        if (with_decider) decider = std::make_unique<HostDecider>(*client, *keeper, options(node, mode), node);
        client->cache().set_listener([this](const k8s::Change& c) {
            if (c.kind == model::Kind::lease) keeper->on_lease_change(c);
            if (decider) decider->on_change(c);
        });
        client->start();
        keeper->start();
        if (decider) decider->start();
    }
    // As Controller::stop(): the threads first, then the Leases given up.
    void stop_cleanly() {
        keeper->request_stop();
        if (decider) decider->request_stop();
        keeper->join();
        if (decider) decider->join();
        keeper->end_leadership();
        if (keeper->stats().lease_renewals > 0) keeper->release_liveness();
        keeper->release_leader();
    }
    ~Gateway() {
        keeper->request_stop();
        if (decider) decider->request_stop();
        keeper->join();
        if (decider) decider->join();
        client->stop();
    }
};

class LeaseKeeperTest : public ::testing::Test {
protected:
    void SetUp() override { server_ = std::make_unique<ApiServerProcess>(std::vector<std::string>{"--token", kToken}); }

    json get(const std::string& path) {
        auto r = server_->call("GET", path, "", "", kToken);
        return r.status == 200 ? r.body : json();
    }
    std::string holder(const std::string& lease) {
        json l = get(std::string("/apis/coordination.k8s.io/v1/namespaces/egw/leases/") + lease);
        return l.is_object() && l.contains("spec") ? l["spec"].value("holderIdentity", "") : "<none>";
    }
    // `cond` holds all the time for `d`.
    static bool consistently(const std::function<bool()>& cond, std::chrono::milliseconds d) {
        auto end = std::chrono::steady_clock::now() + d;
        while (std::chrono::steady_clock::now() < end) {
            if (!cond()) return false;
            std::this_thread::sleep_for(25ms);
        }
        return true;
    }

    std::unique_ptr<ApiServerProcess> server_;
};

TEST_F(LeaseKeeperTest, OneLeaderAndEveryGatewayLive) {
    Gateway a(*server_, "node1", ElectionMode::leader, false);
    Gateway b(*server_, "node2", ElectionMode::leader, false);
    ASSERT_TRUE(eventually([&] { return a.keeper->leader() != b.keeper->leader(); }));
    Gateway& lead = a.keeper->leader() ? a : b;
    const std::string lead_node = &lead == &a ? "node1" : "node2";
    EXPECT_EQ(holder("egw-leader"), lead_node);
    EXPECT_TRUE(eventually([&] { return holder("egw-node-node1") == "node1" && holder("egw-node-node2") == "node2"; }));
    // Told after the Lease is taken (leader() is true first).
    EXPECT_TRUE(eventually([&] { return lead.leadership_changes.load() >= 1; }));
    EXPECT_TRUE(eventually([&] { return lead.keeper->stats().leader_transitions >= 1; }));
    // Both see both gateways live, and there is exactly one leader over several renewals.
    for (Gateway* g : {&a, &b})
        EXPECT_TRUE(eventually([&] {
            size_t live = 0;
            g->client->cache().read(
                [&](const model::ObjectSet& objs) { live = g->keeper->live_now(objs).live.size(); });
            return live == 2;
        }));
    // Over 3 s, twelve retry periods and longer than the Lease: at every sample the same one leads
    // and only it, and neither became leader again in between.
    Gateway& other = &lead == &a ? b : a;
    bool lead_leads = true, other_leads = false;  // at the last sample
    EXPECT_TRUE(consistently(
        [&] {
            lead_leads = lead.keeper->leader();
            other_leads = other.keeper->leader();
            return lead_leads && !other_leads;
        },
        3s))
        << lead_node << " leads: " << lead_leads << ", the other leads: " << other_leads;
    EXPECT_EQ(lead.keeper->stats().leader_transitions, 1u);
    EXPECT_EQ(other.keeper->stats().leader_transitions, 0u);
    for (Gateway* g : {&a, &b})
        EXPECT_TRUE(eventually([&] { return g->keeper->stats().leader_identity == lead_node; }));
}

TEST_F(LeaseKeeperTest, NotServingGivesTheLivenessLeaseUpUntilItServesAgain) {
    Gateway g(*server_, "node1", ElectionMode::external, false);
    ASSERT_TRUE(eventually([&] { return holder("egw-node-node1") == "node1"; }));
    EXPECT_FALSE(g.keeper->leader());  // mode external never leads
    g.serving_problem = "workers stalled";
    ASSERT_TRUE(eventually([&] { return holder("egw-node-node1").empty(); }));
    // Given up for as long as it does not serve: 1.5 s is six retry periods, six rounds that
    // must not take it back.
    EXPECT_TRUE(consistently([&] { return holder("egw-node-node1").empty(); }, 1500ms))
        << "held by \"" << holder("egw-node-node1") << "\" while not serving";
    EXPECT_EQ(g.keeper->stats().not_serving, "workers stalled");
    EXPECT_EQ(g.keeper->serving_problems(), "workers stalled\n");
    g.serving_problem = "";
    EXPECT_TRUE(eventually([&] { return holder("egw-node-node1") == "node1"; }));
    EXPECT_EQ(g.keeper->stats().not_serving, "");
    EXPECT_EQ(holder("egw-leader"), "<none>");  // no attempt at leading in mode external
}

TEST_F(LeaseKeeperTest, HandedBackLeaderLeaseIsTakenAtOnce) {
    auto a = std::make_unique<Gateway>(*server_, "node1", ElectionMode::leader, false);
    ASSERT_TRUE(eventually([&] { return a->keeper->leader(); }));
    Gateway b(*server_, "node2", ElectionMode::leader, false);
    ASSERT_TRUE(eventually([&] { return holder("egw-node-node1") == "node1" && holder("egw-node-node2") == "node2"; }));
    EXPECT_FALSE(b.keeper->leader());
    const auto t0 = std::chrono::steady_clock::now();
    a->stop_cleanly();
    EXPECT_EQ(holder("egw-node-node1"), "");
    // Well within the Lease's 2 s: the follower saw the Lease handed back.
    ASSERT_TRUE(eventually([&] { return b.keeper->leader(); }, 3s));
    EXPECT_LE(std::chrono::steady_clock::now() - t0, 1500ms);
    EXPECT_EQ(holder("egw-leader"), "node2");
    a.reset();
}

json node_json(const std::string& name) {
    return {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
            {"status", {{"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

void add_service(ApiServerProcess& server, const std::string& name) {
    server.control(
        "upsert",
        {{"apiVersion", "v1"},
         {"kind", "Service"},
         {"metadata", {{"name", name}, {"namespace", "testns"}}},
         {"spec", {{"type", "LoadBalancer"}, {"clusterIPs", {"10.96.0.10"}}, {"externalTrafficPolicy", "Cluster"}}},
         {"status", {{"loadBalancer", {{"ingress", json::array({{{"ip", "1.1.1.1"}}})}}}}}});
    server.control(
        "upsert",
        {{"apiVersion", "discovery.k8s.io/v1"},
         {"kind", "EndpointSlice"},
         {"metadata",
          {{"name", name + "-1"}, {"namespace", "testns"}, {"labels", {{"kubernetes.io/service-name", name}}}}},
         {"addressType", "IPv4"},
         {"endpoints", json::array({{{"addresses", {"10.128.0.5"}}, {"nodeName", "node1"}}})}});
    server.control("upsert", {{"apiVersion", "k8s.ovn.org/v1"},
                              {"kind", "EgressService"},
                              {"metadata", {{"name", name}, {"namespace", "testns"}}},
                              {"spec", json::object()}});
}

TEST_F(LeaseKeeperTest, HostDeciderWritesOnlyWhileItsKeeperLeads) {
    server_->control("upsert", node_json("node1"));
    add_service(*server_, "svc1");
    auto status_host = [&] {
        json es = get("/apis/k8s.ovn.org/v1/namespaces/testns/egressservices/svc1");
        return es.is_object() && es.contains("status") ? es["status"].value("host", "<unset>") : "<unset>";
    };
    {
        // A decider whose keeper never leads (mode external) decides nothing.
        Gateway follower(*server_, "node1", ElectionMode::external, true);
        ASSERT_TRUE(eventually([&] { return holder("egw-node-node1") == "node1"; }));
        EXPECT_TRUE(
            consistently([&] { return status_host() == "<unset>" && !follower.decider->stats().deciding; }, 1500ms));
        EXPECT_EQ(follower.decider->stats().status_writes, 0u);
        EXPECT_TRUE(follower.decider->allocations().empty());
    }
    Gateway leader(*server_, "node1", ElectionMode::leader, true);
    ASSERT_TRUE(eventually([&] { return status_host() == "node1"; }));
    EXPECT_TRUE(leader.keeper->leader());
    // The decider counts its write once the answer is in: after the server has it.
    EXPECT_TRUE(eventually([&] { return leader.decider->stats().status_writes == 1; }));
    EXPECT_TRUE(leader.decider->stats().deciding);
    EXPECT_EQ(leader.decider->allocations(), (std::map<std::string, std::string>{{"testns/svc1", "node1"}}));
    auto decisions = leader.decider->decisions();
    ASSERT_EQ(decisions.count("testns/svc1"), 1u);
    EXPECT_EQ(decisions["testns/svc1"].host, "node1");
}

}  // namespace
}  // namespace egw::k8s_source
