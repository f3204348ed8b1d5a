// SPDX-License-Identifier: Apache-2.0
//
// IPv6 as a router forwards it (issue 11 §3): next hops resolved by Neighbor Solicitation on the
// control thread (the worker's side: held packets and advertisements handed over, the IPv6
// neighbour table read on output), hop limit, the routes of the packet's VRF, and the gateway's
// own ICMPv6 errors. Frames are compared byte for byte with what packet.cpp builds independently.
#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <cstring>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

const Ip6Addr kPodsV6 = ip6("fd00:10:244:1::1");
const Ip6Addr kExt1V6 = ip6("2001:db8:2::1");
const Ip6Addr kExt2V6 = ip6("2001:db8:3::1");
const Ip6Addr kServerV6 = ip6("2001:db8:2::100");
const Ip6Addr kExt1GwV6 = ip6("2001:db8:2::fe");
const Ip6Addr kPod10v6 = ip6("fd00:10:244:1::10");

const Ip6Addr kPod11v6 = ip6("fd00:10:244:1::11");
const Ip6Addr kInternetV6 = ip6("2001:db8:99::9");     // behind ext1's router
const Ip6Addr kUnresolvedV6 = ip6("2001:db8:2::200");  // on ext1's link, no neighbour entry

net::IpAddr addr6(const Ip6Addr& a) {
    return net::IpAddr::from_v6(a.data());
}

struct Neighbour6 {
    std::string port;
    Ip6Addr ip;
    Mac mac;
};

// The rig with IPv6 on its ports (a /64 each, connected routes), the default IPv6 route via
// ext1's router unless `default_route` is false, the default action `route` (untranslated IPv6
// is what this file is about), and static IPv6 neighbours: the router, the server and pod 10.
RigOptions dual_stack(bool default_route = true, std::function<void(config::Config&)> more = {}) {
    RigOptions o;
    o.configure = [default_route, more](config::Config& c) {
        c.ports[0].addresses.push_back(net::IpPrefix{addr6(kPodsV6), 64});
        c.ports[1].addresses.push_back(net::IpPrefix{addr6(kExt1V6), 64});
        c.ports[2].addresses.push_back(net::IpPrefix{addr6(kExt2V6), 64});
        if (default_route) {
            config::RouteConfig r;
            r.vrf = "default";
            r.prefix = net::IpPrefix{addr6(ip6("::")), 0};
            r.via = addr6(kExt1GwV6);
            r.port = "ext1";
            c.routes.push_back(r);
        }
        for (const Neighbour6& n :
             {Neighbour6{"ext1", kExt1GwV6, kExt1GwMac}, Neighbour6{"ext1", kServerV6, kServerMac},
              Neighbour6{"pods", kPod10v6, kPod10Mac}}) {
            config::MacAddr m;
            std::copy(n.mac.begin(), n.mac.end(), m.bytes);
            c.neighbors.push_back(config::NeighborConfig{n.port, addr6(n.ip), m});
        }
        c.default_action = config::DefaultAction::route;
        if (more) more(c);
    };
    return o;
}

Bytes pod6(const Bytes& ip, const Mac& from = kPod10Mac) {
    return ethernet(kPodsMac, from, kEtherIpv6, ip);
}
Bytes ext6(const Bytes& ip, const Mac& from = kServerMac) {
    return ethernet(kExt1Mac, from, kEtherIpv6, ip);
}

uint64_t sent(const Rig& r, dp::IcmpError e) {
    return r.workers.at(0)->counters.icmp_sent[static_cast<unsigned>(e)];
}

// The ICMPv6 error the gateway must send: from `from` to `to`, hop limit 64, traffic class 0xc0,
// bytes 4-7 `aux`, quoting `quote` (the offending packet, already cut where it must be).
Bytes error6(const Mac& to_mac, const Mac& port_mac, const Ip6Addr& from, const Ip6Addr& to, uint8_t type, uint8_t code,
             const Bytes& quote, uint32_t aux = 0) {
    Bytes body(4 + quote.size());
    put32(body.data(), aux);
    std::copy(quote.begin(), quote.end(), body.begin() + 4);
    return ethernet(to_mac, port_mac, kEtherIpv6, icmp6_ip(from, to, type, code, body, Ip6Opt{64, {}, 0xc0}));
}

// The body of an ICMPv6 error (bytes 4-7 zero) quoting `pkt`.
Bytes quote_of(const Bytes& pkt) {
    Bytes b(4 + pkt.size(), 0);
    std::copy(pkt.begin(), pkt.end(), b.begin() + 4);
    return b;
}

// The packet as it must leave: the same bytes with the hop limit one lower.
Bytes forwarded(Bytes ip) {
    --ip[7];
    return ip;
}

// ---------------------------------------------------------------------------------------------
// Neighbour resolution, the worker's side.

// A Neighbor Advertisement (any that passes RFC 4861 7.1.2) goes to the control thread as it came,
// marked as an advertisement in the dynfield, and is counted there; an unsolicited one to all
// nodes too. Nothing is sent back.
TEST_F(DataplaneTest, NeighborAdvertisementsGoToTheControlThread) {
    Rig& r = start(dual_stack());
    auto na = [&](const Ip6Addr& dst, const Mac& eth_dst, uint8_t flags) {
        Bytes body(4 + 16 + 8, 0);
        body[0] = flags;
        std::copy(kServerV6.begin(), kServerV6.end(), body.begin() + 4);
        body[20] = 2;
        body[21] = 1;
        std::copy(kServerMac.begin(), kServerMac.end(), body.begin() + 22);
        return ethernet(eth_dst, kServerMac, kEtherIpv6, icmp6_ip(kServerV6, dst, 136, 0, body, Ip6Opt{255}));
    };
    Bytes solicited = na(kExt1V6, kExt1Mac, 0x60);
    Bytes unsolicited = na(ip6("ff02::1"), Mac{0x33, 0x33, 0, 0, 0, 1}, 0x20);
    r.process(0, {{r.ext1, solicited}, {r.ext1, unsolicited}});
    auto got = r.to_control();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].frame, solicited);
    EXPECT_EQ(got[1].frame, unsolicited);
    for (const auto& c : got) {
        EXPECT_TRUE(c.advertisement);
        EXPECT_EQ(c.port, r.ext1);
    }
    EXPECT_EQ(r.w().counters.to_control, 2u);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    // One whose hop limit says it was forwarded is not.
    Bytes forwarded = solicited;
    forwarded[14 + 7] = 254;
    r.process(r.ext1, forwarded);
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.drops(DropReason::malformed), 1u);
}

// The IPv6 neighbour table on its own: a slot answers only for its own (port, address), an erased
// one for nobody, and a full table refuses.
TEST(NeighborTable6, SlotAnswersOnlyForItsKey) {
    dp::NeighborTable6 t(2);
    const Ip6Addr a = ip6("2001:db8:2::fe"), b = ip6("2001:db8:2::ff");
    uint32_t sa = t.insert(1, a.data());
    ASSERT_NE(sa, dp::NeighborTable6::kNone);
    EXPECT_EQ(t.insert(1, a.data()), sa);
    Mac out{};
    EXPECT_FALSE(t.resolve(sa, 1, a.data(), out.data())) << "no MAC yet";
    t.set_mac(sa, kExt1GwMac.data());
    EXPECT_TRUE(t.resolve(sa, 1, a.data(), out.data()));
    EXPECT_EQ(out, kExt1GwMac);
    EXPECT_FALSE(t.resolve(sa, 2, a.data(), out.data())) << "another port";
    EXPECT_FALSE(t.resolve(sa, 1, b.data(), out.data())) << "another address";
    EXPECT_EQ(t.find(1, b.data()), dp::NeighborTable6::kNone);
    EXPECT_EQ(t.find(2, a.data()), dp::NeighborTable6::kNone);
    uint32_t sb = t.insert(2, b.data());
    ASSERT_NE(sb, dp::NeighborTable6::kNone);
    EXPECT_EQ(t.insert(3, b.data()), dp::NeighborTable6::kNone) << "capacity 2";
    uint16_t port = 0;
    Ip6Addr key{};
    ASSERT_TRUE(t.slot_key(sb, &port, key.data()));
    EXPECT_EQ(port, 2);
    EXPECT_EQ(key, b);
    t.erase(sa);
    EXPECT_FALSE(t.resolve(sa, 1, a.data(), out.data()));
    EXPECT_EQ(t.find(1, a.data()), dp::NeighborTable6::kNone);
    uint32_t sc = t.insert(3, b.data());
    ASSERT_NE(sc, dp::NeighborTable6::kNone) << "room again";
    EXPECT_NE(sc, sa) << "the erased slot cools until release(): the new key goes elsewhere";
    t.release(sa);
    EXPECT_EQ(t.used(), 2u);
    EXPECT_EQ(t.find(3, b.data()), sc);
}

// A stage that asks for an IPv4 kind of error for an IPv6 packet gets its ICMPv6 twin; protocol
// unreachable has none (nothing is sent).
TEST(Icmpv6Errors, EveryKindHasItsIcmpv6TwinOrNone) {
    using dp::IcmpError;
    for (unsigned k = 0; k < dp::kIcmpErrorCount; ++k) {
        IcmpError e = static_cast<IcmpError>(k), six = dp::as_icmp6(e);
        SCOPED_TRACE(dp::kIcmpErrorNames[k]);
        if (e == IcmpError::protocol_unreachable) {
            EXPECT_EQ(six, IcmpError::count);
            continue;
        }
        ASSERT_TRUE(dp::icmp_error_is6(six));
        EXPECT_EQ(dp::as_icmp6(six), six);
        // ICMPv6 error types are 1 to 4 (RFC 4443 2.1).
        EXPECT_GE(dp::kIcmpErrorType[static_cast<unsigned>(six)], 1);
        EXPECT_LE(dp::kIcmpErrorType[static_cast<unsigned>(six)], 4);
    }
    EXPECT_EQ(dp::as_icmp6(IcmpError::time_exceeded), IcmpError::time_exceeded6);
    EXPECT_EQ(dp::as_icmp6(IcmpError::fragmentation_needed), IcmpError::packet_too_big);
    EXPECT_EQ(dp::as_icmp6(IcmpError::net_unreachable), IcmpError::no_route6);
}

// ---------------------------------------------------------------------------------------------
// Forwarding

// A pod's IPv6 packet that the policy routes untranslated leaves through the route's port to the
// router's MAC, EtherType 0x86DD, the same bytes but the hop limit one lower (IPv6 has no header
// checksum; the UDP checksum does not cover it); the way back is routed to the pod over the
// connected route.
TEST_F(DataplaneTest, RoutedIpv6LeavesWithTheHopLimitDecremented) {
    Rig& r = start(dual_stack());
    Bytes out = udp6_ip(kPod10v6, 40000, kInternetV6, 53, {1, 2, 3}, Ip6Opt{64});
    r.process(r.pods, pod6(out));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kExt1GwMac, kExt1Mac, kEtherIpv6, forwarded(out)));
    Parsed p = parse_frame(frames[0]);
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.hop_limit, 63);
    Bytes back = udp6_ip(kInternetV6, 53, kPod10v6, 40000, {4, 5}, Ip6Opt{2});
    r.process(r.ext1, ext6(back, kExt1GwMac));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv6, forwarded(back)));
    // An on-link destination is its own next hop.
    Bytes local = tcp6_ip(kPod10v6, 40001, kServerV6, 443, kSyn);
    r.process(r.pods, pod6(local));
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6, forwarded(local)));
    EXPECT_EQ(r.w().counters.routed, 3u);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_TRUE(r.sessions().empty());
}

// A next hop with no MAC: the packet goes to the control thread with its 128-bit next hop in the
// dynfield (the destination itself on-link, else the route's gateway), hop limit already lower;
// once the control thread has learned the MAC (it writes the IPv6 table), the next packet leaves
// at once to it; invalidated or freed, the next packet is held again.
TEST_F(DataplaneTest, UnresolvedIpv6NextHopHoldsThePacketUntilTheTableHasItsMac) {
    Rig& r = start(dual_stack(true, [](config::Config& c) {
        // The router is not a static neighbour here.
        c.neighbors.erase(std::remove_if(c.neighbors.begin(), c.neighbors.end(),
                                         [](const config::NeighborConfig& n) { return n.ip == addr6(kExt1GwV6); }),
                          c.neighbors.end());
    }));
    Bytes on_link = udp6_ip(kPod10v6, 40000, kUnresolvedV6, 53, {1});
    Bytes via_router = udp6_ip(kPod10v6, 40000, kInternetV6, 53, {2});
    r.process(0, {{r.pods, pod6(on_link)}, {r.pods, pod6(via_router)}});
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 2u);
    EXPECT_EQ(held[0].port, r.ext1);
    EXPECT_EQ(held[0].next_hop6, kUnresolvedV6);
    EXPECT_FALSE(held[0].advertisement);
    Bytes want = pod6(forwarded(on_link));
    ASSERT_EQ(held[0].frame.size(), want.size());
    EXPECT_EQ(Bytes(held[0].frame.begin() + 12, held[0].frame.end()), Bytes(want.begin() + 12, want.end()))
        << "the hop limit is lower, the Ethernet addresses are the control thread's to write";
    EXPECT_EQ(held[1].next_hop6, kExt1GwV6);
    EXPECT_EQ(get16(&held[1].frame[12]), kEtherIpv6);
    EXPECT_EQ(r.w().counters.held, 2u);
    EXPECT_EQ(r.total_drops(), 0u);

    // The control thread learned the router's MAC (neighbor_resolver.cpp does this on the NA).
    dp::NeighborTable6& nt = *r.shared.neighbors6;
    uint32_t slot = nt.insert(r.ext1, kExt1GwV6.data());
    ASSERT_NE(slot, dp::NeighborTable6::kNone);
    nt.set_mac(slot, kExt1GwMac.data());
    r.process(r.pods, pod6(via_router));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kExt1GwMac, kExt1Mac, kEtherIpv6, forwarded(via_router)));
    EXPECT_TRUE(r.to_control().empty());
    // Invalidated (probes unanswered): held again.
    nt.invalidate(slot);
    r.process(r.pods, pod6(via_router));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    ASSERT_EQ(r.to_control().size(), 1u);
    // Freed (unused), and another next hop resolved meanwhile: held again, not sent to it.
    nt.erase(slot);
    nt.release(slot);
    const Ip6Addr stranger = ip6("2001:db8:2::77");
    const Mac stranger_mac{0x52, 0x54, 0, 0, 0x07, 0x77};
    uint32_t s2 = nt.insert(r.ext1, stranger.data());
    nt.set_mac(s2, stranger_mac.data());
    r.process(r.pods, pod6(via_router));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto again = r.to_control();
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].next_hop6, kExt1GwV6);
}

// Link-local and multicast destinations never leave, whatever the default action.
TEST_F(DataplaneTest, LinkLocalAndMulticastIpv6AreNeverForwarded) {
    Rig& r = start(dual_stack());
    r.process(r.pods, pod6(udp6_ip(kPod10v6, 40000, ip6("fe80::5054:ff:fe00:64"), 53, {1})));
    r.process(r.pods, ethernet(Mac{0x33, 0x33, 0, 0, 0, 9}, kPod10Mac, kEtherIpv6,
                               udp6_ip(kPod10v6, 40000, ip6("ff0e::9"), 53, {1})));
    r.process(r.ext1, ext6(udp6_ip(ip6("fe80::5054:ff:fe00:64"), 53, kPod10v6, 40000, {1})));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::link_local), 2u);
    EXPECT_EQ(r.drops(DropReason::multicast), 1u);
    EXPECT_EQ(r.w().counters.routed, 0u);
}

// ---------------------------------------------------------------------------------------------
// The gateway's own ICMPv6 errors

// Hop limit 1 (or 0): answered with Time Exceeded (3/0) from the receiving port's address on the
// sender's prefix, to the sender's MAC, quoting the packet as it arrived; nothing is forwarded,
// and the answer is not a drop.
TEST_F(DataplaneTest, Ipv6HopLimitRunningOutIsAnsweredWithTimeExceeded) {
    Rig& r = start(dual_stack());
    Bytes probe = udp6_ip(kPod10v6, 33434, kInternetV6, 33435, {'p', 'r', 'o', 'b', 'e'}, Ip6Opt{1});
    r.process(r.pods, pod6(probe));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], error6(kPod10Mac, kPodsMac, kPodsV6, kPod10v6, 3, 0, probe));
    ASSERT_TRUE(p.inner);
    EXPECT_EQ(p.inner->src6, kPod10v6);
    EXPECT_EQ(p.inner->hop_limit, 1);
    EXPECT_EQ(p.inner->sport, 33434);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(sent(r, dp::IcmpError::time_exceeded6), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.w().counters.routed, 0u);
    // Hop limit 0, from outside: from ext1's address.
    Bytes zero = tcp6_ip(kInternetV6, 443, kPod10v6, 40000, kAck, {}, Ip6Opt{0});
    r.process(r.ext1, ext6(zero, kExt1GwMac));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error6(kExt1GwMac, kExt1Mac, kExt1V6, kInternetV6, 3, 0, zero));
    EXPECT_EQ(sent(r, dp::IcmpError::time_exceeded6), 2u);
    // Hop limit 2 leaves with 1.
    Bytes two = udp6_ip(kPod10v6, 33434, kInternetV6, 33436, {}, Ip6Opt{2});
    r.process(r.pods, pod6(two));
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(parse_frame(frames[0]).hop_limit, 1);
}

// Larger than the egress port's MTU: never fragmented; Packet Too Big (2/0) with the MTU, quoting
// as much of the packet as keeps the error within 1280 bytes (RFC 4443 2.4(c)); a packet of
// exactly the MTU leaves.
TEST_F(DataplaneTest, Ipv6LargerThanTheEgressMtuGetsPacketTooBig) {
    Rig& r = start(dual_stack(true, [](config::Config& c) { c.ports[1].mtu = 1400; }));
    Bytes big = udp6_ip(kPod10v6, 40000, kInternetV6, 9, Bytes(1401 - 48, 0x5a));
    ASSERT_EQ(big.size(), 1401u);
    r.process(r.pods, pod6(big));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0].size(), 14u + 1280u);
    EXPECT_EQ(frames[0],
              error6(kPod10Mac, kPodsMac, kPodsV6, kPod10v6, 2, 0, Bytes(big.begin(), big.begin() + 1232), 1400));
    EXPECT_EQ(p.icmp_ident << 16 | p.icmp_seq, 1400u);
    EXPECT_EQ(sent(r, dp::IcmpError::packet_too_big), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
    Bytes exact = udp6_ip(kPod10v6, 40000, kInternetV6, 9, Bytes(1400 - 48, 7));
    r.process(r.pods, pod6(exact));
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kExt1GwMac, kExt1Mac, kEtherIpv6, forwarded(exact)));
    EXPECT_EQ(sent(r, dp::IcmpError::packet_too_big), 1u);
}

// At IPv6's minimum MTU: a packet one byte over gets Packet Too Big cut to exactly 1280 bytes
// (its first 1232 quoted), and one under the MTU leaves as it came.
TEST_F(DataplaneTest, PacketTooBigAtTheMinimumMtuIsCutTo1280Bytes) {
    Rig& r = start(dual_stack(true, [](config::Config& c) { c.ports[1].mtu = 1280; }));
    Bytes pkt = udp6_ip(kPod10v6, 40000, kInternetV6, 9, Bytes(1281 - 48, 3));
    r.process(r.pods, pod6(pkt));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0].size(), 14u + 1280u);
    EXPECT_EQ(frames[0],
              error6(kPod10Mac, kPodsMac, kPodsV6, kPod10v6, 2, 0, Bytes(pkt.begin(), pkt.begin() + 1232), 1280));
    EXPECT_EQ(sent(r, dp::IcmpError::packet_too_big), 1u);
    Bytes small = udp6_ip(kPod10v6, 40000, kInternetV6, 9, Bytes(1000, 3));
    r.process(r.pods, pod6(small));
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kExt1GwMac, kExt1Mac, kEtherIpv6, forwarded(small)));
    EXPECT_EQ(sent(r, dp::IcmpError::packet_too_big), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// A port MTU below IPv6's minimum (the configuration takes 68 and up, for IPv4's sake): a packet
// too big for it that fits within 1280 bytes with the error's headers is quoted whole, and the
// error carries that MTU.
TEST_F(DataplaneTest, PacketTooBigQuotesASmallPacketWhole) {
    Rig& r = start(dual_stack(true, [](config::Config& c) { c.ports[1].mtu = 1000; }));
    Bytes pkt = udp6_ip(kPod10v6, 40000, kInternetV6, 9, Bytes(1001 - 48, 3));
    ASSERT_EQ(pkt.size(), 1001u);
    r.process(r.pods, pod6(pkt));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0].size(), 14u + 48u + 1001u);
    EXPECT_EQ(frames[0], error6(kPod10Mac, kPodsMac, kPodsV6, kPod10v6, 2, 0, pkt, 1000));
    EXPECT_EQ(p.icmp_ident << 16 | p.icmp_seq, 1000u);
    EXPECT_EQ(sent(r, dp::IcmpError::packet_too_big), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// No route in the VRF nor the default table: Destination Unreachable, no route (1/0).
TEST_F(DataplaneTest, Ipv6WithNoRouteGetsDestinationUnreachable) {
    Rig& r = start(dual_stack(false));
    Bytes out = tcp6_ip(kPod10v6, 40000, kInternetV6, 443, kSyn);
    r.process(r.pods, pod6(out));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error6(kPod10Mac, kPodsMac, kPodsV6, kPod10v6, 1, 0, out));
    EXPECT_EQ(sent(r, dp::IcmpError::no_route6), 1u);
    EXPECT_EQ(r.drops(DropReason::no_route), 0u);
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

// A port with no global IPv6 address answers from its link-local one.
TEST_F(DataplaneTest, PortWithoutGlobalIpv6AddressAnswersFromItsLinkLocalOne) {
    RigOptions o;
    o.configure = [](config::Config& c) { c.default_action = config::DefaultAction::route; };
    Rig& r = start(o);
    Bytes out = udp6_ip(kPod10v6, 40000, kInternetV6, 53, {1});
    r.process(r.pods, pod6(out));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error6(kPod10Mac, kPodsMac, link_local_of(kPodsMac), kPod10v6, 1, 0, out));
}

// UDP from inside to the gateway's own IPv6 addresses (the receiving port's, an outside port's):
// port unreachable (1/4) from the address it was sent to (RFC 4443 2.2(a)); TCP and other ICMPv6
// are dropped as local, an echo request answered.
TEST_F(DataplaneTest, UdpToTheGatewaysIpv6AddressesGetsPortUnreachable) {
    Rig& r = start(dual_stack());
    Bytes to_port = udp6_ip(kPod10v6, 40000, kPodsV6, 53, {1});
    Bytes to_ext1 = udp6_ip(kPod10v6, 40000, kExt1V6, 53, {2});
    r.process(0, {{r.pods, pod6(to_port)}, {r.pods, pod6(to_ext1)}});
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0], error6(kPod10Mac, kPodsMac, kPodsV6, kPod10v6, 1, 4, to_port));
    EXPECT_EQ(frames[1], error6(kPod10Mac, kPodsMac, kExt1V6, kPod10v6, 1, 4, to_ext1));
    EXPECT_TRUE(checksums_valid(parse_frame(frames[1])));
    EXPECT_EQ(sent(r, dp::IcmpError::port_unreachable6), 2u);
    r.process(
        0, {{r.pods, pod6(tcp6_ip(kPod10v6, 40000, kExt1V6, 22, kSyn))},
            {r.pods, pod6(icmp6_ip(kPod10v6, kPodsV6, 1, 4, quote_of(udp6_ip(kPodsV6, 53, kPod10v6, 40000, {1}))))}});
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::local), 2u);
    r.process(r.pods, pod6(echo6_ip(true, kPod10v6, kExt1V6, 9)));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(parse_frame(frames[0]).icmp_type, 129);
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

// The standard rig (no global IPv6 address, the default action masquerade), as the packet fuzz
// target has it: UDP to the inside port's link-local address is answered from that address
// (tests/fuzz/corpus/packet/ipv6-udp-to-port-link-local is this packet).
TEST_F(DataplaneTest, UdpToThePortsLinkLocalAddressGetsPortUnreachableFromIt) {
    Rig& r = start();
    const Ip6Addr ll = link_local_of(kPodsMac);
    Bytes probe = udp6_ip(kPod10v6, 40000, ll, 53, {'p', 'r', 'o', 'b', 'e'});
    r.process(r.pods, pod6(probe));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error6(kPod10Mac, kPodsMac, ll, kPod10v6, 1, 4, probe));
    EXPECT_EQ(sent(r, dp::IcmpError::port_unreachable6), 1u);
}

// From outside, a packet to the receiving port's own addresses that is not an echo request has no
// session to take, whatever the default action: under `route`, UDP from a link-local neighbour to
// the outside port's link-local address and TCP to its global one are dropped as no_session,
// neither routed nor answered.
TEST_F(DataplaneTest, Ipv6FromOutsideToThePortsOwnAddressesIsNeverRouted) {
    Rig& r = start(dual_stack());
    r.process(r.ext1, ext6(udp6_ip(ip6("fe80::77"), 5000, link_local_of(kExt1Mac), 53, {1})));
    r.process(r.ext1, ext6(tcp6_ip(kServerV6, 443, kExt1V6, 40000, kSyn)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.ext2).empty());
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 2u);
    EXPECT_EQ(r.total_drops(), 2u);
}

// Never in answer to an ICMPv6 error (RFC 4443 2.4(e)): a routed Destination Unreachable whose hop
// limit runs out is dropped under its reason; an echo request in the same place is answered.
TEST_F(DataplaneTest, NoIcmpv6ErrorAnswersAnIcmpv6Error) {
    Rig& r = start(dual_stack());
    Bytes quoted = udp6_ip(kInternetV6, 53, kPod10v6, 40000, {1});
    Bytes error = icmp6_ip(
        kPod10v6, kInternetV6, 1, 4,
        [&] {
            Bytes b(4 + quoted.size(), 0);
            std::copy(quoted.begin(), quoted.end(), b.begin() + 4);
            return b;
        }(),
        Ip6Opt{1});
    r.process(r.pods, pod6(error));
    Bytes too_big = icmp6_ip(kPod10v6, kInternetV6, 2, 0, quote_of(quoted), Ip6Opt{1});
    r.process(r.pods, pod6(too_big));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), 2u);
    EXPECT_EQ(sent(r, dp::IcmpError::time_exceeded6), 0u);
    r.process(r.pods, pod6(echo6_ip(true, kPod10v6, kInternetV6, 7, 1, {}, Ip6Opt{1})));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    EXPECT_EQ(sent(r, dp::IcmpError::time_exceeded6), 1u);
}

// The same per-worker bucket as IPv4's errors, shared by both families.
TEST_F(DataplaneTest, Icmpv6ErrorsShareTheWorkersRateLimit) {
    Rig& r = start(dual_stack(true, [](config::Config& c) {
        c.icmp.errors_per_second = 10;
        c.icmp.burst = 3;
    }));
    auto probes = [&](unsigned n, bool v4) {
        std::vector<In> burst;
        for (unsigned k = 0; k < n; ++k) {
            uint16_t port = static_cast<uint16_t>(33434 + k);
            burst.push_back({r.pods, v4 ? r.from_pod(kPod10, udp_ip(kPod10, port, kServer, 33435, {}, IpOpt{.ttl = 1}))
                                        : pod6(udp6_ip(kPod10v6, port, kInternetV6, 33435, {}, Ip6Opt{1}))});
        }
        r.process(0, burst);
        return r.tx(r.pods).size();
    };
    EXPECT_EQ(probes(5, false), 3u);
    EXPECT_EQ(sent(r, dp::IcmpError::time_exceeded6), 3u);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 2u);
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), 2u);
    EXPECT_EQ(probes(1, true), 0u) << "IPv4 shares the empty bucket";
    uint64_t hz = rte_get_tsc_hz();
    r.advance(hz / 10 + hz / 100);
    EXPECT_EQ(probes(2, false), 1u);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 4u);
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), 4u);
}

}  // namespace
}  // namespace egw::test
