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

Bytes text6(const char* s) { return Bytes(s, s + std::strlen(s)); }

const Ip6Addr kPod10v6 = ip6("fd00:10:244:1::10");
const Ip6Addr kServerV6 = ip6("2001:db8:2::100");
const Ip6Addr kIngressV6 = ip6("2001:db8:2::50");

Bytes pod6(const Bytes& ip, const Mac& dst = kPodsMac) { return ethernet(dst, kPod10Mac, kEtherIpv6, ip); }
Bytes ext6(const Bytes& ip, const Mac& dst = kExt1Mac) { return ethernet(dst, kServerMac, kEtherIpv6, ip); }

// Padding options (PadN) making an extension header of `len` bytes (a multiple of 8, at least 8).
Bytes pad_options(size_t len) {
    Bytes b;
    size_t left = len - 2;
    while (left) {
        size_t n = std::min<size_t>(left, 257);
        if (left - n == 1)
            --n;  // leave room for a PadN (2 bytes) rather than a lone byte
        b.push_back(1);  // PadN
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
                 pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), Ip6Opt{64, {{60, pad_options(8)}, {0, pad_options(8)}}})),
                 DropReason::malformed});
    c.push_back({"UDP with checksum 0", false, pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), {}, true)),
                 DropReason::malformed});
    c.push_back({"truncated TCP header", false, pod6(ipv6(kPod10v6, kServerV6, kProtoTcp, Bytes(tcp.begin() + 40, tcp.begin() + 52))),
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
    {
        Bytes rh(6, 0);
        rh[0] = 4;  // routing type (segment routing)
        rh[1] = 1;  // segments left
        c.push_back({"routing header with segments left", false,
                     pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), Ip6Opt{64, {{43, rh}}})),
                     DropReason::ipv6_extension_header});
    }
    c.push_back({"Fragment header", false,
                 pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), Ip6Opt{64, {{44, Bytes{0, 1, 0, 0, 0, 7}}}})),
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
    c.push_back({"IPv4-mapped destination", false, pod6(udp6_ip(kPod10v6, 40000, ip6("::ffff:192.0.2.100"), 53, text6("q"))),
                 DropReason::martian_destination});
    c.push_back({"link-local source", false, pod6(udp6_ip(ip6("fe80::10"), 40000, kServerV6, 53, text6("q"))),
                 DropReason::link_local});
    c.push_back({"link-local destination", true, ext6(echo6_ip(true, kServerV6, ip6("fe80::1"), 7)),
                 DropReason::link_local});
    c.push_back({"unicast in a broadcast frame", false, pod6(udp, kBroadcast), DropReason::link_broadcast});
    c.push_back({"VLAN tag", false, ethernet(kPodsMac, kPod10Mac, 0x8100, Bytes(46, 0)), DropReason::unknown_ethertype});
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
// transport header) and stops where the data plane does not carry IPv6 yet, under its own reason;
// IPv4 in the same burst is translated as usual.
TEST_F(DataplaneTest, ValidIpv6PassesInputBesideIpv4) {
    Rig& r = start();
    Bytes rh(6, 0);  // routing header with no segments left: walked over
    Ip6Opt chain{64, {{0, pad_options(8)}, {60, pad_options(16)}, {43, rh}, {60, pad_options(8)}}};
    std::vector<Bytes> valid = {
        pod6(tcp6_ip(kPod10v6, 40000, kServerV6, 80, kSyn)),
        pod6(udp6_ip(kPod10v6, 40000, kServerV6, 53, text6("q"), chain)),
        pod6(echo6_ip(true, kPod10v6, kServerV6, 7)),
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
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4, udp_ip(kIngress, 40000, kServer, 53, text6("v4"), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.drops(DropReason::ipv6_unsupported), valid.size() + 1);
    EXPECT_EQ(r.total_drops(), valid.size() + 1);
}

}  // namespace
}  // namespace egw::test
