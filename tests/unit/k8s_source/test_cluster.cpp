// SPDX-License-Identifier: Apache-2.0
//
// Two or three egw control planes (k8s_source::Controller, each as one egwd runs it) against the test
// API server (tests/apiserver/apiserver.py): OVN-Kubernetes' cluster-manager scenarios U1-U8
// (docs/kubernetes.md, "Parity scenarios"), leader failover, the renew deadline, the
// external mode, and what each gateway programs. Every test ends by checking with the server's
// request log that only leaders wrote status or labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "control/k8s_source/controller.h"
#include "control/k8s/writer.h"
#include "tests/unit/k8s/apiserver_process.h"

namespace egw::k8s_source {
namespace {

using namespace std::chrono_literals;
using k8s::testing::ApiServerProcess;
using k8s::testing::eventually;
using nlohmann::json;

constexpr const char* kToken = "cluster-t0k3n";
constexpr const char* kNs = "testns";
constexpr const char* kLeaseNs = "egw";
const std::string kPrefix = "egress-service.k8s.ovn.org/";

// Lease timings of the tests: 2 s Leases, 1.5 s renew deadline, 250 ms retries.
constexpr auto kLease = 2s;
constexpr auto kDeadline = 1500ms;
constexpr auto kRetry = 250ms;

json node_json(const std::string& name, json labels = json::object(), bool ready = true) {
    labels["kubernetes.io/hostname"] = name;
    return {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"status", {{"conditions", json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
}

json service_json(const std::string& name, const std::string& etp = "Cluster", const std::string& ip = "1.1.1.1") {
    json s = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", {{"name", name}, {"namespace", kNs}}},
              {"spec", {{"type", "LoadBalancer"}, {"clusterIPs", {"10.96.0.10"}}, {"externalTrafficPolicy", etp}}},
              {"status", {{"loadBalancer", {{"ingress", json::array()}}}}}};
    if (!ip.empty()) s["status"]["loadBalancer"]["ingress"].push_back({{"ip", ip}});
    return s;
}

// One slice "<svc>-1" with an endpoint per (ip, node); node "" leaves nodeName out.
json slice_json(const std::string& svc, const std::vector<std::pair<std::string, std::string>>& eps) {
    json endpoints = json::array();
    for (const auto& [ip, node] : eps) {
        json e = {{"addresses", {ip}}};
        if (!node.empty()) e["nodeName"] = node;
        endpoints.push_back(e);
    }
    return {{"apiVersion", "discovery.k8s.io/v1"},
            {"kind", "EndpointSlice"},
            {"metadata", {{"name", svc + "-1"}, {"namespace", kNs}, {"labels", {{"kubernetes.io/service-name", svc}}}}},
            {"addressType", "IPv4"},
            {"endpoints", endpoints}};
}

json egress_json(const std::string& name, json match_labels = json::object(), const std::string& by = "",
                 const std::optional<std::string>& host = std::nullopt) {
    json spec = json::object();
    if (!by.empty()) spec["sourceIPBy"] = by;
    if (!match_labels.empty()) spec["nodeSelector"] = {{"matchLabels", match_labels}};
    json es = {{"apiVersion", "k8s.ovn.org/v1"},
               {"kind", "EgressService"},
               {"metadata", {{"name", name}, {"namespace", kNs}}},
               {"spec", spec}};
    if (host) es["status"] = {{"host", *host}};
    return es;
}

json liveness_json(const std::string& node) {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", std::string(kLivenessLeasePrefix) + node}, {"namespace", kLeaseNs}}},
            {"spec", {{"holderIdentity", node}, {"leaseDurationSeconds", 30}, {"renewTime", now_micro_time()}}}};
}

class ClusterTest : public ::testing::Test {
protected:
    void SetUp() override { server_ = std::make_unique<ApiServerProcess>(std::vector<std::string>{"--token", kToken}); }

    void TearDown() override {
        // Only leaders write status and labels: the server saw exactly the writes the instances
        // that were leaders counted, and an instance that never led counted none.
        for (auto& [name, c] : gw_)
            c->abandon();  // nothing is in flight after this
        uint64_t status = 0, labels = 0;
        for (auto& [name, c] : gw_) {
            auto s = c->stats();
            status += s.status_writes;
            labels += s.label_writes;
            if (s.leader_transitions == 0) {
                EXPECT_EQ(s.status_writes, 0u) << name << " wrote status without being leader";
                EXPECT_EQ(s.label_writes, 0u) << name << " wrote labels without being leader";
            }
        }
        size_t status_patches = 0, node_patches = 0;
        for (const auto& r : server_->requests("patch")) {
            if (r["code"] != 200) continue;
            const std::string path = r["path"];
            if (path.find("/egressservices/") != std::string::npos && path.ends_with("/status")) ++status_patches;
            if (path.find("/api/v1/nodes/") != std::string::npos) ++node_patches;
        }
        EXPECT_EQ(status_patches, status + status_before_);
        EXPECT_EQ(node_patches, labels + labels_before_);
        gw_.clear();
    }

    ControllerOptions options(const std::string& node, ElectionMode mode = ElectionMode::leader) {
        ControllerOptions o;
        o.node_name = node;
        o.lease_namespace = kLeaseNs;
        o.election = mode;
        o.pod_cidrs = {egw::net::IpPrefix::from_v4(0x0a800000, 14)};  // 10.128.0.0/14
        if (egress_ip_options_) egress_ip_options_(node, o);
        if (egwd_timings_) return o;
        o.lease_duration = kLease;
        o.renew_deadline = kDeadline;
        o.retry_period = kRetry;
        o.write_backoff_initial = 50ms;
        o.write_backoff_max = 500ms;
        return o;
    }

    Controller& start(const std::string& node, ElectionMode mode = ElectionMode::leader) {
        k8s::Credentials creds;
        creds.server = server_->url();
        creds.token = kToken;
        creds.source = "test";
        k8s::ClientOptions co;
        if (!egwd_timings_) {
            co.reflector.backoff_initial = 50ms;
            co.reflector.backoff_max = 500ms;
        }
        co.http.user_agent = "egwd/" + node;  // the server can single one gateway out
        auto c = std::make_unique<Controller>(creds, options(node, mode), co);
        c->start();
        // A stopped instance of the same node is replaced; its counters stay in the totals.
        if (auto it = gw_.find(node); it != gw_.end()) {
            auto s = it->second->stats();
            status_before_ += s.status_writes;
            labels_before_ += s.label_writes;
            it->second->abandon();
        }
        gw_[node] = std::move(c);
        return *gw_[node];
    }

    void upsert(const json& obj) { server_->control("upsert", obj); }
    void remove(const std::string& kind, const std::string& name, const std::string& ns = kNs) {
        server_->control("delete", {{"kind", kind}, {"namespace", kind == "Node" ? "" : ns}, {"name", name}});
    }

    json get(const std::string& path) {
        auto r = server_->call("GET", path, "", "", reader_token_);
        return r.status == 200 ? r.body : json();
    }
    // status.host, or "<unset>" when there is no status (or no EgressService).
    std::string host(const std::string& name) {
        json es = get("/apis/k8s.ovn.org/v1/namespaces/testns/egressservices/" + name);
        if (!es.is_object() || !es.contains("status") || !es["status"].contains("host")) return "<unset>";
        return es["status"]["host"];
    }
    // Nodes and the egress-service labels they carry (nodes without any are left out).
    std::map<std::string, std::set<std::string>> labelled() {
        std::map<std::string, std::set<std::string>> out;
        json nodes = get("/api/v1/nodes");
        for (const auto& n : nodes["items"]) {
            const json labels = n["metadata"].value("labels", json::object());
            for (const auto& [k, v] : labels.items())
                if (k.rfind(kPrefix, 0) == 0) out[n["metadata"]["name"]].insert(k.substr(kPrefix.size()));
        }
        return out;
    }
    json node_labels(const std::string& node) { return get("/api/v1/nodes/" + node)["metadata"]["labels"]; }

    bool eventually_host(const std::string& name, const std::string& want, std::chrono::milliseconds t = 8s) {
        bool ok = eventually([&] { return host(name) == want; }, t);
        if (!ok) ADD_FAILURE() << name << ": status.host is \"" << host(name) << "\", expected \"" << want << "\"";
        return ok;
    }
    bool eventually_labels(const std::map<std::string, std::set<std::string>>& want, std::chrono::milliseconds t = 8s) {
        bool ok = eventually([&] { return labelled() == want; }, t);
        if (!ok) {
            std::string got;
            for (const auto& [n, ls] : labelled())
                for (const auto& l : ls)
                    got += n + ":" + l + " ";
            ADD_FAILURE() << "labels: " << got;
        }
        return ok;
    }
    // `cond` holds all the time for `d`.
    bool consistently(const std::function<bool()>& cond, std::chrono::milliseconds d = 1500ms) {
        auto end = std::chrono::steady_clock::now() + d;
        while (std::chrono::steady_clock::now() < end) {
            if (!cond()) return false;
            std::this_thread::sleep_for(50ms);
        }
        return true;
    }

    // Three gateways, one leading, and six Services each with a host and its node's label.
    void three_gateways_six_services() {
        for (const char* n : {"node1", "node2", "node3"})
            upsert(node_json(n));
        for (const char* n : {"node1", "node2", "node3"})
            start(n);
        ASSERT_NE(wait_ready(), nullptr);
        for (int i = 0; i < 6; ++i)
            add_service("svc" + std::to_string(i));
        ASSERT_TRUE(eventually(
            [&] {
                auto h = hosts();
                return h.size() == 6 &&
                       std::all_of(h.begin(), h.end(), [](auto& kv) { return kv.second.rfind("node", 0) == 0; });
            },
            8s));
        ASSERT_TRUE(eventually([&] {
            size_t n = 0;
            for (auto& [node, ls] : labelled())
                n += ls.size();
            return n == 6;
        }));
    }

    // Waits until some instance leads and every started instance's liveness Lease is live.
    Controller* wait_ready() {
        Controller* leader = nullptr;
        bool ok = eventually(
            [&] {
                leader = current_leader();
                if (!leader) return false;
                auto s = leader->stats();
                return s.synced && s.live_nodes >= gw_.size();
            },
            10s);
        EXPECT_TRUE(ok) << "no leader with every gateway live";
        return leader;
    }
    Controller* current_leader() {
        Controller* found = nullptr;
        int n = 0;
        for (auto& [name, c] : gw_)
            if (c->leader()) {
                found = c.get();
                ++n;
            }
        EXPECT_LE(n, 1) << "two leaders at once";
        return found;
    }
    // The ServiceState a gateway programs for `name`, after poll().
    model::ServiceState serving(Controller& c, const std::string& name) {
        std::vector<model::ServiceState> states;
        auto& mine = served_[&c];
        if (c.poll(states)) {
            mine.clear();
            for (auto& s : states)
                mine[s.key] = s;
        }
        return mine[std::string(kNs) + "/" + name];
    }

    void add_service(const std::string& name, json selector = json::object(), const std::string& ep_node = "node1",
                     const std::string& etp = "Cluster") {
        upsert(service_json(name, etp));
        upsert(slice_json(name, {{"10.128.0.5", ep_node}}));
        upsert(egress_json(name, std::move(selector)));
    }

    // status.host of every EgressService of kNs now ("" for none yet).
    std::map<std::string, std::string> hosts() {
        std::map<std::string, std::string> out;
        json list = get("/apis/k8s.ovn.org/v1/namespaces/testns/egressservices");
        for (const auto& es : list["items"])
            out[es["metadata"]["name"]] = es.contains("status") ? es["status"].value("host", "") : "";
        return out;
    }
    // Successful writes of status.host and node labels the server saw.
    std::pair<size_t, size_t> writes_seen() {
        size_t status = 0, labels = 0;
        for (const auto& r : server_->requests("patch")) {
            if (r["code"] != 200) continue;
            const std::string path = r["path"];
            if (path.ends_with("/status"))
                ++status;
            else if (path.find("/api/v1/nodes/") != std::string::npos)
                ++labels;
        }
        return {status, labels};
    }
    json lease(const std::string& name) { return get("/apis/coordination.k8s.io/v1/namespaces/egw/leases/" + name); }
    std::string holder(const std::string& name) {
        json l = lease(name);
        return l.is_object() && l.contains("spec") ? l["spec"].value("holderIdentity", "") : "";
    }

    std::unique_ptr<ApiServerProcess> server_;
    std::map<std::string, std::unique_ptr<Controller>> gw_;
    std::map<Controller*, std::map<std::string, model::ServiceState>> served_;
    uint64_t status_before_ = 0, labels_before_ = 0;
    std::string reader_token_ = kToken;  // what the test reads with (an admin's when RBAC is on)
    bool egwd_timings_ = false;          // egwd's own defaults rather than the tests' faster ones
    // Sets a node's EgressIP options (watch_egress_ips, its outside subnets and capacity).
    std::function<void(const std::string&, ControllerOptions&)> egress_ip_options_;
};

// U1 and U2: a leader that starts on a cluster keeps the valid hosts, resets stale statuses and
// strips every egress-service label it did not set.
TEST_F(ClusterTest, U1U2StartupRepairOfStaleLabelsAndStatuses) {
    upsert(node_json("node1", {{"unrelated-label", ""},
                               {kPrefix + "deleted-service1", ""},
                               {kPrefix + "deleted-service2", ""},
                               {kPrefix + "testns-svc1", ""},
                               {kPrefix + "testns-svc2", ""},
                               {kPrefix + "testns-srcip-not-by-lb-svc", ""}}));
    upsert(node_json("node2", {{"unrelated-label", ""},
                               {kPrefix + "deleted-service3", ""},
                               {kPrefix + "deleted-service4", ""},
                               {kPrefix + "testns-svc1", ""},
                               {kPrefix + "testns-svc2", ""}}));
    for (const char* s : {"svc1", "svc2", "srcip-not-by-lb-svc"}) {
        upsert(service_json(s));
        upsert(slice_json(s, {{"10.128.0.5", "node1"}}));
    }
    upsert(egress_json("svc1", json::object(), "", "node1"));
    upsert(egress_json("svc2", json::object(), "", "node2"));
    upsert(egress_json("srcip-not-by-lb-svc", json::object(), "Network", "node1"));
    upsert(egress_json("no-service", json::object(), "LoadBalancerIP", "node1"));  // U2: no Service
    upsert(egress_json("network-stale", json::object(), "Network", "node1"));      // U2: Network
    upsert(service_json("network-stale"));
    // The gateways were running until a moment ago (a restart): their Leases are still live.
    upsert(liveness_json("node1"));
    upsert(liveness_json("node2"));

    start("node1");
    start("node2");
    wait_ready();
    eventually_host("svc1", "node1");
    eventually_host("svc2", "node2");
    eventually_host("srcip-not-by-lb-svc", "ALL");
    eventually_host("no-service", "");
    eventually_host("network-stale", "ALL");
    eventually_labels({{"node1", {"testns-svc1"}}, {"node2", {"testns-svc2"}}});
    EXPECT_TRUE(node_labels("node1").contains("unrelated-label"));
    EXPECT_TRUE(node_labels("node2").contains("unrelated-label"));
    // The valid hosts were kept, not re-decided: svc1 and svc2 were never written.
    for (const auto& r : server_->requests("patch", "/egressservices/svc"))
        ADD_FAILURE() << "wrote " << r["path"];
}

// U3 and U4: spec changes move the host, and the label follows it.
TEST_F(ClusterTest, U3U4ServiceChangesAndLabelsFollowTheAllocation) {
    upsert(node_json("node1", {{"firstName", "Albus"}, {"animal", "FlyingBison"}}));
    upsert(node_json("node2", {{"firstName", "Severus"}, {"animal", "Lemur"}}));
    start("node1");
    start("node2");
    wait_ready();

    add_service("svc1", {{"firstName", "Albus"}});
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});
    upsert(egress_json("svc1", {{"firstName", "Albus"}}, "Network"));
    eventually_host("svc1", "ALL");
    eventually_labels({});

    add_service("svc2", {{"firstName", "Severus"}});
    eventually_host("svc2", "node2");
    eventually_labels({{"node2", {"testns-svc2"}}});
    upsert(egress_json("svc2", {{"firstName", "Albus"}}));
    eventually_host("svc2", "node1");
    eventually_labels({{"node1", {"testns-svc2"}}});

    // U4 with the animal selectors.
    add_service("svc3", {{"animal", "FlyingBison"}});
    eventually_host("svc3", "node1");
    upsert(egress_json("svc3", {{"animal", "Lemur"}}));
    eventually_host("svc3", "node2");
    eventually_labels({{"node1", {"testns-svc2"}}, {"node2", {"testns-svc3"}}});
    remove("EgressService", "svc3");
    remove("EgressService", "svc2");
    eventually_labels({});
}

TEST_F(ClusterTest, U5InvalidNodeSelector) {
    upsert(node_json("node1"));
    start("node1");
    start("node2");
    wait_ready();
    add_service("svc1", {{"a:b", "c&"}});
    eventually_host("svc1", "");
    EXPECT_TRUE(consistently([&] { return host("svc1") == "" && labelled().empty(); }));
}

TEST_F(ClusterTest, U6EtpLocalFollowsTheEndpoints) {
    upsert(node_json("node1", {{"square", "pants"}}));
    upsert(node_json("node2"));
    start("node1");
    start("node2");
    wait_ready();
    add_service("svc1", {{"square", "pants"}}, "node2", "Local");
    eventually_host("svc1", "");
    EXPECT_TRUE(consistently([&] { return host("svc1") == "" && labelled().empty(); }, 1s));
    upsert(slice_json("svc1", {{"10.128.0.5", "node2"}, {"10.128.0.6", "node1"}}));
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});
    upsert(slice_json("svc1", {{"10.128.0.5", "node2"}, {"10.128.0.7", ""}}));
    eventually_host("svc1", "");
    eventually_labels({});
}

TEST_F(ClusterTest, U7NodeNotReadyRelabelledScrubbedDeleted) {
    upsert(node_json("node1", {{"home", "pineapple"}}));
    upsert(node_json("node2", {{"home", "rock"}}));
    start("node1");
    start("node2");
    wait_ready();
    add_service("svc1", {{"home", "pineapple"}});
    add_service("svc2", {{"home", "moai"}});
    eventually_host("svc1", "node1");
    eventually_host("svc2", "");
    eventually_labels({{"node1", {"testns-svc1"}}});

    upsert(node_json("node1", {{"home", "pineapple"}, {kPrefix + "testns-svc1", ""}}, false));
    eventually_host("svc1", "");
    eventually_labels({});
    upsert(node_json("node2", {{"home", "moai"}}));
    eventually_host("svc2", "node2");
    eventually_labels({{"node2", {"testns-svc2"}}});

    // Labels egw did not set are removed on node events.
    upsert(node_json("node1",
                     {{"home", "pineapple"}, {kPrefix + "testns-svc2", ""}, {kPrefix + "testns-non-existing-svc", ""}},
                     false));
    upsert(node_json("node2",
                     {{"home", "moai"}, {kPrefix + "testns-svc2", ""}, {kPrefix + "testns-non-existing-svc", ""}}));
    eventually_labels({{"node2", {"testns-svc2"}}});
    remove("Node", "node2");
    eventually_host("svc2", "");
}

// U8: a gateway whose Lease runs out loses its Services; when it is back, they return.
TEST_F(ClusterTest, U8LivenessLostAndRegained) {
    upsert(node_json("node1", {{"gw", "one"}}));
    upsert(node_json("node2", {{"gw", "two"}}));
    start("node2");  // node2 leads: node1 can then die without taking the leader with it
    ASSERT_TRUE(eventually([&] { return gw_["node2"]->leader(); }, 5s));
    start("node1");
    wait_ready();
    add_service("svc1", {{"gw", "one"}});
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});

    auto t0 = std::chrono::steady_clock::now();
    gw_["node1"]->abandon();  // crash: the Lease is no longer renewed
    eventually_host("svc1", "", 6s);
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LE(took, kLease + 2s) << "failover took " << std::chrono::duration<double>(took).count() << " s";
    eventually_labels({});
    EXPECT_TRUE(eventually([&] {
        return gw_["node2"]->decisions()["testns/svc1"].reason ==
               "no eligible node (2 node(s): 1 not matching nodeSelector, 1 without a live egwd)";
    })) << gw_["node2"]->decisions()["testns/svc1"].reason;

    start("node1");
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});
}

// Leader failover: the leader crashes; another instance takes over within the Lease duration, the
// Services it hosted move, every Service has a host again, and no follower ever wrote.
TEST_F(ClusterTest, LeaderFailoverAfterACrash) {
    for (const char* n : {"node1", "node2", "node3"})
        upsert(node_json(n));
    start("node1");
    start("node2");
    start("node3");
    Controller* leader = wait_ready();
    ASSERT_NE(leader, nullptr);
    for (int i = 0; i < 6; ++i)
        add_service("svc" + std::to_string(i));
    for (int i = 0; i < 6; ++i)
        ASSERT_TRUE(eventually([&] { return host("svc" + std::to_string(i)).rfind("node", 0) == 0; }, 8s));
    std::map<std::string, int> per;
    for (int i = 0; i < 6; ++i)
        ++per[host("svc" + std::to_string(i))];
    EXPECT_EQ(per, (std::map<std::string, int>{{"node1", 2}, {"node2", 2}, {"node3", 2}}));  // free first, least loaded
    const auto before = hosts();
    auto status_patches = [&](const std::string& s) {
        return server_->requests("patch", "/egressservices/" + s + "/status").size();
    };
    std::map<std::string, size_t> patches_before;
    for (const auto& [s, h] : before)
        patches_before[s] = status_patches(s);

    const std::string old = leader->options().node_name;
    auto t0 = std::chrono::steady_clock::now();
    leader->abandon();
    Controller* next = nullptr;
    ASSERT_TRUE(eventually([&] { return (next = current_leader()) != nullptr; }, kLease + 3s));
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_NE(next->options().node_name, old);
    EXPECT_LE(took, kLease + 2 * kRetry + 500ms)
        << "takeover took " << std::chrono::duration<double>(took).count() << " s";

    // The dead leader's node loses its Services once its liveness Lease runs out.
    for (int i = 0; i < 6; ++i) {
        const std::string s = "svc" + std::to_string(i);
        ASSERT_TRUE(eventually(
            [&] {
                auto h = host(s);
                return h.rfind("node", 0) == 0 && h != old;
            },
            8s))
            << s;
    }
    EXPECT_TRUE(eventually([&] {
        auto labels = labelled();
        size_t n = 0;
        for (const auto& [node, ls] : labels)
            n += ls.size();
        return !labels.count(old) && n == 6;
    }));
    // The Services of the surviving nodes stayed where they were: the same host, and not one
    // status PATCH for them since the crash (not even one that wrote the same host again).
    size_t kept = 0;
    for (const auto& [s, h] : before) {
        if (h == old) continue;
        ++kept;
        EXPECT_EQ(host(s), h) << s;
        EXPECT_EQ(status_patches(s), patches_before[s]) << s << ": status written since the crash";
    }
    EXPECT_EQ(kept, 4u);
    EXPECT_EQ(next->stats().leader_transitions, 1u);
}

// A clean stop gives the leader Lease back: the next leader is there within a retry period.
TEST_F(ClusterTest, CleanStopHandsLeadershipOverAtOnce) {
    upsert(node_json("node1"));
    start("node1");
    start("node2");
    Controller* leader = wait_ready();
    ASSERT_NE(leader, nullptr);
    auto t0 = std::chrono::steady_clock::now();
    leader->stop();
    ASSERT_TRUE(eventually([&] { return current_leader() != nullptr; }, 3s));
    EXPECT_LE(std::chrono::steady_clock::now() - t0, 1500ms);
    json lease = get("/apis/coordination.k8s.io/v1/namespaces/egw/leases/egw-leader");
    EXPECT_EQ(lease["spec"]["holderIdentity"], current_leader()->options().node_name);
    EXPECT_GE(lease["spec"]["leaseTransitions"].get<int>(), 1);
}

// A leader that cannot renew stops deciding at its renew deadline, before anyone can take over.
TEST_F(ClusterTest, LeaderThatCannotRenewStopsDeciding) {
    upsert(node_json("node1"));
    start("node1");
    Controller* leader = wait_ready();
    ASSERT_NE(leader, nullptr);
    add_service("svc1");
    eventually_host("svc1", "node1");

    // The fault right after a renewal, so that a leader that went on until its Lease ran out
    // would lead for nearly kLease after it.
    auto version = [&] { return lease("egw-leader")["metadata"].value("resourceVersion", ""); };
    const std::string renewed = version();
    ASSERT_TRUE(eventually([&] { return version() != renewed; }, 3s));
    server_->control("faults", {{"errors", json::array({{{"count", 1000}, {"code", 500}, {"path", "egw-leader"}}})}});
    const auto fault = std::chrono::steady_clock::now();
    // The last renewal that went through started before the fault: leadership ends kDeadline after
    // it at the latest. Another instance could take over kLease after the last renewal it saw,
    // about kLease - kRetry after the fault at the earliest; the leader must be done before.
    // Each sample's time is taken before leader() reads the clock, so a late sample cannot make
    // leadership look longer than it was.
    std::chrono::steady_clock::duration led{0};
    ASSERT_TRUE(eventually(
        [&] {
            const auto at = std::chrono::steady_clock::now();
            if (!leader->leader()) return true;
            led = at - fault;
            return false;
        },
        kLease + 1s));
    EXPECT_LT(led, kLease - kRetry) << "still leading "
                                    << std::chrono::duration_cast<std::chrono::milliseconds>(led).count()
                                    << " ms after the fault";
    const uint64_t writes = leader->stats().status_writes;
    add_service("svc2");
    EXPECT_TRUE(consistently([&] { return host("svc2") == "<unset>"; }, 1s));
    EXPECT_EQ(leader->stats().status_writes, writes);

    server_->control("faults", {{"clear", true}});
    ASSERT_TRUE(eventually([&] { return leader->leader(); }, 3s));
    eventually_host("svc2", "node1");
    eventually_host("svc1", "node1");
}

// Write-backs survive API errors: a failed status PATCH is retried until it goes through.
TEST_F(ClusterTest, FailedWritesAreRetried) {
    upsert(node_json("node1"));
    start("node1");
    wait_ready();
    server_->control("faults", {{"errors", json::array({{{"count", 3}, {"code", 500}, {"verb", "patch"}}})}});
    add_service("svc1");
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});
    EXPECT_GE(gw_["node1"]->stats().write_failures, 3u);
    // A manual edit of status.host is reverted.
    json es = get("/apis/k8s.ovn.org/v1/namespaces/testns/egressservices/svc1");
    auto r = server_->call("PATCH", "/apis/k8s.ovn.org/v1/namespaces/testns/egressservices/svc1/status",
                           R"({"status":{"host":"elsewhere"}})", "application/merge-patch+json", kToken);
    ASSERT_EQ(r.status, 200);
    status_before_ += 1;  // the test's own PATCH
    eventually_host("svc1", "node1");
}

// Writes the API server forbids (RBAC without the node patch) are logged once with a hint, retried,
// and go through once the rule is granted; nothing else stops meanwhile.
TEST_F(ClusterTest, ForbiddenWritesAreLoggedOnceAndRetried) {
    k8s::testing::LogCapture log;
    // docker/k8s/rbac.yaml with the Lease namespace of these tests, and a copy without "patch" on nodes.
    std::ifstream in(k8s::testing::source_root() + "/docker/k8s/rbac.yaml");
    std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(full.empty());
    for (size_t at; (at = full.find("egw-system")) != std::string::npos;)
        full.replace(at, 10, kLeaseNs);
    std::string restricted = full;
    const std::string nodes_rule = R"(verbs: ["list", "watch", "patch"])";
    ASSERT_NE(restricted.find(nodes_rule), std::string::npos);
    restricted.replace(restricted.find(nodes_rule), nodes_rule.size(), R"(verbs: ["list", "watch"])");
    k8s::testing::TempDir dir;
    dir.write("full.yaml", full);
    dir.write("restricted.yaml", restricted);
    server_ = std::make_unique<ApiServerProcess>(std::vector<std::string>{
        "--token", kToken, "--token-user", std::string("system:serviceaccount:") + kLeaseNs + ":egwd", "--rbac",
        dir.file("restricted.yaml"), "--admin-token", "test-admin"});
    reader_token_ = "test-admin";
    upsert(node_json("node1"));
    start("node1");
    wait_ready();
    add_service("svc1");
    eventually_host("svc1", "node1");  // the status write is allowed
    ASSERT_TRUE(eventually([&] { return gw_["node1"]->stats().label_write_failures >= 3; }));
    EXPECT_EQ(log.sink().count(spdlog::level::warn, "cannot patch labels"), 1u);
    EXPECT_EQ(log.sink().count(spdlog::level::warn, "HTTP 403 Forbidden: nodes \"node1\" is forbidden: User"), 1u);
    EXPECT_EQ(log.sink().count(spdlog::level::warn, "egwd's RBAC does not allow this write"), 1u);
    EXPECT_TRUE(labelled().empty());
    server_->control("config", {{"rbac", dir.file("full.yaml")}});
    eventually_labels({{"node1", {"testns-svc1"}}});
    // The server applies the patch before egwd hears its answer and logs: wait for the line.
    EXPECT_TRUE(eventually([&] { return log.sink().count(spdlog::level::info, "labels patched again after") == 1u; }));
    EXPECT_EQ(log.sink().count(spdlog::level::info, "labels patched again after"), 1u);
    EXPECT_EQ(log.sink().count(spdlog::level::warn, "cannot patch labels"), 1u);
}

// Kubelet heartbeats (a Node's lastHeartbeatTime, every second) change nothing egw decides on: no
// decision, no pass over the labels, no write (the cache drops updates that change nothing it models).
TEST_F(ClusterTest, NodeHeartbeatsCauseNoWork) {
    upsert(node_json("node1"));
    upsert(node_json("node2"));
    Controller& g = start("node1");
    wait_ready();
    add_service("svc1");
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});
    std::this_thread::sleep_for(500ms);  // the label's own MODIFIED has been seen
    auto heartbeat = [&] {
        return get("/api/v1/nodes/node2")["status"]["conditions"][0].value("lastHeartbeatTime", "");
    };
    server_->control("config", {{"nodeHeartbeat", 1}});
    const std::string first = heartbeat();
    ASSERT_TRUE(eventually([&] { return heartbeat() != first; }, 3s));
    const auto before = g.stats();
    const std::string second = heartbeat();
    ASSERT_TRUE(eventually([&] { return heartbeat() != second; }, 3s));
    const std::string third = heartbeat();
    ASSERT_TRUE(eventually([&] { return heartbeat() != third; }, 3s));
    std::this_thread::sleep_for(300ms);
    const auto after = g.stats();
    server_->control("config", {{"nodeHeartbeat", 0}});
    EXPECT_EQ(after.decisions, before.decisions);
    EXPECT_EQ(after.label_passes, before.label_passes);
    EXPECT_EQ(after.label_writes, before.label_writes);
    EXPECT_EQ(after.status_writes, before.status_writes);
    // A change of a node's egress-service labels still makes a pass (and the stale label goes).
    server_->call("PATCH", "/api/v1/nodes/node2", R"({"metadata":{"labels":{"egress-service.k8s.ovn.org/x-y":""}}})",
                  "application/merge-patch+json", kToken);
    labels_before_ += 1;  // the test's own PATCH
    eventually_labels({{"node1", {"testns-svc1"}}});
    EXPECT_GT(g.stats().label_passes, after.label_passes);
}

// "<namespace>-<name>" longer than 63 characters makes a label key the API server refuses: the
// Service still gets its host, its host no label, the other Services on that node theirs, and the
// reason is logged once.
TEST_F(ClusterTest, ServiceWithATooLongLabelKeyIsServedUnlabelled) {
    k8s::testing::LogCapture log;
    const std::string long_name(64 - std::string(kNs).size() - 1, 'x');  // "testns-xxx...": 64 characters
    upsert(node_json("node1"));
    start("node1");
    wait_ready();
    add_service(long_name);
    add_service("svc1");
    eventually_host(long_name, "node1");
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});
    EXPECT_TRUE(consistently(
        [&] {
            return labelled() == std::map<std::string, std::set<std::string>>{{"node1", {"testns-svc1"}}};
        },
        1000ms));
    EXPECT_EQ(log.sink().count(spdlog::level::warn, "is not a valid label key"), 1u);
    EXPECT_EQ(log.sink().count(spdlog::level::warn, "cannot patch labels"), 0u);
    for (const auto& r : server_->requests("patch", "/api/v1/nodes/"))
        EXPECT_EQ(r["code"], 200) << r.dump();
}

// Every gateway programs from status.host: only the host translates; "ALL" is served everywhere.
TEST_F(ClusterTest, EachGatewayProgramsFromStatusHost) {
    upsert(node_json("node1", {{"gw", "one"}}));
    upsert(node_json("node2", {{"gw", "two"}}));
    Controller& g1 = start("node1");
    Controller& g2 = start("node2");
    wait_ready();
    add_service("svc1", {{"gw", "two"}});
    eventually_host("svc1", "node2");
    ASSERT_TRUE(eventually([&] { return serving(g2, "svc1").serve_here; }));
    EXPECT_TRUE(eventually([&] { return serving(g1, "svc1").reason == "served by node2"; }));
    EXPECT_FALSE(serving(g1, "svc1").serve_here);
    // The Service, its EndpointSlice and its EgressService come on three watches, in no order
    // among them: the host may serve it before the slice (or the Service) has reached it.
    EXPECT_TRUE(eventually([&] {
        model::ServiceState st = serving(g2, "svc1");
        return st.ingress_ipv4 == 0x01010101u && st.endpoint_ipv4s == std::vector<uint32_t>{0x0a800005};
    }));
    // The objects for the CLI follow the polls.
    ASSERT_TRUE(g2.objects().egress_services.count("testns/svc1"));
    EXPECT_EQ(g2.objects().egress_services.at("testns/svc1").node_selector.match_labels.at("gw"), "two");
    EXPECT_TRUE(g2.objects().services.count("testns/svc1"));

    // An endpoint change reaches the host's states.
    upsert(slice_json("svc1", {{"10.128.0.5", "node1"}, {"10.128.0.9", "node2"}}));
    EXPECT_TRUE(eventually([&] { return serving(g2, "svc1").endpoint_ipv4s.size() == 2; }));

    upsert(egress_json("svc1", {{"gw", "two"}}, "Network"));
    eventually_host("svc1", "ALL");
    EXPECT_TRUE(eventually([&] { return serving(g1, "svc1").serve_here && serving(g2, "svc1").serve_here; }));
    EXPECT_EQ(serving(g1, "svc1").mode, model::Mode::network);

    remove("EgressService", "svc1");
    EXPECT_TRUE(eventually([&] {
        std::vector<model::ServiceState> st;
        return g1.poll(st) && st.empty();
    }));
    EXPECT_TRUE(g1.objects().egress_services.empty());
}

// --election=external: egwd follows status.host written by someone else and writes nothing.
TEST_F(ClusterTest, ExternalModeOnlyFollows) {
    upsert(node_json("node1"));
    Controller& g = start("node1", ElectionMode::external);
    ASSERT_TRUE(eventually([&] { return g.stats().synced && g.stats().lease_renewals > 0; }));
    add_service("svc1");
    EXPECT_TRUE(consistently([&] { return host("svc1") == "<unset>" && labelled().empty(); }, 1s));
    EXPECT_FALSE(g.leader());
    EXPECT_FALSE(serving(g, "svc1").serve_here);
    upsert(egress_json("svc1", json::object(), "", "node1"));
    EXPECT_TRUE(eventually([&] { return serving(g, "svc1").serve_here; }));
    upsert(egress_json("svc1", json::object(), "", "node7"));
    EXPECT_TRUE(eventually([&] { return serving(g, "svc1").reason == "served by node7"; }));
    EXPECT_TRUE(server_->requests("get", "egw-leader").empty());  // no election at all
    // The liveness Lease is still kept.
    json lease = get("/apis/coordination.k8s.io/v1/namespaces/egw/leases/egw-node-node1");
    EXPECT_EQ(lease["spec"]["holderIdentity"], "node1");
}

json egress_ip_json(const std::string& name, const std::vector<std::string>& ips) {
    return {{"apiVersion", "k8s.ovn.org/v1"},
            {"kind", "EgressIP"},
            {"metadata", {{"name", name}}},
            {"spec", {{"egressIPs", ips}, {"namespaceSelector", {{"matchLabels", {{"egress", "yes"}}}}}}}};
}

// The leader's EgressIP assignment with two whole control planes: the facts each publishes on its
// Lease (subnet, node1's capacity of one), fewest first, capacity, stickiness, a crashed node's
// addresses left unassigned when the other is full, and each gateway's own addresses.
TEST_F(ClusterTest, EgressIPAssignmentFollowsCapacityAndLiveness) {
    egress_ip_options_ = [](const std::string& node, ControllerOptions& o) {
        o.watch_egress_ips = true;
        o.outside_prefixes = {*net::parse_prefix("192.0.2.1/24")};
        if (node == "node1") o.egress_ip_capacity = 1;
    };
    for (const char* n : {"node1", "node2"})
        upsert(node_json(n, {{kEgressAssignableLabel, ""}}));
    for (const char* name : {"eip-a", "eip-b", "eip-c"})
        upsert(egress_ip_json(name, {std::string("192.0.2.1") + static_cast<char>('0' + (name[4] - 'a'))}));
    start("node1");
    start("node2");
    ASSERT_NE(wait_ready(), nullptr);
    auto items = [&] {
        std::map<std::string, std::string> out;  // EgressIP -> node
        for (const char* name : {"eip-a", "eip-b", "eip-c"}) {
            json e = get(std::string("/apis/k8s.ovn.org/v1/egressips/") + name);
            if (!e.is_object() || !e.contains("status")) continue;
            for (const auto& it : e["status"]["items"])
                out[name] = it["node"];
        }
        return out;
    };
    // Both empty: eip-a to node1 (the tie goes to the name that sorts first), then node2 has the
    // fewest, and node1 is full.
    const std::map<std::string, std::string> want = {{"eip-a", "node1"}, {"eip-b", "node2"}, {"eip-c", "node2"}};
    ASSERT_TRUE(eventually([&] { return items() == want; }, 8s)) << items().size();
    EXPECT_TRUE(consistently([&] { return items() == want; }));
    EXPECT_TRUE(eventually([&] {
        return gw_["node1"]->assigned_egress_ips() ==
                   std::vector<AssignedEgressIP>{{"eip-a", *net::parse_ip("192.0.2.10")}} &&
               gw_["node2"]->assigned_egress_ips().size() == 2;
    }));
    // node2 crashes: node1 is full, so its addresses are unassigned, not guessed; eip-a stays.
    gw_["node2"]->abandon();
    const std::map<std::string, std::string> after = {{"eip-a", "node1"}};
    ASSERT_TRUE(eventually([&] { return items() == after; }, 10s)) << items().size();
    EXPECT_TRUE(consistently([&] { return items() == after; }));
    const EgressIPLeader* leader = gw_["node1"]->egress_ip_leader();
    ASSERT_NE(leader, nullptr);
    EXPECT_TRUE(eventually([&] { return leader->stats().unhostable.size() == 2; }));
    for (const auto& u : leader->stats().unhostable)
        EXPECT_EQ(u.reason, "every node that could host it is at capacity") << u.egress_ip;
}

// A leader Lease with fields of the wrong type (someone else's, or hand-edited) is taken over
// once it cannot be live, without taking the instance down.
TEST_F(ClusterTest, MalformedLeaderLeaseIsTakenOver) {
    upsert({{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", "egw-leader"}, {"namespace", kLeaseNs}, {"labels", "not-a-map"}}},
            {"spec",
             {{"holderIdentity", "ghost"},
              {"leaseDurationSeconds", "15"},
              {"renewTime", "yesterday"},
              {"leaseTransitions", "many"}}}});
    upsert(node_json("node1"));
    Controller& g = start("node1");
    ASSERT_TRUE(eventually([&] { return g.leader(); }, 5s));
    json lease = get("/apis/coordination.k8s.io/v1/namespaces/egw/leases/egw-leader");
    EXPECT_EQ(lease["spec"]["holderIdentity"], "node1");
    EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
    EXPECT_EQ(lease["metadata"]["labels"]["app.kubernetes.io/name"], "egw");
}

// poll() with a delta reports every EgressService the first time and then only what changed, so
// that the daemon's cost per change does not grow with the number of EgressServices.
TEST_F(ClusterTest, PollWithADeltaReportsOnlyWhatChanged) {
    upsert(node_json("node1"));
    add_service("svc1");
    add_service("svc2");
    add_service("svc3");
    Controller& g = start("node1", ElectionMode::external);
    std::map<std::string, model::ServiceState> states;
    std::vector<model::ServiceDelta> deltas;
    auto drain = [&] {
        model::ServiceDelta d;
        if (!g.poll(d)) return;
        EXPECT_FALSE(d.empty());
        EXPECT_TRUE(std::is_sorted(d.changed.begin(), d.changed.end(),
                                   [](const auto& a, const auto& b) { return a.key < b.key; }));
        for (const auto& s : d.changed)
            states[s.key] = s;
        for (const auto& k : d.removed)
            EXPECT_EQ(states.erase(k), 1u) << k;
        deltas.push_back(std::move(d));
    };
    ASSERT_TRUE(eventually([&] {
        drain();
        return states.size() == 3;
    }));
    EXPECT_EQ(deltas.front().changed.size(), 3u);

    deltas.clear();
    upsert(slice_json("svc1", {{"10.128.0.5", "node1"}, {"10.128.0.9", "node2"}}));
    ASSERT_TRUE(eventually([&] {
        drain();
        return states.at("testns/svc1").endpoint_ipv4s.size() == 2;
    }));
    for (const auto& d : deltas) {
        EXPECT_TRUE(d.removed.empty());
        for (const auto& s : d.changed)
            EXPECT_EQ(s.key, "testns/svc1");
    }

    deltas.clear();
    remove("EgressService", "svc2");
    ASSERT_TRUE(eventually([&] {
        drain();
        return !states.count("testns/svc2");
    }));
    for (const auto& d : deltas) {
        EXPECT_TRUE(d.changed.empty());
        EXPECT_EQ(d.removed, std::vector<std::string>{"testns/svc2"});
    }

    // Nothing new: nothing reported. And the list version agrees with the deltas added up.
    model::ServiceDelta none;
    EXPECT_TRUE(consistently([&] { return !g.poll(none) && none.empty(); }, 500ms));
    upsert(slice_json("svc3", {{"10.128.0.7", "node1"}}));
    std::vector<model::ServiceState> all;
    ASSERT_TRUE(eventually([&] { return g.poll(all); }));
    states["testns/svc3"].endpoint_ipv4s = {0x0a800007};
    std::vector<model::ServiceState> summed;
    for (const auto& [k, s] : states)
        summed.push_back(s);
    EXPECT_EQ(all, summed);
}

// poll() reports nothing before every kind has been listed once.
TEST_F(ClusterTest, NothingIsProgrammedBeforeEveryKindSynced) {
    server_->control(
        "faults",
        {{"errors", json::array({{{"count", 1000}, {"code", 500}, {"path", "/endpointslices"}, {"verb", "list"}}})}});
    upsert(node_json("node1"));
    add_service("svc1");
    Controller& g = start("node1");
    std::vector<model::ServiceState> st;
    EXPECT_TRUE(consistently([&] { return !g.poll(st); }, 1s));
    EXPECT_FALSE(g.stats().synced);
    server_->control("faults", {{"clear", true}});
    ASSERT_TRUE(eventually([&] { return g.poll(st); }, 5s));
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0].key, "testns/svc1");
}

// ---- Under faults (issue 14) ----------------------------------------------------------------

// An API server outage longer than the Lease duration, every gateway alive all along: when the
// server is back, no Service loses its host and none moves. The Leases' renewTimes are all older
// than their duration by then; a leader that judged them by the clock would clear every host.
TEST_F(ClusterTest, OutageLongerThanTheLeaseMovesNothing) {
    ASSERT_NO_FATAL_FAILURE(three_gateways_six_services());
    const auto before = hosts();
    const auto labels_before = labelled();
    const auto writes_before = writes_seen();

    server_->control("disrupt", {{"outage", 4}});  // twice the Lease duration
    std::this_thread::sleep_for(4s);
    // Hold it over twice the Lease duration after the outage: the time a wrong verdict would take.
    EXPECT_TRUE(consistently([&] { return hosts() == before; }, 2 * kLease + 1s)) << "a Service moved";
    EXPECT_EQ(labelled(), labels_before);
    EXPECT_EQ(writes_seen(), writes_before) << "status or labels written after the outage";
    Controller* leader = wait_ready();
    ASSERT_NE(leader, nullptr);
    EXPECT_TRUE(leader->stats().deciding);
    EXPECT_EQ(leader->stats().live_nodes, 3u);
    // Followers see the same live gateways as the leader.
    for (auto& [name, c] : gw_)
        EXPECT_EQ(c->stats().live_nodes, 3u) << name;
}

// Lease updates refused (403) for longer than the Lease duration, then allowed again: the same.
TEST_F(ClusterTest, LeaseUpdatesForbiddenThenRestoredMovesNothing) {
    ASSERT_NO_FATAL_FAILURE(three_gateways_six_services());
    const auto before = hosts();
    const auto writes_before = writes_seen();

    server_->control(
        "disrupt", {{"forbid", json::array({{{"verbs", {"update", "create"}}, {"path", "/leases"}, {"seconds", 5}}})}});
    EXPECT_TRUE(consistently([&] { return hosts() == before; }, 5s + 2 * kLease + 1s)) << "a Service moved";
    size_t refused = 0;
    for (const auto& r : server_->requests("update", "/leases/"))
        refused += r["code"] == 403;
    EXPECT_GT(refused, 0u) << "the Lease updates were not refused";
    EXPECT_EQ(writes_seen(), writes_before) << "status or labels written";
    Controller* leader = wait_ready();
    ASSERT_NE(leader, nullptr);
    EXPECT_EQ(leader->stats().live_nodes, 3u);
}

// The leader's EgressService watch is stale (its events are held back) while the host it cleared
// becomes eligible again: the status is still written before the label, although the cache says
// the old host. Checked on the server's history, revision by revision.
TEST_F(ClusterTest, StaleEgressServiceCacheKeepsStatusBeforeLabel) {
    upsert(node_json("node1", {{"gw", "one"}}));
    upsert(node_json("node2", {{"gw", "two"}}));
    start("node2");
    ASSERT_TRUE(eventually([&] { return gw_["node2"]->leader(); }, 5s));
    start("node1");
    wait_ready();
    add_service("svc1", {{"gw", "one"}});
    eventually_host("svc1", "node1");
    eventually_labels({{"node1", {"testns-svc1"}}});

    server_->control("disrupt", {{"hold", json::array({{{"path", "/egressservices"}, {"seconds", 6}}})}});
    upsert(node_json("node1", {{"gw", "one"}, {kPrefix + "testns-svc1", ""}}, false));  // NotReady
    ASSERT_TRUE(eventually_host("svc1", "", 3s));
    eventually_labels({}, 3s);
    upsert(node_json("node1", {{"gw", "one"}}, true));  // Ready again; the cache still says node1
    // Well before the watch delivers anything: the leader does not wait for its cache.
    EXPECT_TRUE(eventually_host("svc1", "node1", 3s));
    eventually_labels({{"node1", {"testns-svc1"}}}, 3s);

    // Every revision: a node that gains svc1's label is what status.host says at that moment.
    std::string status;
    std::map<std::string, bool> had;
    size_t gained = 0;
    const json history = server_->control_get("history")["history"];
    for (const auto& ev : history) {
        const json& o = ev["object"];
        if (ev["kind"] == "EgressService" && ev["name"] == "svc1")
            status = o.contains("status") ? o["status"].value("host", "") : "";
        if (ev["kind"] != "Node") continue;
        const std::string node = ev["name"];
        const bool has =
            ev["type"] != "DELETED" && o["metadata"].value("labels", json::object()).contains(kPrefix + "testns-svc1");
        if (has && !had[node]) {
            ++gained;
            EXPECT_EQ(status, node) << "label on " << node << " at resourceVersion " << ev["resourceVersion"]
                                    << " while status.host is \"" << status << "\"";
        }
        had[node] = has;
    }
    EXPECT_GE(gained, 2u);
}

// A gateway that cannot list EndpointSlices (RBAC) cannot serve: it neither holds its liveness
// Lease nor leads, and it is never elected host; once allowed, it is live again.
TEST_F(ClusterTest, GatewayThatCannotListEndpointSlicesIsNotElected) {
    server_->control(
        "disrupt",
        {{"forbid",
          json::array({{{"verbs", {"list", "watch"}}, {"path", "/endpointslices"}, {"userAgent", "egwd/node1"}}})}});
    upsert(node_json("node1"));
    upsert(node_json("node2"));
    Controller& g1 = start("node1");  // first by name and started first: it would win every tie
    // The reason names the kind, the server's refusal and the RBAC hint.
    ASSERT_TRUE(eventually(
        [&] {
            const std::string p = g1.serving_problems();
            return p.find("endpointslices: not listed yet") != std::string::npos &&
                   p.find("forbidden") != std::string::npos && p.find("RBAC") != std::string::npos;
        },
        5s))
        << g1.serving_problems();
    Controller& g2 = start("node2");
    ASSERT_TRUE(eventually([&] { return g2.leader() && g2.stats().live_nodes == 1; }, 5s));
    add_service("svc1");
    eventually_host("svc1", "node2");
    EXPECT_TRUE(
        consistently([&] { return host("svc1") == "node2" && !g1.leader() && holder("egw-node-node1").empty(); }, 2s));
    EXPECT_FALSE(g1.stats().not_serving.empty());

    server_->control("disrupt", {{"clear", true}});
    ASSERT_TRUE(eventually([&] { return holder("egw-node-node1") == "node1"; }, 5s));
    EXPECT_TRUE(eventually([&] { return g2.stats().live_nodes == 2 && g1.stats().live_nodes == 2; }));
    EXPECT_EQ(g1.serving_problems(), "");
    EXPECT_TRUE(consistently([&] { return host("svc1") == "node2"; }, 1s));  // hosts are sticky
}

// The data plane stops serving (a port without link, a stuck worker): the liveness Lease is given
// up within a renew interval, the Service moves; when it serves again, the Lease is taken back.
TEST_F(ClusterTest, NotServingGivesTheLivenessLeaseUp) {
    upsert(node_json("node1", {{"gw", "yes"}}));
    upsert(node_json("node2", {{"gw", "yes"}}));
    upsert(node_json("node3"));
    start("node3");  // the leader, hosting nothing (no gw label)
    ASSERT_TRUE(eventually([&] { return gw_["node3"]->leader(); }, 5s));
    std::atomic<bool> link{true};
    Controller& g1 = start("node1");
    g1.set_serving_check([&link] { return link ? std::string() : std::string("port ext1: link down"); });
    start("node2");
    wait_ready();
    add_service("svc1", {{"gw", "yes"}});
    eventually_host("svc1", "node1");

    auto t0 = std::chrono::steady_clock::now();
    link = false;
    ASSERT_TRUE(eventually([&] { return holder("egw-node-node1").empty(); }, kRetry + 1s));
    ASSERT_TRUE(eventually_host("svc1", "node2", 3s));
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LE(took, kRetry + 1s) << "moved after " << std::chrono::duration<double>(took).count() << " s";
    EXPECT_EQ(g1.stats().not_serving, "port ext1: link down");
    eventually_labels({{"node2", {"testns-svc1"}}});
    // Given up for as long as the link is down: six retry periods, six rounds that must not take
    // it back, and the Service stays where it went.
    EXPECT_TRUE(consistently([&] { return holder("egw-node-node1").empty() && host("svc1") == "node2"; }, 6 * kRetry))
        << "egw-node-node1 held by \"" << holder("egw-node-node1") << "\", svc1 on \"" << host("svc1")
        << "\" while the link is down";

    link = true;
    ASSERT_TRUE(eventually([&] { return holder("egw-node-node1") == "node1"; }, kRetry + 1s));
    EXPECT_TRUE(eventually([&] { return gw_["node3"]->stats().live_nodes == 3; }));
    EXPECT_TRUE(g1.stats().not_serving.empty());
}

// A gateway that stops cleanly (SIGTERM) gives its liveness Lease up: its Services move at once.
TEST_F(ClusterTest, CleanStopMovesServicesAtOnce) {
    upsert(node_json("node1", {{"gw", "yes"}}));
    upsert(node_json("node2", {{"gw", "yes"}}));
    upsert(node_json("node3"));
    start("node3");
    ASSERT_TRUE(eventually([&] { return gw_["node3"]->leader(); }, 5s));
    start("node1");
    start("node2");
    wait_ready();
    add_service("svc1", {{"gw", "yes"}});
    eventually_host("svc1", "node1");
    auto t0 = std::chrono::steady_clock::now();
    gw_["node1"]->stop();
    ASSERT_TRUE(eventually_host("svc1", "node2", 3s));
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, 1s) << "moved after " << std::chrono::duration<double>(took).count() << " s";
    EXPECT_EQ(lease("egw-node-node1")["spec"]["leaseDurationSeconds"], 1);
    EXPECT_EQ(holder("egw-node-node1"), "");
}

// After an outage the reflectors do not sit out their backoff: the first answer the server gives
// (a Lease renewal) ends it, and every watch is back within a retry period or so, although their
// delays had grown to seconds.
TEST_F(ClusterTest, BackoffEndsWhenTheServerAnswersAgain) {
    upsert(node_json("node1"));
    k8s::Credentials creds;
    creds.server = server_->url();
    creds.token = kToken;
    creds.source = "test";
    k8s::ClientOptions co;
    co.reflector.backoff_initial = 1000ms;  // 1, 2, 4, 8 s (+50 %): the retry after 10 s comes at 15 s or later
    co.reflector.backoff_max = 30s;
    gw_["node1"] = std::make_unique<Controller>(creds, options("node1"), co);
    Controller& g = *gw_["node1"];
    g.start();
    // One reflector per kind (EgressServices, Services, EndpointSlices, Nodes, Leases): without
    // them, all_watching() and the check of their failures below would hold for nothing.
    ASSERT_EQ(g.client().status().size(), 5u);
    auto all_watching = [&] {
        for (const auto& r : g.client().status())
            if (!r.watching) return false;
        return true;
    };
    ASSERT_TRUE(eventually([&] { return g.leader() && all_watching(); }, 5s));

    server_->control("disrupt", {{"outage", 10}});
    std::this_thread::sleep_for(10s);
    auto back = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually(all_watching, 10s));
    auto took = std::chrono::steady_clock::now() - back;
    EXPECT_LT(took, 2s) << "the watches came back " << std::chrono::duration<double>(took).count()
                        << " s after the server";
    const auto reflectors = g.client().status();
    ASSERT_EQ(reflectors.size(), 5u);
    for (const auto& r : reflectors)
        EXPECT_GE(r.failures, 2u) << r.name;  // they did back off
}

// ---- API server restarts and refusals, with egwd's own timings (issue 41) ---------------------
//
// What a real kube-apiserver did to three gateways with egwd's defaults (2 s Leases, 1.5 s renew
// deadline, 0.5 s retries, reflector backoff from 250 ms to 30 s): each test drives one fault and
// checks on the server's history, revision by revision, that over the whole fault and a settle
// period after it no Service moved, no label changed and no Lease was given up, then that the
// leader decides again on fresh state with every gateway live and every host kept.
class ClusterFaultTest : public ClusterTest {
protected:
    static constexpr auto kSettle = 2 * 2s + 2s;  // twice egwd's Lease duration, and some

    void SetUp() override {
        // The test reads as an admin: a restarting server refuses everyone else for a while. No
        // periodic bookmarks: a quiet resource sends nothing on its watch, as on a real server.
        server_ = std::make_unique<ApiServerProcess>(
            std::vector<std::string>{"--token", kToken, "--admin-token", "test-admin", "--bookmark-interval", "0"});
        reader_token_ = "test-admin";
        egwd_timings_ = true;
    }

    // Three gateways and four Services, each with its host and label; returns the leader.
    Controller* three_gateways_four_services() {
        for (const char* n : {"node1", "node2", "node3"})
            upsert(node_json(n));
        for (const char* n : {"node1", "node2", "node3"})
            start(n);
        Controller* leader = wait_ready();
        if (!leader) return nullptr;
        for (int i = 0; i < 4; ++i)
            add_service("svc" + std::to_string(i));
        bool placed = eventually(
            [&] {
                auto h = hosts();
                if (h.size() != 4) return false;
                for (const auto& [k, v] : h)
                    if (v.rfind("node", 0) != 0) return false;
                size_t n = 0;
                for (auto& [node, ls] : labelled())
                    n += ls.size();
                return n == 4;
            },
            10s);
        EXPECT_TRUE(placed) << "the four Services were not placed";
        // Every gateway serving and renewing before the fault.
        EXPECT_TRUE(eventually([&] {
            for (auto& [name, c] : gw_)
                if (!c->stats().not_serving.empty() || c->stats().live_nodes != 3) return false;
            return true;
        }));
        return placed ? current_leader() : nullptr;
    }

    long revision() { return std::stol(server_->control_get("state")["resourceVersion"].get<std::string>()); }

    // Everything in the server's history after revision `from` that moved a Service or gave a
    // Lease up: an EgressService written, a Node's labels patched, a Lease left without holder.
    std::vector<std::string> moves_since(long from) {
        std::vector<std::string> out;
        const json history = server_->control_get("history")["history"];
        for (const auto& ev : history) {
            if (std::stol(ev["resourceVersion"].get<std::string>()) <= from) continue;
            const std::string at = " at resourceVersion " + ev["resourceVersion"].get<std::string>();
            const json& o = ev["object"];
            const std::string name = ev["name"];
            if (ev["kind"] == "EgressService") {
                out.push_back("status.host of " + name + " -> \"" +
                              (o.contains("status") ? o["status"].value("host", "") : std::string()) + "\"" + at);
            } else if (ev["kind"] == "Node") {
                out.push_back("node " + name + " relabelled" + at);
            } else if (ev["kind"] == "Lease") {
                const std::string holder = o.contains("spec") ? o["spec"].value("holderIdentity", "") : "";
                if (holder.empty()) out.push_back("Lease " + name + " given up" + at);
            }
        }
        return out;
    }

    static std::string joined(const std::vector<std::string>& lines) {
        std::string out;
        for (const auto& l : lines)
            out += "\n  " + l;
        return out;
    }

    // After the fault: a leader deciding on fresh state, every gateway live to every gateway and
    // serving, every host kept (the restore found all four valid).
    void expect_recovered_with_every_host_kept() {
        Controller* leader = nullptr;
        const bool ok = eventually(
            [&] {
                leader = current_leader();
                if (!leader) return false;
                auto s = leader->stats();
                if (!s.deciding || s.allocations != 4) return false;
                for (auto& [name, c] : gw_)
                    if (!c->stats().not_serving.empty() || c->stats().live_nodes != 3) return false;
                return true;
            },
            10s);
        EXPECT_TRUE(ok) << "no leader deciding with four hosts kept and three live gateways";
        for (auto& [name, c] : gw_)
            EXPECT_EQ(c->stats().not_serving, "") << name;
    }

    // Samples every gateway's reflectors every 50 ms for `d`: none may say watching and failing at
    // once, and no gateway may stop serving.
    void watch_status_for(std::chrono::milliseconds d, std::vector<std::string>& faults) {
        const auto end = std::chrono::steady_clock::now() + d;
        while (std::chrono::steady_clock::now() < end) {
            for (auto& [name, c] : gw_) {
                for (const auto& r : c->client().status())
                    if (r.watching && r.failing && faults.size() < 20)
                        faults.push_back(name + ": " + r.name + " watching and failing (" + r.last_error + ")");
                const std::string why = c->stats().not_serving;
                if (!why.empty() && faults.size() < 20) faults.push_back(name + " not serving: " + why);
            }
            std::this_thread::sleep_for(50ms);
        }
    }

    // Over `d` no reflector watching and failing at once and no gateway not serving
    // (watch_status_for), and no Service moved since revision `from`.
    void expect_serving_and_unmoved_for(std::chrono::milliseconds d, long from) {
        std::vector<std::string> faults;
        watch_status_for(d, faults);
        EXPECT_TRUE(faults.empty()) << joined(faults);
        const auto moves = moves_since(from);
        EXPECT_TRUE(moves.empty()) << joined(moves);
    }

    size_t refused_requests() {
        size_t n = 0;
        const json log = server_->control_get("requests");
        for (const auto& r : log["requests"])
            n += r["code"] == 403;
        return n;
    }
};

// A restart: the server is away for a second, then answers 403 for 2 s (RBAC informers not yet
// filled), then allows everything. Nobody stops serving, nothing moves.
TEST_F(ClusterFaultTest, ApiServerRestartRefusingForTwoSecondsMovesNothing) {
    Controller* leader = three_gateways_four_services();
    ASSERT_NE(leader, nullptr);
    const long from = revision();
    const uint64_t pauses = leader->stats().pauses;

    server_->control("disrupt", {{"outage", 1}, {"warmUp", 2}});
    expect_serving_and_unmoved_for(3s + kSettle, from);
    EXPECT_GT(refused_requests(), 0u) << "the warm-up refused nothing";
    expect_recovered_with_every_host_kept();
    // The leader paused for the outage and decided again from the API's state.
    if (Controller* now = current_leader(); now == leader) {
        EXPECT_GT(now->stats().pauses, pauses);
    }
}

// After a restart every resource is quiet: no event, no bookmark. A watch reopened with 200 is
// enough: within a retry of the warm-up's end every reflector is watching and none failing.
TEST_F(ClusterFaultTest, QuietWatchesAfterARestartAreHealthyOnceOpen) {
    ASSERT_NE(three_gateways_four_services(), nullptr);
    const long from = revision();
    server_->control("disrupt", {{"outage", 1}, {"warmUp", 2}});
    std::this_thread::sleep_for(3s);  // the end of the warm-up
    // A refused reflector retries at least every refusal_grace / 4 (1.25 s, +50 % while it is
    // below); 5 s covers that on a loaded machine.
    bool all_healthy = eventually(
        [&] {
            for (auto& [name, c] : gw_)
                for (const auto& r : c->client().status())
                    if (!r.watching || r.failing) return false;
            return true;
        },
        5s);
    std::string states;
    for (auto& [name, c] : gw_)
        for (const auto& r : c->client().status())
            states += "\n  " + name + " " + r.name + (r.watching ? " watching" : "") + (r.failing ? " failing" : "") +
                      " " + r.last_error;
    EXPECT_TRUE(all_healthy) << states;
    expect_serving_and_unmoved_for(kSettle, from);
    expect_recovered_with_every_host_kept();
}

// 20 s without an API server, then its restart (2 s of 403s): every Lease is ten durations old by
// then; every gateway that was live before keeps its Services.
TEST_F(ClusterFaultTest, TwentySecondOutageThenRestartMovesNothing) {
    ASSERT_NE(three_gateways_four_services(), nullptr);
    const long from = revision();
    server_->control("disrupt", {{"outage", 20}, {"warmUp", 2}});
    std::this_thread::sleep_for(20s);
    expect_serving_and_unmoved_for(2s + kSettle, from);
    expect_recovered_with_every_host_kept();
}

// Lease writes refused (403) for 15 s while everything else is allowed (an RBAC change, an
// admission webhook): nobody can renew, so nobody's Lease is evidence; nothing moves.
TEST_F(ClusterFaultTest, LeaseUpdatesRefusedForFifteenSecondsMovesNothing) {
    ASSERT_NE(three_gateways_four_services(), nullptr);
    const long from = revision();
    server_->control(
        "disrupt",
        {{"forbid", json::array({{{"verbs", {"update", "create"}}, {"path", "/leases"}, {"seconds", 15}}})}});
    expect_serving_and_unmoved_for(15s + kSettle, from);
    size_t refused = 0;
    for (const auto& r : server_->requests("update", "/leases/"))
        refused += r["code"] == 403;
    EXPECT_GT(refused, 0u) << "the Lease updates were not refused";
    expect_recovered_with_every_host_kept();
}

// The refusal reaches one gateway first (API priority and fairness shedding its requests), the
// leader a second later: the follower's Lease runs out on the leader's clock while the leader is
// still within its renew deadline. With no write of its own accepted since the follower's Lease
// ran out, the leader judges no Lease expired.
TEST_F(ClusterFaultTest, LeaderWhoseOwnLeaseWritesFailJudgesNoLeaseExpired) {
    Controller* leader = three_gateways_four_services();
    ASSERT_NE(leader, nullptr);
    std::string follower;
    for (const auto& [node, host] : hosts())
        if (host != leader->options().node_name) follower = host;
    ASSERT_FALSE(follower.empty()) << "every Service on the leader";
    const long from = revision();
    server_->control(
        "disrupt",
        {{"forbid",
          json::array({{{"verbs", {"update", "create"}}, {"path", "/leases"}, {"userAgent", "egwd/" + follower}}})}});
    // The follower's last renewal was at most a retry period (0.5 s) before; its Lease runs out
    // 1.5-2 s from now, the leader's renew deadline 2-2.5 s from now.
    std::this_thread::sleep_for(1s);
    server_->control("disrupt", {{"forbid", json::array({{{"verbs", {"update", "create"}}, {"path", "/leases"}}})}});
    std::this_thread::sleep_for(4s);  // the leader's deadline and the follower's Lease are long past
    server_->control("disrupt", {{"clear", true}});
    expect_serving_and_unmoved_for(kSettle, from);
    expect_recovered_with_every_host_kept();
}

}  // namespace
}  // namespace egw::k8s_source
