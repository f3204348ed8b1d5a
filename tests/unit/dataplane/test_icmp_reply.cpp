// SPDX-License-Identifier: Apache-2.0
//
// The gateway's own ICMP errors (dataplane/gateway_icmp_error.cpp): every error is compared byte for byte
// with the frame RFC 792/1812 describe, built independently by packet.cpp (type, code, quoted
// datagram, checksums, source address, TTL, TOS), and the counters say what was sent, limited or
// dropped.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <vector>

#include "dataplane/gateway_icmp_error.h"
#include "dataplane/stages.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;
using dp::IcmpError;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

uint64_t sent(const Rig& r, IcmpError e, unsigned worker = 0) {
    return r.workers.at(worker)->counters.icmp_sent[static_cast<unsigned>(e)];
}

// The error the gateway must send: from `from` (a port address) to the sender of `offending`,
// TTL 64, TOS 0xc0, ID 0, quoting `quote`.
Bytes error_frame(const Mac& to_mac, const Mac& port_mac, uint32_t from, uint32_t to, uint8_t type, uint8_t code,
                  const Bytes& quote, uint32_t aux = 0) {
    return ethernet(
        to_mac, port_mac, kEtherIpv4,
        ipv4(from, to, kProtoIcmp, icmp_error(type, code, quote, aux), IpOpt{.ttl = 64, .id = 0, .tos = 0xc0}));
}

// ---------------------------------------------------------------------------------------------
// Time Exceeded

// A pod's packet whose TTL runs out at the gateway is answered before it is translated: the pod
// gets a Time Exceeded from the inside port's address quoting its own header (its address and
// port, not the ingress IP), and no session is made for it.
TEST_F(DataplaneTest, TtlExpiredNewFlowOfAPodGetsTimeExceededQuotingItsOwnHeader) {
    Rig& r = start();
    Bytes probe = udp_ip(kPod10, 33434, kServer, 33435, text("traceroute probe"), IpOpt{.ttl = 1, .id = 0x1111});
    r.process(r.pods, r.from_pod(kPod10, probe));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kPodsAddr);
    EXPECT_EQ(p.dst, kPod10);
    EXPECT_EQ(p.ttl, 64);
    EXPECT_EQ(p.icmp_type, 11);
    EXPECT_EQ(p.icmp_code, 0);
    ASSERT_TRUE(p.inner);
    EXPECT_EQ(p.inner->src, kPod10);
    EXPECT_EQ(p.inner->sport, 33434);
    EXPECT_EQ(p.inner->ttl, 1);
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, probe));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.sessions().empty()) << "no session for a packet that cannot leave";
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 1u);
    EXPECT_EQ(r.total_drops(), 0u) << "an answered packet is not a drop";
    EXPECT_EQ(r.w().counters.tx_packets, 1u);

    // TTL 0 is answered the same way.
    Bytes zero = udp_ip(kPod10, 33434, kServer, 33436, {}, IpOpt{.ttl = 0});
    r.process(r.pods, r.from_pod(kPod10, zero));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, zero));
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 2u);
}

// A packet of an established session (the fast path) is answered untranslated too, and the
// session is not touched by it.
TEST_F(DataplaneTest, TtlExpiredPacketOfASessionIsAnsweredUntranslatedBothWays) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kSyn | kAck)));
    ASSERT_EQ(r.tx(r.pods).size(), 1u);
    uint64_t out_before = r.svc(kWeb).packets_out, in_before = r.svc(kWeb).packets_in;

    Bytes seg = tcp_ip(kPod10, 40000, kServer, 80, kPsh | kAck, text("late"), IpOpt{.ttl = 1});
    r.process(r.pods, r.from_pod(kPod10, seg));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, seg));
    EXPECT_TRUE(r.tx(r.ext1).empty());

    // From outside, to the ingress IP: answered out of ext1 from ext1's address, to the sender's
    // MAC, quoting the packet as it arrived (its destination the ingress IP, not the pod).
    Bytes back = tcp_ip(kServer, 80, kIngress, 40000, kAck, text("back"), IpOpt{.ttl = 1});
    r.process(r.ext1, r.from_ext1(back));
    frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kExt1Addr);
    EXPECT_EQ(frames[0], error_frame(kServerMac, kExt1Mac, kExt1Addr, kServer, 11, 0, back));
    EXPECT_TRUE(r.tx(r.pods).empty());

    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 2u);
    EXPECT_EQ(r.svc(kWeb).packets_out, out_before);
    EXPECT_EQ(r.svc(kWeb).packets_in, in_before);
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.total_drops(), 0u);

    // TTL 2 still passes, with 1.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kAck, {}, IpOpt{.ttl = 2})));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv4, tcp_ip(kServer, 80, kPod10, 40000, kAck, {}, IpOpt{.ttl = 1})));
}

// Untranslated forwarding (a cluster destination) applies the same rule.
TEST_F(DataplaneTest, TtlExpiredRoutedPacketGetsTimeExceeded) {
    Rig& r = start();
    Bytes probe = echo_ip(true, kPod10, kRemotePod, 0x99, 1, text("ping -t 1"), IpOpt{.ttl = 1});
    r.process(r.pods, r.from_pod(kPod10, probe));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, probe));
    EXPECT_EQ(r.w().counters.routed, 0u);
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 1u);
}

// RFC 1812 4.3.2.3: as much of the datagram as keeps the error within 576 bytes; IPv4 options
// are part of the quoted header.
TEST_F(DataplaneTest, TimeExceededQuotesAtMost548Bytes) {
    Rig& r = start();
    Bytes big = udp_ip(kPod10, 5000, kServer, 53, Bytes(1200, 0xab), IpOpt{.ttl = 1});
    r.process(r.pods, r.from_pod(kPod10, big));
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.total_length, 576);
    EXPECT_EQ(frames[0].size(), 14u + 576u);
    EXPECT_EQ(frames[0],
              error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, Bytes(big.begin(), big.begin() + 548)));

    IpOpt o{.ttl = 1, .options = {0x01, 0x01, 0x01, 0x00}};
    Bytes with_options = udp_ip(kPod10, 5001, kServer, 53, text("opt"), o);
    r.process(r.pods, r.from_pod(kPod10, with_options));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, with_options));
}

// A received mbuf with no headroom: the quote is moved back inside the buffer instead.
TEST_F(DataplaneTest, TimeExceededIsBuiltWithoutHeadroom) {
    Rig& r = start();
    Bytes probe = udp_ip(kPod10, 33434, kServer, 33435, text("no headroom"), IpOpt{.ttl = 1});
    Bytes frame = r.from_pod(kPod10, probe);
    rte_mbuf* m = rte_pktmbuf_alloc(r.pool());
    ASSERT_NE(m, nullptr);
    m->data_off = 0;
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    m->port = r.pods;
    ASSERT_EQ(rte_pktmbuf_headroom(m), 0u);
    dp::worker_process_burst(r.w(), r.policy(), &m, 1);
    dp::worker_flush(r.w());
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, probe));
}

// The IPv6 twin: an IPv6 probe whose hop limit runs out in an mbuf with no headroom; the ICMPv6
// Time Exceeded (48 bytes of headers before the quote, against IPv4's 28) is built by moving the
// quote back all the same.
TEST_F(DataplaneTest, Ipv6TimeExceededIsBuiltWithoutHeadroom) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    Bytes probe = udp6_ip(kPod10v6, 33434, kServerV6, 33435, text("no headroom"), Ip6Opt{1});
    Bytes frame = from_pod6(kPod10v6, probe);
    rte_mbuf* m = rte_pktmbuf_alloc(r.pool());
    ASSERT_NE(m, nullptr);
    m->data_off = 0;
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    m->port = r.pods;
    ASSERT_EQ(rte_pktmbuf_headroom(m), 0u);
    dp::worker_process_burst(r.w(), r.policy(), &m, 1);
    dp::worker_flush(r.w());
    auto frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    Bytes body(4 + probe.size(), 0);  // the unused word, then the probe as it arrived
    std::copy(probe.begin(), probe.end(), body.begin() + 4);
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv6, icmp6_ip(kPodsV6, kPod10v6, 3, 0, body, Ip6Opt{64, {}, 0xc0})));
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(IcmpError::time_exceeded6)], 1u);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.sessions6().empty());
    EXPECT_EQ(r.total_drops(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Rate limit

TEST_F(DataplaneTest, IcmpErrorsAreRateLimitedPerWorker) {
    RigOptions o;
    o.configure = [](config::Config& c) {
        c.icmp.errors_per_second = 10;
        c.icmp.burst = 3;
    };
    Rig& r = start(o);
    auto probes = [&](unsigned n) {
        std::vector<In> burst;
        for (unsigned k = 0; k < n; ++k)
            burst.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(33434 + k), kServer, 33435,
                                                               {}, IpOpt{.ttl = 1}))});
        r.process(0, burst);
        return r.tx(r.pods).size();
    };
    // A full bucket: three errors, then the limit (each limited packet is a drop of its reason).
    EXPECT_EQ(probes(5), 3u);
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 3u);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 2u);
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), 2u);
    // A token comes back every 100 ms.
    uint64_t hz = rte_get_tsc_hz();
    r.advance(hz / 10 + hz / 100);
    EXPECT_EQ(probes(2), 1u);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 3u);
    // After a long quiet time, no more than the burst.
    r.advance(hz * 60);
    EXPECT_EQ(probes(5), 3u);
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 7u);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 5u);
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), 5u);
}

TEST_F(DataplaneTest, ZeroErrorsPerSecondSendsNone) {
    RigOptions o;
    o.configure = [](config::Config& c) { c.icmp.errors_per_second = 0; };
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 33434, kServer, 33435, {}, IpOpt{.ttl = 1})));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), 1u);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 1u);
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 0u);
}

// ---------------------------------------------------------------------------------------------
// Never answered (RFC 1812 4.3.2.7)

TEST_F(DataplaneTest, NoIcmpErrorForAnIcmpErrorOrALinkLayerBroadcast) {
    Rig& r = start();
    // An ICMP error routed toward the cluster, its TTL expiring; and one from outside.
    Bytes quoted = udp_ip(kRemotePod, 53, kPod10, 5000, text("q"));
    r.process(r.pods,
              r.from_pod(kPod10, ipv4(kPod10, kRemotePod, kProtoIcmp, icmp_error(3, 3, quoted), IpOpt{.ttl = 1})));
    r.process(r.pods,
              r.from_pod(kPod10, ipv4(kPod10, kRemotePod, kProtoIcmp, icmp_error(11, 0, quoted), IpOpt{.ttl = 0})));
    // A unicast datagram sent to the Ethernet broadcast address, and to a multicast MAC: input
    // drops them before any stage could ask (RFC 1812 5.3.4).
    r.process(r.pods,
              ethernet(kBroadcast, kPod10Mac, kEtherIpv4, udp_ip(kPod10, 5000, kServer, 53, {}, IpOpt{.ttl = 1})));
    Mac mcast{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
    r.process(r.pods, ethernet(mcast, kPod10Mac, kEtherIpv4, udp_ip(kPod10, 5000, kServer, 53, {}, IpOpt{.ttl = 1})));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), 2u);
    EXPECT_EQ(r.drops(DropReason::link_broadcast), 2u);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 0u) << "the never-cases take no token";
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), 0u);
    // An echo request (a query, not an error) is answered.
    Bytes ping = echo_ip(true, kPod10, kServer, 7, 1, {}, IpOpt{.ttl = 1});
    r.process(r.pods, r.from_pod(kPod10, ping));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 11, 0, ping));
}

// ---------------------------------------------------------------------------------------------
// Destination Unreachable

// No route: net unreachable from the receiving port's address, the datagram quoted as it came.
TEST_F(DataplaneTest, NoRouteGetsNetUnreachable) {
    RigOptions o;
    o.configure = [](config::Config& c) {
        std::erase_if(c.routes, [](const config::RouteConfig& rc) { return rc.prefix.len == 0; });
        c.default_action = config::DefaultAction::route;
    };
    o.services = {lb_service(kWeb, kIngress, {kPod10})};
    Rig& r = start(o);
    // A pod of the Service: classified, no route, no session.
    Bytes q = udp_ip(kPod10, 5000, kInternet, 53, text("where"));
    r.process(r.pods, r.from_pod(kPod10, q));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 3, 0, q));
    EXPECT_TRUE(r.sessions().empty());
    // A pod of no Service under the default action route: ip_forward.
    Bytes routed = tcp_ip(kPod20, 6000, kInternet, 443, kSyn);
    r.process(r.pods, r.from_pod(kPod20, routed));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], error_frame(kPod20Mac, kPodsMac, kPodsAddr, kPod20, 3, 0, routed));
    // From outside, routed untouched toward nowhere: back out of ext1 from ext1's address.
    Bytes in = udp_ip(kServer, 7, kInternet, 7, text("through"));
    r.process(r.ext1, r.from_ext1(in));
    frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kServerMac, kExt1Mac, kExt1Addr, kServer, 3, 0, in));
    EXPECT_EQ(sent(r, IcmpError::net_unreachable), 3u);
    EXPECT_EQ(r.drops(DropReason::no_route), 0u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// The gateway's own addresses: UDP gets port unreachable, a protocol it does not speak protocol
// unreachable, TCP nothing (a reset would be the answer; egw sends none). Each answer comes from
// the address it answers for.
TEST_F(DataplaneTest, GatewayAddressesAnswerUdpAndOtherProtocolsWithUnreachable) {
    Rig& r = start();
    Bytes udp = udp_ip(kPod10, 5000, kPodsAddr, 53, text("dns?"));
    r.process(r.pods, r.from_pod(kPod10, udp));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 3, 3, udp));
    // ext1's address seen from inside is the gateway's too; the answer comes from the address the
    // packet was sent to (RFC 1122 3.2.2), as IPv6's does (RFC 4443 2.2(a)), out of the port it
    // reached, the inside one.
    Bytes udp_ext = udp_ip(kPod10, 5001, kExt1Addr, 161, text("snmp?"));
    r.process(r.pods, r.from_pod(kPod10, udp_ext));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kExt1Addr, kPod10, 3, 3, udp_ext));
    Bytes gre = ipv4(kPod10, kPodsAddr, 47, text("tunnel"));
    r.process(r.pods, r.from_pod(kPod10, gre));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], error_frame(kPod10Mac, kPodsMac, kPodsAddr, kPod10, 3, 2, gre));
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kPodsAddr, 22, kSyn)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::local), 1u);
    EXPECT_EQ(sent(r, IcmpError::port_unreachable), 2u);
    EXPECT_EQ(sent(r, IcmpError::protocol_unreachable), 1u);
    EXPECT_TRUE(r.sessions().empty());
}

// The IP-level never-cases (broadcast and multicast destinations, sources naming no single host)
// are also the input filter's (test_filter.cpp), which drops such packets before any stage could
// ask for an error; icmp_reply checks them again by itself. Here it runs alone on a packet input
// has passed, then changed into each case; an unchanged one and a first fragment are answered.
TEST_F(DataplaneTest, IcmpReplyStageRefusesBroadcastMulticastMartiansAndLaterFragments) {
    Rig& r = start();
    struct Case {
        const char* what;
        std::function<void(rte_ipv4_hdr*)> change;
        bool answered;
    };
    const Case cases[] = {
        {"unchanged", [](rte_ipv4_hdr*) {}, true},
        {"first fragment", [](rte_ipv4_hdr* ip) { ip->fragment_offset = nbo16(0x2000); }, true},
        {"later fragment", [](rte_ipv4_hdr* ip) { ip->fragment_offset = nbo16(0x0001); }, false},
        {"multicast", [](rte_ipv4_hdr* ip) { ip->dst_addr = nbo32(ip4(224, 0, 0, 5)); }, false},
        {"limited broadcast", [](rte_ipv4_hdr* ip) { ip->dst_addr = nbo32(ip4(255, 255, 255, 255)); }, false},
        {"directed broadcast", [](rte_ipv4_hdr* ip) { ip->dst_addr = nbo32(ip4(198, 51, 100, 255)); }, false},
        {"from 0.0.0.0", [](rte_ipv4_hdr* ip) { ip->src_addr = 0; }, false},
        {"from loopback", [](rte_ipv4_hdr* ip) { ip->src_addr = nbo32(ip4(127, 0, 0, 1)); }, false},
        {"from 240.0.0.0/4", [](rte_ipv4_hdr* ip) { ip->src_addr = nbo32(ip4(240, 0, 0, 1)); }, false},
        {"from multicast", [](rte_ipv4_hdr* ip) { ip->src_addr = nbo32(ip4(239, 1, 1, 1)); }, false},
        {"from a subnet's broadcast", [](rte_ipv4_hdr* ip) { ip->src_addr = nbo32(ip4(10, 244, 1, 255)); }, false},
    };
    Bytes frame = r.from_pod(kPod10, udp_ip(kPod10, 33434, kServer, 33435, text("probe"), IpOpt{.ttl = 1}));
    uint64_t answered = 0;
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        rte_mbuf* m = rte_pktmbuf_alloc(r.pool());
        ASSERT_NE(m, nullptr);
        std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
        m->port = r.pods;
        dp::Burst b;
        dp::stage_input(r.w(), r.policy(), b, &m, 1);
        ASSERT_EQ(b.pkt[0].next, dp::Next::nat_lookup);
        c.change(b.pkt[0].ip);
        dp::reply_icmp_error(b, 0, IcmpError::time_exceeded, DropReason::ttl_exceeded);
        dp::stage_icmp_reply(r.w(), r.policy(), b);
        EXPECT_EQ(b.pkt[0].next, c.answered ? dp::Next::transmit : dp::Next::drop);
        dp::stage_output(r.w(), r.policy(), b);
        dp::worker_flush(r.w());
        EXPECT_EQ(r.tx(r.pods).size(), c.answered ? 1u : 0u);
        answered += c.answered;
    }
    EXPECT_EQ(sent(r, IcmpError::time_exceeded), answered);
    EXPECT_EQ(r.drops(DropReason::ttl_exceeded), std::size(cases) - answered);
    EXPECT_EQ(r.w().counters.icmp_rate_limited, 0u);
}

}  // namespace
}  // namespace egw::test
