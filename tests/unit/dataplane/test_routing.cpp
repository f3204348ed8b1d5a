// SPDX-License-Identifier: Apache-2.0
//
// Forwarding decisions: cluster destinations, VRFs (network), default actions, ARP, neighbours,
// TTL and the gateway's own addresses.
#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}
Bytes ip_of(const Bytes& frame) {
    return Bytes(frame.begin() + 14, frame.end());
}

// ---------------------------------------------------------------------------------------------
// Cluster destinations

TEST_F(DataplaneTest, ClusterDestinationsAreRoutedUntouched) {
    Rig& r = start();
    uint64_t routed = 0;
    // From an endpoint of the Service and from a pod of no Service alike.
    for (uint32_t pod : {kPod10, kPod20}) {
        for (uint32_t dst : {kRemotePod, kClusterIp, kNodeIp}) {
            SCOPED_TRACE(ip_str(pod) + " -> " + ip_str(dst));
            Bytes payload = text("inside the cluster");
            r.process(r.pods, r.from_pod(pod, tcp_ip(pod, 40000, dst, 8080, kPsh | kAck, payload)));
            auto frames = r.tx(r.pods);
            Parsed p = single(frames);
            ASSERT_TRUE(checksums_valid(p));
            EXPECT_EQ(p.src, pod);
            EXPECT_EQ(p.ttl, 63);
            // Via the cluster router, every other byte as sent.
            EXPECT_EQ(frames[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                                          tcp_ip(pod, 40000, dst, 8080, kPsh | kAck, payload, IpOpt{.ttl = 63})));
            EXPECT_TRUE(r.tx(r.ext1).empty());
            EXPECT_EQ(r.w().counters.routed, ++routed);
        }
    }
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.svc(kWeb).packets_out, 0u);
    EXPECT_EQ(r.default_counters().packets_out, 0u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, PodCidrThroughSecondInsidePort) {
    static const Mac kPods2Mac{0x02, 0x00, 0x00, 0x00, 0x04, 0x01};
    static const Mac kRemotePodMac{0x0a, 0x58, 0x0a, 0xf4, 0x02, 0x0a};
    RigOptions o;
    o.configure = [](config::Config& c) {
        config::PortConfig p;
        p.name = "pods2";
        p.role = config::PortRole::inside;
        p.addresses = {net::IpPrefix::from_v4(ip4(10, 244, 2, 1), 24)};
        config::MacAddr m;
        std::copy(kPods2Mac.begin(), kPods2Mac.end(), m.bytes);
        p.mac = m;
        c.ports.push_back(p);
        config::MacAddr rm;
        std::copy(kRemotePodMac.begin(), kRemotePodMac.end(), rm.bytes);
        c.neighbors.push_back(config::NeighborConfig{"pods2", net::IpAddr::from_v4(kRemotePod), rm});
    };
    Rig& r = start(o);
    uint16_t pods2 = r.port_id("pods2");
    Bytes ip = udp_ip(kPod10, 5000, kRemotePod, 53, text("x"));
    r.process(r.pods, r.from_pod(kPod10, ip));
    auto frames = r.tx(pods2);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], ethernet(kRemotePodMac, kPods2Mac, kEtherIpv4,
                                  udp_ip(kPod10, 5000, kRemotePod, 53, text("x"), IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.routed, 1u);
}

// ---------------------------------------------------------------------------------------------
// VRF choice (EgressService.spec.network)

TEST_F(DataplaneTest, NetworkModeServiceLeavesThroughItsVrf) {
    RigOptions o;
    o.services = {lb_service(kWeb, kIngress, {kPod10}), network_service("default/blue-net", {kPod11}, "blue")};
    Rig& r = start(o);
    uint32_t id = r.service_id("default/blue-net");

    // A destination of the blue table: ext2, masqueraded to ext2's address.
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 6000, kBlueServer, 53, text("blue"))));
    auto frames = r.tx(r.ext2);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherIpv4,
                                  udp_ip(kExt2Addr, 6000, kBlueServer, 53, text("blue"), IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].service_id, id);
    EXPECT_EQ(ss[0].vrf, r.builder().resolve_vrf("blue"));
    EXPECT_EQ(ss[0].out_port, r.ext2);
    EXPECT_TRUE(ss[0].in_use & dp::kSessionMasquerade);

    r.process(r.ext2, r.from_ext2(udp_ip(kBlueServer, 53, kExt2Addr, 6000, text("ok"))));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPod11Mac, kPodsMac, kEtherIpv4,
                                  udp_ip(kBlueServer, 53, kPod11, 6000, text("ok"), IpOpt{.ttl = 63})));

    // A destination only the default table routes: falls through to ext1, masqueraded to ext1.
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 6001, kServer, 53, text("main"))));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kExt1Addr, 6001, kServer, 53, text("main"), IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.tx(r.ext2).empty());
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kExt1Addr, 6001, text("ok"))));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPod11Mac, kPodsMac, kEtherIpv4,
                                  udp_ip(kServer, 53, kPod11, 6001, text("ok"), IpOpt{.ttl = 63})));

    EXPECT_EQ(r.svc("default/blue-net").packets_out, 2u);
    EXPECT_EQ(r.svc("default/blue-net").packets_in, 2u);
    EXPECT_EQ(r.default_counters().packets_out, 0u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, NetworkNamedByTableNumber) {
    RigOptions o;
    o.services = {network_service("default/table", {kPod11}, "100")};
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 6000, kBlueServer, 53, text("x"))));
    Parsed p = single(r.tx(r.ext2));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kExt2Addr);
}

TEST_F(DataplaneTest, LoadBalancerIpServiceInBlueNetwork) {
    constexpr uint32_t kBlueIngress = ip4(198, 51, 100, 50);
    RigOptions o;
    o.services = {lb_service("default/blue-lb", kBlueIngress, {kPod20}, "blue")};
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod20, tcp_ip(kPod20, 41000, kBlueServer, 443, kSyn)));
    auto frames = r.tx(r.ext2);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherIpv4,
                                  tcp_ip(kBlueIngress, 41000, kBlueServer, 443, kSyn, {}, IpOpt{.ttl = 63})));
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_FALSE(ss[0].in_use & dp::kSessionMasquerade);
    r.process(r.ext2, r.from_ext2(tcp_ip(kBlueServer, 443, kBlueIngress, 41000, kSyn | kAck)));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPod20Mac, kPodsMac, kEtherIpv4,
                                  tcp_ip(kBlueServer, 443, kPod20, 41000, kSyn | kAck, {}, IpOpt{.ttl = 63})));

    // Toward a destination of the default table it keeps its ingress IP and leaves on ext1.
    r.process(r.pods, r.from_pod(kPod20, tcp_ip(kPod20, 41001, kServer, 443, kSyn)));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  tcp_ip(kBlueIngress, 41001, kServer, 443, kSyn, {}, IpOpt{.ttl = 63})));
}

TEST_F(DataplaneTest, RepliesReachThePodWhenTheVrfHasADefaultRoute) {
    // The usual shape of a network's table: a default route through its own gateway. Egress
    // of the Service is routed there; replies to the pod are not egress of the Service (an ip
    // rule matches "from <endpoint>") and must still be delivered inside.
    RigOptions o;
    o.configure = [](config::Config& c) {
        config::RouteConfig rt;
        rt.vrf = "blue";
        rt.prefix = net::IpPrefix::from_v4(0, 0);
        rt.via = net::IpAddr::from_v4(kBlueGw);
        rt.port = "ext2";
        c.routes.push_back(rt);
    };
    o.services = {network_service("default/blue-net", {kPod11}, "blue"),
                  lb_service("default/blue-lb", ip4(198, 51, 100, 50), {kPod10}, "blue")};
    Rig& r = start(o);
    for (auto [pod, pod_mac, nat] :
         {std::tuple{kPod11, kPod11Mac, kExt2Addr}, std::tuple{kPod10, kPod10Mac, ip4(198, 51, 100, 50)}}) {
        SCOPED_TRACE(ip_str(pod));
        r.process(r.pods, r.from_pod(pod, udp_ip(pod, 6000, kInternet, 53, text("q"))));
        auto frames = r.tx(r.ext2);
        ASSERT_TRUE(checksums_valid(single(frames)));
        EXPECT_EQ(frames[0], ethernet(kBlueGwMac, kExt2Mac, kEtherIpv4,
                                      udp_ip(nat, 6000, kInternet, 53, text("q"), IpOpt{.ttl = 63})));

        r.process(r.ext2, r.from_ext2(udp_ip(kInternet, 53, nat, 6000, text("a")), kBlueGwMac));
        EXPECT_TRUE(r.tx(r.ext2).empty()) << "the reply was sent back out of the VRF";
        frames = r.tx(r.pods);
        ASSERT_TRUE(checksums_valid(single(frames)));
        EXPECT_EQ(frames[0], ethernet(pod_mac, kPodsMac, kEtherIpv4,
                                      udp_ip(kInternet, 53, pod, 6000, text("a"), IpOpt{.ttl = 63})));
    }
}

namespace v6 {
using namespace std_rig6;
const Ip6Addr kBlueIngressV6 = ip6("2001:db8:3::50");
const Ip6Addr kBlueGwV6 = ip6("2001:db8:3::fe");

// A Service of the dual-stack rig translating IPv6 for `endpoints`.
model::ServiceState with6(model::ServiceState s, std::optional<Ip6Addr> ingress, std::vector<Ip6Addr> endpoints) {
    if (ingress) s.ingress_ipv6 = addr6(*ingress);
    for (const Ip6Addr& e : endpoints)
        s.endpoint_ipv6s.push_back(addr6(e));
    std::sort(s.endpoint_ipv6s.begin(), s.endpoint_ipv6s.end());
    return s;
}
Bytes from_ext2_6(const Bytes& ip, const Mac& src = kBlueServerMac) {
    return ethernet(kExt2Mac, src, kEtherIpv6, ip);
}
}  // namespace v6

TEST_F(DataplaneTest, LoadBalancerIpServiceInBlueNetworkForIpv6) {
    using namespace v6;
    RigOptions o = dual_stack();
    o.services = {
        with6(lb_service("default/blue-lb", ip4(198, 51, 100, 50), {kPod20}, "blue"), kBlueIngressV6, {kPod20v6})};
    Rig& r = start(o);
    r.process(r.pods, from_pod6(kPod20v6, tcp6_ip(kPod20v6, 41000, kBlueServerV6, 443, kSyn)));
    auto frames = r.tx(r.ext2);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherIpv6,
                                  tcp6_ip(kBlueIngressV6, 41000, kBlueServerV6, 443, kSyn, {}, Ip6Opt{63})));
    auto ss = r.sessions6();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_FALSE(ss[0].in_use & dp::kSessionMasquerade);
    EXPECT_EQ(ss[0].vrf, r.builder().resolve_vrf("blue"));
    r.process(r.ext2, from_ext2_6(tcp6_ip(kBlueServerV6, 443, kBlueIngressV6, 41000, kSyn | kAck)));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], to_pod6(kPod20v6, tcp6_ip(kBlueServerV6, 443, kPod20v6, 41000, kSyn | kAck, {}, Ip6Opt{63})));

    // Toward a destination of the default table it keeps its ingress IP and leaves on ext1.
    r.process(r.pods, from_pod6(kPod20v6, tcp6_ip(kPod20v6, 41001, kServerV6, 443, kSyn)));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                  tcp6_ip(kBlueIngressV6, 41001, kServerV6, 443, kSyn, {}, Ip6Opt{63})));
    EXPECT_TRUE(r.tx(r.ext2).empty());
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, Ipv6RepliesReachThePodWhenTheVrfHasADefaultRoute) {
    using namespace v6;
    RigOptions o = dual_stack();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        config::RouteConfig rt;
        rt.vrf = "blue";
        rt.prefix = net::IpPrefix{addr6(ip6("::")), 0};
        rt.via = addr6(kBlueGwV6);
        rt.port = "ext2";
        c.routes.push_back(rt);
        config::MacAddr m;
        std::copy(kBlueGwMac.begin(), kBlueGwMac.end(), m.bytes);
        c.neighbors.push_back(config::NeighborConfig{"ext2", addr6(kBlueGwV6), m});
    };
    o.services = {
        with6(network_service("default/blue-net", {kPod11}, "blue"), std::nullopt, {kPod11v6}),
        with6(lb_service("default/blue-lb", ip4(198, 51, 100, 50), {kPod10}, "blue"), kBlueIngressV6, {kPod10v6})};
    Rig& r = start(o);
    for (auto [pod, nat] : {std::pair{kPod11v6, kExt2V6}, std::pair{kPod10v6, kBlueIngressV6}}) {
        SCOPED_TRACE(ip6_str(pod));
        r.process(r.pods, from_pod6(pod, udp6_ip(pod, 6000, kInternetV6, 53, text("q"))));
        auto frames = r.tx(r.ext2);
        ASSERT_TRUE(checksums_valid(single(frames)));
        EXPECT_EQ(frames[0], ethernet(kBlueGwMac, kExt2Mac, kEtherIpv6,
                                      udp6_ip(nat, 6000, kInternetV6, 53, text("q"), Ip6Opt{63})));

        r.process(r.ext2, from_ext2_6(udp6_ip(kInternetV6, 53, nat, 6000, text("a")), kBlueGwMac));
        EXPECT_TRUE(r.tx(r.ext2).empty()) << "the reply was sent back out of the VRF";
        frames = r.tx(r.pods);
        ASSERT_TRUE(checksums_valid(single(frames)));
        EXPECT_EQ(frames[0], to_pod6(pod, udp6_ip(kInternetV6, 53, pod, 6000, text("a"), Ip6Opt{63})));
    }
    EXPECT_EQ(r.sessions6().size(), 2u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, UnknownNetworkLeavesServiceUnprogrammed) {
    RigOptions o;
    o.services = {lb_service(kWeb, kIngress, {kPod10}),
                  lb_service("default/nowhere", ip4(192, 0, 2, 88), {kPod20}, "purple")};
    Rig& r = start(o);
    const control::ServiceView* view = nullptr;
    for (const auto& v : r.builder().views())
        if (v.state.key == "default/nowhere") view = &v;
    ASSERT_NE(view, nullptr);
    EXPECT_FALSE(view->programmed);
    EXPECT_NE(view->problem.find("unknown network"), std::string::npos) << view->problem;
    EXPECT_NE(view->problem.find("purple"), std::string::npos) << view->problem;
    EXPECT_EQ(r.policy().services[view->id].mode, dp::ServiceMode::inactive);

    // Its pod takes the default action (masquerade to ext1's address).
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 7000, kServer, 53, text("x"))));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kExt1Addr, 7000, kServer, 53, text("x"), IpOpt{.ttl = 63})));
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].service_id, dp::kDefaultPolicyId);
    EXPECT_EQ(r.default_counters().packets_out, 1u);
    EXPECT_EQ(r.svc("default/nowhere").packets_out, 0u);

    // Its ingress IP is not served: no ARP answer for it.
    r.process(r.ext1,
              ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, ip4(192, 0, 2, 88))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

// ---------------------------------------------------------------------------------------------
// Default actions for traffic of no EgressService

TEST_F(DataplaneTest, DefaultActionMasquerade) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod20, tcp_ip(kPod20, 50000, kServer, 80, kSyn)));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  tcp_ip(kExt1Addr, 50000, kServer, 80, kSyn, {}, IpOpt{.ttl = 63})));
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].service_id, dp::kDefaultPolicyId);
    EXPECT_TRUE(ss[0].in_use & dp::kSessionMasquerade);
    EXPECT_EQ(r.default_counters().packets_out, 1u);
    EXPECT_EQ(r.default_counters().sessions_created, 1u);

    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kExt1Addr, 50000, kSyn | kAck)));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPod20Mac, kPodsMac, kEtherIpv4,
                                  tcp_ip(kServer, 80, kPod20, 50000, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.default_counters().packets_in, 1u);
}

// From outside, a packet to the receiving port's own address that is not an echo request has no
// session to take, whatever the default action (IPv4's twin of
// Ipv6FromOutsideToThePortsOwnAddressesIsNeverRouted): under `route`, UDP and TCP to the outside
// port's address are dropped as no_session, neither routed nor answered.
TEST_F(DataplaneTest, FromOutsideToThePortsOwnAddressIsNeverRouted) {
    RigOptions o;
    o.configure = [](config::Config& c) { c.default_action = config::DefaultAction::route; };
    Rig& r = start(o);
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 5000, kExt1Addr, 53, {1})));
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 443, kExt1Addr, 40000, kSyn)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.ext2).empty());
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 2u);
    EXPECT_EQ(r.total_drops(), 2u);
}

TEST_F(DataplaneTest, DefaultActionRoute) {
    RigOptions o;
    o.configure = [](config::Config& c) { c.default_action = config::DefaultAction::route; };
    Rig& r = start(o);
    Bytes payload = text("untouched");
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 50000, kServer, 80, payload)));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kPod20, 50000, kServer, 80, payload, IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.routed, 1u);

    // Replies to the pod's own address are routed back untouched too.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 80, kPod20, 50000, payload)));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              ethernet(kPod20Mac, kPodsMac, kEtherIpv4, udp_ip(kServer, 80, kPod20, 50000, payload, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.w().counters.routed, 2u);

    // An endpoint of the Service is still translated.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 50000, kServer, 80, payload)));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kIngress);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, DefaultActionDrop) {
    RigOptions o;
    o.configure = [](config::Config& c) { c.default_action = config::DefaultAction::drop; };
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 50000, kServer, 80, text("no"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::default_action_drop), 1u);
    EXPECT_EQ(r.total_drops(), 1u);
    EXPECT_TRUE(r.sessions().empty());

    // From outside, nothing is routed to pods either.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 80, kPod20, 50000, text("no"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);

    // The Service's endpoints are still translated, and cluster traffic still routed.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 50000, kServer, 80, text("yes"))));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kIngress);
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 50000, kClusterIp, 80, text("yes"))));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
}

// A reload that changes the default action reaches the flows the old one made: masquerade
// sessions end (replies are dropped, the pod's next packet meets the new action), Services keep
// theirs, and going back to masquerade makes new default sessions.
TEST_F(DataplaneTest, ChangingTheDefaultActionEndsTheSessionsOfTheOldOne) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 50000, kServer, 80, text("a"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kExt1Addr);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 50001, kServer, 80, text("w"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
    ASSERT_EQ(r.sessions().size(), 2u);
    const uint32_t version = r.policy().default_version;

    r.cfg.default_action = config::DefaultAction::drop;
    r.publish(RigOptions{}.services);
    EXPECT_NE(r.policy().default_version, version);
    // The server's answer to the masquerade session finds it withdrawn.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 80, kExt1Addr, 50000, text("b"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session), 1u);
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 50000, kServer, 80, text("c"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::default_action_drop), 1u);
    EXPECT_EQ(r.default_counters().sessions_closed, 1u);
    // The Service's session is untouched.
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].service_id, r.service_id("default/web"));
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 50001, kServer, 80, text("w"))));
    Parsed web = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(web));
    EXPECT_EQ(web.src, kIngress);

    r.cfg.default_action = config::DefaultAction::masquerade;
    r.publish(RigOptions{}.services);
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 50000, kServer, 80, text("d"))));
    Parsed back = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(back));
    EXPECT_EQ(back.src, kExt1Addr);
    EXPECT_EQ(r.default_counters().sessions_created, 2u);
    EXPECT_EQ(r.total_drops(), 2u);
}

// A publication that does not change the default action keeps its sessions (the version stays).
TEST_F(DataplaneTest, RepublishingTheSameDefaultActionKeepsItsSessions) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 50000, kServer, 80, text("a"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    const uint32_t version = r.policy().default_version;
    r.publish(RigOptions{}.services);
    EXPECT_EQ(r.policy().default_version, version);
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 80, kExt1Addr, 50000, text("b"))));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    EXPECT_EQ(r.default_counters().sessions_created, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// The IPv6 twins of the two tests above: the default action's IPv6 masquerade sessions end with
// it and survive a publication that keeps it, web's IPv6 session is untouched.
TEST_F(DataplaneTest, ChangingTheDefaultActionEndsTheIpv6SessionsOfTheOldOne) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 50000, kServerV6, 80, text("a"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src6, kExt1V6);
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 50001, kServerV6, 80, text("w"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);
    ASSERT_EQ(r.sessions6().size(), 2u);
    const uint32_t version = r.policy().default_version;

    r.cfg.default_action = config::DefaultAction::drop;
    r.publish({web6()});
    EXPECT_NE(r.policy().default_version, version);
    // The server's answer to the masquerade session finds it withdrawn.
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 80, kExt1V6, 50000, text("b"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session), 1u);
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 50000, kServerV6, 80, text("c"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::default_action_drop), 1u);
    EXPECT_EQ(r.default_counters().sessions_closed, 1u);
    EXPECT_EQ(r.w().counters.sessions6_closed, 1u);
    // The Service's session is untouched.
    auto ss = r.sessions6();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].service_id, r.service_id("default/web"));
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 50001, kServerV6, 80, text("w"))));
    Parsed web = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(web));
    EXPECT_EQ(web.src6, kIngressV6);

    r.cfg.default_action = config::DefaultAction::masquerade;
    r.publish({web6()});
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 50000, kServerV6, 80, text("d"))));
    Parsed back = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(back));
    EXPECT_EQ(back.src6, kExt1V6);
    EXPECT_EQ(r.default_counters().sessions_created, 2u);
    EXPECT_EQ(r.total_drops(), 2u);
}

TEST_F(DataplaneTest, RepublishingTheSameDefaultActionKeepsItsIpv6Sessions) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 50000, kServerV6, 80, text("a"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    const uint32_t version = r.policy().default_version;
    r.publish({web6()});
    EXPECT_EQ(r.policy().default_version, version);
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 80, kExt1V6, 50000, text("b"))));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], to_pod6(kPod20v6, udp6_ip(kServerV6, 80, kPod20v6, 50000, text("b"), Ip6Opt{63})));
    EXPECT_EQ(r.default_counters().sessions_created, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Outside -> inside without a session

TEST_F(DataplaneTest, OutsideToInsideWithoutSessionIsDropped) {
    Rig& r = start();
    // To the ingress IP, to the masquerade address, and to a pod directly.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kSyn | kAck)));
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kExt1Addr, 40000, text("x"))));
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kPod10, 40000, kSyn)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 3u);
    EXPECT_EQ(r.total_drops(), 3u);
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.svc(kWeb).packets_in, 0u);
}

// ---------------------------------------------------------------------------------------------
// ARP

TEST_F(DataplaneTest, ArpRequestForServedIngressIpIsAnswered) {
    Rig& r = start();
    Bytes req = ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, kIngress));
    r.rx(r.ext1, req);
    r.poll();
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.eth_dst, kServerMac);
    EXPECT_EQ(p.eth_src, kExt1Mac);
    EXPECT_EQ(p.ether_type, kEtherArp);
    EXPECT_EQ(p.arp_htype, 1);
    EXPECT_EQ(p.arp_ptype, kEtherIpv4);
    EXPECT_EQ(p.arp_hlen, 6);
    EXPECT_EQ(p.arp_plen, 4);
    EXPECT_EQ(p.arp_op, 2);
    EXPECT_EQ(p.arp_sha, kExt1Mac);
    EXPECT_EQ(p.arp_spa, kIngress);
    EXPECT_EQ(p.arp_tha, kServerMac);
    EXPECT_EQ(p.arp_tpa, kServer);
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherArp, arp_body(2, kExt1Mac, kIngress, kServerMac, kServer)));
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, ArpRequestForPortAddressesIsAnswered) {
    Rig& r = start();
    r.process(r.ext1, ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, kExt1Addr)));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherArp, arp_body(2, kExt1Mac, kExt1Addr, kServerMac, kServer)));

    // Unicast request (a neighbour refreshing its entry) on the inside port.
    r.process(r.pods, ethernet(kPodsMac, kPod10Mac, kEtherArp, arp_body(1, kPod10Mac, kPod10, Mac{}, kPodsAddr)));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherArp, arp_body(2, kPodsMac, kPodsAddr, kPod10Mac, kPod10)));

    r.process(r.ext2, ethernet(kBroadcast, kBlueServerMac, kEtherArp,
                               arp_body(1, kBlueServerMac, kBlueServer, Mac{}, kExt2Addr)));
    frames = r.tx(r.ext2);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherArp,
                                  arp_body(2, kExt2Mac, kExt2Addr, kBlueServerMac, kBlueServer)));
}

TEST_F(DataplaneTest, ArpRequestsForOtherAddressesAreNotAnswered) {
    Rig& r = start();
    // An unknown address; another port's address; the ingress IP asked on the inside.
    r.process(r.ext1,
              ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, ip4(192, 0, 2, 77))));
    r.process(r.ext1, ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, kExt2Addr)));
    r.process(r.pods, ethernet(kBroadcast, kPod10Mac, kEtherArp, arp_body(1, kPod10Mac, kPod10, Mac{}, kIngress)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.drops(DropReason::local), 3u);
}

// An ingress IP is answered only on the outside ports of its Service's network: web (default
// network) on ext1 and never on ext2 (blue); a Service in blue on ext2 only; a Service in a
// network with no outside port of its own ("red") on the default network's ports, where its
// traffic leaves by the fall-through to the default table.
TEST_F(DataplaneTest, ArpForAnIngressIpOnlyOnItsNetworksPorts) {
    constexpr uint32_t kBlueIngress = ip4(198, 51, 100, 50);
    constexpr uint32_t kRedIngress = ip4(192, 0, 2, 60);
    RigOptions o;
    o.configure = [](config::Config& c) { c.vrfs.push_back(config::VrfConfig{"red", 300}); };
    o.services = {lb_service(kWeb, kIngress, {kPod10}), lb_service("default/db", kBlueIngress, {kPod11}, "blue"),
                  lb_service("default/red", kRedIngress, {kPod20}, "red")};
    Rig& r = start(o);
    auto ask = [&](uint16_t port, const Mac& from, uint32_t from_ip, uint32_t target) {
        r.process(port, ethernet(kBroadcast, from, kEtherArp, arp_body(1, from, from_ip, Mac{}, target)));
        return r.tx(port);
    };
    // Answered where the network is the Service's.
    auto frames = ask(r.ext1, kServerMac, kServer, kIngress);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherArp, arp_body(2, kExt1Mac, kIngress, kServerMac, kServer)));
    frames = ask(r.ext2, kBlueServerMac, kBlueServer, kBlueIngress);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherArp,
                                  arp_body(2, kExt2Mac, kBlueIngress, kBlueServerMac, kBlueServer)));
    frames = ask(r.ext1, kServerMac, kServer, kRedIngress);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherArp, arp_body(2, kExt1Mac, kRedIngress, kServerMac, kServer)));
    EXPECT_EQ(r.drops(DropReason::local), 0u);
    // Refused on the other network's port, counted as addressed to no address of that port.
    EXPECT_TRUE(ask(r.ext2, kBlueServerMac, kBlueServer, kIngress).empty());
    EXPECT_TRUE(ask(r.ext2, kBlueServerMac, kBlueServer, kRedIngress).empty());
    EXPECT_TRUE(ask(r.ext1, kServerMac, kServer, kBlueIngress).empty());
    EXPECT_EQ(r.drops(DropReason::local), 3u);

    // The Service moves to blue: its ingress IP moves with it.
    r.publish({lb_service(kWeb, kIngress, {kPod10}, "blue")});
    EXPECT_TRUE(ask(r.ext1, kServerMac, kServer, kIngress).empty());
    frames = ask(r.ext2, kBlueServerMac, kBlueServer, kIngress);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherArp,
                                  arp_body(2, kExt2Mac, kIngress, kBlueServerMac, kBlueServer)));
    // Two Services sharing one ingress IP in two networks: both networks' ports answer.
    r.publish({lb_service(kWeb, kIngress, {kPod10}, "blue"), lb_service("default/web2", kIngress, {kPod11})});
    EXPECT_EQ(ask(r.ext1, kServerMac, kServer, kIngress).size(), 1u);
    EXPECT_EQ(ask(r.ext2, kBlueServerMac, kBlueServer, kIngress).size(), 1u);
    EXPECT_EQ(r.drops(DropReason::local), 4u);
}

TEST_F(DataplaneTest, ArpReplyGoesToTheControlThread) {
    Rig& r = start();
    Bytes reply = ethernet(kExt1Mac, kServerBMac, kEtherArp, arp_body(2, kServerBMac, kServerB, kExt1Mac, kExt1Addr));
    r.rx(r.ext1, reply);
    r.poll();
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].frame, reply);
    EXPECT_EQ(held[0].port, r.ext1);
    EXPECT_EQ(r.w().counters.to_control, 1u);
    EXPECT_EQ(r.w().counters.held, 0u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// A router that fails over to another MAC announces it with a gratuitous ARP request (sender and
// target its own address), which is for no address of the gateway: from a neighbour the table
// holds with another MAC it goes to the control thread as it came; one that repeats the MAC the
// table has, or comes from an address the table does not hold, is dropped as before. A request
// for the gateway's own address from a moved neighbour is answered to its new MAC, through the
// control thread, which learns the MAC from the answer first.
TEST_F(DataplaneTest, ArpFromAKnownNeighbourWithANewMacGoesToTheControlThread) {
    Rig& r = start();
    static const Mac kMoved{0x52, 0x54, 0x00, 0x00, 0x10, 0x65};
    Bytes garp = ethernet(kBroadcast, kMoved, kEtherArp, arp_body(1, kMoved, kServerB, Mac{}, kServerB));
    r.process(r.ext1, garp);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto handed = r.to_control();
    ASSERT_EQ(handed.size(), 1u);
    EXPECT_EQ(handed[0].frame, garp);
    EXPECT_EQ(handed[0].port, r.ext1);
    EXPECT_FALSE(handed[0].arp_answer);
    EXPECT_EQ(r.w().counters.to_control, 1u);
    EXPECT_EQ(r.total_drops(), 0u);

    // Nothing new: the MAC the table has, an address it does not hold.
    r.process(r.ext1,
              ethernet(kBroadcast, kServerBMac, kEtherArp, arp_body(1, kServerBMac, kServerB, Mac{}, kServerB)));
    r.process(r.ext1, ethernet(kBroadcast, kMoved, kEtherArp, arp_body(1, kMoved, kUnresolved, Mac{}, kUnresolved)));
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.drops(DropReason::local), 2u);

    // A request for the port's address from the moved neighbour: answered to the new MAC, by way
    // of the control thread.
    r.process(r.ext1, ethernet(kBroadcast, kMoved, kEtherArp, arp_body(1, kMoved, kServerB, Mac{}, kExt1Addr)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    handed = r.to_control();
    ASSERT_EQ(handed.size(), 1u);
    EXPECT_TRUE(handed[0].arp_answer);
    EXPECT_EQ(handed[0].frame,
              ethernet(kMoved, kExt1Mac, kEtherArp, arp_body(2, kExt1Mac, kExt1Addr, kMoved, kServerB)));
    // From a neighbour whose MAC is the table's, answered at once as ever.
    r.process(r.ext1,
              ethernet(kBroadcast, kServerBMac, kEtherArp, arp_body(1, kServerBMac, kServerB, Mac{}, kExt1Addr)));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0],
              ethernet(kServerBMac, kExt1Mac, kEtherArp, arp_body(2, kExt1Mac, kExt1Addr, kServerBMac, kServerB)));
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.drops(DropReason::local), 2u);
}

// ---------------------------------------------------------------------------------------------
// Neighbours

TEST_F(DataplaneTest, UnresolvedNextHopHoldsTheTranslatedPacket) {
    Rig& r = start();
    Bytes payload = text("waiting for ARP");
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 7000, kUnresolved, 53, payload)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].port, r.ext1);
    EXPECT_EQ(held[0].next_hop, kUnresolved);
    // Translated already; the control thread only writes the Ethernet header.
    Bytes want = udp_ip(kIngress, 7000, kUnresolved, 53, payload, IpOpt{.ttl = 63});
    EXPECT_EQ(ip_of(held[0].frame), want);
    EXPECT_TRUE(checksums_valid(parse_ipv4(want.data(), want.size())));
    EXPECT_EQ(r.w().counters.held, 1u);
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.total_drops(), 0u);

    // Once the control thread has learnt the MAC, the flow goes straight out.
    static const Mac kLearnt{0x52, 0x54, 0x00, 0x00, 0x00, 0xc8};
    uint32_t slot = r.shared.neighbors->insert(r.ext1, kUnresolved);
    ASSERT_NE(slot, dp::NeighborTable::kNone);
    r.shared.neighbors->set_mac(slot, kLearnt.data());
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 7000, kUnresolved, 53, payload)));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kLearnt, kExt1Mac, kEtherIpv4, want));
    EXPECT_TRUE(r.to_control().empty());
}

TEST_F(DataplaneTest, IncompleteNeighbourHoldsAndGatewayIsTheNextHop) {
    RigOptions o;
    o.configure = [](config::Config& c) {
        std::erase_if(c.neighbors,
                      [](const config::NeighborConfig& n) { return n.ip == net::IpAddr::from_v4(kExt1Gw); });
    };
    Rig& r = start(o);
    // The gateway's entry exists but has no MAC yet (ARP in progress).
    ASSERT_NE(r.shared.neighbors->insert(r.ext1, kExt1Gw), dp::NeighborTable::kNone);
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kInternet, 443, kSyn)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].port, r.ext1);
    EXPECT_EQ(held[0].next_hop, kExt1Gw) << "the next hop is the gateway, not the destination";
    EXPECT_EQ(ip_of(held[0].frame), tcp_ip(kIngress, 40000, kInternet, 443, kSyn, {}, IpOpt{.ttl = 63}));
    EXPECT_EQ(r.w().counters.held, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// A session caches its next hop's table slot. When the control thread frees that entry and the
// slot goes to another next hop (aging, recycling in a full table), the session's next packet
// must not go out with the stranger's MAC: the worker sees the slot holds another key, looks its
// own next hop up again, finds none and holds the packet for ARP; once the next hop is learned
// again (in another slot), the flow goes straight out to it.
TEST_F(DataplaneTest, SessionWhoseCachedNeighbourSlotWasRecycledLooksItsNextHopUpAgain) {
    Rig& r = start();
    dp::NeighborTable& nt = *r.shared.neighbors;
    Bytes payload = text("slot changes hands");
    Bytes want = udp_ip(kIngress, 7000, kServer, 53, payload, IpOpt{.ttl = 63});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 7000, kServer, 53, payload)));
    ASSERT_EQ(r.tx(r.ext1), std::vector<Bytes>{ethernet(kServerMac, kExt1Mac, kEtherIpv4, want)});
    const uint32_t slot = nt.find(r.ext1, kServer);
    ASSERT_NE(slot, dp::NeighborTable::kNone);
    ASSERT_EQ(r.sessions().size(), 1u);
    ASSERT_EQ(r.sessions()[0].out_neighbor, slot) << "the session caches the slot";

    // The control thread frees the entry; after the grace period the slot takes another next hop
    // (one whose probe reaches it), with another MAC.
    nt.erase(slot);
    nt.release(slot);
    static const Mac kStranger{0x52, 0x54, 0x00, 0x00, 0x0d, 0x0d};
    uint32_t stranger = 0;
    for (uint32_t ip = ip4(192, 0, 2, 2); ip < ip4(192, 0, 2, 2) + 1000000 && !stranger; ++ip) {
        if (ip == kServer) continue;
        uint32_t s = nt.insert(r.ext1, ip);
        ASSERT_NE(s, dp::NeighborTable::kNone);
        if (s == slot) {
            stranger = ip;
        } else if (nt.find(r.ext1, ip) == s && s != dp::NeighborTable::kNone) {
            bool fresh = true;  // only take back what this loop added
            for (const auto& n : r.cfg.neighbors)
                if (n.ip == net::IpAddr::from_v4(ip)) fresh = false;
            if (fresh) {
                nt.erase(s);
                nt.release(s);
            }
        }
    }
    ASSERT_NE(stranger, 0u) << "no next hop landed in the freed slot";
    nt.set_mac(slot, kStranger.data());
    EXPECT_EQ(nt.find(r.ext1, kServer), dp::NeighborTable::kNone);

    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 7000, kServer, 53, payload)));
    EXPECT_TRUE(r.tx(r.ext1).empty()) << "sent with the MAC of the slot's new owner";
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].port, r.ext1);
    EXPECT_EQ(held[0].next_hop, kServer);
    EXPECT_EQ(ip_of(held[0].frame), want);
    EXPECT_EQ(r.w().counters.held, 1u);

    // Learned again, in a slot of its own: straight out, and the session caches the new slot.
    uint32_t again = nt.insert(r.ext1, kServer);
    ASSERT_NE(again, dp::NeighborTable::kNone);
    ASSERT_NE(again, slot);
    nt.set_mac(again, kServerMac.data());
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 7000, kServer, 53, payload)));
    EXPECT_EQ(r.tx(r.ext1), std::vector<Bytes>{ethernet(kServerMac, kExt1Mac, kEtherIpv4, want)});
    EXPECT_EQ(r.sessions()[0].out_neighbor, again);
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.total_drops(), 0u);
    // And the worker marked the entry in use, which the control thread reads for aging.
    EXPECT_TRUE(nt.take_used(again));
    EXPECT_FALSE(nt.take_used(again));
}

TEST_F(DataplaneTest, ABurstThroughSeveralNextHopsOfBothFamiliesTakesEachOnesMac) {
    // Output remembers the last next hop of each family it resolved within a burst: next hops of
    // both families interleaved in one burst must each still get their own MAC, and a MAC learnt
    // between bursts reaches the next burst.
    using namespace v6;
    Rig& r = start(dual_stack());
    dp::NeighborTable& nt = *r.shared.neighbors;
    dp::NeighborTable6& nt6 = *r.shared.neighbors6;
    struct Want {
        bool v6;
        Ip6Addr dst6;
        uint32_t dst;
        Mac mac;  // the next hop's MAC; the servers' change between the bursts
    };
    // Each family's first and last next hop is its server, so that a last next hop kept from
    // one burst to the next would send the second burst to the server's old MAC.
    const std::vector<Want> order = {
        {false, {}, kServer, kServerMac},   {true, kServerV6, 0, kServerMac},   {false, {}, kServerB, kServerBMac},
        {true, kInternetV6, 0, kExt1GwMac}, {false, {}, kInternet, kExt1GwMac}, {false, {}, kServer, kServerMac},
        {true, kServerV6, 0, kServerMac},   {true, kInternetV6, 0, kExt1GwMac}, {false, {}, kServerB, kServerBMac},
        {false, {}, kServer, kServerMac},   {true, kInternetV6, 0, kExt1GwMac}, {true, kServerV6, 0, kServerMac},
    };
    auto burst = [&] {
        std::vector<In> in;
        for (size_t k = 0; k < order.size(); ++k) {
            auto sport = static_cast<uint16_t>(7000 + k);
            const Bytes payload = text("next hops");
            in.push_back({r.pods, order[k].v6
                                      ? from_pod6(kPod10v6, udp6_ip(kPod10v6, sport, order[k].dst6, 53, payload))
                                      : r.from_pod(kPod10, udp_ip(kPod10, sport, order[k].dst, 53, payload))});
        }
        r.process(0, in);
        return r.tx(r.ext1);
    };
    auto check = [&](const std::vector<Bytes>& frames, const Mac& server_mac) {
        ASSERT_EQ(frames.size(), order.size());
        for (size_t k = 0; k < order.size(); ++k) {
            Parsed p = parse_frame(frames[k]);
            ASSERT_TRUE(checksums_valid(p)) << "frame " << k;
            EXPECT_EQ(p.ether_type, order[k].v6 ? kEtherIpv6 : kEtherIpv4) << "frame " << k;
            if (order[k].v6)
                EXPECT_EQ(p.dst6, order[k].dst6) << "frame " << k << " in packet order";
            else
                EXPECT_EQ(p.dst, order[k].dst) << "frame " << k << " in packet order";
            EXPECT_EQ(p.sport, 7000 + k) << "frame " << k;
            bool server = order[k].v6 ? order[k].dst6 == kServerV6 : order[k].dst == kServer;
            EXPECT_EQ(p.eth_dst, server ? server_mac : order[k].mac) << "frame " << k;
            EXPECT_EQ(p.eth_src, kExt1Mac) << "frame " << k;
        }
    };
    check(burst(), kServerMac);
    // Each next hop's entry was marked in use, as the control thread's aging reads it.
    for (uint32_t hop : {kServer, kServerB, kExt1Gw})
        EXPECT_TRUE(nt.take_used(nt.find(r.ext1, hop))) << hop;
    for (const Ip6Addr& hop : {kServerV6, kExt1GwV6})
        EXPECT_TRUE(nt6.take_used(nt6.find(r.ext1, hop.data())));

    // Both servers' MACs change between the bursts (a new NIC behind the same addresses).
    static const Mac kNewServerMac{0x52, 0x54, 0x00, 0x00, 0x0e, 0x64};
    nt.set_mac(nt.find(r.ext1, kServer), kNewServerMac.data());
    nt6.set_mac(nt6.find(r.ext1, kServerV6.data()), kNewServerMac.data());
    check(burst(), kNewServerMac);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_TRUE(r.to_control().empty());
}

TEST_F(DataplaneTest, IncompleteIpv6NeighbourHoldsAndGatewayIsTheNextHop) {
    using namespace v6;
    RigOptions o = dual_stack();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        std::erase_if(c.neighbors, [](const config::NeighborConfig& n) { return n.ip == addr6(kExt1GwV6); });
    };
    Rig& r = start(o);
    // The router's entry exists but has no MAC yet (NS in progress).
    ASSERT_NE(r.shared.neighbors6->insert(r.ext1, kExt1GwV6.data()), dp::NeighborTable6::kNone);
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kInternetV6, 443, kSyn)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].port, r.ext1);
    EXPECT_EQ(held[0].next_hop6, kExt1GwV6) << "the next hop is the router, not the destination";
    Bytes want = tcp6_ip(kIngressV6, 40000, kInternetV6, 443, kSyn, {}, Ip6Opt{63});
    EXPECT_EQ(ip_of(held[0].frame), want);
    EXPECT_TRUE(checksums_valid(parse_ipv6(want.data(), want.size())));
    EXPECT_EQ(r.w().counters.held, 1u);
    EXPECT_EQ(r.sessions6().size(), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// The IPv6 twin: a session's cached NeighborTable6 slot freed and given to another next hop; the
// next packet is held for NDP rather than sent with the stranger's MAC, then goes straight out
// once the next hop is learned again in a slot of its own.
TEST_F(DataplaneTest, Ipv6SessionWhoseCachedNeighbourSlotWasRecycledLooksItsNextHopUpAgain) {
    using namespace v6;
    Rig& r = start(dual_stack());
    dp::NeighborTable6& nt = *r.shared.neighbors6;
    Bytes payload = text("slot changes hands");
    Bytes want = udp6_ip(kIngressV6, 7000, kServerV6, 53, payload, Ip6Opt{63});
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 7000, kServerV6, 53, payload)));
    ASSERT_EQ(r.tx(r.ext1), std::vector<Bytes>{ethernet(kServerMac, kExt1Mac, kEtherIpv6, want)});
    const uint32_t slot = nt.find(r.ext1, kServerV6.data());
    ASSERT_NE(slot, dp::NeighborTable6::kNone);
    ASSERT_EQ(r.sessions6().size(), 1u);
    ASSERT_EQ(r.sessions6()[0].out_neighbor, slot) << "the session caches the slot";

    nt.erase(slot);
    nt.release(slot);
    static const Mac kStranger{0x52, 0x54, 0x00, 0x00, 0x0d, 0x0d};
    Ip6Addr stranger{};
    bool found = false;
    for (uint32_t i = 2; i < 1000000 && !found; ++i) {
        Ip6Addr ip = ip6("2001:db8:2::");
        put32(&ip[12], i);
        if (ip == kServerV6) continue;
        uint32_t s = nt.insert(r.ext1, ip.data());
        ASSERT_NE(s, dp::NeighborTable6::kNone);
        if (s == slot) {
            stranger = ip;
            found = true;
        } else if (nt.find(r.ext1, ip.data()) == s) {
            bool fresh = true;  // only take back what this loop added
            for (const auto& n : r.cfg.neighbors)
                if (n.ip == addr6(ip)) fresh = false;
            if (fresh) {
                nt.erase(s);
                nt.release(s);
            }
        }
    }
    ASSERT_TRUE(found) << "no next hop landed in the freed slot";
    nt.set_mac(slot, kStranger.data());
    EXPECT_EQ(nt.find(r.ext1, kServerV6.data()), dp::NeighborTable6::kNone);
    EXPECT_EQ(nt.find(r.ext1, stranger.data()), slot);

    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 7000, kServerV6, 53, payload)));
    EXPECT_TRUE(r.tx(r.ext1).empty()) << "sent with the MAC of the slot's new owner";
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].port, r.ext1);
    EXPECT_EQ(held[0].next_hop6, kServerV6);
    EXPECT_EQ(ip_of(held[0].frame), want);
    EXPECT_EQ(r.w().counters.held, 1u);

    uint32_t again = nt.insert(r.ext1, kServerV6.data());
    ASSERT_NE(again, dp::NeighborTable6::kNone);
    ASSERT_NE(again, slot);
    nt.set_mac(again, kServerMac.data());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 7000, kServerV6, 53, payload)));
    EXPECT_EQ(r.tx(r.ext1), std::vector<Bytes>{ethernet(kServerMac, kExt1Mac, kEtherIpv6, want)});
    EXPECT_EQ(r.sessions6()[0].out_neighbor, again);
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_TRUE(nt.take_used(again));
    EXPECT_FALSE(nt.take_used(again));
}

// ---------------------------------------------------------------------------------------------
// TTL

// Time Exceeded for TTL 1 and 0, on every path: test_icmp_reply.cpp.

// ---------------------------------------------------------------------------------------------
// The gateway's own addresses

TEST_F(DataplaneTest, EchoRequestToPortAddressIsAnswered) {
    Rig& r = start();
    Bytes data = text("ping the gateway");
    r.rx(r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kPodsAddr, 0x77, 5, data, IpOpt{.ttl = 9})));
    r.poll();
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.icmp_type, 0);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  echo_ip(false, kPodsAddr, kPod10, 0x77, 5, data, IpOpt{.ttl = 64})));
    EXPECT_TRUE(r.sessions().empty());

    // From outside, to ext1's address.
    r.process(r.ext1, r.from_ext1(echo_ip(true, kServer, kExt1Addr, 0x78, 1, data)));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  echo_ip(false, kExt1Addr, kServer, 0x78, 1, data, IpOpt{.ttl = 64})));
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.total_drops(), 0u);
}

// An all-zero echo (identifier 0, sequence 0, no data) sums to zero: its reply's only valid
// checksum is 0xFFFF, which an incremental update from the request's gives as 0x0000 unless told
// (a fuzz run found the gateway answering with 0x0000).
TEST_F(DataplaneTest, AllZeroEchoIsAnsweredWithChecksumFFFF) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kPodsAddr, 0, 0, {})));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv4, echo_ip(false, kPodsAddr, kPod10, 0, 0, {}, IpOpt{.ttl = 64})));
    EXPECT_EQ(frames[0].size(), 14u + 20u + 8u);
    EXPECT_EQ((std::pair{frames[0][14 + 20 + 2], frames[0][14 + 20 + 3]}), (std::pair<uint8_t, uint8_t>{0xff, 0xff}));
}

// The reply's words sum to -0 (type 0, identifier 0xFFFF, sequence 0): a sender computing from
// scratch writes 0x0000, the incremental update 0xFFFF; both verify, and the whole message sums to
// 0xFFFF as a receiver checks it.
TEST_F(DataplaneTest, EchoReplySummingToNegativeZeroVerifies) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kPodsAddr, 0xffff, 0, {})));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.icmp_type, 0);
    EXPECT_EQ(p.icmp_ident, 0xffff);
    EXPECT_EQ(p.l4_csum, 0xffff);
    uint32_t sum = 0;
    for (size_t i = 14 + 20; i + 1 < frames[0].size(); i += 2)
        sum += uint32_t{frames[0][i]} << 8 | frames[0][i + 1];
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    EXPECT_EQ(sum, 0xffffu);
    EXPECT_EQ(r.total_drops(), 0u);
}

// The ICMPv6 twin of the two tests above: ICMPv6 sums a pseudo-header, so no echo sums to +0 and
// 0xFFFF is never the only valid checksum; the edge is a reply whose words sum to -0, where a
// sender computes 0x0000 and the incremental update from the request's may give 0xFFFF. The reply
// must verify as a receiver checks it, and be the reply in every other byte.
TEST_F(DataplaneTest, Ipv6EchoReplySummingToNegativeZeroVerifies) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    // The identifier that makes (kPodsV6 -> kPod10v6, echo reply, sequence 0, no data) sum to -0.
    Bytes probe = echo6_ip(false, kPodsV6, kPod10v6, 0, 0, {});
    Bytes l4(probe.begin() + 40, probe.end());
    l4[2] = l4[3] = 0;
    const uint16_t ident = finish(sum16(l4.data(), l4.size(), pseudo_sum6(kPodsV6, kPod10v6, kProtoIcmp6, 8)));
    r.process(r.pods, from_pod6(kPod10v6, echo6_ip(true, kPod10v6, kPodsV6, ident, 0, {})));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    Bytes want = to_pod6(kPod10v6, echo6_ip(false, kPodsV6, kPod10v6, ident, 0, {}, Ip6Opt{64}));
    ASSERT_EQ(get16(&want[14 + 40 + 2]), 0) << "the reply does not sum to -0: the test lost its point";
    ASSERT_EQ(frames[0].size(), want.size());
    uint32_t sum = sum16(&frames[0][14 + 40], 8, pseudo_sum6(kPodsV6, kPod10v6, kProtoIcmp6, 8));
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    EXPECT_EQ(sum, 0xffffu) << "the reply does not verify";
    const uint16_t csum = get16(&frames[0][14 + 40 + 2]);
    EXPECT_TRUE(csum == 0 || csum == 0xffff) << csum;
    frames[0][14 + 40 + 2] = frames[0][14 + 40 + 3] = 0;
    EXPECT_EQ(frames[0], want);
    EXPECT_TRUE(r.sessions6().empty());
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, OtherTrafficToTheGatewayIsDropped) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kPodsAddr, 22, kSyn)));
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 40000, kPodsAddr, 22, text("x"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::local), 1u);
    // On ext1, the inside port's address is not the gateway's to answer: no session.
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
    EXPECT_EQ(r.total_drops(), 2u);
    EXPECT_TRUE(r.sessions().empty());
}

// ---------------------------------------------------------------------------------------------
// Frames the control thread injects

TEST_F(DataplaneTest, InjectedFramesAreTransmittedOnTheirPort) {
    RigOptions o;
    o.inject = true;
    Rig& r = start(o);
    Bytes frame = ethernet(kBroadcast, kExt2Mac, kEtherArp, arp_body(1, kExt2Mac, kExt2Addr, Mac{}, kBlueGw));
    auto inject = [&](uint16_t port) {
        rte_mbuf* m = rte_pktmbuf_alloc(r.pool());
        ASSERT_NE(m, nullptr);
        std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
        m->port = port;
        ASSERT_EQ(rte_ring_enqueue(r.w().inject, m), 0);
    };
    inject(r.ext2);
    inject(99);
    r.poll();
    auto frames = r.tx(r.ext2);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], frame);
    EXPECT_EQ(r.drops(DropReason::local), 1u);
}

}  // namespace
}  // namespace egw::test
