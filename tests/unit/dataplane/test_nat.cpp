// SPDX-License-Identifier: Apache-2.0
//
// NAPT of an EgressService: TCP, UDP, ICMP echo and ICMP errors, both directions. Every output is
// compared byte for byte with the frame a correct translation gives (built independently by
// packet.cpp), and its checksums are recomputed in full.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

TEST_F(DataplaneTest, TcpOutAndBackThroughLoadBalancerIp) {
    Rig& r = start();
    Bytes payload = text("GET / HTTP/1.1\r\nHost: example\r\n\r\n");
    Bytes out_ip = tcp_ip(kPod10, 40000, kServer, 80, kPsh | kAck, payload, IpOpt{.ttl = 64});
    r.rx(r.pods, r.from_pod(kPod10, out_ip));
    EXPECT_EQ(r.poll(), 1u);

    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kIngress);
    EXPECT_EQ(p.sport, 40000);
    EXPECT_EQ(p.dst, kServer);
    EXPECT_EQ(p.dport, 80);
    EXPECT_EQ(p.ttl, 63);
    EXPECT_EQ(p.eth_src, kExt1Mac);
    EXPECT_EQ(p.eth_dst, kServerMac);
    Bytes want = ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                          tcp_ip(kIngress, 40000, kServer, 80, kPsh | kAck, payload, IpOpt{.ttl = 63}));
    EXPECT_EQ(frames[0], want);
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_TRUE(r.tx(r.ext2).empty());

    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    const dp::Session& s = ss[0];
    EXPECT_EQ(s.pod_ip, nbo32(kPod10));
    EXPECT_EQ(s.pod_port, nbo16(40000));
    EXPECT_EQ(s.remote_ip, nbo32(kServer));
    EXPECT_EQ(s.remote_port, nbo16(80));
    EXPECT_EQ(s.nat_ip, nbo32(kIngress));
    EXPECT_EQ(s.nat_port, nbo16(40000));
    EXPECT_EQ(s.proto, kProtoTcp);
    EXPECT_EQ(s.service_id, r.service_id(kWeb));
    EXPECT_EQ(s.out_port, r.ext1);
    EXPECT_FALSE(s.in_use & dp::kSessionMasquerade);

    const auto& sc = r.svc(kWeb);
    EXPECT_EQ(sc.packets_out, 1u);
    EXPECT_EQ(sc.bytes_out, want.size());
    EXPECT_EQ(sc.sessions_created, 1u);
    EXPECT_EQ(sc.packets_in, 0u);
    EXPECT_EQ(r.w().counters.sessions_created, 1u);
    EXPECT_EQ(r.w().counters.rx_packets, 1u);
    EXPECT_EQ(r.w().counters.tx_packets, 1u);
    EXPECT_EQ(r.total_drops(), 0u);

    // The reply comes back to the ingress IP and reaches the pod.
    Bytes reply = text("HTTP/1.1 200 OK\r\n\r\n");
    r.rx(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kPsh | kAck, reply, IpOpt{.ttl = 57})));
    EXPECT_EQ(r.poll(), 1u);
    frames = r.tx(r.pods);
    p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    Bytes back = ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                          tcp_ip(kServer, 80, kPod10, 40000, kPsh | kAck, reply, IpOpt{.ttl = 56}));
    EXPECT_EQ(frames[0], back);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(sc.packets_in, 1u);
    EXPECT_EQ(sc.bytes_in, back.size());
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, TcpSessionStateFollowsHandshakeAndClose) {
    Rig& r = start();
    // Short transitory timeout, long established one, so expiry tells them apart.
    constexpr uint64_t kTransitory = 1000, kEstablished = 1000000;
    r.shared.timeouts.tcp_transitory = kTransitory;
    r.shared.timeouts.tcp_established = kEstablished;
    auto out = [&](uint8_t flags) {
        r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, flags)));
        EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    };
    auto in = [&](uint8_t flags) {
        r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, flags)));
        EXPECT_EQ(r.tx(r.pods).size(), 1u);
    };
    auto state = [&]() -> uint8_t {
        auto ss = r.sessions();
        EXPECT_EQ(ss.size(), 1u);
        return ss.empty() ? 0xff : ss[0].tcp_seen;
    };

    out(kSyn);
    EXPECT_EQ(state(), dp::kTcpSeenInside);
    in(kSyn | kAck);
    EXPECT_EQ(state(), dp::kTcpSeenInside | dp::kTcpSeenOutside);
    out(kAck);
    EXPECT_EQ(state(), dp::kTcpSeenInside | dp::kTcpSeenOutside);

    // Established: idle longer than the transitory timeout, the session stays.
    r.advance(kTransitory * 5);
    r.sweep();
    EXPECT_EQ(r.sessions().size(), 1u) << "an established session used the transitory timeout";
    EXPECT_EQ(r.w().counters.sessions_expired, 0u);

    // One FIN: half-closed (test_tcp.cpp has its timeout). Both: closing, so the transitory
    // timeout applies again.
    out(kFin | kAck);
    EXPECT_EQ(state(), dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinInside);
    in(kFin | kAck);
    EXPECT_EQ(state(),
              dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinInside | dp::kTcpFinOutside | dp::kTcpClosing);
    r.advance(kTransitory / 2);
    r.sweep();
    EXPECT_EQ(r.sessions().size(), 1u) << "expired before its timeout";
    r.advance(kTransitory);
    r.sweep();
    EXPECT_TRUE(r.sessions().empty()) << "a closing session outlived the transitory timeout";
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
    EXPECT_EQ(r.w().counters.sessions_closed, 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u);
}

TEST_F(DataplaneTest, TcpHalfOpenSessionUsesTransitoryTimeout) {
    Rig& r = start();
    r.shared.timeouts.tcp_transitory = 1000;
    r.shared.timeouts.tcp_established = 1000000;
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.advance(2000);
    r.sweep();
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
}

TEST_F(DataplaneTest, UdpBothDirections) {
    Rig& r = start();
    Bytes q = text("query: odd length");
    r.rx(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 5353, kServer, 53, q)));
    r.poll();
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_NE(p.l4_csum, 0);
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv4, udp_ip(kIngress, 5353, kServer, 53, q, IpOpt{.ttl = 63})));

    Bytes a = text("answer");
    r.rx(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 5353, a)));
    r.poll();
    frames = r.tx(r.pods);
    p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0],
              ethernet(kPod11Mac, kPodsMac, kEtherIpv4, udp_ip(kServer, 53, kPod11, 5353, a, IpOpt{.ttl = 63})));

    ASSERT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.sessions()[0].proto, kProtoUdp);
    EXPECT_EQ(r.svc(kWeb).packets_out, 1u);
    EXPECT_EQ(r.svc(kWeb).packets_in, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, UdpWithoutChecksumStaysWithoutChecksum) {
    Rig& r = start();
    Bytes q(33, 0xab);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 7000, kServer, 9000, q, {}, /*zero_checksum=*/true)));
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.l4_csum, 0);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kIngress, 7000, kServer, 9000, q, IpOpt{.ttl = 63}, true)));

    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 9000, kIngress, 7000, q, {}, true)));
    frames = r.tx(r.pods);
    p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.l4_csum, 0);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  udp_ip(kServer, 9000, kPod10, 7000, q, IpOpt{.ttl = 63}, true)));
}

TEST_F(DataplaneTest, EthernetPaddingIsNotForwarded) {
    Rig& r = start();
    Bytes ip = udp_ip(kPod10, 7000, kServer, 9000, text("hi"));
    Bytes frame = r.from_pod(kPod10, ip);
    frame.resize(60, 0xee);  // minimum Ethernet frame: padding after a 30-byte datagram
    r.process(r.pods, frame);
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kIngress, 7000, kServer, 9000, text("hi"), IpOpt{.ttl = 63})));
}

TEST_F(DataplaneTest, IcmpEchoIdentifierTranslatedAndRestored) {
    Rig& r = start();
    Bytes data(56);
    for (size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<uint8_t>(i);
    // Identifier 7 lies outside the NAT port range, so it must be replaced.
    r.process(r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kServer, 7, 1, data)));
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.icmp_type, 8);
    EXPECT_EQ(p.src, kIngress);
    uint16_t ident = p.icmp_ident;
    EXPECT_GE(ident, r.cfg.sessions.port_min);
    EXPECT_LE(ident, r.cfg.sessions.port_max);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  echo_ip(true, kIngress, kServer, ident, 1, data, IpOpt{.ttl = 63})));
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].proto, kProtoIcmp);
    EXPECT_EQ(ss[0].pod_port, nbo16(7));
    EXPECT_EQ(ss[0].nat_port, nbo16(ident));

    r.process(r.ext1, r.from_ext1(echo_ip(false, kServer, kIngress, ident, 1, data)));
    frames = r.tx(r.pods);
    p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv4, echo_ip(false, kServer, kPod10, 7, 1, data, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.svc(kWeb).packets_in, 1u);

    // An echo reply with another identifier has no session.
    r.process(r.ext1, r.from_ext1(echo_ip(false, kServer, kIngress, static_cast<uint16_t>(ident + 1), 1, data)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
}

// A pod's all-zero echo (identifier 0, sequence 0, no data): the reply restored to identifier 0
// sums to zero, and only 0xFFFF verifies there.
TEST_F(DataplaneTest, AllZeroEchoReplyRestoredToThePodKeepsAValidChecksum) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kServer, 0, 0, {})));
    Parsed out = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(out));
    uint16_t ident = out.icmp_ident;
    ASSERT_NE(ident, 0);
    r.process(r.ext1, r.from_ext1(echo_ip(false, kServer, kIngress, ident, 0, {})));
    auto frames = r.tx(r.pods);
    Parsed back = single(frames);
    ASSERT_TRUE(checksums_valid(back));
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv4, echo_ip(false, kServer, kPod10, 0, 0, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, IcmpErrorFromOutsideIsTranslatedBackToThePod) {
    Rig& r = start();
    Bytes q = text("dns?");
    // Source port 500 is below the NAT range: the translation changes it.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 500, kServer, 53, q)));
    auto frames = r.tx(r.ext1);
    Parsed sent = single(frames);
    ASSERT_TRUE(checksums_valid(sent));
    uint16_t nat_port = sent.sport;
    ASSERT_NE(nat_port, 500);
    Bytes sent_ip(frames[0].begin() + 14, frames[0].end());

    // Port unreachable from the server, quoting the whole datagram it got.
    r.process(r.ext1, r.from_ext1(ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, sent_ip))));
    frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    ASSERT_TRUE(p.inner);
    EXPECT_EQ(p.dst, kPod10);
    EXPECT_EQ(p.inner->src, kPod10);
    EXPECT_EQ(p.inner->sport, 500);
    EXPECT_TRUE(p.inner->l4_complete);
    // The quote is the pod's datagram as it left the gateway, addresses and checksums restored.
    Bytes quoted = udp_ip(kPod10, 500, kServer, 53, q, IpOpt{.ttl = 63});
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  ipv4(kServer, kPod10, kProtoIcmp, icmp_error(3, 3, quoted), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.svc(kWeb).packets_in, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, IcmpErrorFromRouterQuotingTcpHeaderStart) {
    Rig& r = start();
    // Toward the Internet through ext1's gateway.
    r.process(r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 80, kInternet, 443, kSyn)));
    auto frames = r.tx(r.ext1);
    Parsed sent = single(frames);
    ASSERT_TRUE(checksums_valid(sent));
    EXPECT_EQ(sent.eth_dst, kExt1GwMac);
    uint16_t nat_port = sent.sport;
    ASSERT_NE(nat_port, 80);
    Bytes sent_ip(frames[0].begin() + 14, frames[0].end());

    // Time exceeded from the gateway, quoting the IPv4 header and 8 bytes (RFC 792).
    Bytes quote(sent_ip.begin(), sent_ip.begin() + 28);
    r.process(r.ext1, r.from_ext1(ipv4(kExt1Gw, kIngress, kProtoIcmp, icmp_error(11, 0, quote)), kExt1GwMac));
    frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    Bytes orig = tcp_ip(kPod11, 80, kInternet, 443, kSyn, {}, IpOpt{.ttl = 63});
    Bytes want_quote(orig.begin(), orig.begin() + 28);
    EXPECT_EQ(frames[0], ethernet(kPod11Mac, kPodsMac, kEtherIpv4,
                                  ipv4(kExt1Gw, kPod11, kProtoIcmp, icmp_error(11, 0, want_quote), IpOpt{.ttl = 63})));
}

TEST_F(DataplaneTest, IcmpErrorFromOutsideQuotingFullTcpSegment) {
    Rig& r = start();
    Bytes data = text("payload");
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 999, kServer, 22, kPsh | kAck, data)));
    auto frames = r.tx(r.ext1);
    Parsed sent = single(frames);
    ASSERT_TRUE(checksums_valid(sent));
    Bytes sent_ip(frames[0].begin() + 14, frames[0].end());
    r.process(r.ext1, r.from_ext1(ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 13, sent_ip))));
    frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    ASSERT_TRUE(p.inner && p.inner->l4_complete);
    EXPECT_EQ(frames[0],
              ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                       ipv4(kServer, kPod10, kProtoIcmp,
                            icmp_error(3, 13, tcp_ip(kPod10, 999, kServer, 22, kPsh | kAck, data, IpOpt{.ttl = 63})),
                            IpOpt{.ttl = 63})));
}

TEST_F(DataplaneTest, IcmpErrorAboutEchoIsTranslatedBack) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kInternet, 9, 3)));
    auto frames = r.tx(r.ext1);
    Parsed sent = single(frames);
    ASSERT_TRUE(checksums_valid(sent));
    Bytes sent_ip(frames[0].begin() + 14, frames[0].end());
    r.process(r.ext1, r.from_ext1(ipv4(kExt1Gw, kIngress, kProtoIcmp, icmp_error(3, 1, sent_ip)), kExt1GwMac));
    frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  ipv4(kExt1Gw, kPod10, kProtoIcmp,
                                       icmp_error(3, 1, echo_ip(true, kPod10, kInternet, 9, 3, {}, IpOpt{.ttl = 63})),
                                       IpOpt{.ttl = 63})));
}

// A reply delivered to the pod, as the pod received it, and the port the gateway chose.
struct Delivered {
    Bytes ip;
    uint16_t nat_port;
};

Delivered udp_exchange(Rig& r, uint32_t pod, uint16_t pod_port, const Bytes& answer) {
    r.process(r.pods, r.from_pod(pod, udp_ip(pod, pod_port, kServer, 53, text("q"))));
    Parsed sent = single(r.tx(r.ext1));
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, sent.sport, answer)));
    auto in = r.tx(r.pods);
    EXPECT_EQ(in.size(), 1u);
    if (in.empty()) return {};
    return {Bytes(in[0].begin() + 14, in[0].end()), sent.sport};
}

TEST_F(DataplaneTest, IcmpErrorFromPodIsTranslatedToTheNatAddress) {
    Rig& r = start();
    Bytes answer = text("answer");
    Delivered d = udp_exchange(r, kPod10, 500, answer);
    ASSERT_FALSE(d.ip.empty());
    ASSERT_NE(d.nat_port, 500);

    // The pod's port is closed: it reports the reply it received.
    r.process(r.pods, r.from_pod(kPod10, ipv4(kPod10, kServer, kProtoIcmp, icmp_error(3, 3, d.ip))));
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    // As the server must see it: about the datagram it sent to the NAT address and port.
    Bytes quoted = udp_ip(kServer, 53, kIngress, d.nat_port, answer, IpOpt{.ttl = 63});
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  ipv4(kIngress, kServer, kProtoIcmp, icmp_error(3, 3, quoted), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.svc(kWeb).packets_out, 2u);
}

TEST_F(DataplaneTest, IcmpErrorFromClusterRouterAboutAReplyIsTranslated) {
    // Path MTU discovery: the node in front of the pod cannot forward a reply and tells the
    // server. The error's source is not the pod; it must still leave with the NAT address and
    // correct checksums.
    Rig& r = start();
    Bytes answer(200, 0x11);
    Delivered d = udp_exchange(r, kPod10, 500, answer);
    ASSERT_FALSE(d.ip.empty());
    r.process(r.pods, r.from_pod(kPodsRouter, ipv4(kPodsRouter, kServer, kProtoIcmp, icmp_error(3, 4, d.ip, 1400))));
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    Bytes quoted = udp_ip(kServer, 53, kIngress, d.nat_port, answer, IpOpt{.ttl = 63});
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                       ipv4(kIngress, kServer, kProtoIcmp, icmp_error(3, 4, quoted, 1400), IpOpt{.ttl = 63})));
}

TEST_F(DataplaneTest, IcmpErrorToAnotherGatewayAddressIsStillTranslatedCorrectly) {
    // The error is matched by its quote; its outer destination (here ext1's own address rather
    // than the ingress IP) is replaced by the pod's all the same, checksums included.
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 500, kServer, 53, text("q"))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    Bytes sent_ip(frames[0].begin() + 14, frames[0].end());
    r.process(r.ext1, r.from_ext1(ipv4(kServer, kExt1Addr, kProtoIcmp, icmp_error(3, 3, sent_ip))));
    frames = r.tx(r.pods);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  ipv4(kServer, kPod10, kProtoIcmp,
                                       icmp_error(3, 3, udp_ip(kPod10, 500, kServer, 53, text("q"), IpOpt{.ttl = 63})),
                                       IpOpt{.ttl = 63})));
}

TEST_F(DataplaneTest, IcmpErrorWithoutSessionIsDropped) {
    Rig& r = start();
    Bytes never_sent = udp_ip(kIngress, 33333, kServer, 53, text("x"), IpOpt{.ttl = 63});
    r.process(r.ext1, r.from_ext1(ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, never_sent))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
    Bytes reply = udp_ip(kServer, 53, kPod10, 4444, text("x"));
    r.process(r.pods, r.from_pod(kPod10, ipv4(kPod10, kServer, kProtoIcmp, icmp_error(3, 3, reply))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 2u);
    EXPECT_TRUE(r.sessions().empty());
}

TEST_F(DataplaneTest, SameSourcePortFromTwoPodsToOneServer) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    r.process(r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 40000, kServer, 80, kSyn)));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 2u);
    Parsed a = parse_frame(frames[0]), b = parse_frame(frames[1]);
    ASSERT_TRUE(checksums_valid(a));
    ASSERT_TRUE(checksums_valid(b));
    EXPECT_EQ(a.src, kIngress);
    EXPECT_EQ(b.src, kIngress);
    EXPECT_EQ(a.sport, 40000) << "the first flow keeps its port";
    EXPECT_NE(b.sport, 40000) << "the second flow must get another port";
    EXPECT_GE(b.sport, 1024);
    EXPECT_EQ(r.sessions().size(), 2u);

    // Replies, in the opposite order, reach the right pod with its own port.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, b.sport, kSyn | kAck)));
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kSyn | kAck)));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0], ethernet(kPod11Mac, kPodsMac, kEtherIpv4,
                                  tcp_ip(kServer, 80, kPod11, 40000, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(frames[1], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  tcp_ip(kServer, 80, kPod10, 40000, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, BurstOfManyFlowsIsTranslatedInOrder) {
    // More than one burst's worth in a single call: every packet translated, each flow its
    // own session, and the outputs keep their order.
    Rig& r = start();
    std::vector<In> burst;
    for (uint16_t i = 0; i < 48; ++i)
        burst.push_back({r.pods, r.from_pod(i % 2 ? kPod11 : kPod10,
                                            udp_ip(i % 2 ? kPod11 : kPod10, static_cast<uint16_t>(20000 + i), kServer,
                                                   53, Bytes(i, 0x42)))});
    r.process(0, burst);
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 48u);
    for (uint16_t i = 0; i < 48; ++i) {
        Parsed p = parse_frame(frames[i]);
        ASSERT_TRUE(checksums_valid(p)) << i;
        EXPECT_EQ(p.src, kIngress);
        EXPECT_EQ(p.sport, 20000 + i);
        EXPECT_EQ(p.payload.size(), i);
    }
    EXPECT_EQ(r.sessions().size(), 48u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 48u);
}

// ---------------------------------------------------------------------------------------------
// IPv6 twins (NAPT66 on the dual-stack rig)

namespace v6 {
using namespace std_rig6;

// Two payload bytes that make a UDP datagram of (src, sport, dst, dport) and `len` - 2 more
// payload bytes `rest` sum to -0, so that a sender computes its checksum as 0 and must send
// 0xFFFF (RFC 8200 8.1: 0 is no checksum, which IPv6 does not have).
Bytes udp6_zero_sum_payload(const Ip6Addr& src, uint16_t sport, const Ip6Addr& dst, uint16_t dport, const Bytes& rest) {
    Bytes payload(2 + rest.size(), 0);
    std::copy(rest.begin(), rest.end(), payload.begin() + 2);
    Bytes udp = udp6_ip(src, sport, dst, dport, payload);
    Bytes l4(udp.begin() + 40, udp.end());
    l4[6] = l4[7] = 0;
    uint32_t sum = sum16(l4.data(), l4.size(), pseudo_sum6(src, dst, kProtoUdp, static_cast<uint32_t>(l4.size())));
    put16(payload.data(), finish(sum));
    return payload;
}

// The one's complement sum of an IPv6 packet's transport message and pseudo-header, as a
// receiver checks it: 0xFFFF when it verifies.
uint16_t received_sum6(const Bytes& frame) {
    Ip6Addr src, dst;
    std::copy(frame.begin() + 14 + 8, frame.begin() + 14 + 24, src.begin());
    std::copy(frame.begin() + 14 + 24, frame.begin() + 14 + 40, dst.begin());
    uint32_t len = static_cast<uint32_t>(frame.size() - 14 - 40);
    uint32_t sum = sum16(&frame[14 + 40], len, pseudo_sum6(src, dst, frame[14 + 6], len));
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}
}  // namespace v6

// A UDP datagram translated either way whose checksum comes out as 0 leaves with 0xFFFF: an
// incremental update gives 0 there, which is no checksum in IPv4 but invalid in IPv6 (the IPv6
// meaning of the all-zero echo tests above).
TEST_F(DataplaneTest, Ipv6UdpChecksumThatComesToZeroIsSentAsFFFF) {
    using namespace v6;
    Rig& r = start(dual_stack());
    Bytes out_payload = udp6_zero_sum_payload(kIngressV6, 40000, kServerV6, 53, text("out"));
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, out_payload)));
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.l4_csum, 0xffff);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                  udp6_ip(kIngressV6, 40000, kServerV6, 53, out_payload, Ip6Opt{63})));

    Bytes back_payload = udp6_zero_sum_payload(kServerV6, 53, kPod10v6, 40000, text("back"));
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, back_payload)));
    frames = r.tx(r.pods);
    p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.l4_csum, 0xffff);
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, udp6_ip(kServerV6, 53, kPod10v6, 40000, back_payload, Ip6Opt{63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// The ICMPv6 echo twin of AllZeroEchoReplyRestoredToThePodKeepsAValidChecksum: ICMPv6 sums a
// pseudo-header, so no echo sums to +0; the edge is a reply restored to identifier 0 whose words
// sum to -0, where a sender computes 0x0000 and an incremental update may give 0xFFFF. Whichever
// is sent, the reply must verify as a receiver checks it.
TEST_F(DataplaneTest, Ipv6EchoReplyRestoredToThePodSummingToNegativeZeroVerifies) {
    using namespace v6;
    Rig& r = start(dual_stack());
    // The sequence number that makes (kServerV6 -> kPod10v6, echo reply, identifier 0) sum to -0.
    Bytes probe = echo6_ip(false, kServerV6, kPod10v6, 0, 0, {});
    Bytes l4(probe.begin() + 40, probe.end());
    l4[2] = l4[3] = 0;
    const uint16_t seq = finish(sum16(l4.data(), l4.size(), pseudo_sum6(kServerV6, kPod10v6, kProtoIcmp6, 8)));
    r.process(r.pods, from_pod6(kPod10v6, echo6_ip(true, kPod10v6, kServerV6, 0, seq, {})));
    Parsed out = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(out));
    uint16_t ident = out.icmp_ident;
    ASSERT_NE(ident, 0);
    r.process(r.ext1, from_ext1_6(echo6_ip(false, kServerV6, kIngressV6, ident, seq, {})));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    Bytes want = to_pod6(kPod10v6, echo6_ip(false, kServerV6, kPod10v6, 0, seq, {}, Ip6Opt{63}));
    ASSERT_EQ(get16(&want[14 + 40 + 2]), 0) << "the reply does not sum to -0: the test lost its point";
    ASSERT_EQ(frames[0].size(), want.size());
    EXPECT_EQ(received_sum6(frames[0]), 0xffff) << "the reply does not verify";
    const uint16_t csum = get16(&frames[0][14 + 40 + 2]);
    EXPECT_TRUE(csum == 0 || csum == 0xffff) << csum;
    frames[0][14 + 40 + 2] = frames[0][14 + 40 + 3] = 0;
    EXPECT_EQ(frames[0], want);
    EXPECT_EQ(r.total_drops(), 0u);
}

// The IPv6 twin of EthernetPaddingIsNotForwarded: no IPv6 packet is short enough to be padded (40
// bytes of header and 8 of transport make 62 with Ethernet), but bytes past the payload length
// are a trailer all the same, and do not leave with the packet.
TEST_F(DataplaneTest, Ipv6BytesPastThePayloadLengthAreNotForwarded) {
    using namespace v6;
    Rig& r = start(dual_stack());
    Bytes frame = from_pod6(kPod10v6, udp6_ip(kPod10v6, 7000, kServerV6, 9000, text("hi")));
    frame.resize(frame.size() + 18, 0xee);
    r.process(r.pods, frame);
    auto frames = r.tx(r.ext1);
    Parsed p = single(frames);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                  udp6_ip(kIngressV6, 7000, kServerV6, 9000, text("hi"), Ip6Opt{63})));
    // And back: the reply's trailer stays behind too.
    frame = from_ext1_6(udp6_ip(kServerV6, 9000, kIngressV6, 7000, text("ok")));
    frame.resize(frame.size() + 7, 0xee);
    r.process(r.ext1, frame);
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, udp6_ip(kServerV6, 9000, kPod10v6, 7000, text("ok"), Ip6Opt{63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, BurstOfManyIpv6FlowsIsTranslatedInOrder) {
    using namespace v6;
    Rig& r = start(dual_stack());
    std::vector<In> burst;
    for (uint16_t i = 0; i < 48; ++i) {
        const Ip6Addr& pod = i % 2 ? kPod11v6 : kPod10v6;
        burst.push_back(
            {r.pods, from_pod6(pod, udp6_ip(pod, static_cast<uint16_t>(20000 + i), kServerV6, 53, Bytes(i, 0x42)))});
    }
    r.process(0, burst);
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 48u);
    for (uint16_t i = 0; i < 48; ++i) {
        Parsed p = parse_frame(frames[i]);
        ASSERT_TRUE(checksums_valid(p)) << i;
        EXPECT_EQ(p.src6, kIngressV6);
        EXPECT_EQ(p.sport, 20000 + i);
        EXPECT_EQ(p.payload.size(), i);
    }
    EXPECT_EQ(r.sessions6().size(), 48u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 48u);
    EXPECT_EQ(r.w().counters.sessions6_created, 48u);
}

}  // namespace
}  // namespace egw::test
