// SPDX-License-Identifier: Apache-2.0
//
// Limits and lifecycle of sessions: port pool exhaustion, the session limit, expiry, and what a
// policy change does to existing sessions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

// ---------------------------------------------------------------------------------------------
// Port pool

TEST_F(DataplaneTest, PortExhaustionIsPerDestinationAndCounted) {
    RigOptions o;
    o.configure = [](config::Config& c) {
        c.sessions.port_min = 2000;
        c.sessions.port_max = 2003;
    };
    Rig& r = start(o);
    std::set<uint16_t> used;
    for (uint16_t i = 0; i < 4; ++i) {
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(40000 + i), kServer, 53, text("q"))));
        Parsed p = single(r.tx(r.ext1));
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.src, kIngress);
        EXPECT_GE(p.sport, 2000);
        EXPECT_LE(p.sport, 2003);
        used.insert(p.sport);
    }
    EXPECT_EQ(used.size(), 4u) << "two flows share a NAT port toward the same destination";
    EXPECT_EQ(r.svc(kWeb).port_alloc_failures, 0u);

    // A fifth flow toward the same server: no port left.
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40004, kServer, 53, text("q"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::port_exhausted), 1u);
    EXPECT_EQ(r.svc(kWeb).port_alloc_failures, 1u);
    EXPECT_EQ(r.sessions().size(), 4u);
    // The same server on another port is another destination for endpoint-dependent NAT.
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40004, kServer, 54, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);

    // Another destination has its own ports.
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40004, kServerB, 53, text("q"))));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.dst, kServerB);
    EXPECT_GE(p.sport, 2000);
    EXPECT_LE(p.sport, 2003);
    // So has another NAT address (the masquerade of a pod of no Service).
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kServer, 53, text("q"))));
    p = single(r.tx(r.ext1));
    EXPECT_EQ(p.src, kExt1Addr);
    EXPECT_EQ(r.default_counters().port_alloc_failures, 0u);

    // Existing flows are unaffected by the exhaustion.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, *used.begin(), text("a"))));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    EXPECT_EQ(r.drops(DropReason::port_exhausted), 1u);
    EXPECT_EQ(r.total_drops(), 1u);
}

TEST_F(DataplaneTest, FreedPortIsReused) {
    RigOptions o;
    o.configure = [](config::Config& c) {
        c.sessions.port_min = 2000;
        c.sessions.port_max = 2000;
    };
    Rig& r = start(o);
    r.shared.timeouts.udp = 100;
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).sport, 2000);
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40000, kServer, 53, text("q"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::port_exhausted), 1u);
    r.advance(1000);
    r.sweep();
    ASSERT_TRUE(r.sessions().empty());
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40000, kServer, 53, text("q"))));
    Parsed p = single(r.tx(r.ext1));
    EXPECT_EQ(p.sport, 2000);
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 2000, text("a"))));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(parse_frame(frames[0]).dst, kPod11) << "the reply went to the port's previous owner";
}

// ---------------------------------------------------------------------------------------------
// Session limit

TEST_F(DataplaneTest, SessionLimitDropsNewFlowsOnly) {
    RigOptions o;
    o.sessions_per_worker = 2;
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    r.process(r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 40000, kServer, 443, kSyn)));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    EXPECT_EQ(r.sessions().size(), 2u);

    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40001, kServer, 80, kSyn)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::session_limit), 1u);
    EXPECT_EQ(r.total_drops(), 1u);
    EXPECT_EQ(r.sessions().size(), 2u);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);

    // The two existing flows carry on in both directions.
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kAck)));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 443, kIngress, 40000, kSyn | kAck)));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(parse_frame(frames[0]).dst, kPod11);
    EXPECT_EQ(r.total_drops(), 1u);
}

// A full table whose sessions have all expired (the sweep has not passed them yet) makes room
// for a new flow at once instead of refusing it; a full table of live sessions still refuses.
TEST_F(DataplaneTest, FullTableReclaimsAnExpiredSessionOnDemand) {
    RigOptions o;
    o.sessions_per_worker = 4;
    Rig& r = start(o);
    r.shared.timeouts.udp = 1000;
    for (uint16_t i = 0; i < 4; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(30000 + i), kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 4u);
    ASSERT_EQ(r.w().sessions.active(), 4u);

    // Live: refused and counted.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 31000, kServer, 53, text("q"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::session_limit), 1u);

    // All four expire; no sweep runs. The next new flow takes one expired session's place.
    r.advance(2000);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 31001, kServer, 53, text("q"))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_TRUE(checksums_valid(parse_frame(frames[0])));
    EXPECT_EQ(r.drops(DropReason::session_limit), 1u);
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
    EXPECT_EQ(r.w().sessions.active(), 4u);
    std::set<uint16_t> ports;
    for (const auto& s : r.sessions())
        ports.insert(rte_be_to_cpu_16(s.pod_port));
    EXPECT_EQ(ports.count(31001), 1u);
}

// One pod may not take the table: past sessions.max_per_pod (its share on this worker) its new
// flows are refused and counted, while another pod still opens flows, and its own flows that
// exist go on. A closed session gives the pod its room back.
TEST_F(DataplaneTest, PerPodSessionLimitRefusesOnlyThatPod) {
    Rig& r = start();
    r.shared.pod_session_limit = 3;
    r.shared.timeouts.udp = 1000;
    for (uint16_t i = 0; i < 5; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(30000 + i), kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 3u);
    EXPECT_EQ(r.drops(DropReason::pod_session_limit), 2u);
    EXPECT_EQ(r.w().sessions.pod_sessions(rte_cpu_to_be_32(kPod10)), 3u);
    // Another tenant is not affected, nor are the pod's existing flows.
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 30000, kServer, 53, text("q"))));
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 30000, kServer, 53, text("again"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    EXPECT_EQ(r.drops(DropReason::pod_session_limit), 2u);
    EXPECT_EQ(r.w().sessions.pod_sessions(rte_cpu_to_be_32(kPod11)), 1u);
    EXPECT_EQ(r.sessions().size(), 4u);

    // The pod's sessions expire (the one just used lives on): room for new ones.
    r.advance(600);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 30000, kServer, 53, text("keep"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    r.advance(600);
    r.sweep();
    EXPECT_EQ(r.w().sessions.pod_sessions(rte_cpu_to_be_32(kPod10)), 1u);
    EXPECT_EQ(r.w().sessions.pod_sessions(rte_cpu_to_be_32(kPod11)), 0u);
    for (uint16_t i = 0; i < 3; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(31000 + i), kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    EXPECT_EQ(r.drops(DropReason::pod_session_limit), 3u);
    EXPECT_EQ(r.w().sessions.pod_sessions(rte_cpu_to_be_32(kPod10)), 3u);

    // With no limit (the default) the pod opens as many as the table holds.
    r.shared.pod_session_limit = 0;
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 32000, kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(r.w().sessions.pod_sessions(rte_cpu_to_be_32(kPod10)), 4u);
}

// The reclaim runs in the middle of a burst: an ICMP error earlier in the same burst may quote the
// very session it takes (an error does not refresh its session). That error must not be
// translated with the flow that took the slot: it finds its session gone and is dropped.
TEST_F(DataplaneTest, ErrorOfASessionReclaimedInTheSameBurstIsNotMistranslated) {
    RigOptions o;
    o.sessions_per_worker = 1;
    Rig& r = start(o);
    r.shared.timeouts.udp = 1000;
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 30000, kServer, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.advance(2000);
    // The pod reports a reply of the expired flow unreachable, then opens another flow.
    Bytes reply = udp_ip(kServer, 53, kPod10, 30000, text("a"));
    r.process(0, {{r.pods, r.from_pod(kPod10, ipv4(kPod10, kServer, kProtoIcmp, icmp_error(3, 3, reply)))},
                  {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 30001, kServer, 53, text("q")))}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(parse_frame(frames[0]).proto, kProtoUdp);
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
    ASSERT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(rte_be_to_cpu_16(r.sessions()[0].pod_port), 30001);
}

// TCP: an RST, a FIN or a SYN+ACK from a pod never opens a session; in loose mode (the default) a
// segment of a connection under way does, in strict mode only a SYN.
TEST_F(DataplaneTest, TcpSegmentsThatMayNotOpenASessionAreDroppedAndCounted) {
    Rig& r = start();
    uint16_t port = 41000;
    for (uint8_t f : {kRst, uint8_t(kRst | kAck), uint8_t(kFin | kAck), uint8_t(kSyn | kAck), uint8_t(kSyn | kFin)}) {
        r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, port++, kServer, 80, f)));
        EXPECT_TRUE(r.tx(r.ext1).empty()) << "flags " << int(f);
    }
    EXPECT_EQ(r.drops(DropReason::tcp_not_opening), 5u);
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.sessions_created, 0u);

    // Loose: a mid-stream ACK (say, after an egwd restart) opens one, as does a SYN.
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, port++, kServer, 80, kAck, text("data"))));
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, port++, kServer, 80, kSyn)));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    EXPECT_EQ(r.sessions().size(), 2u);

    // Strict: the mid-stream ACK is refused, the SYN is not.
    r.shared.tcp_strict = true;
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, port++, kServer, 80, kAck, text("data"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::tcp_not_opening), 6u);
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, port++, kServer, 80, kSyn)));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(r.sessions().size(), 3u);
    // A session that exists carries every segment, RST and FIN included, in either mode.
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, static_cast<uint16_t>(port - 1), kServer, 80, kRst)));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(r.drops(DropReason::tcp_not_opening), 6u);
}

// ---------------------------------------------------------------------------------------------
// Expiry

TEST_F(DataplaneTest, IdleSessionsExpire) {
    Rig& r = start();
    constexpr uint64_t kUdp = 1000;
    r.shared.timeouts.udp = kUdp;
    r.shared.timeouts.icmp = kUdp;
    constexpr unsigned kFlows = 20;
    for (uint16_t i = 0; i < kFlows; ++i) {
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(30000 + i), kServer, 53, text("q"))));
    }
    r.process(r.pods, r.from_pod(kPod11, echo_ip(true, kPod11, kServer, 4000)));
    EXPECT_EQ(r.tx(r.ext1).size(), kFlows + 1);
    ASSERT_EQ(r.sessions().size(), kFlows + 1);

    // One flow stays active; the others go idle past the timeout.
    r.advance(kUdp * 6 / 10);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 30000, kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    r.advance(kUdp * 6 / 10);

    // One expiry step looks at kSweepPerIteration slots, no more.
    uint32_t cursor = r.w().sweep_cursor;
    size_t before = r.sessions().size();
    dp::worker_expire_step(r.w(), r.policy());
    EXPECT_EQ(r.w().sweep_cursor, (cursor + dp::kSweepPerIteration) % r.w().sessions.slots_handed_out());
    size_t gone = before - r.sessions().size();
    EXPECT_LE(gone, dp::kSweepPerIteration);
    EXPECT_EQ(r.w().counters.sessions_expired, gone);

    r.sweep();
    auto left = r.sessions();
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left[0].pod_port, nbo16(30000));
    EXPECT_EQ(r.w().counters.sessions_expired, kFlows);
    EXPECT_EQ(r.w().counters.sessions_closed, kFlows);
    EXPECT_EQ(r.svc(kWeb).sessions_closed, kFlows);
    EXPECT_EQ(r.w().sessions.active(), 1u);

    // Replies to an expired session find nothing.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 30001, text("late"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
    // The active one still works.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 30000, text("a"))));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
}

TEST_F(DataplaneTest, ExpiryStepIsBoundedEvenWhenEverythingExpired) {
    Rig& r = start();
    r.shared.timeouts.udp = 10;
    for (uint16_t i = 0; i < 100; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(30000 + i), kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 100u);
    r.advance(1000);
    size_t left = 100;
    unsigned steps = 0;
    while (left > 0 && steps < r.w().sessions.capacity()) {
        uint32_t cursor = r.w().sweep_cursor;
        dp::worker_expire_step(r.w(), r.policy());
        ++steps;
        size_t now_left = r.sessions().size();
        EXPECT_LE(left - now_left, dp::kSweepPerIteration);
        EXPECT_EQ(r.w().sweep_cursor, (cursor + dp::kSweepPerIteration) % r.w().sessions.slots_handed_out());
        left = now_left;
    }
    EXPECT_GE(steps, (100 + dp::kSweepPerIteration - 1) / dp::kSweepPerIteration);
    // With nothing left the step returns at once.
    uint32_t cursor = r.w().sweep_cursor;
    dp::worker_expire_step(r.w(), r.policy());
    EXPECT_EQ(r.w().sweep_cursor, cursor);
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.sessions_expired, 100u);
}

// The sweep walks the slots that have been handed out, not all of sessions.max: with a few
// sessions in a large table it comes back to each of them within a few steps, where walking
// every slot would take capacity / kSweepPerIteration steps.
TEST_F(DataplaneTest, ExpirySweepWalksOnlyTheSlotsHandedOut) {
    RigOptions o;
    o.sessions_per_worker = 65536;
    Rig& r = start(o);
    constexpr uint64_t kUdp = 1000;
    r.shared.timeouts.udp = kUdp;
    constexpr unsigned kFlows = 20;
    for (uint16_t i = 0; i < kFlows; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(30000 + i), kServer, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), kFlows);
    ASSERT_EQ(r.w().sessions.slots_handed_out(), kFlows);

    // Nothing is idle yet: whole rounds of the sweep close nothing, and the cursor stays among
    // the 20 slots.
    for (unsigned step = 0; step < 10; ++step) {
        dp::worker_expire_step(r.w(), r.policy());
        ASSERT_LT(r.w().sweep_cursor, kFlows) << "step " << step;
    }
    ASSERT_EQ(r.sessions().size(), kFlows);

    // Once they are idle, one round of ceil(20 / 8) steps closes them all.
    r.advance(kUdp + 1);
    constexpr unsigned kRound = (kFlows + dp::kSweepPerIteration - 1) / dp::kSweepPerIteration;
    for (unsigned step = 0; step < kRound; ++step)
        dp::worker_expire_step(r.w(), r.policy());
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.sessions_expired, kFlows);
    EXPECT_EQ(r.w().sessions.active(), 0u);

    // New sessions take the freed slots again: the bound stays where it was.
    for (uint16_t i = 0; i < kFlows; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(31000 + i), kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), kFlows);
    EXPECT_EQ(r.w().sessions.slots_handed_out(), kFlows);
}

// The sweep's pace as the control thread sets it (in ticks of the rig's clock), and the UDP timeout.
void pace_sweep(Rig& r, uint64_t pass, uint64_t step_max, uint64_t udp_timeout) {
    r.shared.sweep_pass_ticks = pass;
    r.shared.sweep_step_max_ticks = step_max;
    r.shared.timeouts.udp = udp_timeout;
}

// The poll loop's sweep is paced by time: a step of each table every
// sweep_pass_ticks * kSweepPerIteration / slots_handed_out() ticks, at most sweep_step_max_ticks
// apart, so a pass over the slots handed out takes sweep_pass_ticks whatever the poll rate.
TEST_F(DataplaneTest, ExpirySweepIsPacedByTime) {
    Rig& r = start();
    constexpr uint64_t kPass = 2000, kStepMax = 10000, kUdp = 100000;
    pace_sweep(r, kPass, kStepMax, kUdp);
    constexpr unsigned kFlows = 20;
    for (uint16_t i = 0; i < kFlows; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(30000 + i), kServer, 53, text("q"))));
    ASSERT_EQ(r.sessions().size(), kFlows);
    ASSERT_EQ(r.w().sessions.slots_handed_out(), kFlows);
    constexpr uint64_t kInterval = kPass * dp::kSweepPerIteration / kFlows;  // 800 ticks

    // The first call steps; calls before the interval has gone by do not, however many.
    dp::worker_expire_paced(r.w(), r.policy());
    EXPECT_EQ(r.w().sweep_cursor, dp::kSweepPerIteration);
    for (int i = 0; i < 100; ++i)
        dp::worker_expire_paced(r.w(), r.policy());
    r.advance(kInterval - 1);
    dp::worker_expire_paced(r.w(), r.policy());
    EXPECT_EQ(r.w().sweep_cursor, dp::kSweepPerIteration);
    r.advance(1);
    dp::worker_expire_paced(r.w(), r.policy());
    EXPECT_EQ(r.w().sweep_cursor, 2 * dp::kSweepPerIteration);

    // Idle sessions all close within one pass of kPass ticks (plus the step under way), polled
    // every 10 ticks.
    r.advance(kUdp + 1);
    uint64_t waited = 0;
    while (!r.sessions().empty() && waited <= 2 * kPass) {
        dp::worker_expire_paced(r.w(), r.policy());
        r.advance(10);
        waited += 10;
    }
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_LE(waited, kPass + kInterval);
    EXPECT_EQ(r.w().counters.sessions_expired, kFlows);
}

// With few slots handed out the steps are sweep_step_max_ticks apart, not a pass's worth.
TEST_F(DataplaneTest, ExpirySweepStepsAreAtMostTheStepMaxApart) {
    Rig& r = start();
    constexpr uint64_t kPass = 2000, kStepMax = 1000, kUdp = 100;
    pace_sweep(r, kPass, kStepMax, kUdp);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 30000, kServer, 53, text("q"))));
    ASSERT_EQ(r.w().sessions.slots_handed_out(), 1u);
    dp::worker_expire_paced(r.w(), r.policy());  // a step now: the next one is kStepMax away
    ASSERT_EQ(r.sessions().size(), 1u);
    r.advance(kStepMax - 1);  // idle past its timeout, but no step is due
    dp::worker_expire_paced(r.w(), r.policy());
    EXPECT_EQ(r.sessions().size(), 1u);
    r.advance(1);
    dp::worker_expire_paced(r.w(), r.policy());
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
}

TEST_F(DataplaneTest, PollLoopExpiresWithRealTime) {
    // worker_poll_once runs the sweep with the TSC as its clock.
    Rig& r = start();
    r.rx(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 30000, kServer, 53, text("q"))));
    r.poll();
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    ASSERT_EQ(r.sessions().size(), 1u);
    r.shared.timeouts.udp = 1;  // one TSC tick: idle already
    for (uint32_t i = 0; i <= r.w().sessions.capacity() / dp::kSweepPerIteration; ++i)
        r.poll();
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
}

// ---------------------------------------------------------------------------------------------
// Policy changes

TEST_F(DataplaneTest, RepublishingTheSamePolicyKeepsSessions) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    // A new snapshot (new generation) with the same Services, and one with an endpoint added.
    r.publish({lb_service(kWeb, kIngress, {kPod10, kPod11})});
    r.publish({lb_service(kWeb, kIngress, {kPod10, kPod11, kPod20})});
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kSyn | kAck)));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(parse_frame(frames[0]).dst, kPod10);
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.w().counters.sessions_closed, 0u);
    r.sweep();
    EXPECT_EQ(r.sessions().size(), 1u);
}

TEST_F(DataplaneTest, DeletedServiceStopsTranslatingAtOnce) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kIngress);
    r.process(r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 40001, kServer, 80, kSyn)));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kIngress);

    r.publish({});  // the EgressService is gone

    // A reply to the old translation is not translated with stale addresses.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kSyn | kAck)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 1u);

    // The next packet of the flow gets a new session under the new policy (default action).
    r.process(r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 40001, kServer, 80, kAck)));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  tcp_ip(kExt1Addr, 40001, kServer, 80, kAck, {}, IpOpt{.ttl = 63})));
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].service_id, dp::kDefaultPolicyId);
    EXPECT_EQ(ss[0].nat_ip, nbo32(kExt1Addr));

    // Replies to the old address and port, for either flow, are dropped.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40000, kAck)));
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, 40001, kAck)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 3u);
    // The new translation works.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kExt1Addr, 40001, kAck)));
    EXPECT_EQ(single(r.tx(r.pods)).dst, kPod11);
    // No ARP for the old ingress IP any more.
    r.process(r.ext1, ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, kIngress)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

TEST_F(DataplaneTest, ChangedIngressIpMovesFlowsToTheNewAddress) {
    constexpr uint32_t kNewIngress = ip4(192, 0, 2, 51);
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kIngress);

    r.publish({lb_service(kWeb, kNewIngress, {kPod10, kPod11})});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q2"))));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kNewIngress, 40000, kServer, 53, text("q2"), IpOpt{.ttl = 63})));
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].nat_ip, nbo32(kNewIngress));
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);

    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("old"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 1u);
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kNewIngress, 40000, text("new"))));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  udp_ip(kServer, 53, kPod10, 40000, text("new"), IpOpt{.ttl = 63})));
}

TEST_F(DataplaneTest, ReplyBeforeAnyOutgoingPacketAfterChangeIsStale) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    // Same ingress IP, but the pod is no longer an endpoint: its translation must stop.
    r.publish({lb_service(kWeb, kIngress, {kPod11})});
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("a"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session), 1u);
    EXPECT_TRUE(r.sessions().empty());
    EXPECT_EQ(r.w().counters.sessions_closed, 1u);
}

TEST_F(DataplaneTest, LosingOneEndpointLeavesTheOthersSessionsAlone) {
    // Scaling a Service down must not cut the connections of the pods that stay: a server
    // pushing to an idle client would otherwise never be heard again.
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 443, kSyn)));
    r.process(r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 40001, kServer, 443, kSyn)));
    ASSERT_EQ(r.tx(r.ext1).size(), 2u);
    r.publish({lb_service(kWeb, kIngress, {kPod10})});

    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 443, kIngress, 40000, kPsh | kAck, text("push"))));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  tcp_ip(kServer, 443, kPod10, 40000, kPsh | kAck, text("push"), IpOpt{.ttl = 63})));
    // The pod that left the Service: its translation ends.
    r.process(r.ext1, r.from_ext1(tcp_ip(kServer, 443, kIngress, 40001, kPsh | kAck, text("push"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session), 1u);

    r.sweep();
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].pod_ip, nbo32(kPod10));
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u);
    // And it keeps working in both directions.
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 443, kAck)));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
}

TEST_F(DataplaneTest, ExpirySweepReclaimsSessionsOfAChangedPolicy) {
    Rig& r = start();
    for (uint16_t i = 0; i < 5; ++i)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(40000 + i), kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 5u);
    uint32_t id = r.service_id(kWeb);
    r.publish({});
    r.sweep();
    EXPECT_TRUE(r.sessions().empty()) << "sessions of a deleted Service kept their ports";
    EXPECT_EQ(r.w().service_counters[id].sessions_closed, 5u);
}

TEST_F(DataplaneTest, ServiceMovedToAnotherGatewayStopsTranslating) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kIngress);
    model::ServiceState moved = lb_service(kWeb, kIngress, {kPod10, kPod11});
    moved.serve_here = false;
    moved.status_host = "gw-2";
    moved.reason = "served by gw-2";
    r.publish({moved});

    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("a"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 1u);
    // Its pods now take the default action here.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kExt1Addr);
    // And the ingress IP is no longer answered for.
    r.process(r.ext1, ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, kIngress)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

TEST_F(DataplaneTest, PodClaimedByTwoServicesLeavesWithTheFirstByName) {
    RigOptions o;
    o.services = {lb_service("a/first", kIngress, {kPod10}),
                  lb_service("b/second", ip4(192, 0, 2, 51), {kPod10, kPod11})};
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, ip4(192, 0, 2, 51));
}

TEST_F(DataplaneTest, RouteChangeMovesSessionsOrReplacesMasqueradedOnes) {
    Rig& r = start();
    // Through ext1's gateway: one flow of the Service, one masqueraded flow of a pod of none.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kInternet, 53, text("q"))));
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kInternet, 53, text("q"))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(parse_frame(frames[1]).src, kExt1Addr);

    // The default route moves to ext2's gateway.
    for (auto& rt : r.cfg.routes)
        if (rt.vrf == "default" && rt.prefix.len == 0) {
            rt.via = net::IpAddr::from_v4(kBlueGw);
            rt.port = "ext2";
        }
    r.publish({lb_service(kWeb, kIngress, {kPod10, kPod11})});

    // The Service's session keeps its address and follows the route.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kInternet, 53, text("q2"))));
    frames = r.tx(r.ext2);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kBlueGwMac, kExt2Mac, kEtherIpv4,
                                  udp_ip(kIngress, 40000, kInternet, 53, text("q2"), IpOpt{.ttl = 63})));
    // The masqueraded one was bound to ext1's address: replaced by one on ext2's.
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kInternet, 53, text("q2"))));
    frames = r.tx(r.ext2);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kBlueGwMac, kExt2Mac, kEtherIpv4,
                                  udp_ip(kExt2Addr, 40000, kInternet, 53, text("q2"), IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.sessions().size(), 2u);
    EXPECT_EQ(r.default_counters().sessions_closed, 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 0u);

    // Replies: the Service's, arriving now on ext2, reach the pod; one to the old masquerade
    // address does not.
    r.process(r.ext2, r.from_ext2(udp_ip(kInternet, 53, kIngress, 40000, text("a")), kBlueGwMac));
    EXPECT_EQ(single(r.tx(r.pods)).dst, kPod10);
    r.process(r.ext1, r.from_ext1(udp_ip(kInternet, 53, kExt1Addr, 40000, text("a")), kExt1GwMac));
    EXPECT_TRUE(r.tx(r.pods).empty());
}

TEST_F(DataplaneTest, PublicationWithTheSameRoutesKeepsTheSessionsCachedRoutes) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("a"))));
    ASSERT_EQ(r.tx(r.pods).size(), 1u);
    auto before = r.sessions();
    ASSERT_EQ(before.size(), 1u);
    ASSERT_NE(before[0].in_port, dp::kPortUnset);

    // Another Service appears: a new snapshot with the same routes.
    r.publish({lb_service(kWeb, kIngress, {kPod10, kPod11}), lb_service("other/svc", ip4(192, 0, 2, 52), {kPod20})});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q2"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
    auto after = r.sessions();
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].in_port, before[0].in_port) << "the way back to the pod was forgotten";
    EXPECT_EQ(after[0].in_neighbor, before[0].in_neighbor);
    EXPECT_EQ(after[0].out_neighbor, before[0].out_neighbor);
    EXPECT_EQ(after[0].epoch, static_cast<uint32_t>(r.policy().generation)) << "checked again under the new snapshot";
}

// ---------------------------------------------------------------------------------------------
// Full queues: counted drops, and every mbuf accounted for (the fixture checks the pool)

TEST_F(DataplaneTest, FullTransmitQueueIsACountedDrop) {
    Rig& r = start();
    constexpr unsigned kPackets = 1100;  // the port's transmit ring holds 1023
    for (unsigned sent = 0; sent < kPackets; sent += dp::kBurst) {
        std::vector<In> burst;
        for (unsigned i = sent; i < std::min(kPackets, sent + dp::kBurst); ++i)
            burst.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q")))});
        r.process(0, burst);
    }
    EXPECT_EQ(r.w().counters.tx_packets, 1023u);
    EXPECT_EQ(r.drops(DropReason::tx_full), kPackets - 1023);
    EXPECT_EQ(r.tx(r.ext1).size(), 1023u);
}

TEST_F(DataplaneTest, FullHandOffRingIsACountedDrop) {
    RigOptions o;
    o.workers = 2;
    Rig& r = start(o);
    constexpr unsigned kPackets = 2100;  // the hand-off ring holds 2047
    for (unsigned sent = 0; sent < kPackets; sent += dp::kBurst) {
        std::vector<In> burst;
        for (unsigned i = sent; i < std::min(kPackets, sent + dp::kBurst); ++i)
            burst.push_back({r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("a")))});
        r.process(0, burst);
    }
    EXPECT_EQ(r.w(0).counters.handed_off, 2047u);
    EXPECT_EQ(r.drops(DropReason::handoff_full, 0), kPackets - 2047);
    EXPECT_EQ(r.handoff_pending(0, 1), 2047u);
}

TEST_F(DataplaneTest, PodJoiningAServiceLeavesTheDefaultTranslation) {
    // kPod20 starts as a pod of no EgressService: masqueraded by the default action.
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kExt1Addr);
    // A pod that stays outside every Service keeps its default session across the change.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40001, kServer, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kIngress);

    r.publish({lb_service(kWeb, kIngress, {kPod10, kPod11, kPod20})});

    // The next packet of the same flow leaves with the Service's ingress IP, not the old address.
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kServer, 53, text("q"))));
    auto out = single(r.tx(r.ext1));
    EXPECT_EQ(out.src, kIngress);
    EXPECT_TRUE(checksums_valid(out));
    // The reply to the old masquerade address finds nothing to translate with.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kExt1Addr, 40000, text("a"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    // The reply to the new translation reaches the pod.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000, text("a"))));
    EXPECT_EQ(single(r.tx(r.pods)).dst, kPod20);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
    EXPECT_EQ(r.default_counters().sessions_closed, 1u);
}

TEST_F(DataplaneTest, DefaultSessionsOfOtherPodsSurviveAnEndpointAddition) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src, kExt1Addr);
    // Another pod (not kPod20) joins the Service.
    constexpr uint32_t kPod12 = ip4(10, 244, 1, 12);
    r.publish({lb_service(kWeb, kIngress, {kPod10, kPod11, kPod12})});
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kExt1Addr);
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kExt1Addr, 40000, text("a"))));
    EXPECT_EQ(single(r.tx(r.pods)).dst, kPod20);
    EXPECT_EQ(r.default_counters().sessions_created, 1u);
    EXPECT_EQ(r.default_counters().sessions_closed, 0u);
}

TEST_F(DataplaneTest, PodClaimedByTwoServicesGoesWithTheFirstByName) {
    constexpr uint32_t kIngressA = ip4(192, 0, 2, 60);
    Rig& r = start();
    // Sorted by key, as the rules hand them over: "default/a" comes before "default/web".
    r.publish({lb_service("default/a", kIngressA, {kPod10}), lb_service(kWeb, kIngress, {kPod10, kPod11})});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngressA);
    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
    EXPECT_EQ(r.svc("default/a").sessions_created, 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 1u);
}

// ---------------------------------------------------------------------------------------------
// IPv6 twins of the tests above, on the dual-stack rig: the same port pool, limits and policy
// changes over the IPv6 session table (NAPT66 to web's IPv6 ingress IP, the default masquerade to
// ext1's IPv6 address).

namespace v6 {
using namespace std_rig6;

// The dual-stack rig with the NAT ports limited to [lo, hi].
RigOptions ports(uint16_t lo, uint16_t hi) {
    RigOptions o = dual_stack();
    auto base = o.configure;
    o.configure = [base, lo, hi](config::Config& c) {
        base(c);
        c.sessions.port_min = lo;
        c.sessions.port_max = hi;
    };
    return o;
}

// web with `endpoints` as its IPv6 endpoints (its IPv4 side as the standard rig has it).
model::ServiceState web_with(std::vector<Ip6Addr> endpoints) {
    model::ServiceState web = web6();
    web.endpoint_ipv6s.clear();
    for (const Ip6Addr& e : endpoints)
        web.endpoint_ipv6s.push_back(addr6(e));
    std::sort(web.endpoint_ipv6s.begin(), web.endpoint_ipv6s.end());
    return web;
}

// An IPv6-translating LoadBalancerIP Service of `endpoints`.
model::ServiceState lb6(const std::string& key, uint32_t ingress4, const Ip6Addr& ingress6,
                        std::vector<Ip6Addr> endpoints) {
    model::ServiceState s = lb_service(key, ingress4, {});
    s.ingress_ipv6 = addr6(ingress6);
    for (const Ip6Addr& e : endpoints)
        s.endpoint_ipv6s.push_back(addr6(e));
    std::sort(s.endpoint_ipv6s.begin(), s.endpoint_ipv6s.end());
    return s;
}

// A Neighbor Solicitation from ext1's server for `target`, to its solicited-node group.
Bytes solicit(const Ip6Addr& target) {
    const Ip6Addr group = solicited_node(target);
    return ethernet(multicast_mac(group), kServerMac, kEtherIpv6, ns6_ip(kServerV6, group, target, kServerMac));
}

Ip6Addr nat_ip(const dp::Session6& s) {
    return std::to_array(s.nat_ip.b);
}
Ip6Addr pod_ip(const dp::Session6& s) {
    return std::to_array(s.pod_ip.b);
}
}  // namespace v6

TEST_F(DataplaneTest, Ipv6PortExhaustionIsPerDestinationAndCounted) {
    using namespace v6;
    Rig& r = start(ports(2000, 2003));
    std::set<uint16_t> used;
    for (uint16_t i = 0; i < 4; ++i) {
        r.process(r.pods,
                  from_pod6(kPod10v6, udp6_ip(kPod10v6, static_cast<uint16_t>(40000 + i), kServerV6, 53, text("q"))));
        Parsed p = single(r.tx(r.ext1));
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.src6, kIngressV6);
        EXPECT_GE(p.sport, 2000);
        EXPECT_LE(p.sport, 2003);
        used.insert(p.sport);
    }
    EXPECT_EQ(used.size(), 4u) << "two flows share a NAT port toward the same destination";
    EXPECT_EQ(r.svc(kWeb).port_alloc_failures, 0u);

    // A fifth flow toward the same server: no port left.
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40004, kServerV6, 53, text("q"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::port_exhausted), 1u);
    EXPECT_EQ(r.svc(kWeb).port_alloc_failures, 1u);
    EXPECT_EQ(r.sessions6().size(), 4u);
    // The same server on another port is another destination for endpoint-dependent NAT.
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40004, kServerV6, 54, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);

    // Another destination has its own ports.
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40004, kInternetV6, 53, text("q"))));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.dst6, kInternetV6);
    EXPECT_GE(p.sport, 2000);
    EXPECT_LE(p.sport, 2003);
    // So has another NAT address (the masquerade of a pod of no Service).
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kServerV6, 53, text("q"))));
    p = single(r.tx(r.ext1));
    EXPECT_EQ(p.src6, kExt1V6);
    EXPECT_EQ(r.default_counters().port_alloc_failures, 0u);

    // Existing flows are unaffected by the exhaustion.
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, *used.begin(), text("a"))));
    EXPECT_EQ(r.tx(r.pods).size(), 1u);
    EXPECT_EQ(r.drops(DropReason::port_exhausted), 1u);
    EXPECT_EQ(r.total_drops(), 1u);
    EXPECT_TRUE(r.sessions().empty());
}

TEST_F(DataplaneTest, Ipv6FreedPortIsReused) {
    using namespace v6;
    Rig& r = start(ports(2000, 2000));
    r.shared.timeouts.udp = 100;
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).sport, 2000);
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40000, kServerV6, 53, text("q"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::port_exhausted), 1u);
    r.advance(1000);
    r.sweep();
    ASSERT_TRUE(r.sessions6().empty());
    EXPECT_EQ(r.w().counters.sessions6_closed, 1u);
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40000, kServerV6, 53, text("q"))));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.sport, 2000);
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 2000, text("a"))));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], to_pod6(kPod11v6, udp6_ip(kServerV6, 53, kPod11v6, 40000, text("a"), Ip6Opt{63})))
        << "the reply went to the port's previous owner";
}

TEST_F(DataplaneTest, Ipv6DeletedServiceStopsTranslatingAtOnce) {
    using namespace v6;
    Rig& r = start(dual_stack());
    r.process(r.ext1, solicit(kIngressV6));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u) << "the ingress IP is not answered for to begin with";
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 80, kSyn)));
    ASSERT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);
    r.process(r.pods, from_pod6(kPod11v6, tcp6_ip(kPod11v6, 40001, kServerV6, 80, kSyn)));
    ASSERT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);

    r.publish({});  // the EgressService is gone

    // A reply to the old translation is not translated with stale addresses.
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 80, kIngressV6, 40000, kSyn | kAck)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 1u);

    // The next packet of the flow gets a new session under the new policy (default action).
    r.process(r.pods, from_pod6(kPod11v6, tcp6_ip(kPod11v6, 40001, kServerV6, 80, kAck)));
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv6, tcp6_ip(kExt1V6, 40001, kServerV6, 80, kAck, {}, Ip6Opt{63})));
    auto ss = r.sessions6();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].service_id, dp::kDefaultPolicyId);
    EXPECT_EQ(nat_ip(ss[0]), kExt1V6);

    // Replies to the old address and port, for either flow, are dropped.
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 80, kIngressV6, 40000, kAck)));
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 80, kIngressV6, 40001, kAck)));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 3u);
    // The new translation works.
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 80, kExt1V6, 40001, kAck)));
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], to_pod6(kPod11v6, tcp6_ip(kServerV6, 80, kPod11v6, 40001, kAck, {}, Ip6Opt{63})));
    // No Neighbor Advertisement for the old ingress IP any more.
    r.process(r.ext1, solicit(kIngressV6));
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

TEST_F(DataplaneTest, Ipv6LosingOneEndpointLeavesTheOthersSessionsAlone) {
    using namespace v6;
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 443, kSyn)));
    r.process(r.pods, from_pod6(kPod11v6, tcp6_ip(kPod11v6, 40001, kServerV6, 443, kSyn)));
    ASSERT_EQ(r.tx(r.ext1).size(), 2u);
    r.publish({web_with({kPod10v6})});

    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 443, kIngressV6, 40000, kPsh | kAck, text("push"))));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              to_pod6(kPod10v6, tcp6_ip(kServerV6, 443, kPod10v6, 40000, kPsh | kAck, text("push"), Ip6Opt{63})));
    // The pod that left the Service: its translation ends.
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 443, kIngressV6, 40001, kPsh | kAck, text("push"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session), 1u);

    r.sweep();
    auto ss = r.sessions6();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(pod_ip(ss[0]), kPod10v6);
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u);
    EXPECT_EQ(r.w().counters.sessions6_closed, 1u);
    // And it keeps working in both directions.
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 443, kAck)));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src6, kIngressV6);
    EXPECT_EQ(r.sessions6().size(), 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
}

TEST_F(DataplaneTest, Ipv6ExpirySweepReclaimsSessionsOfAChangedPolicy) {
    using namespace v6;
    Rig& r = start(dual_stack());
    for (uint16_t i = 0; i < 5; ++i)
        r.process(r.pods,
                  from_pod6(kPod10v6, udp6_ip(kPod10v6, static_cast<uint16_t>(40000 + i), kServerV6, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 5u);
    ASSERT_EQ(r.sessions6().size(), 5u);
    uint32_t id = r.service_id(kWeb);
    r.publish({});
    r.sweep();
    EXPECT_TRUE(r.sessions6().empty()) << "sessions of a deleted Service kept their ports";
    EXPECT_EQ(r.w().service_counters[id].sessions_closed, 5u);
    EXPECT_EQ(r.w().counters.sessions6_closed, 5u);
}

TEST_F(DataplaneTest, Ipv6ServiceMovedToAnotherGatewayStopsTranslating) {
    using namespace v6;
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);
    r.process(r.ext1, solicit(kIngressV6));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u) << "the ingress IP is not answered for to begin with";
    model::ServiceState moved = web6();
    moved.serve_here = false;
    moved.status_host = "gw-2";
    moved.reason = "served by gw-2";
    r.publish({moved});

    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text("a"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::stale_session) + r.drops(DropReason::no_session), 1u);
    // Its pods now take the default action here.
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src6, kExt1V6);
    // And the ingress IP is no longer answered for.
    r.process(r.ext1, solicit(kIngressV6));
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

// Both orders the two IPv4 tests above take: the Services as the rig starts with them and as a
// publication gives them; either way a pod of both leaves with the first by name.
TEST_F(DataplaneTest, Ipv6PodClaimedByTwoServicesGoesWithTheFirstByName) {
    using namespace v6;
    const Ip6Addr first = ip6("2001:db8:2::60"), second = ip6("2001:db8:2::61");
    for (bool at_start : {true, false}) {
        SCOPED_TRACE(at_start ? "services at start" : "services published");
        if (rig_) {
            rig_->drain_all();
            EXPECT_EQ(rig_->mbufs_in_use(), 0);
            rig_.reset();
        }
        std::vector<model::ServiceState> services = {lb6("a/first", ip4(192, 0, 2, 60), first, {kPod10v6}),
                                                     lb6("b/second", ip4(192, 0, 2, 61), second, {kPod10v6, kPod11v6})};
        RigOptions o = dual_stack();
        if (at_start) o.services = services;
        Rig& r = start(o);
        if (!at_start) r.publish(services);
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
        Parsed p = single(r.tx(r.ext1));
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.src6, first);
        r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40000, kServerV6, 53, text("q"))));
        p = single(r.tx(r.ext1));
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.src6, second);
        EXPECT_EQ(r.svc("a/first").sessions_created, 1u);
        EXPECT_EQ(r.svc("b/second").sessions_created, 1u);
    }
}

TEST_F(DataplaneTest, Ipv6PublicationWithTheSameRoutesKeepsTheSessionsCachedRoutes) {
    using namespace v6;
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text("a"))));
    ASSERT_EQ(r.tx(r.pods).size(), 1u);
    auto before = r.sessions6();
    ASSERT_EQ(before.size(), 1u);
    ASSERT_NE(before[0].in_port, dp::kPortUnset);

    // Another Service appears: a new snapshot with the same routes.
    r.publish({web6(), lb6("other/svc", ip4(192, 0, 2, 52), ip6("2001:db8:2::52"), {kPod20v6})});
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q2"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);
    auto after = r.sessions6();
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].in_port, before[0].in_port) << "the way back to the pod was forgotten";
    EXPECT_EQ(after[0].in_neighbor, before[0].in_neighbor);
    EXPECT_EQ(after[0].out_neighbor, before[0].out_neighbor);
    EXPECT_EQ(std::to_array(after[0].in_next_hop.b), std::to_array(before[0].in_next_hop.b));
    EXPECT_EQ(std::to_array(after[0].out_next_hop.b), std::to_array(before[0].out_next_hop.b));
    EXPECT_EQ(after[0].epoch, static_cast<uint32_t>(r.policy().generation)) << "checked again under the new snapshot";
    EXPECT_EQ(r.w().counters.sessions6_closed, 0u);
}

TEST_F(DataplaneTest, Ipv6PodJoiningAServiceLeavesTheDefaultTranslation) {
    using namespace v6;
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kServerV6, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src6, kExt1V6);
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40001, kServerV6, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);

    r.publish({web_with({kPod10v6, kPod11v6, kPod20v6})});

    // The next packet of the same flow leaves with the Service's ingress IP, not the old address.
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kServerV6, 53, text("q"))));
    auto out = single(r.tx(r.ext1));
    EXPECT_EQ(out.src6, kIngressV6);
    EXPECT_TRUE(checksums_valid(out));
    // The reply to the old masquerade address finds nothing to translate with.
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kExt1V6, 40000, text("a"))));
    EXPECT_TRUE(r.tx(r.pods).empty());
    // The reply to the new translation reaches the pod.
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text("a"))));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], to_pod6(kPod20v6, udp6_ip(kServerV6, 53, kPod20v6, 40000, text("a"), Ip6Opt{63})));
    EXPECT_EQ(r.svc(kWeb).sessions_created, 2u);
    EXPECT_EQ(r.default_counters().sessions_closed, 1u);
    EXPECT_EQ(r.sessions6().size(), 2u);
}

TEST_F(DataplaneTest, Ipv6DefaultSessionsOfOtherPodsSurviveAnEndpointAddition) {
    using namespace v6;
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kServerV6, 53, text("q"))));
    ASSERT_EQ(single(r.tx(r.ext1)).src6, kExt1V6);
    // Another pod (not kPod20v6) joins the Service.
    r.publish({web_with({kPod10v6, kPod11v6, ip6("fd00:10:244:1::12")})});
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kServerV6, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src6, kExt1V6);
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kExt1V6, 40000, text("a"))));
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], to_pod6(kPod20v6, udp6_ip(kServerV6, 53, kPod20v6, 40000, text("a"), Ip6Opt{63})));
    EXPECT_EQ(r.default_counters().sessions_created, 1u);
    EXPECT_EQ(r.default_counters().sessions_closed, 0u);
}

}  // namespace
}  // namespace egw::test
