// SPDX-License-Identifier: Apache-2.0
//
// Ingress to the IPv6 ingress IPs the gateway serves (dataplane/ingress.h), the IPv6 twins of
// test_ingress.cpp: connections from outside to a Service's ports on its IPv6 ingress IP are
// routed untranslated into the cluster toward ingress.via6, the cluster's answers leave
// untranslated in the Service's network, ICMPv6 errors about them take the same way, and a pod
// connecting to a served IPv6 ingress IP (hairpin) is refused with ICMPv6 administratively
// prohibited (1/1). Every frame is compared byte for byte with the one expected, built
// independently, and its checksums recomputed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dataplane/stages.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using namespace std_rig6;
using dp::DropReason;
using dp::IcmpError;

constexpr uint32_t kTcp80 = uint32_t{kProtoTcp} << 16 | 80;
constexpr uint32_t kUdp53 = uint32_t{kProtoUdp} << 16 | 53;
constexpr uint32_t kBlueIngress = ip4(198, 51, 100, 50);
const std::string kShop = "default/shop";

const Ip6Addr kServerBv6 = ip6("2001:db8:2::101");
const Ip6Addr kBlueIngressV6 = ip6("2001:db8:3::50");

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

std::vector<net::IpAddr> addrs6(std::initializer_list<Ip6Addr> l) {
    std::vector<net::IpAddr> v;
    for (const Ip6Addr& a : l)
        v.push_back(addr6(a));
    std::sort(v.begin(), v.end());
    return v;
}

// web (ingress 192.0.2.50 and 2001:db8:2::50, default network) listening on TCP 80 and UDP 53;
// shop (198.51.100.50 and 2001:db8:3::50, network blue) on TCP 80.
model::ServiceState web() {
    model::ServiceState s = lb_service(kWeb, kIngress, {kPod10, kPod11});
    s.ingress_ipv6 = addr6(kIngressV6);
    s.endpoint_ipv6s = addrs6({kPod10v6, kPod11v6});
    s.ports = {kTcp80, kUdp53};
    return s;
}

model::ServiceState shop() {
    model::ServiceState s = lb_service(kShop, kBlueIngress, {kPod20}, "blue");
    s.ingress_ipv6 = addr6(kBlueIngressV6);
    s.endpoint_ipv6s = addrs6({kPod20v6});
    s.ports = {kTcp80};
    return s;
}

// The standard rig, dual-stack (std_rig6::configure_ipv6(), and ext1's second server as a static
// neighbour), with the IPv6 ingress next hop: the cluster's router on the pods port (a node whose proxy takes the
// load-balancer IPs). `via6` false: only the IPv4 one (ingress.via) is configured.
RigOptions ingress_rig(bool via6 = true, std::function<void(config::Config&)> more = {}) {
    RigOptions o;
    o.services = {web(), shop()};
    o.configure = [via6, more](config::Config& c) {
        configure_ipv6(c);
        add_neighbor6(c, "ext1", kServerBv6, kServerBMac);
        c.ingress.port = "pods";
        c.ingress.via = net::IpAddr::from_v4(kPodsRouter);
        if (via6) c.ingress.via6 = addr6(kPodsRouterV6);
        if (more) more(c);
    };
    return o;
}

Mac pod_mac(const Ip6Addr& pod) {
    return pod == kPod11v6 ? kPod11Mac : pod == kPod20v6 ? kPod20Mac : kPod10Mac;
}
Bytes from_pod6(const Ip6Addr& pod, const Bytes& ip) {
    return ethernet(kPodsMac, pod_mac(pod), kEtherIpv6, ip);
}
Bytes from_ext1_6(const Bytes& ip, const Mac& src = kServerMac) {
    return ethernet(kExt1Mac, src, kEtherIpv6, ip);
}
Bytes from_ext2_6(const Bytes& ip) {
    return ethernet(kExt2Mac, kBlueServerMac, kEtherIpv6, ip);
}
// What a node behind the pods port sends: from the cluster router's MAC to the pods port.
Bytes from_cluster6(const Bytes& ip) {
    return ethernet(kPodsMac, kPodsRouterMac, kEtherIpv6, ip);
}
Bytes to_cluster6(const Bytes& ip) {
    return ethernet(kPodsRouterMac, kPodsMac, kEtherIpv6, ip);
}

// The packet as it must leave: the same bytes with the hop limit one lower.
Bytes forwarded(Bytes ip) {
    --ip[7];
    return ip;
}

// The body of an ICMPv6 error: bytes 4-7 `aux`, then the quote.
Bytes error_body(uint32_t aux, const Bytes& quote) {
    Bytes b(4 + quote.size());
    put32(b.data(), aux);
    std::copy(quote.begin(), quote.end(), b.begin() + 4);
    return b;
}

// The ICMPv6 error the gateway must send: from `from` to `to`, hop limit 64, traffic class 0xc0.
Bytes error6(const Mac& to_mac, const Mac& port_mac, const Ip6Addr& from, const Ip6Addr& to, uint8_t type, uint8_t code,
             const Bytes& quote, uint32_t aux = 0) {
    return ethernet(to_mac, port_mac, kEtherIpv6,
                    icmp6_ip(from, to, type, code, error_body(aux, quote), Ip6Opt{64, {}, 0xc0}));
}

uint64_t sent(const Rig& r, IcmpError e) {
    return r.workers.at(0)->counters.icmp_sent[static_cast<unsigned>(e)];
}

// A client's connection to web's IPv6 ingress IP goes into the cluster as it came (hop limit one
// lower), to the ingress next hop's MAC; the cluster's answers go back out of ext1 untranslated.
// No session and no NAT port is used either way.
TEST_F(DataplaneTest, AConnectionToAServedIpv6IngressIpGoesIntoTheClusterAndItsAnswerComesBackUntranslated) {
    Rig& r = start(ingress_rig());
    Bytes syn = tcp6_ip(kServerV6, 51000, kIngressV6, 80, kSyn, {}, Ip6Opt{64});
    r.process(r.ext1, from_ext1_6(syn));
    auto in = r.tx(r.pods);
    Parsed p = single(in);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(in[0], to_cluster6(forwarded(syn)));
    EXPECT_EQ(p.hop_limit, 63);
    EXPECT_TRUE(r.tx(r.ext1).empty());

    Bytes syn_ack = tcp6_ip(kIngressV6, 80, kServerV6, 51000, kSyn | kAck, {}, Ip6Opt{64});
    r.process(r.pods, from_cluster6(syn_ack));
    auto out = r.tx(r.ext1);
    p = single(out);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(out[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6, forwarded(syn_ack)));

    // Data both ways, and UDP to the other port the Service lists.
    r.process(r.ext1,
              from_ext1_6(tcp6_ip(kServerV6, 51000, kIngressV6, 80, kAck | kPsh, text("GET / HTTP/1.0\r\n\r\n"))));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    r.process(r.pods,
              from_cluster6(tcp6_ip(kIngressV6, 80, kServerV6, 51000, kAck | kPsh, text("HTTP/1.0 200 OK\r\n"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    Bytes query = udp6_ip(kServerBv6, 5353, kIngressV6, 53, text("query"));
    r.process(r.ext1, from_ext1_6(query, kServerBMac));
    in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 1u);
    ASSERT_TRUE(checksums_valid(parse_frame(in[0])));
    EXPECT_EQ(in[0], to_cluster6(forwarded(query)));
    Bytes answer = udp6_ip(kIngressV6, 53, kServerBv6, 5353, text("answer"));
    r.process(r.pods, from_cluster6(answer));
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], ethernet(kServerBMac, kExt1Mac, kEtherIpv6, forwarded(answer)));

    EXPECT_TRUE(r.sessions6().empty());
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.ingress_in, 3u);
    EXPECT_EQ(r.w().counters.ingress_out, 3u);
    EXPECT_EQ(r.w().counters.sessions_created, 0u);
    EXPECT_EQ(r.w().counters.routed, 3u) << "the answers are forwarded in their network, as IPv4's are";
    EXPECT_EQ(r.svc(kWeb).packets_in, 0u) << "not the Service's translated traffic";
    EXPECT_EQ(r.total_drops(), 0u);
}

// The answer is routed in the Service's network: shop's (network blue) leaves through ext2 to a
// client there, and falls through to the default table for a destination blue has no route to
// (OVN-Kubernetes E7: replies use the Service's network).
TEST_F(DataplaneTest, TheClustersIpv6AnswerIsRoutedInTheServicesNetwork) {
    Rig& r = start(ingress_rig());
    Bytes syn = tcp6_ip(kBlueServerV6, 52000, kBlueIngressV6, 80, kSyn);
    r.process(r.ext2, from_ext2_6(syn));
    auto in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 1u);
    EXPECT_EQ(in[0], to_cluster6(forwarded(syn)));

    Bytes syn_ack = tcp6_ip(kBlueIngressV6, 80, kBlueServerV6, 52000, kSyn | kAck);
    r.process(r.pods, from_cluster6(syn_ack));
    auto out = r.tx(r.ext2);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(checksums_valid(parse_frame(out[0])));
    EXPECT_EQ(out[0], ethernet(kBlueServerMac, kExt2Mac, kEtherIpv6, forwarded(syn_ack)));
    EXPECT_TRUE(r.tx(r.ext1).empty());

    // No route in blue: the default table's (via ext1's router).
    Bytes far = tcp6_ip(kBlueIngressV6, 80, kInternetV6, 52001, kSyn | kAck);
    r.process(r.pods, from_cluster6(far));
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], ethernet(kExt1GwMac, kExt1Mac, kEtherIpv6, forwarded(far)));
    EXPECT_EQ(r.w().counters.ingress_out, 2u);

    // Web's answer to the blue client is routed in web's network (the default one), not blue's:
    // the default table reaches 2001:db8:3::/64 only by its default route.
    r.process(r.pods, from_cluster6(tcp6_ip(kIngressV6, 80, kBlueServerV6, 52002, kSyn | kAck)));
    EXPECT_EQ(r.tx(r.ext2).size(), 0u);
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(r.w().counters.ingress_out, 3u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// Only the Service's ports are ingress, only from the ports where the gateway answers Neighbor
// Solicitations for the address, and only while the Service is served here: anything else to
// the ingress IP is what it was, a packet with no session.
TEST_F(DataplaneTest, OnlyTheServicesPortsFromItsNetworkAreIpv6Ingress) {
    Rig& r = start(ingress_rig());
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 51000, kIngressV6, 81, kSyn)));      // not a Service port
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 51000, kIngressV6, 80)));            // TCP 80, not UDP
    r.process(r.ext2, from_ext2_6(tcp6_ip(kBlueServerV6, 51000, kIngressV6, 80, kSyn)));  // web's on blue's port
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 51000, kBlueIngressV6, 80, kSyn)));  // shop's on ext1
    r.process(r.ext1, from_ext1_6(echo6_ip(true, kServerV6, kIngressV6, 7)));             // ping
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 5u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);

    // Served elsewhere now: its address and ports are no longer the gateway's.
    r.publish({shop()});
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 51000, kIngressV6, 80, kSyn)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    r.process(r.pods, from_cluster6(tcp6_ip(kIngressV6, 80, kServerV6, 51000, kAck | kPsh, text("late"))));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(parse_frame(out[0]).src6, kExt1V6) << "no longer ingress: the default action's masquerade";
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
    EXPECT_EQ(r.w().counters.ingress_out, 0u);

    // And back: ingress again.
    r.publish({web(), shop()});
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 51001, kIngressV6, 80, kSyn)));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    EXPECT_EQ(r.w().counters.ingress_in, 1u);
}

// A reply to one of the Service's own translated sessions still reaches its pod: the session is
// looked up first, and ingress is only for what has none.
TEST_F(DataplaneTest, RepliesToTranslatedIpv6SessionsAreNotIngress) {
    Rig& r = start(ingress_rig());
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 80, kSyn)));
    Parsed out = single(r.tx(r.ext1));
    ASSERT_EQ(out.src6, kIngressV6);
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 80, kIngressV6, out.sport, kSyn | kAck)));
    auto back = r.tx(r.pods);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv6,
                                tcp6_ip(kServerV6, 80, kPod10v6, 40000, kSyn | kAck, {}, Ip6Opt{63})));
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
}

// Without ingress.via6 the gateway has nowhere to send IPv6 ingress (ingress.via is IPv4's
// only): dropped under its own reason.
TEST_F(DataplaneTest, WithoutAnIpv6IngressNextHopIpv6IngressIsDroppedAndCounted) {
    Rig& r = start(ingress_rig(false));
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 51000, kIngressV6, 80, kSyn)));
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 51000, kIngressV6, 53)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::ingress_no_next_hop), 2u);
    EXPECT_EQ(r.total_drops(), 2u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
    // IPv4 ingress still goes in.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 51000, kIngress, 80, kSyn)));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    EXPECT_EQ(r.w().counters.ingress_in, 1u);
}

// The hop limit applies to ingress as to any forwarded packet: an expiring one gets a Time
// Exceeded from the receiving port's address and is not forwarded.
TEST_F(DataplaneTest, Ipv6IngressWithAnExpiringHopLimitGetsTimeExceeded) {
    Rig& r = start(ingress_rig());
    Bytes probe = udp6_ip(kServerV6, 33434, kIngressV6, 53, text("probe"), Ip6Opt{1});
    r.process(r.ext1, from_ext1_6(probe));
    EXPECT_TRUE(r.tx(r.pods).empty());
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], error6(kServerMac, kExt1Mac, kExt1V6, kServerV6, 3, 0, probe));
    EXPECT_EQ(sent(r, IcmpError::time_exceeded6), 1u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// Larger than the inside port's MTU: a router never fragments IPv6, so Packet Too Big with that
// MTU, from the receiving port's address; a packet of exactly the MTU goes in.
TEST_F(DataplaneTest, Ipv6IngressLargerThanTheInsideMtuGetsPacketTooBig) {
    Rig& r = start(ingress_rig(true, [](config::Config& c) { c.ports[0].mtu = 1400; }));
    Bytes big = udp6_ip(kServerV6, 5353, kIngressV6, 53, Bytes(1401 - 48, 0x5a));
    ASSERT_EQ(big.size(), 1401u);
    r.process(r.ext1, from_ext1_6(big));
    EXPECT_TRUE(r.tx(r.pods).empty());
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0],
              error6(kServerMac, kExt1Mac, kExt1V6, kServerV6, 2, 0, Bytes(big.begin(), big.begin() + 1232), 1400));
    EXPECT_EQ(sent(r, IcmpError::packet_too_big), 1u);
    EXPECT_EQ(r.w().counters.ingress_in, 0u);
    Bytes exact = udp6_ip(kServerV6, 5353, kIngressV6, 53, Bytes(1400 - 48, 7));
    r.process(r.ext1, from_ext1_6(exact));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], to_cluster6(forwarded(exact)));
    EXPECT_EQ(r.w().counters.ingress_in, 1u);
}

// An ICMPv6 error about the cluster's answer (a router's Packet Too Big on the way to the client)
// goes into the cluster too, untouched, so that the node's path-MTU discovery works; one from the
// cluster about a client's packet (the node's own error) leaves in the Service's network.
TEST_F(DataplaneTest, AnIcmpv6ErrorAboutAnIpv6IngressAnswerGoesIntoTheCluster) {
    Rig& r = start(ingress_rig());
    Bytes answer = tcp6_ip(kIngressV6, 80, kServerV6, 51000, kAck, Bytes(64, 0x55), Ip6Opt{60});
    Bytes error = icmp6_ip(kExt1GwV6, kIngressV6, 2, 0, error_body(1280, answer));
    r.process(r.ext1, from_ext1_6(error, kExt1GwMac));
    auto in = r.tx(r.pods);
    Parsed p = single(in);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(in[0], to_cluster6(forwarded(error)));
    EXPECT_EQ(r.w().counters.ingress_in, 1u);

    Bytes client = udp6_ip(kServerV6, 5353, kIngressV6, 53, text("query"), Ip6Opt{63});
    Bytes unreachable = icmp6_ip(kPodsRouterV6, kServerV6, 1, 4, error_body(0, client));
    r.process(r.pods, from_cluster6(unreachable));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(checksums_valid(parse_frame(out[0])));
    EXPECT_EQ(out[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6, forwarded(unreachable)));
    EXPECT_EQ(r.w().counters.ingress_out, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// Hairpin: a pod connecting to a served IPv6 ingress IP on one of its Service's ports is refused
// at once (its connect fails with "permission denied" instead of timing out) with ICMPv6
// destination unreachable, administratively prohibited (1/1), counted as the error it got, and
// never forwarded.
TEST_F(DataplaneTest, HairpinToAServedIpv6IngressIpIsRefusedWithAdministrativelyProhibited) {
    Rig& r = start(ingress_rig());
    Bytes syn = tcp6_ip(kPod10v6, 40000, kIngressV6, 80, kSyn);
    r.process(r.pods, from_pod6(kPod10v6, syn));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    // From the address the pod connected to (RFC 4443 2.2(a): the answer to a packet sent to one
    // of the node's addresses comes from that address).
    EXPECT_EQ(frames[0], error6(kPod10Mac, kPodsMac, kIngressV6, kPod10v6, 1, 1, syn));
    // Another pod to another Service's address (shop's, in blue), UDP to web's.
    r.process(r.pods, from_pod6(kPod20v6, tcp6_ip(kPod20v6, 40001, kBlueIngressV6, 80, kSyn)));
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40002, kIngressV6, 53)));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 2u);
    for (const Bytes& f : frames) {
        Parsed e = parse_frame(f);
        ASSERT_TRUE(checksums_valid(e));
        EXPECT_EQ(e.icmp_type, 1);
        EXPECT_EQ(e.icmp_code, 1);
    }
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.ext2).empty());
    EXPECT_TRUE(r.sessions6().empty());
    EXPECT_EQ(sent(r, IcmpError::admin_prohibited6), 3u);
    EXPECT_EQ(sent(r, IcmpError::admin_prohibited), 0u);
    EXPECT_EQ(r.total_drops(), 0u) << "an answered packet is not a drop";

    // With the rate limit spent, the refusal is a drop counted as hairpin.
    r.w().icmp_tat = r.w().now + (uint64_t{1} << 50);
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40003, kIngressV6, 80, kSyn)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::hairpin), 1u);

    // Other ports of the ingress IP are the gateway's own address as before: TCP dropped as
    // local, UDP answered with port unreachable (1/4).
    r.w().icmp_tat = 0;
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40004, kIngressV6, 22, kSyn)));
    EXPECT_EQ(r.drops(DropReason::local), 1u);
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40005, kIngressV6, 54)));
    p = single(r.tx(r.pods));
    EXPECT_EQ(p.icmp_type, 1);
    EXPECT_EQ(p.icmp_code, 4);
    EXPECT_EQ(r.drops(DropReason::hairpin), 1u);
}

// Two workers, web listening on TCP 40000, a port of worker 1's block: a connection to it on the
// IPv6 ingress IP received by worker 0 is forwarded by worker 0 with no hand-off (no session can
// hold that port: nat_ports.h), and a pod's flow from its own port 40000, which worker 1 would
// otherwise keep, is given another port of worker 1's block.
TEST_F(DataplaneTest, Ipv6IngressToAServicePortInAnotherWorkersBlockStaysWhereItArrived) {
    RigOptions o = ingress_rig();
    o.workers = 2;
    model::ServiceState s = web();
    s.ports = {uint32_t{kProtoTcp} << 16 | 40000};
    o.services = {s};
    Rig& r = start(o);
    ASSERT_EQ(dp::owner_of_port(r.shared, 40000), 1u);
    Bytes syn = tcp6_ip(kServerV6, 51000, kIngressV6, 40000, kSyn, {}, Ip6Opt{64});
    r.process(0, {{r.ext1, from_ext1_6(syn)}});
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    EXPECT_EQ(r.handoff_pending(0, 1), 0u);
    auto in = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(in)));
    EXPECT_EQ(in[0], to_cluster6(forwarded(syn)));
    EXPECT_EQ(r.w(0).counters.ingress_in, 1u);

    r.own_flows_from_inside_on(1);
    r.process(1, {{r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 80, kSyn))}});
    Parsed out = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(out));
    EXPECT_EQ(out.src6, kIngressV6);
    EXPECT_NE(out.sport, 40000);
    EXPECT_GE(out.sport, r.w(1).nat_port_lo);
    EXPECT_LE(out.sport, r.w(1).nat_port_hi);
    ASSERT_EQ(r.sessions6(1).size(), 1u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

}  // namespace
}  // namespace egw::test
