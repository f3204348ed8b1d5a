// SPDX-License-Identifier: Apache-2.0
//
// Malformed and unsupported input: each frame is dropped with its own reason, nothing of it
// leaves, and valid packets in the same burst are forwarded as usual.
#include <gtest/gtest.h>
#include <rte_mbuf_core.h>

#include <cstring>
#include <random>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

// Rewrites the IPv4 header checksum of a datagram after a deliberate change to its header.
Bytes fix_ip_checksum(Bytes ip) {
    size_t hl = std::min<size_t>((ip[0] & 0x0f) * 4u, ip.size());
    if (hl < 12) return ip;
    ip[10] = ip[11] = 0;
    put16(&ip[10], finish(sum16(ip.data(), hl)));
    return ip;
}

struct Case {
    std::string name;
    bool from_outside;
    Bytes frame;
    DropReason reason;
};

std::vector<Case> malformed_cases(const Rig& r) {
    std::vector<Case> c;
    Bytes udp = udp_ip(kPod10, 40000, kServer, 53, text("query"));
    Bytes tcp = tcp_ip(kPod10, 40000, kServer, 80, kSyn);
    auto pod = [&](const Bytes& ip) { return r.from_pod(kPod10, ip); };

    c.push_back({"truncated Ethernet header", false, Bytes(kPodsMac.begin(), kPodsMac.end()), DropReason::malformed});
    c.push_back({"truncated IPv4 header", false, pod(Bytes(udp.begin(), udp.begin() + 12)), DropReason::malformed});
    {
        Bytes ip = udp;
        ip[0] = 0x44;
        c.push_back({"IHL below 5", false, pod(fix_ip_checksum(ip)), DropReason::malformed});
    }
    {
        Bytes ip = udp;
        ip[0] = 0x65;
        c.push_back({"IP version 6 under the IPv4 EtherType", false, pod(fix_ip_checksum(ip)), DropReason::malformed});
    }
    {
        Bytes ip = udp;
        put16(&ip[2], static_cast<uint16_t>(ip.size() + 10));
        c.push_back({"total length beyond the frame", false, pod(fix_ip_checksum(ip)), DropReason::malformed});
    }
    {
        Bytes ip = udp;
        put16(&ip[2], 16);
        c.push_back({"total length below the header", false, pod(fix_ip_checksum(ip)), DropReason::malformed});
    }
    {
        Bytes ip = udp;
        ip[10] ^= 0x01;
        c.push_back({"bad IPv4 header checksum", false, pod(ip), DropReason::malformed});
    }
    c.push_back({"protocol 253 for a NAT flow", false, pod(ipv4(kPod10, kServer, 253, text("experimental"))),
                 DropReason::unsupported_protocol});
    c.push_back({"GRE for a masqueraded flow", false, r.from_pod(kPod20, ipv4(kPod20, kServer, 47, Bytes(8, 0))),
                 DropReason::unsupported_protocol});
    c.push_back({"truncated TCP header", false,
                 pod(ipv4(kPod10, kServer, kProtoTcp, Bytes(tcp.begin() + 20, tcp.begin() + 32))),
                 DropReason::malformed});
    {
        Bytes ip = tcp;
        ip[20 + 12] = 0x40;
        c.push_back({"TCP data offset below 5", false, pod(ip), DropReason::malformed});
    }
    {
        Bytes ip = tcp;
        ip[20 + 12] = 0xf0;
        c.push_back({"TCP data offset beyond the segment", false, pod(ip), DropReason::malformed});
    }
    {
        Bytes ip = udp;
        put16(&ip[20 + 4], static_cast<uint16_t>(ip.size() - 20 + 1));
        c.push_back({"UDP length beyond the datagram", false, pod(ip), DropReason::malformed});
    }
    {
        Bytes ip = udp;
        put16(&ip[20 + 4], 4);
        c.push_back({"UDP length below its header", false, pod(ip), DropReason::malformed});
    }
    c.push_back(
        {"truncated UDP header", false, pod(ipv4(kPod10, kServer, kProtoUdp, Bytes(6, 0))), DropReason::malformed});
    c.push_back({"truncated ICMP header", false, pod(ipv4(kPod10, kServer, kProtoIcmp, Bytes{8, 0, 0xf7, 0xff})),
                 DropReason::malformed});
    c.push_back(
        {"ICMP error with a quote too short", true,
         r.from_ext1(ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, Bytes(udp.begin(), udp.begin() + 24)))),
         DropReason::malformed});
    {
        Bytes quote = udp;
        quote[0] = 0x43;
        c.push_back({"ICMP error quoting a header with IHL below 5", true,
                     r.from_ext1(ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, quote))), DropReason::malformed});
    }
    c.push_back({"ICMP timestamp request from an endpoint", false,
                 pod(ipv4(kPod10, kServer, kProtoIcmp, icmp_error(13, 0, Bytes(12, 0)))),
                 DropReason::icmp_unsupported});
    c.push_back({"zeros under the IPv6 EtherType", false, ethernet(kPodsMac, kPod10Mac, kEtherIpv6, Bytes(60, 0)),
                 DropReason::malformed});
    c.push_back(
        {"VLAN tag", false, ethernet(kPodsMac, kPod10Mac, 0x8100, Bytes(46, 0)), DropReason::unknown_ethertype});
    c.push_back({"unicast for another MAC", false, ethernet(Mac{0x02, 0, 0, 0, 0x99, 0x99}, kPod10Mac, kEtherIpv4, udp),
                 DropReason::foreign_mac});
    c.push_back(
        {"truncated ARP", true, ethernet(kBroadcast, kServerMac, kEtherArp, Bytes(10, 0)), DropReason::malformed});
    {
        Bytes arp = arp_body(1, kServerMac, kServer, Mac{}, kIngress);
        arp[5] = 16;  // protocol address length of IPv6
        c.push_back({"ARP for another protocol size", true, ethernet(kBroadcast, kServerMac, kEtherArp, arp),
                     DropReason::malformed});
    }
    return c;
}

TEST_F(DataplaneTest, EachMalformedFrameIsDroppedWithItsReason) {
    Rig& r = start();
    for (const Case& c : malformed_cases(r)) {
        SCOPED_TRACE(c.name);
        uint64_t before = r.drops(c.reason), total = r.total_drops();
        r.process(c.from_outside ? r.ext1 : r.pods, c.frame);
        EXPECT_EQ(r.drops(c.reason), before + 1);
        EXPECT_EQ(r.total_drops(), total + 1);
        EXPECT_TRUE(r.tx(r.pods).empty());
        EXPECT_TRUE(r.tx(r.ext1).empty());
        EXPECT_TRUE(r.tx(r.ext2).empty());
        EXPECT_TRUE(r.to_control().empty());
        EXPECT_TRUE(r.sessions().empty());
    }
    EXPECT_EQ(r.svc(kWeb).packets_out, 0u);
    EXPECT_EQ(r.w().counters.tx_packets, 0u);
}

TEST_F(DataplaneTest, ValidPacketsInAMalformedBurstAreForwarded) {
    Rig& r = start();
    auto cases = malformed_cases(r);
    Bytes first = udp_ip(kPod10, 40000, kServer, 53, text("first"));
    Bytes last = tcp_ip(kPod11, 40001, kServer, 80, kSyn);
    std::vector<In> burst;
    burst.push_back({r.pods, r.from_pod(kPod10, first)});
    for (const Case& c : cases)
        burst.push_back({c.from_outside ? r.ext1 : r.pods, c.frame});
    burst.push_back({r.pods, r.from_pod(kPod11, last)});
    ASSERT_LE(burst.size(), dp::kBurst);
    r.process(0, burst);

    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 2u);
    ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
    ASSERT_TRUE(checksums_valid(parse_frame(frames[1])));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kIngress, 40000, kServer, 53, text("first"), IpOpt{.ttl = 63})));
    EXPECT_EQ(frames[1], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  tcp_ip(kIngress, 40001, kServer, 80, kSyn, {}, IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.total_drops(), cases.size());
    for (unsigned reason = 0; reason < dp::kDropReasonCount; ++reason) {
        uint64_t want = 0;
        for (const Case& c : cases)
            want += static_cast<unsigned>(c.reason) == reason;
        EXPECT_EQ(r.drops(static_cast<DropReason>(reason)), want) << dp::kDropReasonNames[reason];
    }
    EXPECT_EQ(r.sessions().size(), 2u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 2u);
}

TEST_F(DataplaneTest, DontFragmentIsNotAFragment) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("df"), IpOpt{.frag = 0x4000})));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kIngress, 40000, kServer, 53, text("df"), IpOpt{.ttl = 63, .frag = 0x4000})));
}

TEST_F(DataplaneTest, Ipv4OptionsAreKeptAndTranslated) {
    Rig& r = start();
    IpOpt o{.ttl = 30, .options = {0x01, 0x01, 0x01, 0x00}};
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn, text("opt"), o)));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    o.ttl = 29;
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv4, tcp_ip(kIngress, 40000, kServer, 80, kSyn, text("opt"), o)));
    o.ttl = 50;
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kSyn | kAck, {}, o)));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    o.ttl = 49;
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv4, tcp_ip(kServer, 80, kPod10, 40000, kSyn | kAck, {}, o)));
}

TEST_F(DataplaneTest, OtherProtocolsToClusterDestinationsAreRouted) {
    Rig& r = start();
    Bytes ip = ipv4(kPod10, kRemotePod, 253, text("experimental"));
    r.process(r.pods, r.from_pod(kPod10, ip));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                                  ipv4(kPod10, kRemotePod, 253, text("experimental"), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// The software check of the IPv4 header checksum (no NIC flag) covers every bit of the common
// 20-byte header: each single flipped bit is a malformed drop, whatever word it is in, and
// headers of many shapes (TOS, identification, TTL, DF, addresses, which move the carries of the
// sum about) with their right checksum are translated.
TEST_F(DataplaneTest, HeaderChecksumCheckCoversEveryBitOfTheHeader) {
    Rig& r = start();
    const Bytes good = udp_ip(kPod10, 40000, kServer, 53, text("q"));
    uint64_t malformed = r.drops(DropReason::malformed);
    for (size_t bit = 0; bit < 20 * 8; ++bit) {
        SCOPED_TRACE(bit);
        Bytes bad = good;
        bad[bit / 8] ^= static_cast<uint8_t>(0x80 >> (bit % 8));
        r.process(r.pods, r.from_pod(kPod10, bad));
        EXPECT_EQ(r.drops(DropReason::malformed), ++malformed);
        EXPECT_TRUE(r.tx(r.ext1).empty());
    }
    std::mt19937 rng(23);
    for (int k = 0; k < 300; ++k) {
        IpOpt o;
        o.tos = static_cast<uint8_t>(rng());
        o.id = static_cast<uint16_t>(rng());
        o.ttl = static_cast<uint8_t>(2 + rng() % 254);
        o.frag = rng() % 2 ? 0x4000 : 0;
        uint32_t server = ip4(192, 0, 2, 100 + k % 2);
        auto sport = static_cast<uint16_t>(1024 + rng() % 60000);
        // Every other one from a cluster address no Service owns (masqueraded to ext1's own) that
        // ends in .255 with a high third octet: bytes 8-15 of its header then read as a 64-bit word
        // near the top, so adding the words carries out of 64 bits.
        bool high = k % 2;
        uint32_t src = high ? ip4(10, 244, static_cast<uint8_t>(192 + rng() % 63), 255) : kPod10;
        SCOPED_TRACE(ip_str(src));
        r.process(r.pods, r.from_pod(kPod10, udp_ip(src, sport, server, 53, text("shape"), o)));
        auto out = r.tx(r.ext1);
        ASSERT_EQ(out.size(), 1u);
        Parsed p = parse_frame(out[0]);
        ASSERT_TRUE(p.ok) << p.error;
        EXPECT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.ttl, o.ttl - 1);
        EXPECT_EQ(p.id, o.id);
        EXPECT_EQ(p.src, high ? kExt1Addr : kIngress);
    }
    // And the second carry: identification 0xF50B with DF from 10.244.191.255 puts the first 16
    // bytes' two words within 2^32 of 2^64, so adding the destination's word carries out for 100
    // of the 256 TOS values.
    for (unsigned tos = 0; tos < 256; ++tos) {
        IpOpt o;
        o.tos = static_cast<uint8_t>(tos);
        o.id = 0xf50b;
        o.frag = 0x4000;
        SCOPED_TRACE(tos);
        r.process(r.pods, r.from_pod(kPod10, udp_ip(ip4(10, 244, 191, 255), static_cast<uint16_t>(20000 + tos), kServer,
                                                    53, text("shape"), o)));
        auto out = r.tx(r.ext1);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_TRUE(checksums_valid(parse_frame(out[0])));
    }
    EXPECT_EQ(r.drops(DropReason::malformed), malformed);
}

TEST_F(DataplaneTest, ReceiveChecksumFlagsAreHonouredExactly) {
    Rig& r = start();
    Bytes good = udp_ip(kPod10, 40000, kServer, 53, text("q"));
    Bytes wrong = good;
    put16(&wrong[10], static_cast<uint16_t>(get16(&wrong[10]) + 1));
    Bytes want =
        ethernet(kServerMac, kExt1Mac, kEtherIpv4, udp_ip(kIngress, 40000, kServer, 53, text("q"), IpOpt{.ttl = 63}));
    constexpr size_t kIpChecksum = 14 + 10;  // the IPv4 header checksum's offset in the frame

    // The NIC checked the header and found it good: no software check needed.
    r.process(0, {{r.pods, r.from_pod(kPod10, good), RTE_MBUF_F_RX_IP_CKSUM_GOOD}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], want);
    // GOOD is taken at its word: a field the software check would refuse is not checked again,
    // and the packet leaves translated, its checksum updated incrementally from the field it had
    // (so still off). Only that field differs from the translation of the right packet.
    r.process(0, {{r.pods, r.from_pod(kPod10, wrong), RTE_MBUF_F_RX_IP_CKSUM_GOOD}});
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(frames[0].size(), want.size());
    EXPECT_NE(get16(&frames[0][kIpChecksum]), get16(&want[kIpChecksum]));
    Bytes masked = frames[0];
    put16(&masked[kIpChecksum], get16(&want[kIpChecksum]));
    EXPECT_EQ(masked, want);
    EXPECT_EQ(r.total_drops(), 0u);
    // The NIC found it bad.
    r.process(0, {{r.pods, r.from_pod(kPod10, wrong), RTE_MBUF_F_RX_IP_CKSUM_BAD}});
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::malformed), 1u);
    // "NONE": the header is intact but the checksum field is not right, so it cannot be
    // updated incrementally; the packet must not leave with a wrong checksum: it is checked in
    // software and dropped.
    r.process(0, {{r.pods, r.from_pod(kPod10, wrong), RTE_MBUF_F_RX_IP_CKSUM_NONE}});
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::malformed), 2u);
    // UNKNOWN (no flag, what a NIC without the offload and every virtual device give): checked in
    // software as well.
    r.process(0, {{r.pods, r.from_pod(kPod10, wrong), RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN}});
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::malformed), 3u);
    EXPECT_EQ(r.total_drops(), 3u);
    // "NONE" with a right field is an ordinary packet.
    r.process(0, {{r.pods, r.from_pod(kPod10, good), RTE_MBUF_F_RX_IP_CKSUM_NONE}});
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], want);
    EXPECT_EQ(r.total_drops(), 3u);
}

// The IPv6 twin. IPv6 has no header checksum, so no IP checksum flag a NIC sets on an IPv6 packet
// (GOOD, NONE, or UNKNOWN, the usual one) may decide anything: each packet is translated as the
// same packet without flags is. BAD is left out: it is not a state an IPv6 header can be in, and
// no behaviour for it was chosen. The transport checksums stay end to end: a wrong one is neither
// mended nor a reason to drop; the incremental update carries the error as it was.
TEST_F(DataplaneTest, Ipv6IgnoresTheReceiveIpChecksumFlags) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    const Bytes want =
        ethernet(kServerMac, kExt1Mac, kEtherIpv6, udp6_ip(kIngressV6, 40000, kServerV6, 53, text("q"), Ip6Opt{63}));
    for (uint64_t flags : {uint64_t{0}, uint64_t{RTE_MBUF_F_RX_IP_CKSUM_GOOD}, uint64_t{RTE_MBUF_F_RX_IP_CKSUM_NONE},
                           uint64_t{RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN}}) {
        SCOPED_TRACE(flags);
        r.process(0, {{r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))), flags}});
        auto frames = r.tx(r.ext1);
        ASSERT_EQ(frames.size(), 1u);
        EXPECT_TRUE(checksums_valid(parse_frame(frames[0])));
        EXPECT_EQ(frames[0], want);
    }
    // A UDP checksum one off leaves one off: translated, not mended.
    Bytes wrong = udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"));
    put16(&wrong[40 + 6], static_cast<uint16_t>(get16(&wrong[40 + 6]) - 1));
    r.process(0, {{r.pods, from_pod6(kPod10v6, wrong), RTE_MBUF_F_RX_IP_CKSUM_GOOD}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_FALSE(checksums_valid(parse_frame(frames[0])));
    Bytes off = want;
    put16(&off[14 + 40 + 6], static_cast<uint16_t>(get16(&off[14 + 40 + 6]) - 1));
    EXPECT_EQ(frames[0], off);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.sessions6().size(), 1u);
}

}  // namespace
}  // namespace egw::test
