// SPDX-License-Identifier: Apache-2.0
//
// The cluster-wide EgressService rules (control/k8s_source/decisions.h), case by case from
// docs/kubernetes.md ("The EgressService contract", "The decisions"), and OVN-Kubernetes'
// cluster-manager tests U1-U8 (listed there, "Parity scenarios") replayed on the pure functions
// (tests/unit/k8s_source/test_cluster.cpp replays them against the test API server).
#include <gtest/gtest.h>

#include "control/k8s_source/decisions.h"
#include "control/k8s_source/slice_owners.h"
#include "control/k8s_source/work_queue.h"
#include "control/k8s/writer.h"

using namespace egw::k8s_source;
using namespace egw::model;
using egw::net::IpPrefix;

namespace {

constexpr uint32_t ip4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return a << 24 | b << 16 | c << 8 | d;
}

const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1'800'000'000));

ObjectMeta meta(const std::string& ns, const std::string& name) {
    ObjectMeta m;
    m.namespace_ = ns;
    m.name = name;
    return m;
}

Node node(const std::string& name, std::map<std::string, std::string> labels = {}, bool ready = true) {
    Node n;
    n.meta.name = name;
    n.meta.labels = std::move(labels);
    n.meta.labels["kubernetes.io/hostname"] = name;
    n.ready = ready;
    return n;
}

Lease lease(const std::string& name, const std::string& holder, Clock::time_point renewed, int32_t seconds = 15) {
    Lease l;
    l.meta = meta("egw", name);
    l.holder_identity = holder;
    l.lease_duration_seconds = seconds;
    l.renew_time = egw::k8s::format_micro_time(renewed);
    return l;
}

EgressService egress(const std::string& name, const std::string& by = "", LabelSelector sel = {},
                     const std::string& host = "", bool has_status = false) {
    EgressService es;
    es.meta = meta("testns", name);
    es.source_ip_by = by;
    es.node_selector = std::move(sel);
    es.status_host = host;
    es.has_status = has_status || !host.empty();
    return es;
}

Service lb(const std::string& name, const std::string& etp = "",
           std::vector<LoadBalancerIngress> ingress = {{"1.1.1.1", ""}}) {
    Service s;
    s.meta = meta("testns", name);
    s.type = "LoadBalancer";
    s.ingress = std::move(ingress);
    s.external_traffic_policy = etp;
    return s;
}

EndpointSlice slice(const std::string& name, const std::string& svc, std::vector<Endpoint> eps) {
    EndpointSlice s;
    s.meta = meta("testns", name);
    s.service_name = svc;
    s.address_type = "IPv4";
    s.endpoints = std::move(eps);
    return s;
}

Endpoint ep(const std::string& addr, std::optional<std::string> node_name) {
    return Endpoint{{addr}, std::move(node_name)};
}

LabelSelector labels(std::map<std::string, std::string> m) {
    LabelSelector s;
    s.match_labels = std::move(m);
    return s;
}

// A cluster and a leader that applies decisions as the controller does: decide, record, write the
// status into the objects, and decide again right away after a re-election.
struct Cluster : ::testing::Test {
    ObjectSet objects;
    std::set<std::string> live;
    std::vector<IpPrefix> pods{IpPrefix::from_v4(ip4(10, 128, 0, 0), 14)};
    Allocations alloc;
    std::map<std::string, std::vector<std::string>> history;  // key -> status.host values written

    void add_node(const std::string& name, std::map<std::string, std::string> l = {}, bool ready = true) {
        objects.upsert(node(name, std::move(l), ready));
        live.insert(name);
    }
    // An EgressService with its LoadBalancer Service and one endpoint on `ep_node`.
    void add_service(const std::string& name, LabelSelector sel = {}, const std::string& by = "",
                     const std::string& ep_node = "node1", const std::string& etp = "") {
        objects.upsert(egress(name, by, std::move(sel)));
        objects.upsert(lb(name, etp));
        objects.upsert(slice(name + "-1", name, {ep("10.128.0.5", ep_node)}));
    }
    EgressService& es(const std::string& name) { return objects.egress_services.at("testns/" + name); }
    Node& nd(const std::string& name) { return objects.nodes.at(name); }

    HostDecision decide_once(const std::string& key) {
        const SliceIndex slices = index_endpoint_slices(objects);
        ClusterView view{objects, slices, live, pods};
        HostDecision d = decide_host(view, key, alloc);
        apply(alloc, d);
        if (d.exists) {
            auto& e = objects.egress_services.at(key);
            if (!e.has_status || e.status_host != d.host) history[key].push_back(d.host);
            e.status_host = d.host;
            e.has_status = true;
        }
        return d;
    }
    // Decides every EgressService until nothing is re-elected; returns key -> status.host.
    std::map<std::string, std::string> sync() {
        std::vector<std::string> keys;
        for (const auto& [k, e] : objects.egress_services)
            keys.push_back(k);
        for (int round = 0; round < 4 && !keys.empty(); ++round) {
            std::vector<std::string> again;
            for (const auto& k : keys)
                if (decide_once(k).reelect) again.push_back(k);
            keys = again;
        }
        std::map<std::string, std::string> out;
        for (const auto& [k, e] : objects.egress_services)
            out[k] = e.status_host;
        return out;
    }
    std::string host(const std::string& name) { return sync()["testns/" + name]; }
    // Node labels after applying label_patches.
    std::map<std::string, std::set<std::string>> labelled() {
        for (const auto& p : label_patches(objects, alloc)) {
            auto& l = objects.nodes.at(p.node).meta.labels;
            for (const auto& [k, v] : p.labels) {
                if (v)
                    l[k] = *v;
                else
                    l.erase(k);
            }
        }
        EXPECT_TRUE(label_patches(objects, alloc).empty());  // converged in one round
        std::map<std::string, std::set<std::string>> out;
        for (const auto& [name, n] : objects.nodes)
            for (const auto& [k, v] : n.meta.labels)
                if (k.rfind(kNodeLabelPrefix, 0) == 0) out[name].insert(k);
        return out;
    }
};

const std::string kSvc1Label = "egress-service.k8s.ovn.org/testns-svc1";
const std::string kSvc2Label = "egress-service.k8s.ovn.org/testns-svc2";

}  // namespace

// ---- Leases ----

// Liveness is judged on the local monotonic clock: renewTime is never compared with it.
const SteadyClock::time_point kT0 = SteadyClock::time_point(std::chrono::hours(100));

TEST(Liveness, LiveForItsDurationAfterTheLastChangeSeen) {
    auto l = lease("egw-node-a", "a", kNow - std::chrono::hours(24), 15);  // renewTime a day old
    LeaseObservations seen;
    seen.view_since = kT0 - std::chrono::seconds(60);
    seen.changed["egw/egw-node-a"] = kT0 - std::chrono::seconds(10);
    EXPECT_EQ(observed_expiry(l, seen), kT0 + std::chrono::seconds(5));
    // Never seen to change: it counts from the start of the unbroken view.
    seen.changed.clear();
    EXPECT_EQ(observed_expiry(l, seen), kT0 - std::chrono::seconds(45));
    // The view was re-established (after an outage) later than the last change seen: from there.
    seen.changed["egw/egw-node-a"] = kT0 - std::chrono::seconds(30);
    seen.view_since = kT0 - std::chrono::seconds(1);
    EXPECT_EQ(observed_expiry(l, seen), kT0 + std::chrono::seconds(14));
    l.holder_identity = "";  // given up
    EXPECT_FALSE(observed_expiry(l, seen));
    l = lease("egw-node-a", "a", kNow, 0);
    EXPECT_FALSE(observed_expiry(l, seen));
}

TEST(Liveness, CountsLiveLeasesOfEgwInstancesOnly) {
    ObjectSet o;
    o.upsert(lease("egw-node-a", "a", kNow));
    o.upsert(lease("egw-node-b", "b", kNow));
    o.upsert(lease("egw-node-c", "", kNow));   // released: no holder
    o.upsert(lease("egw-leader", "a", kNow));  // not a liveness Lease
    o.upsert(lease("egw-node-d", "d", kNow));
    LeaseObservations seen;
    seen.view_since = kT0 - std::chrono::seconds(100);
    seen.changed["egw/egw-node-a"] = kT0 - std::chrono::seconds(1);
    seen.changed["egw/egw-node-b"] = kT0 - std::chrono::seconds(20);  // expired
    seen.changed["egw/egw-node-c"] = kT0;
    seen.changed["egw/egw-leader"] = kT0;
    seen.changed["egw/egw-node-d"] = kT0 - std::chrono::seconds(5);
    Liveness lv = liveness(o, seen, kT0);
    EXPECT_EQ(lv.live, (std::set<std::string>{"a", "d"}));
    ASSERT_TRUE(lv.next_change);
    EXPECT_EQ(*lv.next_change, kT0 + std::chrono::seconds(10));  // d runs out first
    // Right after the view was re-established nobody has run out, whatever their renewTime says.
    seen.view_since = kT0;
    EXPECT_EQ(liveness(o, seen, kT0).live, (std::set<std::string>{"a", "b", "d"}));
    EXPECT_TRUE(liveness(ObjectSet{}, seen, kT0).live.empty());
    EXPECT_FALSE(liveness(ObjectSet{}, seen, kT0).next_change);
}

// A Lease that ran out is expired only once the API accepted a write of this egwd sent after it
// ran out: until then its holder's renewals may have been refused as this egwd's were.
TEST(Liveness, ExpiredOnlyOnceAWriteSentSinceWasAccepted) {
    ObjectSet o;
    o.upsert(lease("egw-node-a", "a", kNow));
    o.upsert(lease("egw-node-b", "b", kNow));
    LeaseObservations seen;
    seen.view_since = kT0 - std::chrono::seconds(100);
    seen.changed["egw/egw-node-a"] = kT0 - std::chrono::seconds(20);  // ran out at kT0 - 5 s
    seen.changed["egw/egw-node-b"] = kT0 - std::chrono::seconds(1);   // live until kT0 + 14 s
    seen.write_accepted_sent = kT0 - std::chrono::seconds(6);         // before a ran out
    Liveness lv = liveness(o, seen, kT0);
    EXPECT_EQ(lv.live, (std::set<std::string>{"a", "b"}));
    ASSERT_TRUE(lv.next_change);
    EXPECT_EQ(*lv.next_change, kT0 + std::chrono::seconds(14));  // only a live-by-clock Lease schedules
    seen.write_accepted_sent = kT0 - std::chrono::seconds(5);    // sent as it ran out: confirms it
    EXPECT_EQ(liveness(o, seen, kT0).live, (std::set<std::string>{"b"}));
    seen.write_accepted_sent.reset();  // not known: by the clock alone
    EXPECT_EQ(liveness(o, seen, kT0).live, (std::set<std::string>{"b"}));
}

TEST(Allocations, CountsLoadPerNode) {
    Allocations a;
    a.assign("ns/a", "n1");
    a.assign("ns/b", "n1");
    a.assign("ns/c", "n2");
    EXPECT_EQ(a.load("n1"), 2u);
    EXPECT_EQ(a.load("n2"), 1u);
    EXPECT_EQ(a.load("n3"), 0u);
    a.assign("ns/b", "n2");  // moves
    EXPECT_EQ(a.load("n1"), 1u);
    EXPECT_EQ(a.load("n2"), 2u);
    a.release("ns/a");
    a.release("ns/zzz");
    EXPECT_EQ(a.load("n1"), 0u);
    ASSERT_NE(a.host_of("ns/b"), nullptr);
    EXPECT_EQ(*a.host_of("ns/b"), "n2");
    EXPECT_EQ(a.host_of("ns/a"), nullptr);
    a.clear();
    EXPECT_TRUE(a.hosts().empty());
    EXPECT_EQ(a.load("n2"), 0u);
}

// ---- preconditions (semantics section 2) ----

TEST_F(Cluster, EveryEmptyHostReason) {
    add_node("node1");
    add_service("svc1");
    const std::string k = "testns/svc1";
    EXPECT_EQ(host("svc1"), "node1");

    objects.services.erase(k);
    EXPECT_EQ(host("svc1"), "");
    EXPECT_EQ(decide_once(k).reason, "Service not found");

    objects.upsert(lb("svc1"));
    objects.services.at(k).type = "ClusterIP";
    EXPECT_EQ(host("svc1"), "");
    EXPECT_EQ(decide_once(k).reason, "Service is not type LoadBalancer");

    objects.upsert(lb("svc1", "", {}));
    EXPECT_EQ(host("svc1"), "");
    EXPECT_EQ(decide_once(k).reason, "Service has no ingress IP");

    objects.upsert(lb("svc1", "", {{"", "lb.example.com"}}));  // a hostname is not an ingress IP
    EXPECT_EQ(decide_once(k).reason, "Service has no ingress IP");

    objects.upsert(lb("svc1"));
    objects.endpoint_slices.clear();
    EXPECT_EQ(host("svc1"), "");
    EXPECT_EQ(decide_once(k).reason, "no endpoints in the pod network");

    // Host-networked endpoints (outside the pod CIDRs) do not count.
    objects.upsert(slice("svc1-1", "svc1", {ep("192.168.18.15", "node1")}));
    EXPECT_EQ(decide_once(k).reason, "no endpoints in the pod network");

    objects.upsert(slice("svc1-1", "svc1", {ep("10.128.0.5", "node1")}));
    es("svc1").node_selector = labels({{"a:b", "c&"}});
    EXPECT_EQ(host("svc1"), "");
    EXPECT_EQ(decide_once(k).reason.rfind("invalid nodeSelector: matchLabels key \"a:b\"", 0), 0u);

    es("svc1").node_selector = labels({{"perfect", "match"}});
    EXPECT_EQ(host("svc1"), "");
    EXPECT_EQ(decide_once(k).reason, "no eligible node (1 node(s): 1 not matching nodeSelector)");

    // Every transition went through "" exactly as written above, never to another node.
    EXPECT_EQ(history[k], (std::vector<std::string>{"node1", ""}));
}

TEST_F(Cluster, NoCandidateReasonCountsEachFailure) {
    add_node("a", {{"gw", "yes"}});
    add_node("b", {{"gw", "yes"}}, false);
    add_node("c", {{"gw", "yes"}});
    add_node("d", {{"gw", "no"}});
    add_node("e", {{"gw", "yes"}});
    live.erase("c");
    add_service("svc1", labels({{"gw", "yes"}}), "", "e", "Local");
    nd("e").ready = false;
    objects.upsert(slice("svc1-1", "svc1", {ep("10.128.0.5", "e")}));
    EXPECT_EQ(host("svc1"), "");
    EXPECT_EQ(decide_once("testns/svc1").reason,
              "no eligible node (5 node(s): 1 not matching nodeSelector, 3 without an endpoint "
              "(externalTrafficPolicy Local), 1 not Ready)");
    objects.nodes.clear();
    EXPECT_EQ(decide_once("testns/svc1").reason, "no eligible node: there are no nodes");
}

TEST_F(Cluster, DeletedEgressServiceReleasesItsNode) {
    add_node("node1");
    add_service("svc1");
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(alloc.load("node1"), 1u);
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node1", {kSvc1Label}}}));
    objects.egress_services.clear();
    HostDecision d = decide_once("testns/svc1");
    EXPECT_FALSE(d.exists);
    EXPECT_EQ(d.host, "");
    EXPECT_EQ(alloc.load("node1"), 0u);
    EXPECT_TRUE(labelled().empty());
}

TEST_F(Cluster, NetworkIsAllWithoutLookingAtTheService) {
    add_node("node1");
    objects.upsert(egress("svc1", "Network"));
    EXPECT_EQ(host("svc1"), "");  // no Service at all comes first
    Service s = lb("svc1", "", {});
    s.type = "ClusterIP";
    objects.upsert(s);
    EXPECT_EQ(host("svc1"), "ALL");
    HostDecision d = decide_once("testns/svc1");
    EXPECT_EQ(d.mode, Mode::network);
    EXPECT_EQ(d.reason, "");
    EXPECT_TRUE(alloc.hosts().empty());
}

TEST_F(Cluster, EmptySourceIPByIsLoadBalancerIP) {
    add_node("node1");
    add_service("svc1", {}, "");
    add_service("svc2", {}, "LoadBalancerIP");
    auto hosts = sync();
    EXPECT_EQ(hosts["testns/svc1"], "node1");
    EXPECT_EQ(hosts["testns/svc2"], "node1");
}

TEST_F(Cluster, LastIngressIpsAreKeptPerFamily) {
    add_node("node1");
    add_service("svc1");
    objects.upsert(lb("svc1", "", {{"1.1.1.1", ""}, {"2001:db8::1", ""}, {"2.2.2.2", ""}, {"2001:db8::2", ""}}));
    auto slices = index_endpoint_slices(objects);
    ServiceFacts f = service_facts(objects, "testns/svc1", &slices["testns/svc1"], pods);
    EXPECT_EQ(f.state.ingress_ipv4, ip4(2, 2, 2, 2));
    EXPECT_EQ(f.state.ingress_ipv6, egw::net::parse_ip("2001:db8::2"));
}

// ---- election (semantics section 3) ----

TEST_F(Cluster, FreeNodesFirstThenLeastLoadedTiesByName) {
    add_node("n-b");
    add_node("n-a");
    add_node("n-c");
    for (int i = 0; i < 7; ++i)
        add_service("svc" + std::to_string(i));
    auto hosts = sync();
    std::map<std::string, int> per;
    for (const auto& [k, h] : hosts)
        ++per[h];
    EXPECT_EQ(per, (std::map<std::string, int>{{"n-a", 3}, {"n-b", 2}, {"n-c", 2}}));
    EXPECT_EQ(hosts["testns/svc0"], "n-a");
    EXPECT_EQ(hosts["testns/svc1"], "n-b");
    EXPECT_EQ(hosts["testns/svc2"], "n-c");
    EXPECT_EQ(hosts["testns/svc3"], "n-a");
}

TEST_F(Cluster, StickyNoRebalancingWhenNodesAreAdded) {
    add_node("node1");
    add_service("svc1");
    add_service("svc2");
    EXPECT_EQ(sync(), (std::map<std::string, std::string>{{"testns/svc1", "node1"}, {"testns/svc2", "node1"}}));
    add_node("node2");
    EXPECT_EQ(sync(), (std::map<std::string, std::string>{{"testns/svc1", "node1"}, {"testns/svc2", "node1"}}));
    add_service("svc3");  // a new Service goes to the free node
    EXPECT_EQ(host("svc3"), "node2");
}

TEST_F(Cluster, ReelectionPassesThroughEmpty) {
    add_node("node1");
    add_node("node2");
    add_service("svc1");
    EXPECT_EQ(host("svc1"), "node1");
    nd("node1").ready = false;
    const SliceIndex slices = index_endpoint_slices(objects);
    ClusterView view{objects, slices, live, pods};
    HostDecision d = decide_host(view, "testns/svc1", alloc);
    EXPECT_EQ(d.host, "");
    EXPECT_TRUE(d.reelect);
    EXPECT_EQ(d.reason, "host node1 no longer eligible: node node1 is not Ready");
    EXPECT_EQ(host("svc1"), "node2");
    EXPECT_EQ(history["testns/svc1"], (std::vector<std::string>{"node1", "", "node2"}));
}

TEST_F(Cluster, EveryReelectionTrigger) {
    add_node("node1", {{"gw", "yes"}});
    add_node("node2", {{"gw", "yes"}});
    add_service("svc1", labels({{"gw", "yes"}}));
    const std::string k = "testns/svc1";
    EXPECT_EQ(host("svc1"), "node1");

    // Deleted.
    objects.nodes.erase("node1");
    EXPECT_EQ(decide_once(k).reason, "host node1 no longer eligible: node node1 no longer exists");
    EXPECT_EQ(host("svc1"), "node2");

    // Lease expired.
    add_node("node1", {{"gw", "yes"}});
    live.erase("node2");
    EXPECT_EQ(decide_once(k).reason, "host node2 no longer eligible: node node2 has no live egwd (its Lease expired)");
    EXPECT_EQ(host("svc1"), "node1");

    // Labels no longer match.
    live.insert("node2");
    nd("node1").meta.labels["gw"] = "no";
    EXPECT_EQ(decide_once(k).reason, "host node1 no longer eligible: node node1 does not match nodeSelector");
    EXPECT_EQ(host("svc1"), "node2");

    // The selector changes and still matches the host: it stays.
    es("svc1").node_selector = labels({{"kubernetes.io/hostname", "node2"}});
    EXPECT_EQ(host("svc1"), "node2");
    // ...and no longer matches: it moves.
    es("svc1").node_selector = labels({{"gw", "no"}});
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(history[k], (std::vector<std::string>{"node1", "", "node2", "", "node1", "", "node2", "", "node1"}));
}

TEST_F(Cluster, InvalidSelectorOnAnAllocatedServiceClearsIt) {
    // The contract lists the invalid selector among the "" reasons; OVN-Kubernetes' cluster manager
    // would keep the old host here (docs/kubernetes.md, "The decisions").
    add_node("node1");
    add_service("svc1");
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node1", {kSvc1Label}}}));
    es("svc1").node_selector = labels({{"a:b", "c&"}});
    EXPECT_EQ(host("svc1"), "");
    EXPECT_TRUE(alloc.hosts().empty());
    EXPECT_TRUE(labelled().empty());
}

TEST_F(Cluster, AllEndpointsGoneThenBack) {
    add_node("node1");
    add_service("svc1");
    EXPECT_EQ(host("svc1"), "node1");
    objects.endpoint_slices.clear();
    EXPECT_EQ(host("svc1"), "");
    EXPECT_TRUE(alloc.hosts().empty());
    objects.upsert(slice("svc1-1", "svc1", {ep("10.128.0.9", "node1")}));
    EXPECT_EQ(host("svc1"), "node1");
}

// ---- restart and repair ----

TEST_F(Cluster, RestoreKeepsValidHostsOnly) {
    add_node("node1");
    add_node("node2");
    add_node("node3");
    add_service("svc1");  // valid on node2
    es("svc1").status_host = "node2";
    add_service("svc2");  // host is gone
    es("svc2").status_host = "node9";
    add_service("svc3", labels({{"x", "y"}}));  // host no longer matches
    es("svc3").status_host = "node1";
    add_service("svc4", {}, "Network");
    es("svc4").status_host = "node1";
    add_service("svc5", {}, "", "node1", "Local");  // ETP=Local, host without endpoint
    es("svc5").status_host = "node3";
    objects.upsert(egress("svc6", "", {}, "node1"));  // no Service
    const SliceIndex slices = index_endpoint_slices(objects);
    ClusterView view{objects, slices, live, pods};
    alloc = restore_allocations(view);
    EXPECT_EQ(alloc.hosts(), (std::map<std::string, std::string>{{"testns/svc1", "node2"}}));
    auto hosts = sync();
    EXPECT_EQ(hosts["testns/svc1"], "node2");  // kept
    EXPECT_EQ(hosts["testns/svc2"], "node1");  // re-elected to a free node
    EXPECT_EQ(hosts["testns/svc3"], "");
    EXPECT_EQ(hosts["testns/svc4"], "ALL");
    EXPECT_EQ(hosts["testns/svc5"], "node1");
    EXPECT_EQ(hosts["testns/svc6"], "");
}

TEST_F(Cluster, NewLeaderMovesAnInvalidHostThroughEmpty) {
    add_node("node1");
    add_node("node2");
    add_service("svc1");
    es("svc1").status_host = "node2";
    es("svc1").has_status = true;
    live.erase("node2");  // its gateway died with the old leader
    EXPECT_EQ(decide_once("testns/svc1").reason,
              "host node2 no longer eligible: node node2 has no live egwd (its Lease expired)");
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(history["testns/svc1"], (std::vector<std::string>{"", "node1"}));

    // Without an allocation, an eligible node in status.host is kept (not re-balanced).
    alloc.clear();
    live.insert("node2");
    es("svc1").status_host = "node2";
    EXPECT_EQ(host("svc1"), "node2");

    // A write the objects do not show yet counts as the status.
    alloc.clear();
    es("svc1").status_host = "node2";
    std::map<std::string, std::string> written{{"testns/svc1", ""}};
    const SliceIndex slices = index_endpoint_slices(objects);
    ClusterView view{objects, slices, live, pods, &written};
    HostDecision d = decide_host(view, "testns/svc1", alloc);
    EXPECT_EQ(d.host, "node1");  // free node first: node2 is not taken from the stale status
    EXPECT_FALSE(d.reelect);
}

// ---- what a gateway programs (semantics section 4.4) ----

TEST(Serving, FollowsStatusHostOnly) {
    ObjectSet o;
    std::vector<IpPrefix> pods{IpPrefix::from_v4(ip4(10, 128, 0, 0), 14)};
    o.upsert(egress("svc1", "", {}, "gw1"));
    o.upsert(lb("svc1"));
    o.upsert(slice("svc1-1", "svc1", {ep("10.128.0.5", "n"), ep("10.128.0.4", std::nullopt)}));
    auto slices = index_endpoint_slices(o);
    auto state = [&](const std::string& self) {
        auto it = slices.find("testns/svc1");
        return serving_state(service_facts(o, "testns/svc1", it == slices.end() ? nullptr : &it->second, pods), self);
    };
    ServiceState st = state("gw1");
    EXPECT_TRUE(st.serve_here);
    EXPECT_EQ(st.reason, "");
    EXPECT_EQ(st.status_host, "gw1");
    EXPECT_EQ(st.mode, Mode::load_balancer_ip);
    EXPECT_EQ(st.ingress_ipv4, ip4(1, 1, 1, 1));
    EXPECT_EQ(st.endpoint_ipv4s, (std::vector<uint32_t>{ip4(10, 128, 0, 4), ip4(10, 128, 0, 5)}));

    st = state("gw2");
    EXPECT_FALSE(st.serve_here);
    EXPECT_EQ(st.reason, "served by gw1");

    // The spec says Network but status names this node: status wins (the node controller never
    // reads sourceIPBy).
    o.egress_services.at("testns/svc1").source_ip_by = "Network";
    st = state("gw1");
    EXPECT_TRUE(st.serve_here);
    EXPECT_EQ(st.mode, Mode::load_balancer_ip);

    o.egress_services.at("testns/svc1").status_host = "ALL";
    st = state("gw2");
    EXPECT_TRUE(st.serve_here);
    EXPECT_EQ(st.mode, Mode::network);

    o.egress_services.at("testns/svc1").status_host = "";
    st = state("gw1");
    EXPECT_FALSE(st.serve_here);
    EXPECT_EQ(st.reason, "status.host is \"\" (no gateway serves it)");
    EXPECT_EQ(st.mode, Mode::network);  // from the spec while nobody decided
    o.egress_services.at("testns/svc1").has_status = false;
    EXPECT_EQ(state("gw1").reason, "no status.host yet");

    o.egress_services.at("testns/svc1").status_host = "gw1";
    o.services.at("testns/svc1").ingress.clear();
    EXPECT_EQ(state("gw1").reason, "Service has no ingress IP");
    o.services.at("testns/svc1").type = "NodePort";
    EXPECT_EQ(state("gw1").reason, "Service is not type LoadBalancer");
    o.services.clear();
    EXPECT_EQ(state("gw1").reason, "Service not found");
    o.egress_services.clear();
    EXPECT_EQ(state("gw1").reason, "EgressService not found");
    EXPECT_FALSE(state("gw1").serve_here);
}

// ---- labels ----

TEST(Labels, PatchSetsWantedAndRemovesStaleOnly) {
    Node n = node("node1", {{"unrelated-label", ""},
                            {"egress-service.k8s.ovn.org/deleted-service1", ""},
                            {"egress-service.k8s.ovn.org/testns-svc1", "x"},
                            {"egress-service.k8s.ovn.org/testns-svc3", ""}});
    auto p = label_patch(n, {kSvc1Label, kSvc2Label, "egress-service.k8s.ovn.org/testns-svc3"});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->node, "node1");
    EXPECT_EQ(p->labels,
              (std::map<std::string, std::optional<std::string>>{
                  {"egress-service.k8s.ovn.org/deleted-service1", std::nullopt}, {kSvc1Label, ""}, {kSvc2Label, ""}}));
    EXPECT_FALSE(label_patch(node("node2", {{"a", "b"}}), {}));
    EXPECT_FALSE(label_patch(node("node3", {{kSvc1Label, ""}}), {kSvc1Label}));
}

TEST(Labels, KeysTooLongForTheApiServerAreLeftOut) {
    // "<namespace>-<name>" of 64 characters: OVN-Kubernetes' key is not a valid label key then, and
    // one such key in a node's merge patch would make the server refuse the whole patch.
    const std::string ns(30, 'n'), name(33, 's');
    const std::string long_label = node_label_for(ns + "/" + name);
    ASSERT_FALSE(label_key_problem(long_label).empty());
    Allocations a;
    a.assign(ns + "/" + name, "node1");
    a.assign("testns/svc1", "node1");
    a.assign(ns + "/" + name.substr(1), "node2");  // 63 characters: still valid
    auto wanted = desired_labels(a);
    EXPECT_EQ(wanted["node1"], (std::set<std::string>{kSvc1Label}));
    EXPECT_EQ(wanted["node2"], (std::set<std::string>{node_label_for(ns + "/" + name.substr(1))}));
    // The scrubber keeps removing what is not wanted, and never names the invalid key.
    ObjectSet o;
    o.nodes["node1"] = node("node1", {{"egress-service.k8s.ovn.org/stale", ""}});
    o.nodes["node2"] = node("node2", {});
    auto patches = label_patches(o, a);
    ASSERT_EQ(patches.size(), 2u);
    EXPECT_EQ(patches[0].labels, (std::map<std::string, std::optional<std::string>>{
                                     {"egress-service.k8s.ovn.org/stale", std::nullopt}, {kSvc1Label, ""}}));
    for (const auto& p : patches)
        for (const auto& [k, v] : p.labels)
            EXPECT_TRUE(label_key_problem(k).empty()) << k;
}

// ---- U1-U8 (docs/kubernetes.md, "Parity scenarios") ----

TEST_F(Cluster, U1StartupRepairDeletesStaleLabels) {
    add_node("node1", {{"unrelated-label", ""},
                       {"egress-service.k8s.ovn.org/deleted-service1", ""},
                       {"egress-service.k8s.ovn.org/deleted-service2", ""},
                       {kSvc1Label, ""},
                       {kSvc2Label, ""},
                       {"egress-service.k8s.ovn.org/testns-srcip-not-by-lb-svc", ""}});
    add_node("node2", {{"unrelated-label", ""},
                       {"egress-service.k8s.ovn.org/deleted-service3", ""},
                       {"egress-service.k8s.ovn.org/deleted-service4", ""},
                       {kSvc1Label, ""},
                       {kSvc2Label, ""}});
    add_service("svc1");
    es("svc1").status_host = "node1";
    add_service("svc2");
    es("svc2").status_host = "node2";
    add_service("srcip-not-by-lb-svc", {}, "Network");
    es("srcip-not-by-lb-svc").status_host = "node1";
    const SliceIndex slices = index_endpoint_slices(objects);
    ClusterView view{objects, slices, live, pods};
    alloc = restore_allocations(view);
    sync();
    EXPECT_EQ(labelled(),
              (std::map<std::string, std::set<std::string>>{{"node1", {kSvc1Label}}, {"node2", {kSvc2Label}}}));
    EXPECT_TRUE(nd("node1").meta.labels.count("unrelated-label"));
    EXPECT_TRUE(nd("node2").meta.labels.count("unrelated-label"));
}

TEST_F(Cluster, U2StartupRepairResetsStaleStatus) {
    add_node("node1");
    objects.upsert(egress("svc1", "", {}, "node1"));  // no Service
    objects.upsert(egress("svc2", "Network", {}, "node1"));
    objects.upsert(lb("svc2"));
    const SliceIndex slices = index_endpoint_slices(objects);
    ClusterView view{objects, slices, live, pods};
    alloc = restore_allocations(view);
    EXPECT_TRUE(alloc.hosts().empty());
    auto hosts = sync();
    EXPECT_EQ(hosts["testns/svc1"], "");
    EXPECT_EQ(hosts["testns/svc2"], "ALL");
}

TEST_F(Cluster, U3ServiceChanges) {
    add_node("node1", {{"firstName", "Albus"}});
    add_node("node2", {{"firstName", "Severus"}});
    add_service("svc1", labels({{"firstName", "Albus"}}));
    EXPECT_EQ(host("svc1"), "node1");
    es("svc1").source_ip_by = "Network";
    EXPECT_EQ(host("svc1"), "ALL");
    EXPECT_TRUE(alloc.hosts().empty());
    add_service("svc2", labels({{"firstName", "Severus"}}));
    EXPECT_EQ(host("svc2"), "node2");
    es("svc2").node_selector = labels({{"firstName", "Albus"}});
    EXPECT_EQ(host("svc2"), "node1");
}

TEST_F(Cluster, U4NodeLabelsFollowTheAllocation) {
    add_node("node1", {{"animal", "FlyingBison"}});
    add_node("node2", {{"animal", "Lemur"}});
    add_service("svc1", labels({{"animal", "FlyingBison"}}));
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node1", {kSvc1Label}}}));
    es("svc1").node_selector = labels({{"animal", "Lemur"}});
    EXPECT_EQ(host("svc1"), "node2");
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node2", {kSvc1Label}}}));
    objects.egress_services.clear();
    EXPECT_FALSE(decide_once("testns/svc1").exists);
    EXPECT_TRUE(labelled().empty());
}

TEST_F(Cluster, U5InvalidNodeSelector) {
    add_node("node1");
    add_service("svc1", labels({{"a:b", "c&"}}));
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(host("svc1"), "");
    EXPECT_TRUE(labelled().empty());
}

TEST_F(Cluster, U6EtpLocalAndEndpointSlices) {
    add_node("node1", {{"square", "pants"}});
    add_node("node2");
    add_service("svc1", labels({{"square", "pants"}}), "", "node2", "Local");
    EXPECT_EQ(host("svc1"), "");
    EXPECT_TRUE(labelled().empty());
    objects.upsert(slice("svc1-1", "svc1", {ep("10.128.0.5", "node2"), ep("10.128.0.6", "node1")}));
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node1", {kSvc1Label}}}));
    // Endpoints on node2 only, plus one without nodeName (ignored).
    objects.upsert(slice("svc1-1", "svc1", {ep("10.128.0.5", "node2"), ep("10.128.0.7", std::nullopt)}));
    EXPECT_EQ(host("svc1"), "");
    EXPECT_TRUE(labelled().empty());
}

TEST_F(Cluster, U7NodeChanges) {
    add_node("node1", {{"home", "pineapple"}});
    add_node("node2", {{"home", "rock"}});
    add_service("svc1", labels({{"home", "pineapple"}}));
    add_service("svc2", labels({{"home", "moai"}}));
    auto hosts = sync();
    EXPECT_EQ(hosts["testns/svc1"], "node1");
    EXPECT_EQ(hosts["testns/svc2"], "");
    nd("node1").ready = false;
    EXPECT_EQ(host("svc1"), "");
    EXPECT_TRUE(labelled().empty());
    nd("node2").meta.labels["home"] = "moai";
    EXPECT_EQ(host("svc2"), "node2");
    nd("node1").meta.labels[kSvc2Label] = "";
    nd("node1").meta.labels["egress-service.k8s.ovn.org/testns-non-existing-svc"] = "";
    nd("node2").meta.labels["egress-service.k8s.ovn.org/testns-non-existing-svc"] = "";
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node2", {kSvc2Label}}}));
    objects.nodes.erase("node2");
    EXPECT_EQ(host("svc2"), "");
}

TEST_F(Cluster, U8LivenessLostAndRegained) {
    add_node("node1");
    add_service("svc1");
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node1", {kSvc1Label}}}));
    live.clear();
    EXPECT_EQ(host("svc1"), "");
    EXPECT_TRUE(labelled().empty());
    live.insert("node1");
    EXPECT_EQ(host("svc1"), "node1");
    EXPECT_EQ(labelled(), (std::map<std::string, std::set<std::string>>{{"node1", {kSvc1Label}}}));
}

// ---- helpers of the controller ----

TEST(SliceOwners, TracksMovesBetweenServices) {
    ObjectSet o;
    o.upsert(slice("s-1", "a", {}));
    o.upsert(slice("s-2", "a", {}));
    o.upsert(slice("s-3", "b", {}));
    SliceOwners owners;
    owners.rebuild(o);
    EXPECT_EQ(owners.slices(o, "testns/a").size(), 2u);
    std::vector<std::string> affected;
    o.upsert(slice("s-2", "b", {}));  // relabelled to another Service
    owners.update(o, "testns/s-2", affected);
    EXPECT_EQ(affected, (std::vector<std::string>{"testns/a", "testns/b"}));
    EXPECT_EQ(owners.slices(o, "testns/a").size(), 1u);
    EXPECT_EQ(owners.slices(o, "testns/b").size(), 2u);
    affected.clear();
    o.endpoint_slices.erase("testns/s-3");
    owners.update(o, "testns/s-3", affected);
    EXPECT_EQ(affected, (std::vector<std::string>{"testns/b"}));
    EXPECT_EQ(owners.slices(o, "testns/b").size(), 1u);
    affected.clear();
    o.upsert(slice("s-9", "c", {}));
    owners.update(o, "testns/s-9", affected);
    EXPECT_EQ(affected, (std::vector<std::string>{"testns/c"}));
    auto idx = owners.index(o, {"testns/a", "testns/zzz"});
    EXPECT_EQ(idx.size(), 1u);
    EXPECT_EQ(idx["testns/a"].size(), 1u);
}

TEST(WorkQueue, CoalescesAndDelays) {
    WorkQueue q;
    q.add("b");
    q.add("a");
    q.add("b");
    q.add_after("c", std::chrono::milliseconds(50));
    auto now = WorkQueue::Clock::now;
    EXPECT_EQ(q.take(now()), (std::vector<std::string>{"b", "a"}));
    EXPECT_EQ(q.size(), 1u);
    EXPECT_TRUE(q.take(now()).empty());
    auto t0 = now();
    EXPECT_EQ(q.take(now() + std::chrono::seconds(5)), (std::vector<std::string>{"c"}));
    EXPECT_GE(now() - t0, std::chrono::milliseconds(40));
    q.add_after("d", std::chrono::seconds(60));
    q.add("d");  // moves forward
    EXPECT_EQ(q.take(now()), (std::vector<std::string>{"d"}));
    q.add_after("e", std::chrono::seconds(60));
    q.wake();
    EXPECT_TRUE(q.take(now() + std::chrono::seconds(5)).empty());
    ASSERT_TRUE(q.next_due());
    q.clear();
    EXPECT_FALSE(q.next_due());
}
