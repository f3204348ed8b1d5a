// SPDX-License-Identifier: Apache-2.0
//
// Ingress to the ingress IPs the gateway serves (dataplane/ingress.h): connections from outside
// to a Service's ports on its ingress IP are routed untranslated into the cluster toward
// ingress.via, the cluster's answers leave untranslated in the Service's network, and a pod
// connecting to a served ingress IP (hairpin) is refused with ICMP administratively prohibited.
// Every frame is compared byte for byte with the one expected, built independently.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "dataplane/stages.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;
using dp::IcmpError;

constexpr uint32_t kTcp80 = uint32_t{kProtoTcp} << 16 | 80;
constexpr uint32_t kUdp53 = uint32_t{kProtoUdp} << 16 | 53;
constexpr uint32_t kBlueIngress = ip4(198, 51, 100, 50);
const std::string kShop = "default/shop";

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

// web (ingress 192.0.2.50, default network) listening on TCP 80 and UDP 53; shop (ingress
// 198.51.100.50, network blue) on TCP 80.
model::ServiceState web() {
    model::ServiceState s = lb_service(kWeb, kIngress, {kPod10, kPod11});
    s.ports = {kTcp80, kUdp53};
    return s;
}

model::ServiceState shop() {
    model::ServiceState s = lb_service(kShop, kBlueIngress, {kPod20}, "blue");
    s.ports = {kTcp80};
    return s;
}

// The ingress next hop: the cluster's router on the pods port (a node whose proxy takes the
// load-balancer IPs).
RigOptions ingress_rig(bool with_next_hop = true) {
    RigOptions o;
    o.services = {web(), shop()};
    if (with_next_hop)
        o.configure = [](config::Config& c) {
            c.ingress.via = net::IpAddr::from_v4(kPodsRouter);
            c.ingress.port = "pods";
        };
    return o;
}

// What a node behind the pods port sends: from the cluster router's MAC to the pods port.
Bytes from_cluster(const Rig& r, const Bytes& ip) {
    (void)r;
    return ethernet(kPodsMac, kPodsRouterMac, kEtherIpv4, ip);
}

uint64_t sent(const Rig& r, IcmpError e) {
    return r.workers.at(0)->counters.icmp_sent[static_cast<unsigned>(e)];
}

// A client's connection to web's ingress IP goes into the cluster as it came (TTL one lower),
// to the ingress next hop's MAC; the cluster's answers go back out of ext1 untranslated. No
// session and no NAT port is used either way.
TEST_F(DataplaneTest, AConnectionToAServedIngressIpGoesIntoTheClusterAndItsAnswerComesBackUntranslated) {
    Rig& r = start(ingress_rig());
    Bytes syn = tcp_ip(kServer, 51000, kIngress, 80, kSyn, {}, IpOpt{.ttl = 64, .id = 0x4242});
    r.process(r.ext1, r.from_ext1(syn));
    auto in = r.tx(r.pods);
    Parsed p = single(in);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              tcp_ip(kServer, 51000, kIngress, 80, kSyn, {}, IpOpt{.ttl = 63, .id = 0x4242})));
    EXPECT_TRUE(r.tx(r.ext1).empty());

    Bytes syn_ack = tcp_ip(kIngress, 80, kServer, 51000, kSyn | kAck, {}, IpOpt{.ttl = 64, .id = 0x4343});
    r.process(r.pods, from_cluster(r, syn_ack));
    auto out = r.tx(r.ext1);
    p = single(out);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(out[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                               tcp_ip(kIngress, 80, kServer, 51000, kSyn | kAck, {}, IpOpt{.ttl = 63, .id = 0x4343})));

    // Data both ways, and UDP to the other port the Service lists.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 51000, kIngress, 80, kAck | kPsh, text("GET / HTTP/1.0\r\n\r\n"))));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    r.process(r.pods, from_cluster(r, tcp_ip(kIngress, 80, kServer, 51000, kAck | kPsh, text("HTTP/1.0 200 OK\r\n"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    Bytes query = udp_ip(kServerB, 5353, kIngress, 53, text("query"));
    r.process(r.ext1, r.from_ext1(query, kServerBMac));
    in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 1u);
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              udp_ip(kServerB, 5353, kIngress, 53, text("query"), IpOpt{.ttl = 63})));
    r.process(r.pods, from_cluster(r, udp_ip(kIngress, 53, kServerB, 5353, text("answer"))));
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], ethernet(kServerBMac, kExt1Mac, kEtherIpv4,
                               udp_ip(kIngress, 53, kServerB, 5353, text("answer"), IpOpt{.ttl = 63})));

    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.ingress_in, 3u);
    EXPECT_EQ(r.w().counters.ingress_out, 3u);
    EXPECT_EQ(r.w().counters.sessions_created, 0u);
    EXPECT_EQ(r.svc(kWeb).packets_in, 0u) << "not the Service's translated traffic";
    EXPECT_EQ(r.total_drops(), 0u);
}

// The answer is routed in the Service's network: shop's (network blue) leaves through ext2 to a
// client there, and falls through to the default table for a destination blue has no route to,
// as `ip rule ... lookup` does (OVN-Kubernetes E7: replies use the Service's network).
TEST_F(DataplaneTest, TheClustersAnswerIsRoutedInTheServicesNetwork) {
    Rig& r = start(ingress_rig());
    r.process(r.ext2, r.from_ext2(tcp_ip(kBlueServer, 52000, kBlueIngress, 80, kSyn)));
    auto in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 1u);
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              tcp_ip(kBlueServer, 52000, kBlueIngress, 80, kSyn, {}, IpOpt{.ttl = 63})));

    r.process(r.pods, from_cluster(r, tcp_ip(kBlueIngress, 80, kBlueServer, 52000, kSyn | kAck)));
    auto out = r.tx(r.ext2);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], ethernet(kBlueServerMac, kExt2Mac, kEtherIpv4,
                               tcp_ip(kBlueIngress, 80, kBlueServer, 52000, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.tx(r.ext1).empty());

    // No route in blue: the default table's (via ext1's gateway).
    r.process(r.pods, from_cluster(r, tcp_ip(kBlueIngress, 80, kInternet, 52001, kSyn | kAck)));
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], ethernet(kExt1GwMac, kExt1Mac, kEtherIpv4,
                               tcp_ip(kBlueIngress, 80, kInternet, 52001, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.w().counters.ingress_out, 2u);

    // Web's answer to the blue client is routed in web's network (the default one), not blue's:
    // the default table has no route to 198.51.100.0/24 but through its default route.
    r.process(r.pods, from_cluster(r, tcp_ip(kIngress, 80, kBlueServer, 52002, kSyn | kAck)));
    EXPECT_EQ(r.tx(r.ext2).size(), 0u);
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// Only the Service's ports are ingress, only from the ports where the gateway answers ARP for
// the address, and only while the Service is served here: anything else to the ingress IP is
// what it was, a packet with no session.
TEST_F(DataplaneTest, OnlyTheServicesPortsFromItsNetworkAreIngress) {
    Rig& r = start(ingress_rig());
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 51000, kIngress, 81, kSyn)));      // not a Service port
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 51000, kIngress, 80)));            // TCP 80, not UDP
    r.process(r.ext2, r.from_ext2(tcp_ip(kBlueServer, 51000, kIngress, 80, kSyn)));  // web's address on blue's port
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 51000, kBlueIngress, 80, kSyn)));  // shop's on ext1
    r.process(r.ext1, r.from_ext1(echo_ip(true, kServer, kIngress, 7)));             // ping
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 5u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);

    // Served elsewhere now: its address and ports are no longer the gateway's.
    r.publish({shop()});
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 51000, kIngress, 80, kSyn)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    // (Mid-stream: a SYN+ACK with no session opens none, tcp_not_opening.)
    r.process(r.pods, from_cluster(r, tcp_ip(kIngress, 80, kServer, 51000, kAck | kPsh, text("late"))));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(parse_frame(out[0]).src, kExt1Addr) << "no longer ingress: the default action's masquerade";
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
    EXPECT_EQ(r.w().counters.ingress_out, 0u);

    // And back: ingress again.
    r.publish({web(), shop()});
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 51001, kIngress, 80, kSyn)));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    EXPECT_EQ(r.w().counters.ingress_in, 1u);
}

// A reply to one of the Service's own translated sessions still reaches its pod: the session is
// looked up first, and ingress is only for what has none.
TEST_F(DataplaneTest, RepliesToTranslatedSessionsAreNotIngress) {
    Rig& r = start(ingress_rig());
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    Parsed out = single(r.tx(r.ext1));
    ASSERT_EQ(out.src, kIngress);
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, out.sport, kSyn | kAck)));
    auto back = r.tx(r.pods);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                tcp_ip(kServer, 80, kPod10, 40000, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
}

// Without ingress.via the gateway has nowhere to send them: dropped under their own reason.
TEST_F(DataplaneTest, WithoutAnIngressNextHopIngressIsDroppedAndCounted) {
    Rig& r = start(ingress_rig(false));
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 51000, kIngress, 80, kSyn)));
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 51000, kIngress, 53)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::ingress_no_next_hop), 2u);
    EXPECT_EQ(r.total_drops(), 2u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
}

// The TTL rule applies to ingress as to any forwarded packet: an expiring one gets a Time
// Exceeded from the receiving port's address and is not forwarded.
TEST_F(DataplaneTest, IngressWithAnExpiringTtlGetsTimeExceeded) {
    Rig& r = start(ingress_rig());
    Bytes probe = udp_ip(kServer, 33434, kIngress, 53, text("probe"), IpOpt{.ttl = 1});
    r.process(r.ext1, r.from_ext1(probe));
    EXPECT_TRUE(r.tx(r.pods).empty());
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kExt1Addr);
    EXPECT_EQ(p.dst, kServer);
    EXPECT_EQ(p.icmp_type, 11);
    ASSERT_TRUE(p.inner);
    EXPECT_EQ(p.inner->dst, kIngress);
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 1u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
}

// Ingress goes through the one forwarding body, the egress MTU included: larger than the inside
// port's MTU with DF set, the client gets Fragmentation Needed with that MTU from the receiving
// port's address (quoting its datagram), where output alone would drop it unanswered and the
// client's path-MTU discovery would never learn why (a black hole for the Service's clients).
// Exactly the MTU goes in whole; without DF, in fragments.
TEST_F(DataplaneTest, IngressLargerThanTheInsideMtuGetsFragmentationNeededOrGoesInFragments) {
    RigOptions o = ingress_rig();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        for (auto& port : c.ports)
            if (port.name == "pods") port.mtu = 1400;
    };
    Rig& r = start(o);
    Bytes data(1401 - 40, 0x5a);
    Bytes big = tcp_ip(kServer, 51000, kIngress, 80, kAck, data, IpOpt{.frag = 0x4000});
    ASSERT_EQ(big.size(), 1401u);
    r.process(r.ext1, r.from_ext1(big));
    EXPECT_TRUE(r.tx(r.pods).empty());
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    Bytes quote(big.begin(), big.begin() + 576 - 28);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  ipv4(kExt1Addr, kServer, kProtoIcmp, icmp_error(3, 4, quote, 1400),
                                       IpOpt{.ttl = 64, .id = 0, .tos = 0xc0})));
    EXPECT_EQ(sent(r, IcmpError::fragmentation_needed), 1u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
    EXPECT_EQ(r.total_drops(), 0u);

    Bytes exact = tcp_ip(kServer, 51000, kIngress, 80, kAck, Bytes(1400 - 40, 1), IpOpt{.frag = 0x4000});
    r.process(r.ext1, r.from_ext1(exact));
    auto in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 1u);
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              tcp_ip(kServer, 51000, kIngress, 80, kAck, Bytes(1400 - 40, 1),
                                     IpOpt{.ttl = 63, .frag = 0x4000})));

    Bytes loose = tcp_ip(kServer, 51000, kIngress, 80, kAck, data);
    r.process(r.ext1, r.from_ext1(loose));
    in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 2u) << "cut to the inside port's MTU";
    std::vector<Bytes> ips;
    for (const Bytes& f : in) {
        EXPECT_LE(f.size(), 1414u);
        ips.emplace_back(f.begin() + 14, f.end());
    }
    EXPECT_EQ(reassemble(ips), tcp_ip(kServer, 51000, kIngress, 80, kAck, data, IpOpt{.ttl = 63}));
    EXPECT_EQ(r.w().counters.ingress_in, 2u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// An ICMP error about the cluster's answer (a router's Fragmentation Needed on the way to the
// client) goes into the cluster too, untouched, so that the node's path-MTU discovery works.
TEST_F(DataplaneTest, AnIcmpErrorAboutAnIngressAnswerGoesIntoTheCluster) {
    Rig& r = start(ingress_rig());
    Bytes answer = tcp_ip(kIngress, 80, kServer, 51000, kAck, Bytes(64, 0x55), IpOpt{.ttl = 60});
    Bytes error = ipv4(kExt1Gw, kIngress, kProtoIcmp, icmp_error(3, 4, answer, 1400));
    r.process(r.ext1, r.from_ext1(error, kExt1GwMac));
    auto in = r.tx(r.pods);
    Parsed p = single(in);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              ipv4(kExt1Gw, kIngress, kProtoIcmp, icmp_error(3, 4, answer, 1400), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.w().counters.ingress_in, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// Hairpin: a pod connecting to a served ingress IP on one of its Service's ports is refused at
// once (its connect fails with "host unreachable" instead of timing out), counted as the ICMP
// error it got, and never forwarded. The refusal comes from the ingress IP the pod addressed, as
// IPv6's does (RFC 1122 3.2.2, RFC 4443 2.2(a)).
TEST_F(DataplaneTest, HairpinToAServedIngressIpIsRefusedWithAdministrativelyProhibited) {
    Rig& r = start(ingress_rig());
    Bytes syn = tcp_ip(kPod10, 40000, kIngress, 80, kSyn, {}, IpOpt{.ttl = 64, .id = 0x0707});
    r.process(r.pods, r.from_pod(kPod10, syn));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  ipv4(kIngress, kPod10, kProtoIcmp, icmp_error(3, 13, syn),
                                       IpOpt{.ttl = 64, .id = 0, .tos = 0xc0})));
    // Another pod to another Service's address (shop's, in blue), UDP to web's.
    r.process(r.pods, r.from_pod(kPod20, tcp_ip(kPod20, 40001, kBlueIngress, 80, kSyn)));
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40002, kIngress, 53)));
    EXPECT_EQ(r.tx(r.pods).size(), 2u);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.ext2).empty());
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(sent(r, IcmpError::admin_prohibited), 3u);
    EXPECT_EQ(r.total_drops(), 0u) << "an answered packet is not a drop";

    // With the rate limit spent, the refusal is a drop counted as hairpin.
    r.w().icmp_tat = r.w().now + (uint64_t{1} << 50);
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40003, kIngress, 80, kSyn)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::hairpin), 1u);

    // Other ports of the ingress IP are the gateway's own address as before: TCP dropped as
    // local, UDP answered with port unreachable.
    r.w().icmp_tat = 0;
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40004, kIngress, 22, kSyn)));
    EXPECT_EQ(r.drops(DropReason::local), 1u);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40005, kIngress, 54)));
    EXPECT_EQ(single(r.tx(r.pods)).icmp_code, 3);
}

}  // namespace
}  // namespace egw::test
