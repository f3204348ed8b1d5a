// SPDX-License-Identifier: Apache-2.0
//
// The stages of a burst (dataplane/stages.h) against packet-at-a-time processing. Each stage
// runs once over the packets whose next step is its own, so a burst in which every next step
// occurs, with packets that depend on each other across stages (a stale hit closed by the slow
// path before an older translation's reply is looked at, a new flow and its second packet), must
// still give exactly what the same packets give one burst each: the same frames in the same
// order on every port, the same frames held for ARP, the same drops, counters and sessions.
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

TEST_F(DataplaneTest, EveryNextStepInOneBurstMatchesPacketAtATime) {
    RigOptions o;
    o.workers = 2;  // worker 0 owns NAT ports 1024-33279, worker 1 the rest
    Rig& a = start(o);
    auto b = std::make_unique<Rig>(o);

    for (Rig* r : {&a, b.get()}) {
        // A session of the Service, and one of the default masquerade that the next policy makes
        // stale (its pod becomes an endpoint of the Service).
        r->process(r->pods, r->from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("first"))));
        r->process(r->pods, r->from_pod(kPod20, udp_ip(kPod20, 3000, kInternet, 53, text("first"))));
        ASSERT_EQ(r->tx(r->ext1).size(), 2u);
        r->publish({lb_service(kWeb, kIngress, {kPod10, kPod11, kPod20})});
    }
    Bytes quoted = udp_ip(kIngress, 20000, kServer, 53, text("first"));
    Bytes truncated = udp_ip(kPod10, 20009, kServer, 53, text("cut"));
    truncated.resize(24);
    auto input = [&](Rig& r) {
        return std::vector<In>{
            // local: ARP request for the pods port, echo request to its address
            {r.pods, ethernet(kBroadcast, kPod10Mac, kEtherArp, arp_body(1, kPod10Mac, kPod10, Mac{}, kPodsAddr))},
            {r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kPodsAddr, 9))},
            // drops made by input
            {r.pods, r.from_pod(kPod10, truncated)},
            {r.pods, ethernet(kPodsMac, kPod10Mac, 0x8100, Bytes(46, 0))},
            // nat_fast: a hit each way, and a hit whose TTL runs out (icmp_reply: Time Exceeded)
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("hit")))},
            {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 20000, text("reply")))},
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("ttl"), IpOpt{.ttl = 1}))},
            // icmp_error: a router reports on the session's packet
            {r.ext1, r.from_ext1(ipv4(kExt1Gw, kIngress, kProtoIcmp, icmp_error(3, 4, quoted)), kExt1GwMac)},
            // nat_slow: the stale session replaced, then a reply to its old translation
            {r.pods, r.from_pod(kPod20, udp_ip(kPod20, 3000, kInternet, 53, text("stale")))},
            {r.ext1, r.from_ext1(udp_ip(kInternet, 53, kExt1Addr, 3000, text("old")), kExt1GwMac)},
            // nat_slow: a new flow and its second packet, a new flow toward an unresolved host
            {r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 2000, kServerB, 443, kSyn))},
            {r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 2000, kServerB, 443, kAck))},
            {r.pods, r.from_pod(kPod11, udp_ip(kPod11, 5000, kUnresolved, 53, text("held")))},
            // ip_forward: a cluster destination
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20003, kRemotePod, 53, text("cluster")))},
            // handoff: a reply to a NAT port of worker 1's block
            {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 60000, text("worker 1")))},
        };
    };
    a.process(0, input(a));
    for (const In& in : input(*b))
        b->process(0, {in});

    auto pods_a = a.tx(a.pods), ext1_a = a.tx(a.ext1);
    // ARP reply, echo reply, the reply, the Time Exceeded, the ICMP error, the cluster destination
    EXPECT_EQ(pods_a.size(), 6u);
    EXPECT_EQ(ext1_a.size(), 4u);  // the hit, the replaced session, the new flow's two segments
    EXPECT_EQ(pods_a, b->tx(b->pods));
    EXPECT_EQ(ext1_a, b->tx(b->ext1));
    EXPECT_EQ(a.tx(a.ext2), b->tx(b->ext2));
    auto held_a = a.to_control(), held_b = b->to_control();
    ASSERT_EQ(held_a.size(), 1u);
    ASSERT_EQ(held_b.size(), 1u);
    EXPECT_EQ(held_a[0].frame, held_b[0].frame);
    EXPECT_EQ(held_a[0].next_hop, kUnresolved);
    EXPECT_EQ(a.handoff_pending(0, 1), 1u);
    EXPECT_EQ(b->handoff_pending(0, 1), 1u);
    for (unsigned d = 0; d < dp::kDropReasonCount; ++d)
        EXPECT_EQ(a.w().counters.drops[d], b->w().counters.drops[d]) << dp::kDropReasonNames[d];
    EXPECT_EQ(a.drops(DropReason::malformed), 1u);
    EXPECT_EQ(a.drops(DropReason::unknown_ethertype), 1u);
    EXPECT_EQ(a.drops(DropReason::ttl_exceeded), 0u);
    const auto time_exceeded = static_cast<unsigned>(dp::IcmpError::time_exceeded);
    EXPECT_EQ(a.w().counters.icmp_sent[time_exceeded], 1u);
    EXPECT_EQ(b->w().counters.icmp_sent[time_exceeded], 1u);
    EXPECT_EQ(a.drops(DropReason::no_session) + a.drops(DropReason::stale_session), 1u);
    const auto& ca = a.w().counters;
    const auto& cb = b->w().counters;
    EXPECT_EQ(ca.sessions_created, cb.sessions_created);
    EXPECT_EQ(ca.sessions_closed, cb.sessions_closed);
    EXPECT_EQ(ca.sessions_closed, 1u);
    EXPECT_EQ(ca.routed, cb.routed);
    EXPECT_EQ(ca.held, cb.held);
    EXPECT_EQ(ca.handed_off, cb.handed_off);
    EXPECT_EQ(a.svc(kWeb).packets_out, b->svc(kWeb).packets_out);
    EXPECT_EQ(a.svc(kWeb).packets_in, b->svc(kWeb).packets_in);
    EXPECT_EQ(a.svc(kWeb).bytes_in, b->svc(kWeb).bytes_in);
    auto sa = a.sessions(), sb = b->sessions();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
        EXPECT_EQ(dp::SessionTable::inside_key(sa[i]).src, dp::SessionTable::inside_key(sb[i]).src);
        EXPECT_EQ(sa[i].pod_port, sb[i].pod_port);
        EXPECT_EQ(sa[i].nat_ip, sb[i].nat_ip);
        EXPECT_EQ(sa[i].nat_port, sb[i].nat_port);
        EXPECT_EQ(sa[i].service_id, sb[i].service_id);
    }
    b->drain_all();
    EXPECT_EQ(b->mbufs_in_use(), 0);
}

}  // namespace
}  // namespace egw::test
