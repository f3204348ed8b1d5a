// SPDX-License-Identifier: Apache-2.0
//
// IPv6 on the packet path: the input stage's parsing (extension headers within their bound,
// filters by address class, each drop under its own reason), and what later stages do with it.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text6(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

const Ip6Addr kPod10v6 = ip6("fd00:10:244:1::10");
const Ip6Addr kServerV6 = ip6("2001:db8:2::100");
const Ip6Addr kIngressV6 = ip6("2001:db8:2::50");

Bytes pod6(const Bytes& ip, const Mac& dst = kPodsMac) {
    return ethernet(dst, kPod10Mac, kEtherIpv6, ip);
}
Bytes ext6(const Bytes& ip, const Mac& dst = kExt1Mac) {
    return ethernet(dst, kServerMac, kEtherIpv6, ip);
}

// Padding options (PadN) making an extension header of `len` bytes (a multiple of 8, at least 8).
Bytes pad_options(size_t len) {
    Bytes b;
    size_t left = len - 2;
    while (left) {
        size_t n = std::min<size_t>(left, 257);
        if (left - n == 1) --n;  // leave room for a PadN (2 bytes) rather than a lone byte
        b.push_back(1);          // PadN
        b.push_back(static_cast<uint8_t>(n - 2));
        b.resize(b.size() + n - 2, 0);
        left -= n;
    }
    return b;
}

struct Case {
    std::string name;
    bool from_outside;
    Bytes frame;
    DropReason reason;
};

std::vector<Case> input_cases() {
    std::vector<Case> c;
    Bytes udp = udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("query"));
    Bytes tcp = tcp6_ip(kPod10v6, 40000, kServerV6, 80, kSyn);

    c.push_back({"truncated IPv6 header", false, pod6(Bytes(udp.begin(), udp.begin() + 30)), DropReason::malformed});
    {
        Bytes ip = udp;
        ip[0] = 0x45;
        c.push_back({"IP version 4 under the IPv6 EtherType", false, pod6(ip), DropReason::malformed});
    }
    {
        Bytes ip = udp;
        put16(&ip[4], static_cast<uint16_t>(ip.size() - 40 + 1));
        c.push_back({"payload length beyond the frame", false, pod6(ip), DropReason::malformed});
    }
    c.push_back({"extension header cut by the payload length", false,
                 pod6(ipv6(kPod10v6, kServerV6, 60, Bytes{17, 0, 1, 2})), DropReason::malformed});
    c.push_back({"Hop-by-Hop options not first", false,
                 pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"),
                              Ip6Opt{64, {{60, pad_options(8)}, {0, pad_options(8)}}})),
                 DropReason::malformed});
    c.push_back({"UDP with checksum 0", false, pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), {}, true)),
                 DropReason::malformed});
    c.push_back({"truncated TCP header", false,
                 pod6(ipv6(kPod10v6, kServerV6, kProtoTcp, Bytes(tcp.begin() + 40, tcp.begin() + 52))),
                 DropReason::malformed});
    c.push_back({"truncated ICMPv6 header", false, pod6(ipv6(kPod10v6, kServerV6, kProtoIcmp6, Bytes{128, 0})),
                 DropReason::malformed});
    c.push_back({"ICMPv6 error with a quote too short", true,
                 ext6(icmp6_ip(kServerV6, kIngressV6, 1, 4, Bytes(4 + 30, 0))), DropReason::malformed});
    {
        Ip6Opt o;
        for (int k = 0; k < 5; ++k)
            o.ext.push_back({60, pad_options(8)});
        c.push_back({"five extension headers", false, pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), o)),
                     DropReason::ipv6_extension_header});
    }
    c.push_back({"extension headers over 256 bytes", false,
                 pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), Ip6Opt{64, {{60, pad_options(264)}}})),
                 DropReason::ipv6_extension_header});
    // A fragment is put together with the rest of its datagram (test_fragments6.cpp), unless an
    // extension header stands before its Fragment header, which rte_ip_frag does not take.
    c.push_back({"Fragment header behind another extension header", false,
                 pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"),
                              Ip6Opt{64, {{60, pad_options(8)}, {44, Bytes{0, 1, 0, 0, 0, 7}}}})),
                 DropReason::fragment});
    c.push_back({"mDNS to ff02::fb", false,
                 pod6(udp6_ip(kPod10v6, 5353, ip6("ff02::fb"), 5353, text6("q")), Mac{0x33, 0x33, 0, 0, 0, 0xfb}),
                 DropReason::multicast});
    c.push_back({"unspecified source", false, pod6(udp6_ip(ip6("::"), 40000, kServerV6, 53, text6("q"))),
                 DropReason::martian_source});
    c.push_back({"multicast source", true, ext6(udp6_ip(ip6("ff0e::1"), 53, kIngressV6, 40000, text6("q"))),
                 DropReason::martian_source});
    c.push_back({"loopback destination", false, pod6(udp6_ip(kPod10v6, 40000, ip6("::1"), 53, text6("q"))),
                 DropReason::martian_destination});
    c.push_back({"IPv4-mapped destination", false,
                 pod6(udp6_ip(kPod10v6, 40000, ip6("::ffff:192.0.2.100"), 53, text6("q"))),
                 DropReason::martian_destination});
    c.push_back({"link-local source", false, pod6(udp6_ip(ip6("fe80::10"), 40000, kServerV6, 53, text6("q"))),
                 DropReason::link_local});
    c.push_back(
        {"link-local destination", true, ext6(echo6_ip(true, kServerV6, ip6("fe80::1"), 7)), DropReason::link_local});
    c.push_back({"unicast in a broadcast frame", false, pod6(udp, kBroadcast), DropReason::link_broadcast});
    c.push_back(
        {"VLAN tag", false, ethernet(kPodsMac, kPod10Mac, 0x8100, Bytes(46, 0)), DropReason::unknown_ethertype});
    return c;
}

TEST_F(DataplaneTest, Ipv6InputDropsEachFrameWithItsReason) {
    Rig& r = start();
    for (const Case& c : input_cases()) {
        SCOPED_TRACE(c.name);
        uint64_t before = r.drops(c.reason), total = r.total_drops();
        r.process(c.from_outside ? r.ext1 : r.pods, c.frame);
        EXPECT_EQ(r.drops(c.reason), before + 1) << dp::kDropReasonNames[static_cast<unsigned>(c.reason)];
        EXPECT_EQ(r.total_drops(), total + 1);
        EXPECT_TRUE(r.tx(r.pods).empty());
        EXPECT_TRUE(r.tx(r.ext1).empty());
        EXPECT_TRUE(r.to_control().empty());
    }
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.tx_packets, 0u);
}

// Valid IPv6 of every kind passes input (extension headers within the bound walked to the
// transport header) and goes on to the NAT stages, which answer or drop it here for what the rig
// lacks (no IPv6 route, a protocol not translated, no session); IPv4 in the same burst is
// translated as usual.
TEST_F(DataplaneTest, ValidIpv6PassesInputBesideIpv4) {
    Rig& r = start();
    Bytes rh(6, 0);  // routing header with no segments left: walked over
    Ip6Opt chain{64, {{0, pad_options(8)}, {60, pad_options(16)}, {43, rh}, {60, pad_options(8)}}};
    std::vector<Bytes> valid = {
        pod6(tcp6_ip(kPod10v6, 40000, kServerV6, 80, kSyn)),
        pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), chain)), pod6(echo6_ip(true, kPod10v6, kServerV6, 7)),
        pod6(ipv6(kPod10v6, kServerV6, 59, {})),  // no next header
    };
    std::vector<In> burst;
    burst.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text6("v4")))});
    for (const Bytes& f : valid)
        burst.push_back({r.pods, f});
    burst.push_back({r.ext1, ext6(echo6_ip(false, kServerV6, kIngressV6, 7))});
    r.process(0, burst);
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kIngress, 40000, kServer, 53, text6("v4"), IpOpt{.ttl = 63})));
    // No IPv6 route: each answered with Destination Unreachable, no route, back to the pod.
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::no_route6)], 3u);
    auto answers = r.tx(r.pods);
    ASSERT_EQ(answers.size(), 3u);
    for (const Bytes& a : answers) {
        Parsed p = parse_frame(a);
        EXPECT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.dst6, kPod10v6);
        EXPECT_EQ(p.icmp_type, 1);
        EXPECT_EQ(p.icmp_code, 0);
    }
    EXPECT_EQ(r.drops(DropReason::unsupported_protocol), 1u);
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
    EXPECT_EQ(r.total_drops(), 2u);
}

// The rig with IPv6 on its ports and routes, and the web Service's IPv6 ingress IP.
const Ip6Addr kPodsV6 = ip6("fd00:10:244:1::1");
const Ip6Addr kExt1V6 = ip6("2001:db8:2::1");
const Ip6Addr kExt2V6 = ip6("2001:db8:3::1");
const Ip6Addr kExt1GwV6 = ip6("2001:db8:2::fe");

net::IpAddr addr6(const Ip6Addr& a) {
    return net::IpAddr::from_v6(a.data());
}

RigOptions dual_stack() {
    RigOptions o;
    o.configure = [](config::Config& c) {
        c.ports[0].addresses.push_back(net::IpPrefix{addr6(kPodsV6), 64});
        c.ports[1].addresses.push_back(net::IpPrefix{addr6(kExt1V6), 64});
        c.ports[2].addresses.push_back(net::IpPrefix{addr6(kExt2V6), 64});
        config::RouteConfig r;
        r.vrf = "default";
        r.prefix = net::IpPrefix{addr6(ip6("::")), 0};
        r.via = addr6(kExt1GwV6);
        r.port = "ext1";
        c.routes.push_back(r);
        r.prefix = net::IpPrefix{addr6(ip6("fd00:10:244::")), 48};
        r.via = addr6(ip6("fd00:10:244:1::fe"));
        r.port = "pods";
        c.routes.push_back(r);
    };
    model::ServiceState web = lb_service(kWeb, kIngress, {kPod10, kPod11});
    web.ingress_ipv6 = addr6(kIngressV6);
    web.endpoint_ipv6s = {addr6(kPod10v6)};
    o.services = {web};
    return o;
}

// The Neighbor Advertisement egw must send for `target` to `dst` (flags R, S unless DAD, O).
Bytes advert(const Mac& eth_dst, const Mac& port_mac, const Ip6Addr& target, const Ip6Addr& dst, bool solicited) {
    Bytes body(4 + 16 + 8, 0);
    body[0] = static_cast<uint8_t>(0x80 | (solicited ? 0x40 : 0) | 0x20);
    std::copy(target.begin(), target.end(), body.begin() + 4);
    body[20] = 2;
    body[21] = 1;
    std::copy(port_mac.begin(), port_mac.end(), body.begin() + 22);
    return ethernet(eth_dst, port_mac, kEtherIpv6, icmp6_ip(target, dst, 136, 0, body, Ip6Opt{255}));
}

Bytes solicit(const Ip6Addr& src, const Ip6Addr& target, const Mac& from) {
    Ip6Addr group = solicited_node(target);
    return ethernet(multicast_mac(group), from, kEtherIpv6, ns6_ip(src, group, target, from));
}

TEST_F(DataplaneTest, NeighborSolicitationsForPortAddressesAreAnswered) {
    Rig& r = start(dual_stack());
    // A global address of the receiving port.
    r.process(r.ext1, solicit(kServerV6, kExt1V6, kServerMac));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], advert(kServerMac, kExt1Mac, kExt1V6, kServerV6, true));
    // Its link-local address, asked from a link-local one (unicast, as reachability checks do).
    Ip6Addr ll = link_local_of(kExt1Mac);
    Ip6Addr server_ll = ip6("fe80::5054:ff:fe00:64");
    r.process(r.ext1, ethernet(kExt1Mac, kServerMac, kEtherIpv6, ns6_ip(server_ll, ll, ll, kServerMac)));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], advert(kServerMac, kExt1Mac, ll, server_ll, true));
    // The inside port answers for its own address.
    r.process(r.pods, solicit(kPod10v6, kPodsV6, kPod10Mac));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], advert(kPod10Mac, kPodsMac, kPodsV6, kPod10v6, true));
    // Duplicate address detection: from ::, answered to all nodes, not solicited.
    r.process(r.ext1, solicit(ip6("::"), kExt1V6, kServerMac));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], advert(Mac{0x33, 0x33, 0, 0, 0, 1}, kExt1Mac, kExt1V6, ip6("ff02::1"), false));
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.w().counters.tx_packets, 4u);
}

TEST_F(DataplaneTest, ServedIpv6IngressIpIsAnsweredOnlyOnItsNetworksOutsidePorts) {
    Rig& r = start(dual_stack());
    r.process(r.ext1, solicit(kServerV6, kIngressV6, kServerMac));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], advert(kServerMac, kExt1Mac, kIngressV6, kServerV6, true));
    // Not on another network's port, nor inside, nor for another port's address.
    r.process(r.ext2, ethernet(kExt2Mac, kBlueServerMac, kEtherIpv6,
                               ns6_ip(ip6("2001:db8:3::100"), kIngressV6, kIngressV6, kBlueServerMac)));
    r.process(r.pods, solicit(kPod10v6, kIngressV6, kPod10Mac));
    r.process(r.ext1, solicit(kServerV6, kExt2V6, kServerMac));
    EXPECT_TRUE(r.tx(r.ext2).empty());
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::local), 3u);
    // Once the Service is no longer served here, its ingress IP is not answered any more.
    model::ServiceState web = dual_stack().services[0];
    web.serve_here = false;
    web.status_host = "gw-2";
    r.publish({web});
    r.process(r.ext1, solicit(kServerV6, kIngressV6, kServerMac));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::local), 4u);
}

TEST_F(DataplaneTest, NeighborDiscoveryFailingItsChecksIsDropped) {
    Rig& r = start(dual_stack());
    Ip6Addr group = solicited_node(kExt1V6);
    Mac gmac = multicast_mac(group);
    auto ns = [&](const Ip6Addr& src, const Ip6Addr& dst, const Ip6Opt& o) {
        return ethernet(gmac, kServerMac, kEtherIpv6, ns6_ip(src, dst, kExt1V6, kServerMac, o));
    };
    struct NdCase {
        std::string name;
        Bytes frame;
        DropReason reason;
    };
    std::vector<NdCase> cases;
    cases.push_back({"hop limit below 255", ns(kServerV6, group, Ip6Opt{64}), DropReason::malformed});
    {
        Bytes f = ns(kServerV6, group, Ip6Opt{255});
        f[14 + 40 + 2] ^= 0x10;
        cases.push_back({"bad ICMPv6 checksum", f, DropReason::malformed});
    }
    cases.push_back({"DAD to a unicast address",
                     ethernet(kExt1Mac, kServerMac, kEtherIpv6, ns6_ip(ip6("::"), kExt1V6, kExt1V6, kServerMac)),
                     DropReason::malformed});
    {
        Bytes body(4 + 16 + 8, 0);
        std::copy(kExt1V6.begin(), kExt1V6.end(), body.begin() + 4);
        body[20] = 1;  // source link-layer address option of length 0
        cases.push_back({"option of length 0",
                         ethernet(gmac, kServerMac, kEtherIpv6, icmp6_ip(kServerV6, group, 135, 0, body, Ip6Opt{255})),
                         DropReason::malformed});
    }
    cases.push_back({"solicitation for an address not ours", solicit(kServerV6, ip6("2001:db8:2::77"), kServerMac),
                     DropReason::local});
    {
        Bytes body(4 + 16, 0);
        body[0] = 0x60;
        Ip6Addr srv = kServerV6;
        std::copy(srv.begin(), srv.end(), body.begin() + 4);
        // Solicited (0x40) yet sent to a multicast group: RFC 4861 7.1.2 discards it.
        cases.push_back({"solicited advertisement to all nodes",
                         ethernet(Mac{0x33, 0x33, 0, 0, 0, 1}, kServerMac, kEtherIpv6,
                                  icmp6_ip(kServerV6, ip6("ff02::1"), 136, 0, body, Ip6Opt{255})),
                         DropReason::malformed});
    }
    cases.push_back({"router solicitation",
                     ethernet(Mac{0x33, 0x33, 0, 0, 0, 2}, kServerMac, kEtherIpv6,
                              icmp6_ip(link_local_of(kServerMac), ip6("ff02::2"), 133, 0, Bytes(4, 0), Ip6Opt{255})),
                     DropReason::local});
    for (const NdCase& c : cases) {
        SCOPED_TRACE(c.name);
        uint64_t before = r.drops(c.reason), total = r.total_drops();
        r.process(r.ext1, c.frame);
        EXPECT_EQ(r.drops(c.reason), before + 1);
        EXPECT_EQ(r.total_drops(), total + 1);
        EXPECT_TRUE(r.tx(r.ext1).empty());
    }
}

// RFC 6980: Neighbor Discovery never comes in fragments, and a forged one could hide its options
// from a filter that way. Dropped and counted, neither answered nor handed to the control thread:
// an atomic fragment, the first fragment of two (whose later one times out alone), an unsolicited
// advertisement, and a solicitation behind a Destination Options header that fills its first
// fragment, whose ICMPv6 type shows only once the datagram is put together.
TEST_F(DataplaneTest, NeighborDiscoveryInFragmentsIsDroppedNeitherAnsweredNorLearned) {
    Rig& r = start(dual_stack());
    const Ip6Addr group = solicited_node(kExt1V6);
    auto to_ext1 = [&](const Mac& dst, const Bytes& ip) { return ethernet(dst, kServerMac, kEtherIpv6, ip); };
    const Bytes ns = ns6_ip(kServerV6, group, kExt1V6, kServerMac);
    r.process(r.ext1, to_ext1(multicast_mac(group), ns));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u) << "whole, it is answered";

    r.process(r.ext1, to_ext1(multicast_mac(group), fragment6_of(ns, 0, ns.size() - 40, false, 1)));
    std::vector<Bytes> two = fragments6(ns6_ip(kServerV6, kExt1V6, kExt1V6, kServerMac), 16, 2);
    ASSERT_EQ(two.size(), 2u);
    r.process(0, {{r.ext1, to_ext1(kExt1Mac, two[0])}, {r.ext1, to_ext1(kExt1Mac, two[1])}});
    static const Mac kMoved{0x52, 0x54, 0x00, 0x00, 0x10, 0x64};
    Bytes na(4 + 16 + 8, 0);
    na[0] = 0xa0;  // Router, Override
    std::copy(kServerV6.begin(), kServerV6.end(), na.begin() + 4);
    na[20] = 2;
    na[21] = 1;
    std::copy(kMoved.begin(), kMoved.end(), na.begin() + 22);
    std::vector<Bytes> na2 = fragments6(icmp6_ip(kServerV6, ip6("ff02::1"), 136, 0, na, Ip6Opt{255}), 16, 3);
    ASSERT_EQ(na2.size(), 2u);
    const Mac all_nodes{0x33, 0x33, 0, 0, 0, 1};
    r.process(0, {{r.ext1, to_ext1(all_nodes, na2[0])}, {r.ext1, to_ext1(all_nodes, na2[1])}});
    const Bytes behind = ns6_ip(kServerV6, kExt1V6, kExt1V6, kServerMac, Ip6Opt{255, {{60, pad_options(8)}}});
    r.process(0, {{r.ext1, to_ext1(kExt1Mac, fragment6_of(behind, 0, 8, true, 4))},
                  {r.ext1, to_ext1(kExt1Mac, fragment6_of(behind, 8, behind.size() - 48, false, 4))}});

    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.drops(DropReason::ndp_fragmented), 4u);
    EXPECT_EQ(r.drops(DropReason::multicast), 1u) << "the advertisement's later fragment, to all nodes";
    EXPECT_EQ(r.total_drops(), 5u);
    r.drain_all();
    EXPECT_EQ(r.drops(DropReason::fragment_timeout), 1u) << "the solicitation's later fragment, held alone";
    EXPECT_EQ(r.mbufs_in_use(), 0);
}

// A routing header with segments left is for the node its destination address names (RFC 8200
// 4.4): on its way elsewhere it is translated and forwarded like any packet, header and all; to
// the gateway's own or NAT addresses, where egw would have to follow it, it is dropped.
TEST_F(DataplaneTest, RoutingHeaderWithSegmentsLeftIsForwardedUnlessForTheGateway) {
    Rig& r = start(std_rig6::dual_stack());
    Bytes rh(6, 0);
    rh[0] = 4;  // routing type (segment routing)
    rh[1] = 1;  // segments left
    r.process(r.pods, pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), Ip6Opt{64, {{43, rh}}})));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(Bytes(frames[0].begin() + 14, frames[0].end()),
              udp6_ip(kIngressV6, 40000, kServerV6, 53, text6("q"), Ip6Opt{63, {{43, rh}}}));
    EXPECT_TRUE(checksums_valid(parse_frame(frames[0])));
    EXPECT_EQ(r.total_drops(), 0u);

    r.process(r.ext1, ext6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text6("q"), Ip6Opt{64, {{43, rh}}})));
    r.process(r.ext1, ext6(udp6_ip(kServerV6, 53, kExt1V6, 40000, text6("q"), Ip6Opt{64, {{43, rh}}})));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::ipv6_extension_header), 2u);
    EXPECT_EQ(r.total_drops(), 2u);
}

TEST_F(DataplaneTest, EchoRequestsToThePortsIpv6AddressesAreAnswered) {
    Rig& r = start(dual_stack());
    r.process(r.ext1, ext6(echo6_ip(true, kServerV6, kExt1V6, 0x77, 3, text6("ping"))));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv6, echo6_ip(false, kExt1V6, kServerV6, 0x77, 3, text6("ping"))));
    r.process(r.pods, pod6(echo6_ip(true, kPod10v6, kPodsV6, 0x78, 1, text6("in"))));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv6, echo6_ip(false, kPodsV6, kPod10v6, 0x78, 1, text6("in"))));
    // Another port's address is not the receiving port's: not answered; it is a NAT address
    // (ext2's masquerade address) with no session for this.
    r.process(r.ext1, ext6(echo6_ip(true, kServerV6, kExt2V6, 0x79)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
}

TEST_F(DataplaneTest, EchoFromALinkLocalNeighborToThePortIsAnsweredAndNeverForwarded) {
    // What `ping fe80::...%eth0` from a host on the link sends: link-local to link-local. The
    // port's own link-local (and global) addresses answer; nothing else with a link-local address
    // gets past input.
    Rig& r = start(dual_stack());
    Ip6Addr pod_ll = link_local_of(kPod10Mac), port_ll = link_local_of(kPodsMac);
    r.process(r.pods, pod6(echo6_ip(true, pod_ll, port_ll, 0x31, 1, text6("ll"))));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv6, echo6_ip(false, port_ll, pod_ll, 0x31, 1, text6("ll"))));
    r.process(r.pods, pod6(echo6_ip(true, pod_ll, kPodsV6, 0x32, 1, text6("gl"))));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv6, echo6_ip(false, kPodsV6, pod_ll, 0x32, 1, text6("gl"))));
    // Another port's link-local address, and a link-local source toward the outside: dropped.
    uint64_t before = r.drops(DropReason::link_local);
    r.process(r.pods, pod6(echo6_ip(true, pod_ll, link_local_of(kExt1Mac), 0x33)));
    r.process(r.pods, pod6(echo6_ip(true, pod_ll, kServerV6, 0x34)));
    EXPECT_EQ(r.drops(DropReason::link_local), before + 2);
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

TEST_F(DataplaneTest, Ipv6RoutesAreLongestPrefixPerVrfWithTheDefaultTableBehind) {
    Rig& r = start(dual_stack());
    const dp::PolicySnapshot& p = r.policy();
    const dp::NextHop6* nh = p.lookup_route6(dp::kDefaultVrf, ip6("2001:db8:2::100").data());
    ASSERT_NE(nh, nullptr);
    EXPECT_EQ(nh->port, r.ext1);
    EXPECT_TRUE(nh->on_link);
    nh = p.lookup_route6(dp::kDefaultVrf, ip6("2001:db8:99::1").data());
    ASSERT_NE(nh, nullptr);
    EXPECT_EQ(nh->port, r.ext1);
    EXPECT_FALSE(nh->on_link);
    EXPECT_EQ(Ip6Addr(std::to_array(nh->gateway.b)), kExt1GwV6);
    nh = p.lookup_route6(dp::kDefaultVrf, ip6("fd00:10:244:2::10").data());
    ASSERT_NE(nh, nullptr);
    EXPECT_EQ(nh->port, r.pods);
    EXPECT_FALSE(nh->on_link);
    nh = p.lookup_route6(dp::kDefaultVrf, kPod10v6.data());  // the connected /64 is longer than the /48
    ASSERT_NE(nh, nullptr);
    EXPECT_TRUE(nh->on_link);
    // blue: its connected /64, then the default table.
    uint8_t blue = p.ports[r.ext2].vrf;
    nh = p.lookup_route6(blue, ip6("2001:db8:3::100").data());
    ASSERT_NE(nh, nullptr);
    EXPECT_EQ(nh->port, r.ext2);
    nh = p.lookup_route6(blue, ip6("2001:db8:99::1").data());
    ASSERT_NE(nh, nullptr);
    EXPECT_EQ(nh->port, r.ext1);
    EXPECT_EQ(p.lookup_route6_in(blue, ip6("2001:db8:99::1").data()), nullptr);
    // The NAT addresses: the outside ports' addresses and the served ingress IP.
    EXPECT_EQ(p.nat_addresses6.find(kExt1V6.data()), uint32_t{dp::kNatPortAddress});
    EXPECT_EQ(p.nat_addresses6.find(kPodsV6.data()), dp::Ip6Map::kMissing);
    EXPECT_TRUE(p.answers_ndp_for_ingress(r.ext1, kIngressV6.data()));
    EXPECT_FALSE(p.answers_ndp_for_ingress(r.ext2, kIngressV6.data()));
}

}  // namespace
}  // namespace egw::test
