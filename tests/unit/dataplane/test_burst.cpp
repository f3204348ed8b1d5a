// SPDX-License-Identifier: Apache-2.0
//
// Packets of one burst that depend on each other: the session lookups of a burst are made
// before any packet is finished, so what earlier packets of the burst create or close must be
// seen by the later ones.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) { return Bytes(s, s + std::strlen(s)); }

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
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4, udp_ip(kServer, 53, kPod10, 40000, text("a"), IpOpt{.ttl = 63})));
    EXPECT_EQ(frames[1], ethernet(kPod11Mac, kPodsMac, kEtherIpv4, tcp_ip(kServer, 80, kPod11, 500, kAck, {}, IpOpt{.ttl = 63})));
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
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4, udp_ip(kNewIngress, 40000, kServer, 53, text("q2"), IpOpt{.ttl = 63})));
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

}  // namespace
}  // namespace egw::test
