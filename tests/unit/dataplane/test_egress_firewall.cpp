// SPDX-License-Identifier: Apache-2.0
//
// EgressFirewall on the packet path (docs/kubernetes.md, "EgressFirewall"): objects compiled by
// the real control::firewall::EgressFirewallState, published with the rig's snapshot, enforced
// by the NAT slow path on new flows and by the maintenance sweep on established ones. Each test
// checks what left (bytes for the ICMP rejects), the drop reason, the sessions and the hits the
// control thread sums per namespace and rule.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "control/firewall/firewall_state.h"
#include "control/model/egress_firewall.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;
using dp::IcmpError;
using nlohmann::json;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

model::Pod pod(const std::string& ns, const std::string& name, std::vector<net::IpAddr> ips) {
    model::Pod p;
    p.meta.namespace_ = ns;
    p.meta.name = name;
    p.ips = std::move(ips);
    p.phase = model::PodPhase::running;
    p.node = "node-a";
    return p;
}

net::IpAddr v4(uint32_t host_order) {
    return net::IpAddr::from_v4(host_order);
}

net::IpAddr v6(const Ip6Addr& a) {
    return net::IpAddr::from_v6(a.data());
}

// Pods 10 and 11 (web's endpoints) in namespace "shop", pod 20 in "other"; both families.
model::ObjectSet cluster_objects() {
    model::ObjectSet objs;
    objs.upsert(pod("shop", "web-10", {v4(kPod10), v6(std_rig6::kPod10v6)}));
    objs.upsert(pod("shop", "web-11", {v4(kPod11), v6(std_rig6::kPod11v6)}));
    objs.upsert(pod("other", "tool-20", {v4(kPod20), v6(std_rig6::kPod20v6)}));
    return objs;
}

// An EgressFirewall of `ns` named `name` with these spec.egress rules, through the real parser.
model::EgressFirewall firewall(const std::string& ns, const json& egress, const std::string& name = "default") {
    json j = {{"apiVersion", "k8s.ovn.org/v1"},
              {"kind", "EgressFirewall"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec", {{"egress", egress}}}};
    return model::parse_egress_firewall(j);
}

json deny_cidr(const std::string& cidr) {
    return {{"type", "Deny"}, {"to", {{"cidrSelector", cidr}}}};
}
json allow_cidr(const std::string& cidr) {
    return {{"type", "Allow"}, {"to", {{"cidrSelector", cidr}}}};
}

// The rig with a firewall state its builder publishes from.
class EgressFirewallTest : public DataplaneTest {
protected:
    Rig& start_with(const RigOptions& o = {}) {
        Rig& r = start(o);
        state_ = std::make_unique<firewall::EgressFirewallState>(static_cast<unsigned>(r.workers.size()));
        services_ = o.services;
        return r;
    }

    // Compiles `objs` and publishes a snapshot carrying the result.
    void apply(model::ObjectSet objs, bool reject_icmp = false) {
        objs_ = std::move(objs);
        state_->update(objs_, {}, true, reject_icmp);
        ASSERT_EQ(state_->last_error(), "");
        rig_->builder().set_egress_firewall(state_->policy());
        rig_->publish(services_);
    }
    void apply_rules(const std::string& ns, const json& egress, bool reject_icmp = false) {
        model::ObjectSet objs = cluster_objects();
        objs.upsert(firewall(ns, egress));
        apply(std::move(objs), reject_icmp);
    }

    firewall::NamespaceFirewallView view(const std::string& ns) const {
        for (auto& v : state_->views())
            if (v.namespace_ == ns) return v;
        ADD_FAILURE() << "no firewall view for " << ns;
        return {};
    }

    std::unique_ptr<firewall::EgressFirewallState> state_;
    std::vector<model::ServiceState> services_;
    model::ObjectSet objs_;
};

// A denied CIDR: web's pod's UDP to the denied server is dropped under egress_firewall_denied
// before any session or NAT port is taken; the same pod to another server leaves translated, and
// a pod of a namespace without a firewall reaches the denied server.
TEST_F(EgressFirewallTest, DeniedCidrDropsNewFlowsOfTheNamespacesPodsOnly) {
    Rig& r = start_with();
    apply_rules("shop", json::array({deny_cidr("192.0.2.100/32")}));

    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("denied"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);
    EXPECT_TRUE(r.sessions().empty());

    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServerB, 53, text("allowed"))));
    Parsed out = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(out));
    EXPECT_EQ(out.src, kIngress);
    EXPECT_EQ(out.dst, kServerB);
    ASSERT_EQ(r.sessions().size(), 1u);

    // Pod 20 is in "other": no firewall, so not classified at all.
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40001, kServer, 53, text("other ns"))));
    EXPECT_EQ(single(r.tx(r.ext1)).dst, kServer);
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);
    EXPECT_EQ(r.sessions().size(), 2u);

    auto v = view("shop");
    EXPECT_EQ(v.denied, 1u);
    EXPECT_EQ(v.allowed, 1u) << "the flow to .101 is allowed by default";
    EXPECT_EQ(v.rule_hits, std::vector<uint64_t>{1});
    EXPECT_EQ(v.pod_ips, 4u);
}

// Ports: TCP 80 denied to the whole range while TCP 443 to the same server is allowed by the rule
// above it, and UDP (no rule names it) is allowed by default. First match decides.
TEST_F(EgressFirewallTest, DeniedPortWithAnotherPortAllowed) {
    Rig& r = start_with();
    apply_rules(
        "shop",
        json::array({
            {{"type", "Allow"},
             {"to", {{"cidrSelector", "192.0.2.0/24"}}},
             {"ports", json::array({{{"protocol", "TCP"}, {"port", 443}}})}},
            {{"type", "Deny"},
             {"to", {{"cidrSelector", "0.0.0.0/0"}}},
             {"ports", json::array({{{"protocol", "TCP"}, {"port", 80}}, {{"protocol", "TCP"}, {"port", 443}}})}},
        }));
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);

    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40001, kServer, 443, kSyn)));
    Parsed https = single(r.tx(r.ext1));
    EXPECT_EQ(https.dport, 443);
    EXPECT_EQ(https.src, kIngress);

    // 443 outside 192.0.2.0/24 falls to the second rule.
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40002, kBlueServer, 443, kSyn)));
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 2u);

    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40003, kServer, 80, text("udp"))));
    EXPECT_EQ(single(r.tx(r.ext1)).dport, 80);
    EXPECT_EQ(r.sessions().size(), 2u);

    auto v = view("shop");
    EXPECT_EQ(v.rule_hits, (std::vector<uint64_t>{1, 2}));
    EXPECT_EQ(v.denied, 2u);
    EXPECT_EQ(v.allowed, 2u);
}

// First match: an Allow of one host before a Deny of its network lets that host through only.
TEST_F(EgressFirewallTest, FirstMatchingRuleDecides) {
    Rig& r = start_with();
    apply_rules("shop", json::array({allow_cidr("192.0.2.100/32"), deny_cidr("192.0.2.0/24")}));
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("first"))));
    EXPECT_EQ(single(r.tx(r.ext1)).dst, kServer);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServerB, 53, text("second"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);
    EXPECT_EQ(view("shop").rule_hits, (std::vector<uint64_t>{1, 1}));
}

// Default allow, and only the object named "default" counts: a Deny-everything object under
// another name changes nothing.
TEST_F(EgressFirewallTest, DefaultAllowAndOnlyTheObjectNamedDefault) {
    Rig& r = start_with();
    model::ObjectSet objs = cluster_objects();
    objs.upsert(firewall("shop", json::array({deny_cidr("203.0.113.0/24")})));
    objs.upsert(firewall("shop", json::array({deny_cidr("0.0.0.0/0")}), "strict"));
    apply(std::move(objs));
    EXPECT_EQ(state_->ignored().size(), 1u);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("allowed"))));
    EXPECT_EQ(single(r.tx(r.ext1)).dst, kServer);
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 0u);
    auto v = view("shop");
    EXPECT_EQ(v.allowed, 1u);
    EXPECT_EQ(v.rule_hits, std::vector<uint64_t>{0});
}

// The default action routing untranslated is governed too (pod 20 is no endpoint), while a
// destination inside the cluster never is.
TEST_F(EgressFirewallTest, DefaultActionRouteIsFilteredClusterDestinationsAreNot) {
    RigOptions o;
    o.configure = [](config::Config& c) { c.default_action = config::DefaultAction::route; };
    Rig& r = start_with(o);
    apply_rules("other", json::array({deny_cidr("0.0.0.0/0")}));
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kServer, 53, text("routed"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kClusterIp, 53, text("cluster"))));
    EXPECT_EQ(single(r.tx(r.pods)).dst, kClusterIp);
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);
    EXPECT_EQ(view("other").denied, 1u);
}

// IPv6: a denied /128 dropped, another destination translated (NAPT66 to web's IPv6 ingress IP).
TEST_F(EgressFirewallTest, Ipv6DeniedPrefix) {
    using namespace std_rig6;
    Rig& r = start_with(dual_stack());
    apply_rules("shop", json::array({deny_cidr("2001:db8:2::100/128")}));
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("denied"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);
    EXPECT_TRUE(r.sessions6().empty());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kInternetV6, 53, text("allowed"))));
    Parsed out = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(out));
    EXPECT_EQ(out.src6, kIngressV6);
    EXPECT_EQ(out.dst6, kInternetV6);
    EXPECT_EQ(r.sessions6().size(), 1u);
    auto v = view("shop");
    EXPECT_EQ(v.denied, 1u);
    EXPECT_EQ(v.allowed, 1u);
}

// A rule change cuts an established flow: the session made while allowed is closed by the
// worker's sweep after the new rules are published (no packet needed), and the flow's next packet
// is a new flow that the new rules drop.
TEST_F(EgressFirewallTest, RuleChangeCutsAnEstablishedFlow) {
    Rig& r = start_with();
    apply_rules("shop", json::array({deny_cidr("198.51.100.0/24")}));
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("before"))));
    Parsed out = single(r.tx(r.ext1));
    ASSERT_EQ(r.sessions().size(), 1u);
    // The reply reaches the pod: the flow is established.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, out.sport, text("answer"))));
    EXPECT_EQ(single(r.tx(r.pods)).dst, kPod10);

    apply_rules("shop", json::array({deny_cidr("192.0.2.100/32")}));
    ASSERT_EQ(r.sessions().size(), 1u) << "nothing is cut before the worker looks";
    r.poll();
    EXPECT_TRUE(r.sessions().empty()) << "the sweep closes the session the new rules deny";
    EXPECT_EQ(r.w().counters.sessions_closed, 1u);

    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("after"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 1u);
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, out.sport, text("late answer"))));
    EXPECT_TRUE(r.tx(r.pods).empty()) << "no way back in without the session";
    // The cut and the new flow both count for the denying rule of the new rule set.
    EXPECT_EQ(view("shop").rule_hits, std::vector<uint64_t>{2});
}

// A session the new rules still allow is kept across the republication.
TEST_F(EgressFirewallTest, RuleChangeKeepsAllowedSessions) {
    Rig& r = start_with();
    apply_rules("shop", json::array({deny_cidr("198.51.100.0/24")}));
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("kept"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    apply_rules("shop", json::array({deny_cidr("198.51.100.0/24"), deny_cidr("192.0.2.101/32")}));
    r.poll();
    EXPECT_EQ(r.sessions().size(), 1u);
}

Bytes error_body6(const Bytes& quote) {
    Bytes b(4 + quote.size());
    std::copy(quote.begin(), quote.end(), b.begin() + 4);
    return b;
}

// policy.egress_firewall_reject icmp: the pod gets destination unreachable, administratively
// prohibited (3/13) from the inside port's address quoting its own packet, byte for byte.
TEST_F(EgressFirewallTest, IcmpRejectIsAdministrativelyProhibitedFromThePort) {
    Rig& r = start_with();
    apply_rules("shop", json::array({deny_cidr("192.0.2.100/32")}), true);
    Bytes syn = tcp_ip(kPod10, 40000, kServer, 80, kSyn);
    r.process(r.pods, r.from_pod(kPod10, syn));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kPodsAddr);
    EXPECT_EQ(p.dst, kPod10);
    EXPECT_EQ(p.icmp_type, 3);
    EXPECT_EQ(p.icmp_code, 13);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  ipv4(kPodsAddr, kPod10, kProtoIcmp, icmp_error(3, 13, syn),
                                       IpOpt{.ttl = 64, .id = 0, .tos = 0xc0})));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(IcmpError::firewall_prohibited)], 1u);
    EXPECT_EQ(view("shop").denied, 1u);
}

// The same for IPv6: ICMPv6 destination unreachable, administratively prohibited (1/1).
TEST_F(EgressFirewallTest, IcmpRejectIpv6) {
    using namespace std_rig6;
    Rig& r = start_with(dual_stack());
    apply_rules("shop", json::array({deny_cidr("2001:db8:2::/64")}), true);
    Bytes syn = tcp6_ip(kPod10v6, 40000, kServerV6, 80, kSyn);
    r.process(r.pods, from_pod6(kPod10v6, syn));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src6, kPodsV6);
    EXPECT_EQ(p.icmp_type, 1);
    EXPECT_EQ(p.icmp_code, 1);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv6,
                                  icmp6_ip(kPodsV6, kPod10v6, 1, 1, error_body6(syn), Ip6Opt{64, {}, 0xc0})));
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(IcmpError::firewall_prohibited6)], 1u);
}

// Enforcement off publishes no policy: nothing is classified or dropped.
TEST_F(EgressFirewallTest, EnforcementOffFiltersNothing) {
    Rig& r = start_with();
    model::ObjectSet objs = cluster_objects();
    objs.upsert(firewall("shop", json::array({deny_cidr("0.0.0.0/0")})));
    objs_ = std::move(objs);
    ASSERT_TRUE(state_->update(objs_, {}, false, false));
    EXPECT_EQ(state_->policy(), nullptr);
    r.builder().set_egress_firewall(state_->policy());
    r.publish(services_);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("off"))));
    EXPECT_EQ(single(r.tx(r.ext1)).dst, kServer);
    EXPECT_EQ(r.drops(DropReason::egress_firewall_denied), 0u);
}

}  // namespace
}  // namespace egw::test
