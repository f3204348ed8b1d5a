// SPDX-License-Identifier: Apache-2.0
//
// Packets of one burst that depend on each other: the session lookups of a burst are made
// before any packet is finished, so what earlier packets of the burst create or close must be
// seen by the later ones.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

TEST_F(DataplaneTest, PacketsOfANewFlowInOneBurstShareOneSession) {
    Rig& r = start();
    // A UDP client starting with several datagrams at once (DNS, QUIC, RTP), and a TCP flow whose
    // port has to be translated.
    std::vector<In> burst;
    for (const char* q : {"one", "two", "three"})
        burst.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text(q)))});
    for (uint8_t flags : {kSyn, kAck, uint8_t(kPsh | kAck)})
        burst.push_back({r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 500, kServer, 80, flags))});
    r.process(0, burst);

    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 6u);
    std::vector<Parsed> out;
    for (const auto& f : frames) {
        out.push_back(parse_frame(f));
        ASSERT_TRUE(checksums_valid(out.back()));
        EXPECT_EQ(out.back().src, kIngress);
    }
    EXPECT_EQ(out[0].sport, 40000);
    EXPECT_EQ(out[1].sport, 40000) << "one flow left with two source ports";
    EXPECT_EQ(out[2].sport, 40000) << "one flow left with two source ports";
    EXPECT_NE(out[3].sport, 500);
    EXPECT_EQ(out[4].sport, out[3].sport) << "one flow left with two source ports";
    EXPECT_EQ(out[5].sport, out[3].sport) << "one flow left with two source ports";
    EXPECT_EQ(r.sessions().size(), 2u);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 6u);

    // Replies reach both pods.
    r.process(0, {{r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("a")))},
                  {r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, out[3].sport, kAck))}});
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  udp_ip(kServer, 53, kPod10, 40000, text("a"), IpOpt{.ttl = 63})));
    EXPECT_EQ(frames[1],
              ethernet(kPod11Mac, kPodsMac, kEtherIpv4, tcp_ip(kServer, 80, kPod11, 500, kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// The IPv6 twin: an IPv6 packet's first step is decided at input and its session made in
// nat_slow, so the later packets of a new flow in the same burst must find the session the first
// one made rather than each making one (NAPT66 to the Service's IPv6 ingress IP).
TEST_F(DataplaneTest, Ipv6PacketsOfANewFlowInOneBurstShareOneSession) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    std::vector<In> burst;
    for (const char* q : {"one", "two", "three"})
        burst.push_back({r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text(q)))});
    for (uint8_t flags : {kSyn, kAck, uint8_t(kPsh | kAck)})
        burst.push_back({r.pods, from_pod6(kPod11v6, tcp6_ip(kPod11v6, 500, kServerV6, 80, flags))});
    r.process(0, burst);

    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 6u);
    std::vector<Parsed> out;
    for (const auto& f : frames) {
        out.push_back(parse_frame(f));
        ASSERT_TRUE(checksums_valid(out.back()));
        EXPECT_EQ(out.back().src6, kIngressV6);
    }
    EXPECT_EQ(out[0].sport, 40000);
    EXPECT_EQ(out[1].sport, 40000) << "one flow left with two source ports";
    EXPECT_EQ(out[2].sport, 40000) << "one flow left with two source ports";
    EXPECT_NE(out[3].sport, 500);
    EXPECT_EQ(out[4].sport, out[3].sport) << "one flow left with two source ports";
    EXPECT_EQ(out[5].sport, out[3].sport) << "one flow left with two source ports";
    EXPECT_EQ(r.sessions6().size(), 2u);
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 6u);
    EXPECT_EQ(r.w().counters.sessions6_created, 2u);

    // Replies reach both pods, in one burst.
    r.process(0, {{r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text("a")))},
                  {r.ext1, from_ext1_6(tcp6_ip(kServerV6, 80, kIngressV6, out[3].sport, kAck))}});
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, udp6_ip(kServerV6, 53, kPod10v6, 40000, text("a"), Ip6Opt{63})));
    EXPECT_EQ(frames[1], to_pod6(kPod11v6, tcp6_ip(kServerV6, 80, kPod11v6, 500, kAck, {}, Ip6Opt{63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, ReplyToOldTranslationInTheBurstThatReplacesIt) {
    constexpr uint32_t kNewIngress = ip4(192, 0, 2, 51);
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kIngress);
    r.publish({lb_service(kWeb, kNewIngress, {kPod10, kPod11})});

    // The pod's next datagram replaces the session; a reply to the old address follows it in
    // the same burst and must not be translated with what replaced it.
    r.process(0, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q2")))},
                  {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("old")))}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kNewIngress, 40000, kServer, 53, text("q2"), IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.tx(r.pods).empty()) << "a reply to the old address was translated";
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 1u);
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].nat_ip, nbo32(kNewIngress));
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u);
}

TEST_F(DataplaneTest, StaleSessionClosedOnceWhenReplyAndPacketShareABurst) {
    constexpr uint32_t kNewIngress = ip4(192, 0, 2, 51);
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.publish({lb_service(kWeb, kNewIngress, {kPod10, kPod11})});

    // Reply first (closes the stale session), then the pod's datagram (new session).
    r.process(0, {{r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("old")))},
                  {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q2")))}});
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session), 1u);
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kNewIngress);
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u) << "one session closed, counted twice";
    EXPECT_EQ(r.w().counters.sessions_closed, 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
    EXPECT_EQ(r.sessions().size(), 1u);
}

// The IPv6 twins of the two tests above: web's IPv6 ingress IP changes; in the next burst the
// pod's datagram replaces the stale IPv6 session and a reply to the old address is not
// translated with what replaced it, whichever of the two comes first, and the stale session is
// closed once.
TEST_F(DataplaneTest, Ipv6ReplyToTheOldTranslationSharingABurstWithWhatReplacesIt) {
    using namespace std_rig6;
    const Ip6Addr moved = ip6("2001:db8:2::51");
    for (bool reply_first : {false, true}) {
        SCOPED_TRACE(reply_first ? "reply first" : "pod's datagram first");
        if (rig_) {
            rig_->drain_all();
            EXPECT_EQ(rig_->mbufs_in_use(), 0) << "the data plane leaked mbufs (or freed some twice)";
            rig_.reset();
        }
        Rig& r = start(dual_stack());
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
        ASSERT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);
        model::ServiceState web = web6();
        web.ingress_ipv6 = addr6(moved);
        r.publish({web});

        In pod{r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q2")))};
        In reply{r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text("old")))};
        r.process(0, reply_first ? std::vector<In>{reply, pod} : std::vector<In>{pod, reply});
        auto frames = r.tx(r.ext1);
        ASSERT_EQ(frames.size(), 1u);
        ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
        EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                      udp6_ip(moved, 40000, kServerV6, 53, text("q2"), Ip6Opt{63})));
        EXPECT_TRUE(r.tx(r.pods).empty()) << "a reply to the old address was translated";
        EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 1u);
        auto ss = r.sessions6();
        ASSERT_EQ(ss.size(), 1u);
        EXPECT_EQ(std::to_array(ss[0].nat_ip.b), moved);
        EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u) << "one session closed, counted twice";
        EXPECT_EQ(r.w().counters.sessions6_closed, 1u);
        EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
    }
}

// More frames to one port in one call than its transmit buffer holds (several bursts before the
// flush), both families interleaved, all to one next hop each: output sends the full buffer of
// the right port on the way, and every frame leaves once, in order, translated.
TEST_F(DataplaneTest, MoreFramesToOnePortThanItsTransmitBufferHoldsAllLeaveInOrder) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    constexpr unsigned kFrames = 5 * dp::kTxBufferSize / 2;
    std::vector<In> in;
    for (unsigned k = 0; k < kFrames; ++k) {
        auto sport = static_cast<uint16_t>(10000 + k);
        Bytes payload = text("frame");
        payload.push_back(static_cast<uint8_t>(k));
        in.push_back({r.pods, k % 3 == 2 ? from_pod6(kPod10v6, udp6_ip(kPod10v6, sport, kServerV6, 53, payload))
                                         : r.from_pod(kPod10, udp_ip(kPod10, sport, kServer, 53, payload))});
    }
    r.process(0, in);
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), kFrames);
    for (unsigned k = 0; k < kFrames; ++k) {
        SCOPED_TRACE(k);
        Parsed p = parse_frame(out[k]);
        ASSERT_TRUE(p.ok) << p.error;
        EXPECT_TRUE(checksums_valid(p));
        ASSERT_FALSE(p.payload.empty());
        EXPECT_EQ(p.payload.back(), static_cast<uint8_t>(k)) << "out of order";
        EXPECT_EQ(p.ether_type, k % 3 == 2 ? kEtherIpv6 : kEtherIpv4);
        EXPECT_EQ(mac_str(Mac{out[k][0], out[k][1], out[k][2], out[k][3], out[k][4], out[k][5]}), mac_str(kServerMac));
    }
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.w().counters.tx_packets, kFrames);
    EXPECT_EQ(r.total_drops(), 0u);
    // Only full buffers were sent on the way: no port saw a send that it refused.
    for (unsigned port = 0; port < r.w().n_ports; ++port)
        EXPECT_EQ(r.w().tx_refused_bursts[port], 0u) << "port " << port;
}

// A full burst of hits both ways, sixteen outgoing packets and sixteen replies interleaved: input
// finds the candidate sessions of each direction's first keys a few keys behind their buckets
// (LookupQueue::cand), and the lookup finds the rest. Each packet is translated with its own
// session: none is taken for a miss (no session is made, no reply is dropped), and each frame is
// the one its flow gets on its own.
TEST_F(DataplaneTest, AFullBurstOfHitsBothWaysTakesEachPacketsOwnSession) {
    Rig& r = start();
    constexpr unsigned kFlows = dp::kBurst / 2;
    auto pod = [](unsigned j) { return j % 2 ? kPod11 : kPod10; };
    auto port = [](unsigned j) { return static_cast<uint16_t>(30000 + j); };
    std::vector<In> opening, burst;
    for (unsigned j = 0; j < kFlows; ++j)
        opening.push_back({r.pods, r.from_pod(pod(j), udp_ip(pod(j), port(j), kServer, 53, text("open")))});
    r.process(0, opening);
    ASSERT_EQ(r.tx(r.ext1).size(), kFlows);
    ASSERT_EQ(r.sessions().size(), kFlows);
    for (unsigned j = 0; j < kFlows; ++j) {
        burst.push_back({r.pods, r.from_pod(pod(j), udp_ip(pod(j), port(j), kServer, 53, text("out")))});
        burst.push_back({r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, port(j), text("back")))});
    }
    r.process(0, burst);

    auto out = r.tx(r.ext1), back = r.tx(r.pods);
    ASSERT_EQ(out.size(), kFlows);
    ASSERT_EQ(back.size(), kFlows);
    for (unsigned j = 0; j < kFlows; ++j) {
        Parsed o = parse_frame(out[j]);
        EXPECT_TRUE(checksums_valid(o)) << "flow " << j;
        EXPECT_EQ(o.src, kIngress) << "flow " << j;
        EXPECT_EQ(o.sport, port(j)) << "flow " << j;
        EXPECT_EQ(o.dst, kServer) << "flow " << j;
        EXPECT_EQ(out[j], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                   udp_ip(kIngress, port(j), kServer, 53, text("out"), IpOpt{.ttl = 63})))
            << "flow " << j;
        EXPECT_EQ(back[j], ethernet(j % 2 ? kPod11Mac : kPod10Mac, kPodsMac, kEtherIpv4,
                                    udp_ip(kServer, 53, pod(j), port(j), text("back"), IpOpt{.ttl = 63})))
            << "flow " << j;
    }
    EXPECT_EQ(r.sessions().size(), kFlows);
    EXPECT_EQ(r.w().counters.sessions_created, kFlows);
    EXPECT_EQ(r.svc(kWeb).packets_out, 2 * kFlows);
    EXPECT_EQ(r.svc(kWeb).packets_in, kFlows);
    EXPECT_EQ(r.total_drops(), 0u);
}

// The IPv6 twin (the IPv6 table's queues).
TEST_F(DataplaneTest, Ipv6AFullBurstOfHitsBothWaysTakesEachPacketsOwnSession) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    constexpr unsigned kFlows = dp::kBurst / 2;
    auto pod = [](unsigned j) { return j % 2 ? kPod11v6 : kPod10v6; };
    auto port = [](unsigned j) { return static_cast<uint16_t>(30000 + j); };
    std::vector<In> opening, burst;
    for (unsigned j = 0; j < kFlows; ++j)
        opening.push_back({r.pods, from_pod6(pod(j), udp6_ip(pod(j), port(j), kServerV6, 53, text("open")))});
    r.process(0, opening);
    ASSERT_EQ(r.tx(r.ext1).size(), kFlows);
    ASSERT_EQ(r.sessions6().size(), kFlows);
    for (unsigned j = 0; j < kFlows; ++j) {
        burst.push_back({r.pods, from_pod6(pod(j), udp6_ip(pod(j), port(j), kServerV6, 53, text("out")))});
        burst.push_back({r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, port(j), text("back")))});
    }
    r.process(0, burst);

    auto out = r.tx(r.ext1), back = r.tx(r.pods);
    ASSERT_EQ(out.size(), kFlows);
    ASSERT_EQ(back.size(), kFlows);
    for (unsigned j = 0; j < kFlows; ++j) {
        Parsed o = parse_frame(out[j]);
        EXPECT_TRUE(checksums_valid(o)) << "flow " << j;
        EXPECT_EQ(o.src6, kIngressV6) << "flow " << j;
        EXPECT_EQ(o.sport, port(j)) << "flow " << j;
        EXPECT_EQ(out[j], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                   udp6_ip(kIngressV6, port(j), kServerV6, 53, text("out"), Ip6Opt{63})))
            << "flow " << j;
        EXPECT_EQ(back[j], to_pod6(pod(j), udp6_ip(kServerV6, 53, pod(j), port(j), text("back"), Ip6Opt{63})))
            << "flow " << j;
    }
    EXPECT_EQ(r.sessions6().size(), kFlows);
    EXPECT_EQ(r.w().counters.sessions6_created, kFlows);
    EXPECT_EQ(r.svc(kWeb).packets_out, 2 * kFlows);
    EXPECT_EQ(r.svc(kWeb).packets_in, kFlows);
    EXPECT_EQ(r.total_drops(), 0u);
}

// A burst mixing every outcome (hits both ways, new sessions of an SNAT Service and of the default
// masquerade, a pod-port collision that forces a probe, the second packet of a new flow, a TTL
// answered with Time Exceeded, a cluster destination routed untouched, a reply with no session, a hand-off) gives the
// same frames, counters and sessions as the same packets sent one per burst. The burst path
// classifies and prefetches all of a burst's new sessions before creating any of them, so this
// pins that batching to the packet-at-a-time result.
TEST_F(DataplaneTest, MixedBurstMatchesPacketAtATime) {
    RigOptions o;
    o.workers = 2;  // worker 0 owns NAT ports 1024-33279, worker 1 the rest
    o.services = {lb_service(kWeb, kIngress, {kPod10, kPod11})};
    Rig& a = start(o);
    auto b = std::make_unique<Rig>(o);
    // Worker 0 owns every flow from inside: the hand-off under test is a reply's.
    a.own_flows_from_inside_on(0);
    b->own_flows_from_inside_on(0);

    auto input = [](Rig& r) {
        return std::vector<In>{
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("hit")))},
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20001, kServer, 53, text("new")))},
            {r.pods, r.from_pod(kPod11, udp_ip(kPod11, 20001, kServer, 53, text("same port")))},
            {r.pods, r.from_pod(kPod20, udp_ip(kPod20, 3000, kInternet, 53, text("default")))},
            {r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 2000, kServerB, 443, kSyn))},
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20002, kServer, 53, text("ttl"), IpOpt{.ttl = 1}))},
            {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 60000, text("worker 1")))},
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20003, kRemotePod, 53, text("cluster")))},
            {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 20005, text("no session")))},
            {r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 2000, kServerB, 443, kAck))},
            {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 20000, text("reply")))},
        };
    };
    for (Rig* r : {&a, b.get()}) {
        r->process(r->pods, r->from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("first"))));
        ASSERT_EQ(r->tx(r->ext1).size(), 1u);
    }
    a.process(0, input(a));
    for (const In& in : input(*b))
        b->process(0, {in});

    auto pods_a = a.tx(a.pods), ext1_a = a.tx(a.ext1);
    EXPECT_EQ(pods_a.size(), 3u);  // the Time Exceeded, the cluster destination and the reply
    EXPECT_EQ(ext1_a.size(), 6u);  // the hit, four new flows, the flow's second segment
    EXPECT_EQ(pods_a, b->tx(b->pods));
    EXPECT_EQ(ext1_a, b->tx(b->ext1));
    EXPECT_EQ(a.tx(a.ext2), b->tx(b->ext2));
    EXPECT_EQ(a.handoff_pending(0, 1), 1u);
    EXPECT_EQ(b->handoff_pending(0, 1), 1u);
    for (unsigned d = 0; d < dp::kDropReasonCount; ++d)
        EXPECT_EQ(a.w().counters.drops[d], b->w().counters.drops[d]) << dp::kDropReasonNames[d];
    EXPECT_EQ(a.drops(DropReason::ttl_exceeded), 0u);
    const auto time_exceeded = static_cast<unsigned>(dp::IcmpError::time_exceeded);
    EXPECT_EQ(a.w().counters.icmp_sent[time_exceeded], 1u);
    EXPECT_EQ(b->w().counters.icmp_sent[time_exceeded], 1u);
    EXPECT_EQ(a.drops(DropReason::no_session), 1u);
    EXPECT_EQ(a.w().counters.sessions_created, b->w().counters.sessions_created);
    EXPECT_EQ(a.w().counters.sessions_created, 5u);
    EXPECT_EQ(a.w().counters.routed, b->w().counters.routed);
    EXPECT_EQ(a.svc(kWeb).sessions_created, b->svc(kWeb).sessions_created);
    EXPECT_EQ(a.svc(kWeb).packets_out, b->svc(kWeb).packets_out);
    EXPECT_EQ(a.svc(kWeb).packets_in, b->svc(kWeb).packets_in);
    EXPECT_EQ(a.default_counters().sessions_created, b->default_counters().sessions_created);
    auto sa = a.sessions(), sb = b->sessions();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
        EXPECT_EQ(dp::SessionTable::inside_key(sa[i]).src, dp::SessionTable::inside_key(sb[i]).src);
        EXPECT_EQ(dp::SessionTable::outside_key(sa[i]).dst, dp::SessionTable::outside_key(sb[i]).dst);
        EXPECT_EQ(sa[i].pod_port, sb[i].pod_port);
        EXPECT_EQ(sa[i].nat_port, sb[i].nat_port) << "a different port was chosen";
    }
    // The pod-port collision really probed: the second pod's flow left with another port.
    bool probed = false;
    for (const auto& s : sa)
        probed |= s.pod_ip == nbo32(kPod11) && s.pod_port == nbo16(20001) && s.nat_port != nbo16(20001);
    EXPECT_TRUE(probed);
    b->drain_all();
    EXPECT_EQ(b->mbufs_in_use(), 0);
}

}  // namespace
}  // namespace egw::test
