// SPDX-License-Identifier: Apache-2.0
//
// config/reload.h: which differences a reload may apply while egwd runs, which need a restart,
// and that applying the live ones leaves nothing else different.
#include "config/reload.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using namespace egw::config;
using json = nlohmann::json;

json base(const std::string& source = "files") {
    json j = json::parse(R"({
      "eal": {"vdevs": ["net_tap0", "net_tap1", "net_tap2"]},
      "workers": [1],
      "ports": [
        {"name": "in", "device": "net_tap0", "role": "inside", "addresses": ["10.244.1.1/24"]},
        {"name": "out", "device": "net_tap1", "role": "outside", "addresses": ["192.0.2.1/24"]},
        {"name": "blue1", "device": "net_tap2", "role": "outside", "vrf": "blue", "addresses": ["198.51.100.1/24"]}
      ],
      "vrfs": [{"name": "blue", "table": 100}],
      "routes": [{"prefix": "0.0.0.0/0", "via": "192.0.2.254", "port": "out"}],
      "neighbors": [{"port": "out", "ip": "192.0.2.254", "mac": "02:00:00:00:00:fe"}],
      "cluster": {"pod_cidrs": ["10.244.0.0/16"], "service_cidrs": ["10.96.0.0/12"]},
      "node": {"name": "gw-1", "labels": {"egw.example.com/gateway": "true"}},
      "state": {"source": "files", "path": "/manifests"}
    })");
    if (source == "kubernetes") j["state"] = {{"source", "kubernetes"}, {"kubeconfig", "/kubeconfig"}};
    return j;
}

Config load(const json& j) {
    return load_text(j.dump(), "/etc/egw/egw.json");
}

TEST(Reload, TheSameFileChangesNothing) {
    auto c = compare_for_reload(load(base()), load(base()));
    EXPECT_TRUE(c.empty());
}

TEST(Reload, RoutesNeighboursDefaultActionAndArpTimersAreLive) {
    json j = base();
    j["routes"].push_back(
        {{"vrf", "blue"}, {"prefix", "203.0.113.0/24"}, {"via", "198.51.100.254"}, {"port", "blue1"}});
    j["neighbors"][0]["mac"] = "02:00:00:00:00:fd";
    j["default_action"] = "drop";
    j["arp"] = {{"retry_ms", 500},     {"reachable_s", 60},           {"hold_packets", 64},
                {"announce_count", 5}, {"announce_interval_ms", 200}, {"probes", 4},
                {"unused_s", 120}};
    j["cluster"]["node_ips"] = {"10.0.0.5"};
    j["ingress"] = {{"via", "10.244.1.2"}, {"port", "in"}};
    auto c = compare_for_reload(load(base()), load(j));
    EXPECT_EQ(c.restart, std::vector<std::string>{});
    EXPECT_EQ(c.live, (std::vector<std::string>{"arp.announce_count", "arp.announce_interval_ms", "arp.hold_packets",
                                                "arp.probes", "arp.reachable_s", "arp.retry_ms", "arp.unused_s",
                                                "cluster.node_ips", "default_action", "ingress", "neighbors[0].mac",
                                                "routes"}));
    // Moved, and taken away: live too.
    json k = j;
    k["ingress"]["via"] = "10.244.1.3";
    EXPECT_EQ(compare_for_reload(load(j), load(k)).live, std::vector<std::string>{"ingress.via"});
    json l = j;
    l.erase("ingress");
    EXPECT_EQ(compare_for_reload(load(j), load(l)).live, std::vector<std::string>{"ingress"});
}

TEST(Reload, EverythingReadAtStartNeedsARestartAndIsNamed) {
    json j = base();
    j["ports"][1]["mtu"] = 9000;
    j["sessions"] = {{"timeouts", {{"udp", 30}}}};
    j["vrfs"].push_back({{"name", "red"}, {"table", 200}});
    j["workers"] = {1, 2};
    j["eal"]["lcores"] = "0-2";
    j["mempool"] = {{"mbufs", 4095}};
    j["node"]["name"] = "gw-2";
    j["metrics"] = {{"listen", "127.0.0.1:9470"}};
    j["routes"][0]["via"] = "192.0.2.253";  // live, but reported beside the others
    auto c = compare_for_reload(load(base()), load(j));
    EXPECT_EQ(c.restart,
              (std::vector<std::string>{"eal.lcores", "mempool.mbufs", "metrics.enabled", "metrics.listen", "node.name",
                                        "ports[1].mtu", "sessions.timeouts.udp", "vrfs", "workers"}));
    EXPECT_EQ(c.live, std::vector<std::string>{"routes[0].via"});
}

TEST(Reload, PodCidrsAndNodeLabelsAreLiveOnlyWithTheFilesSource) {
    for (const std::string source : {"files", "kubernetes"}) {
        json j = base(source);
        j["cluster"]["pod_cidrs"] = {"10.244.0.0/16", "10.245.0.0/16"};
        j["node"]["labels"]["zone"] = "a";
        j["state"]["poll_ms"] = 500;
        auto c = compare_for_reload(load(base(source)), load(j));
        const std::vector<std::string> all = {"cluster.pod_cidrs", "node.labels.zone", "state.poll_ms"};
        if (source == "files") {
            EXPECT_EQ(c.live, all);
            EXPECT_TRUE(c.restart.empty());
        } else {
            // The election took its copy of the pod CIDRs at start; Node labels come from the API.
            EXPECT_EQ(c.restart, all);
            EXPECT_TRUE(c.live.empty());
        }
    }
}

TEST(Reload, TheStateSourceItselfNeedsARestart) {
    auto c = compare_for_reload(load(base("files")), load(base("kubernetes")));
    EXPECT_TRUE(c.live.empty());
    EXPECT_FALSE(c.restart.empty());
    for (const auto& p : c.restart)
        EXPECT_EQ(p.rfind("state.", 0), 0u) << p;
}

// Whatever compare_for_reload calls live, apply_live copies: afterwards the two configurations
// differ only where a restart is needed.
TEST(Reload, ApplyingTheLiveChangesLeavesOnlyTheRestartOnes) {
    for (const std::string source : {"files", "kubernetes"}) {
        json j = base(source);
        j["routes"] = {{{"prefix", "0.0.0.0/0"}, {"via", "192.0.2.253"}, {"port", "out"}},
                       {{"vrf", "blue"}, {"prefix", "0.0.0.0/0"}, {"via", "198.51.100.254"}, {"port", "blue1"}}};
        j["neighbors"] = json::array();
        j["default_action"] = "route";
        j["arp"] = {{"retry_ms", 250},     {"reachable_s", 10},           {"hold_packets", 16}, {"max_neighbors", 128},
                    {"announce_count", 1}, {"announce_interval_ms", 100}, {"probes", 2},        {"unused_s", 30}};
        j["cluster"] = {{"pod_cidrs", {"10.0.0.0/8"}}, {"service_cidrs", json::array()}, {"node_ips", {"10.1.1.1"}}};
        j["node"]["labels"] = {{"a", "b"}};
        j["state"]["poll_ms"] = 1000;
        j["ingress"] = {{"via", "10.244.1.2"}, {"port", "in"}};
        j["ports"][0]["rx_desc"] = 512;
        Config running = load(base(source));
        const Config next = load(j);
        auto before = compare_for_reload(running, next);
        ASSERT_FALSE(before.live.empty()) << source;
        apply_live(running, next);
        auto after = compare_for_reload(running, next);
        EXPECT_TRUE(after.live.empty()) << source << ": " << ::testing::PrintToString(after.live);
        EXPECT_EQ(after.restart, before.restart) << source;
        // Nothing read at start moved.
        EXPECT_EQ(running.ports, load(base(source)).ports);
        EXPECT_EQ(running.arp.max_neighbors, load(base(source)).arp.max_neighbors);
    }
}

}  // namespace
