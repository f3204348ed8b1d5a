// SPDX-License-Identifier: Apache-2.0
//
// The stages of a burst (dataplane/stages.h) against packet-at-a-time processing. Each stage
// runs once over the packets whose next step is its own, so a burst in which every next step
// occurs, with packets that depend on each other across stages (a stale hit closed by the slow
// path before an older translation's reply is looked at, a new flow and its second packet), must
// still give exactly what the same packets give one burst each: the same frames in the same
// order on every port, the same frames held for ARP, the same drops, counters and sessions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
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
    // Worker 0 owns every flow from inside: the hand-off in the burst is a reply's.
    a.own_flows_from_inside_on(0);
    b->own_flows_from_inside_on(0);

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

// The dual-stack twin: the same outcomes for IPv6 (a Neighbor Solicitation and an echo request for
// the pods port, a truncated header, hits both ways and one whose hop limit runs out, an ICMPv6
// error about a session's packet, a stale masquerade replaced before a reply to its old
// translation, a new flow and its second segment, a new flow held for NDP, a cluster destination,
// a hand-off) interleaved with the IPv4 packets above in one burst. IPv6 decides its first step at
// input and keeps its own session table, so neither family may disturb the other's order.
TEST_F(DataplaneTest, DualStackBurstWithEveryNextStepMatchesPacketAtATime) {
    using namespace std_rig6;
    const Ip6Addr unresolved = ip6("2001:db8:2::200");  // on ext1's link, no neighbour entry
    RigOptions o = dual_stack();
    o.workers = 2;
    Rig& a = start(o);
    auto b = std::make_unique<Rig>(o);
    // Worker 0 owns every flow from inside: the hand-off in the burst is a reply's.
    a.own_flows_from_inside_on(0);
    b->own_flows_from_inside_on(0);

    for (Rig* r : {&a, b.get()}) {
        r->process(r->pods, r->from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("first"))));
        r->process(r->pods, r->from_pod(kPod20, udp_ip(kPod20, 3000, kInternet, 53, text("first"))));
        r->process(r->pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 20000, kServerV6, 53, text("first"))));
        r->process(r->pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 3000, kInternetV6, 53, text("first"))));
        ASSERT_EQ(r->tx(r->ext1).size(), 4u);
        model::ServiceState web = web6();
        web.endpoint_ipv4s = {kPod10, kPod11, kPod20};
        web.endpoint_ipv6s.push_back(addr6(kPod20v6));
        std::sort(web.endpoint_ipv6s.begin(), web.endpoint_ipv6s.end());
        r->publish({web});
    }
    Bytes quoted = udp_ip(kIngress, 20000, kServer, 53, text("first"));
    const Bytes quoted6 = udp6_ip(kIngressV6, 20000, kServerV6, 53, text("first"));
    Bytes error6(4 + quoted6.size(), 0);  // Destination Unreachable's unused word, then the quote
    std::copy(quoted6.begin(), quoted6.end(), error6.begin() + 4);
    Bytes truncated = udp_ip(kPod10, 20009, kServer, 53, text("cut"));
    truncated.resize(24);
    Bytes truncated6 = udp6_ip(kPod10v6, 20009, kServerV6, 53, text("cut"));
    truncated6.resize(30);
    const Ip6Addr group = solicited_node(kPodsV6);
    auto input = [&](Rig& r) {
        return std::vector<In>{
            {r.pods, ethernet(kBroadcast, kPod10Mac, kEtherArp, arp_body(1, kPod10Mac, kPod10, Mac{}, kPodsAddr))},
            {r.pods,
             ethernet(multicast_mac(group), kPod10Mac, kEtherIpv6, ns6_ip(kPod10v6, group, kPodsV6, kPod10Mac))},
            {r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kPodsAddr, 9))},
            {r.pods, from_pod6(kPod10v6, echo6_ip(true, kPod10v6, kPodsV6, 9))},
            {r.pods, r.from_pod(kPod10, truncated)},
            {r.pods, from_pod6(kPod10v6, truncated6)},
            {r.pods, ethernet(kPodsMac, kPod10Mac, 0x8100, Bytes(46, 0))},
            {r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 20000, kServerV6, 53, text("hit")))},
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("hit")))},
            {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 20000, text("reply")))},
            {r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 20000, text("reply")))},
            {r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 20000, kServerV6, 53, text("ttl"), Ip6Opt{1}))},
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("ttl"), IpOpt{.ttl = 1}))},
            {r.ext1, r.from_ext1(ipv4(kExt1Gw, kIngress, kProtoIcmp, icmp_error(3, 4, quoted)), kExt1GwMac)},
            {r.ext1, from_ext1_6(icmp6_ip(kExt1GwV6, kIngressV6, 1, 0, error6), kExt1GwMac)},
            {r.pods, r.from_pod(kPod20, udp_ip(kPod20, 3000, kInternet, 53, text("stale")))},
            {r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 3000, kInternetV6, 53, text("stale")))},
            {r.ext1, from_ext1_6(udp6_ip(kInternetV6, 53, kExt1V6, 3000, text("old")), kExt1GwMac)},
            {r.ext1, r.from_ext1(udp_ip(kInternet, 53, kExt1Addr, 3000, text("old")), kExt1GwMac)},
            {r.pods, from_pod6(kPod11v6, tcp6_ip(kPod11v6, 2000, kInternetV6, 443, kSyn))},
            {r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 2000, kServerB, 443, kSyn))},
            {r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 2000, kServerB, 443, kAck))},
            {r.pods, from_pod6(kPod11v6, tcp6_ip(kPod11v6, 2000, kInternetV6, 443, kAck))},
            {r.pods, r.from_pod(kPod11, udp_ip(kPod11, 5000, kUnresolved, 53, text("held")))},
            {r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 5000, unresolved, 53, text("held")))},
            {r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 20003, kRemotePodV6, 53, text("cluster")))},
            {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20003, kRemotePod, 53, text("cluster")))},
            {r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 60000, text("worker 1")))},
            {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 60000, text("worker 1")))},
        };
    };
    a.process(0, input(a));
    for (const In& in : input(*b))
        b->process(0, {in});

    auto pods_a = a.tx(a.pods), ext1_a = a.tx(a.ext1);
    // Per family: the ARP reply or Neighbor Advertisement, the echo reply, the reply, the Time
    // Exceeded, the ICMP error, the cluster destination.
    EXPECT_EQ(pods_a.size(), 12u);
    EXPECT_EQ(ext1_a.size(), 8u);  // per family: the hit, the replaced session, the new flow's two segments
    for (const Bytes& f : pods_a)
        EXPECT_TRUE(checksums_valid(parse_frame(f)));
    for (const Bytes& f : ext1_a)
        EXPECT_TRUE(checksums_valid(parse_frame(f)));
    size_t v6_out = 0, v6_back = 0;
    for (const Bytes& f : pods_a)
        v6_back += get16(&f[12]) == kEtherIpv6;
    for (const Bytes& f : ext1_a)
        v6_out += get16(&f[12]) == kEtherIpv6;
    EXPECT_EQ(v6_back, 6u);
    EXPECT_EQ(v6_out, 4u);
    EXPECT_EQ(pods_a, b->tx(b->pods));
    EXPECT_EQ(ext1_a, b->tx(b->ext1));
    EXPECT_EQ(a.tx(a.ext2), b->tx(b->ext2));
    auto held_a = a.to_control(), held_b = b->to_control();
    ASSERT_EQ(held_a.size(), 2u);
    ASSERT_EQ(held_b.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(held_a[i].frame, held_b[i].frame);
        EXPECT_EQ(held_a[i].next_hop, held_b[i].next_hop);
        EXPECT_EQ(held_a[i].next_hop6, held_b[i].next_hop6);
    }
    EXPECT_EQ(held_a[0].next_hop, kUnresolved);
    EXPECT_EQ(held_a[1].next_hop6, unresolved);
    EXPECT_EQ(a.handoff_pending(0, 1), 2u);
    EXPECT_EQ(b->handoff_pending(0, 1), 2u);
    for (unsigned d = 0; d < dp::kDropReasonCount; ++d)
        EXPECT_EQ(a.w().counters.drops[d], b->w().counters.drops[d]) << dp::kDropReasonNames[d];
    EXPECT_EQ(a.drops(DropReason::malformed), 2u);
    EXPECT_EQ(a.drops(DropReason::unknown_ethertype), 1u);
    EXPECT_EQ(a.drops(DropReason::ttl_exceeded), 0u);
    for (auto e : {dp::IcmpError::time_exceeded, dp::IcmpError::time_exceeded6}) {
        EXPECT_EQ(a.w().counters.icmp_sent[static_cast<unsigned>(e)], 1u)
            << dp::kIcmpErrorNames[static_cast<unsigned>(e)];
        EXPECT_EQ(b->w().counters.icmp_sent[static_cast<unsigned>(e)], 1u)
            << dp::kIcmpErrorNames[static_cast<unsigned>(e)];
    }
    EXPECT_EQ(a.drops(DropReason::no_session) + a.drops(DropReason::stale_session), 2u);
    const auto& ca = a.w().counters;
    const auto& cb = b->w().counters;
    EXPECT_EQ(ca.sessions_created, cb.sessions_created);
    EXPECT_EQ(ca.sessions6_created, cb.sessions6_created);
    // One stale session closed per family (sessions_closed counts both).
    EXPECT_EQ(ca.sessions_closed, 2u);
    EXPECT_EQ(ca.sessions6_closed, 1u);
    EXPECT_EQ(cb.sessions_closed, 2u);
    EXPECT_EQ(cb.sessions6_closed, 1u);
    EXPECT_EQ(ca.routed, cb.routed);
    EXPECT_EQ(ca.held, cb.held);
    EXPECT_EQ(ca.held, 2u);
    EXPECT_EQ(ca.handed_off, cb.handed_off);
    EXPECT_EQ(a.svc(kWeb).packets_out, b->svc(kWeb).packets_out);
    EXPECT_EQ(a.svc(kWeb).packets_in, b->svc(kWeb).packets_in);
    EXPECT_EQ(a.svc(kWeb).bytes_in, b->svc(kWeb).bytes_in);
    EXPECT_EQ(a.default_counters().sessions_created, b->default_counters().sessions_created);
    auto sa = a.sessions(), sb = b->sessions();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
        EXPECT_EQ(dp::SessionTable::inside_key(sa[i]).src, dp::SessionTable::inside_key(sb[i]).src);
        EXPECT_EQ(sa[i].pod_port, sb[i].pod_port);
        EXPECT_EQ(sa[i].nat_ip, sb[i].nat_ip);
        EXPECT_EQ(sa[i].nat_port, sb[i].nat_port);
        EXPECT_EQ(sa[i].service_id, sb[i].service_id);
    }
    auto s6a = a.sessions6(), s6b = b->sessions6();
    ASSERT_EQ(s6a.size(), s6b.size());
    // The first two sessions, the replacement of the stale one, the TCP flow (the held datagram's
    // session and the cluster destination make none, as for IPv4).
    EXPECT_EQ(s6a.size(), sa.size());
    for (size_t i = 0; i < s6a.size(); ++i) {
        EXPECT_EQ(std::to_array(s6a[i].pod_ip.b), std::to_array(s6b[i].pod_ip.b));
        EXPECT_EQ(std::to_array(s6a[i].remote_ip.b), std::to_array(s6b[i].remote_ip.b));
        EXPECT_EQ(s6a[i].pod_port, s6b[i].pod_port);
        EXPECT_EQ(std::to_array(s6a[i].nat_ip.b), std::to_array(s6b[i].nat_ip.b));
        EXPECT_EQ(s6a[i].nat_port, s6b[i].nat_port);
        EXPECT_EQ(s6a[i].service_id, s6b[i].service_id);
    }
    b->drain_all();
    EXPECT_EQ(b->mbufs_in_use(), 0);
}

// More packets at once than one burst holds (a hand-off ring or a caller may give
// worker_process_burst() up to 65,535): the stages run over them a burst of dp::kBurst at a time,
// in order. New flows of both families and a TCP handshake begin at the end of the first burst
// and go on at the start of the second, with replies to the new sessions: every packet must find
// what the first burst made, exactly as when each packet is received alone.
TEST_F(DataplaneTest, TwoBurstsAtOnceMatchPacketAtATime) {
    using namespace std_rig6;
    constexpr size_t kPackets = 2 * dp::kBurst;
    RigOptions o = dual_stack();
    Rig& a = start(o);
    auto b = std::make_unique<Rig>(o);
    for (Rig* r : {&a, b.get()}) {
        r->process(r->pods, r->from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text("first"))));
        r->process(r->pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 20000, kServerV6, 53, text("first"))));
        ASSERT_EQ(r->tx(r->ext1).size(), 2u);
    }
    auto input = [&](Rig& r) {
        std::vector<In> in;
        auto hits = [&](unsigned n) {
            for (unsigned k = 0; k < n; ++k) {
                std::string t = "hit " + std::to_string(in.size());
                if (k % 4 == 3)
                    in.push_back(
                        {r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 20000, kServerV6, 53, text(t.c_str())))});
                else
                    in.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, 20000, kServer, 53, text(t.c_str())))});
            }
        };
        hits(dp::kBurst - 3);
        // The last three packets of the first burst: two new flows and a SYN.
        in.push_back({r.pods, r.from_pod(kPod11, udp_ip(kPod11, 7000, kServerB, 53, text("new")))});
        in.push_back({r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 7000, kServerV6, 53, text("new")))});
        in.push_back({r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 2100, kServerB, 443, kSyn))});
        // The first packets of the second burst: what follows each of them.
        in.push_back({r.pods, r.from_pod(kPod11, udp_ip(kPod11, 7000, kServerB, 53, text("again")))});
        in.push_back({r.ext1, r.from_ext1(udp_ip(kServerB, 53, kIngress, 7000, text("reply")), kServerBMac)});
        in.push_back({r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 7000, kServerV6, 53, text("again")))});
        in.push_back({r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 7000, text("reply")))});
        in.push_back({r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 2100, kServerB, 443, kAck))});
        hits(kPackets - in.size());
        return in;
    };
    std::vector<In> receive = input(a);
    ASSERT_EQ(receive.size(), kPackets);
    a.process(0, receive);
    for (const In& in : input(*b))
        b->process(0, {in});

    auto pods_a = a.tx(a.pods), ext1_a = a.tx(a.ext1);
    ASSERT_EQ(pods_a.size(), 2u);  // the two replies
    EXPECT_EQ(pods_a[0], ethernet(kPod11Mac, kPodsMac, kEtherIpv4,
                                  udp_ip(kServerB, 53, kPod11, 7000, text("reply"), IpOpt{.ttl = 63})));
    EXPECT_EQ(pods_a[1], to_pod6(kPod11v6, udp6_ip(kServerV6, 53, kPod11v6, 7000, text("reply"), Ip6Opt{63})));
    EXPECT_EQ(ext1_a.size(), kPackets - 2);
    for (const Bytes& f : ext1_a)
        EXPECT_TRUE(checksums_valid(parse_frame(f)));
    EXPECT_EQ(pods_a, b->tx(b->pods));
    EXPECT_EQ(ext1_a, b->tx(b->ext1));
    EXPECT_EQ(a.total_drops(), 0u);
    EXPECT_EQ(b->total_drops(), 0u);
    // One session per new flow, made in the first burst and found by the second.
    EXPECT_EQ(a.w().counters.sessions_created, 2u + 3u);
    EXPECT_EQ(a.w().counters.sessions_created, b->w().counters.sessions_created);
    EXPECT_EQ(a.svc(kWeb).packets_out, b->svc(kWeb).packets_out);
    EXPECT_EQ(a.svc(kWeb).packets_in, 2u);
    EXPECT_EQ(b->svc(kWeb).packets_in, 2u);
    auto sa = a.sessions(), sb = b->sessions();
    ASSERT_EQ(sa.size(), 3u);
    ASSERT_EQ(sb.size(), 3u);
    for (size_t i = 0; i < sa.size(); ++i) {
        EXPECT_EQ(dp::SessionTable::inside_key(sa[i]).src, dp::SessionTable::inside_key(sb[i]).src);
        EXPECT_EQ(sa[i].nat_port, sb[i].nat_port);
        EXPECT_EQ(sa[i].tcp_seen, sb[i].tcp_seen);
    }
    EXPECT_EQ(a.sessions6().size(), 2u);
    EXPECT_EQ(b->sessions6().size(), 2u);
    b->drain_all();
    EXPECT_EQ(b->mbufs_in_use(), 0);
}

}  // namespace
}  // namespace egw::test
