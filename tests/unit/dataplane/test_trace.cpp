// SPDX-License-Identifier: Apache-2.0
//
// The packet trace (dataplane/trace.h) on the rig: which packets a worker takes, what each stage
// decided for them, their headers on the way in and out, the budget, and that stopping (or never
// starting) leaves the packets as they would have been.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "dataplane/burst.h"
#include "dataplane/trace.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;
using dp::Next;
using dp::ProfiledStage;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

// A trace of `limit` packets over the rig's workers, set up as the control thread does it.
struct RigTrace {
    RigTrace(Rig& r, const dp::TraceMatch& m, uint32_t limit) : rig(r) {
        shared.match = m;
        shared.limit = limit;
        for (dp::Worker* w : r.workers) {
            storage.push_back(std::make_unique<dp::TracePacket[]>(limit));
            auto b = std::make_unique<dp::TraceBuffer>();
            b->shared = &shared;
            b->capacity = limit;
            b->packets = storage.back().get();
            w->trace.store(b.get(), std::memory_order_release);
            buffers.push_back(std::move(b));
        }
    }
    ~RigTrace() { stop(); }
    void stop() {
        for (dp::Worker* w : rig.workers)
            w->trace.store(nullptr, std::memory_order_release);
    }
    uint32_t published(unsigned worker = 0) const {
        return buffers.at(worker)->published.load(std::memory_order_acquire);
    }
    const dp::TracePacket& packet(unsigned k, unsigned worker = 0) const {
        EXPECT_LT(k, published(worker));
        return buffers.at(worker)->packets[k];
    }

    Rig& rig;
    dp::TraceShared shared;
    std::vector<std::unique_ptr<dp::TracePacket[]>> storage;
    std::vector<std::unique_ptr<dp::TraceBuffer>> buffers;
};

uint32_t addr_of(const uint8_t* a) {
    return uint32_t{a[0]} << 24 | uint32_t{a[1]} << 16 | uint32_t{a[2]} << 8 | a[3];
}

std::vector<ProfiledStage> stages_of(const dp::TracePacket& p) {
    std::vector<ProfiledStage> s;
    for (unsigned k = 0; k < p.n_steps; ++k)
        s.push_back(static_cast<ProfiledStage>(p.steps[k].stage));
    return s;
}

Next next_of(const dp::TraceStep& s) {
    return static_cast<Next>(s.next);
}

dp::TraceMatch every_packet() {
    return {};
}

// A new flow of a pod: input -> nat_lookup (no session) -> nat_slow (session created, NAT
// address and port, port and next hop) -> output, queued; the headers after carry the NAT source
// and the next hop's MAC, the headers before are the pod's.
TEST_F(DataplaneTest, TraceShowsATranslatedPacketStageByStage) {
    Rig& r = start();
    RigTrace t(r, every_packet(), 10);
    Bytes out_ip = udp_ip(kPod10, 40000, kServer, 53, text("query"), IpOpt{.ttl = 64});
    Bytes frame = r.from_pod(kPod10, out_ip);
    r.process(r.pods, frame);
    auto sent = r.tx(r.ext1);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                udp_ip(kIngress, 40000, kServer, 53, text("query"), IpOpt{.ttl = 63})))
        << "tracing does not change the packet";

    ASSERT_EQ(t.published(), 1u);
    const dp::TracePacket& p = t.packet(0);
    EXPECT_EQ(p.rx_port, r.pods);
    EXPECT_EQ(p.frame_len, frame.size());
    EXPECT_EQ(stages_of(p), (std::vector<ProfiledStage>{ProfiledStage::input, ProfiledStage::nat_lookup,
                                                        ProfiledStage::nat_slow, ProfiledStage::output}));
    EXPECT_EQ(next_of(p.steps[0]), Next::nat_lookup);
    EXPECT_EQ(next_of(p.steps[1]), Next::nat_slow);
    EXPECT_EQ(p.steps[1].session, dp::SessionTable::kNone);
    EXPECT_EQ(p.steps[1].session_change, static_cast<uint8_t>(dp::TraceSession::none));
    const dp::TraceStep& slow = p.steps[2];
    EXPECT_EQ(next_of(slow), Next::output);
    EXPECT_EQ(slow.session_change, static_cast<uint8_t>(dp::TraceSession::created));
    EXPECT_NE(slow.session, dp::SessionTable::kNone);
    EXPECT_EQ(slow.out_port, r.ext1);
    EXPECT_EQ(addr_of(slow.next_hop), kServer);
    ASSERT_TRUE(slow.has_tuple);
    EXPECT_EQ(addr_of(slow.src), kIngress) << "the NAT address";
    EXPECT_EQ(slow.sport, 40000) << "the NAT port";
    EXPECT_EQ(addr_of(slow.dst), kServer);
    EXPECT_EQ(slow.ttl, 63);
    EXPECT_EQ(next_of(p.steps[3]), Next::output);
    EXPECT_EQ(p.outcome, static_cast<uint8_t>(dp::TraceOutcome::queued));

    dp::FrameSummary before = dp::summarize_frame(p.before, p.before_len);
    EXPECT_EQ(p.before_len, frame.size()) << "a short frame is kept whole";
    EXPECT_EQ(Bytes(p.before, p.before + p.before_len), frame);
    EXPECT_EQ(addr_of(before.src), kPod10);
    EXPECT_EQ(before.ttl, 64);
    dp::FrameSummary after = dp::summarize_frame(p.after, p.after_len);
    EXPECT_EQ(Bytes(p.after, p.after + p.after_len), sent[0]) << "the frame as it left";
    EXPECT_EQ(addr_of(after.src), kIngress);
    EXPECT_EQ(after.sport, 40000);
    Mac dst_mac;
    std::copy(after.dst_mac, after.dst_mac + 6, dst_mac.begin());
    EXPECT_EQ(dst_mac, kServerMac);

    // The next packet of the flow finds its session: input -> nat_lookup (found) -> nat_fast.
    r.process(r.pods, frame);
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    ASSERT_EQ(t.published(), 2u);
    const dp::TracePacket& q = t.packet(1);
    EXPECT_EQ(stages_of(q), (std::vector<ProfiledStage>{ProfiledStage::input, ProfiledStage::nat_lookup,
                                                        ProfiledStage::nat_fast, ProfiledStage::output}));
    EXPECT_EQ(q.steps[1].session_change, static_cast<uint8_t>(dp::TraceSession::found));
    EXPECT_EQ(q.steps[1].session, slow.session);
    EXPECT_EQ(q.steps[2].out_port, r.ext1);
    EXPECT_EQ(addr_of(q.steps[2].src), kIngress);
}

// TTL 1: the stage that refuses it says why and which ICMP error answers it; icmp_reply builds
// it, and the headers after are that error's, back toward the pod.
TEST_F(DataplaneTest, TraceShowsTheDropReasonAndTheIcmpErrorGenerated) {
    Rig& r = start();
    RigTrace t(r, every_packet(), 10);
    Bytes probe = udp_ip(kPod10, 33434, kServer, 33435, text("probe"), IpOpt{.ttl = 1});
    r.process(r.pods, r.from_pod(kPod10, probe));
    ASSERT_EQ(r.tx(r.pods).size(), 1u);
    ASSERT_EQ(t.published(), 1u);
    const dp::TracePacket& p = t.packet(0);
    ASSERT_GE(p.n_steps, 3u);
    const dp::TraceStep* refused = nullptr;
    for (unsigned k = 0; k < p.n_steps; ++k)
        if (next_of(p.steps[k]) == Next::icmp_reply) refused = &p.steps[k];
    ASSERT_NE(refused, nullptr) << "a stage sends it to icmp_reply";
    EXPECT_EQ(refused->reason, static_cast<uint8_t>(DropReason::ttl_exceeded));
    EXPECT_EQ(refused->icmp, static_cast<uint8_t>(dp::IcmpError::time_exceeded));
    const dp::TraceStep& reply = p.steps[p.n_steps - 2];
    EXPECT_EQ(static_cast<ProfiledStage>(reply.stage), ProfiledStage::icmp_reply);
    EXPECT_EQ(next_of(reply), Next::transmit) << "a finished frame";
    EXPECT_EQ(reply.out_port, r.pods);
    EXPECT_EQ(addr_of(reply.src), kPodsAddr);
    EXPECT_EQ(addr_of(reply.dst), kPod10);
    EXPECT_EQ(p.outcome, static_cast<uint8_t>(dp::TraceOutcome::queued));
    dp::FrameSummary after = dp::summarize_frame(p.after, p.after_len);
    EXPECT_EQ(after.proto, 1);
    EXPECT_EQ(after.icmp_type, 11);
    EXPECT_EQ(addr_of(after.dst), kPod10);
    EXPECT_TRUE(r.sessions().empty());
}

// A next hop with no MAC yet: output gives the packet to the control thread, and the trace says
// so (the headers after are those it reached output with: translated, Ethernet not yet written).
TEST_F(DataplaneTest, TraceSaysAPacketIsHeldForItsNextHop) {
    Rig& r = start();
    RigTrace t(r, every_packet(), 10);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kUnresolved, 53)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto held = r.to_control();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].next_hop, kUnresolved);
    ASSERT_EQ(t.published(), 1u);
    const dp::TracePacket& p = t.packet(0);
    EXPECT_EQ(p.outcome, static_cast<uint8_t>(dp::TraceOutcome::held));
    EXPECT_EQ(addr_of(p.steps[2].next_hop), kUnresolved);
    dp::FrameSummary after = dp::summarize_frame(p.after, p.after_len);
    EXPECT_EQ(addr_of(after.src), kIngress);
}

// A frame input refuses: the drop at input with its reason, dropped by output, no headers but
// those it came with.
TEST_F(DataplaneTest, TraceShowsADropAtTheStageThatDecidedIt) {
    Rig& r = start();
    RigTrace t(r, every_packet(), 10);
    Bytes bad = udp_ip(kPod10, 40000, kServer, 53);
    bad[10] ^= 0xff;  // the IPv4 header checksum
    r.process(r.pods, r.from_pod(kPod10, bad));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::malformed), 1u);
    ASSERT_EQ(t.published(), 1u);
    const dp::TracePacket& p = t.packet(0);
    EXPECT_EQ(stages_of(p), (std::vector<ProfiledStage>{ProfiledStage::input, ProfiledStage::output}));
    EXPECT_EQ(next_of(p.steps[0]), Next::drop);
    EXPECT_EQ(p.steps[0].reason, static_cast<uint8_t>(DropReason::malformed));
    EXPECT_EQ(next_of(p.steps[1]), Next::drop);
    EXPECT_EQ(p.outcome, static_cast<uint8_t>(dp::TraceOutcome::dropped));
    EXPECT_EQ(r.mbufs_in_use(), 0);
}

// The filter picks only matching packets; others of the same bursts go by untraced.
TEST_F(DataplaneTest, TraceTakesOnlyPacketsThatMatch) {
    Rig& r = start();
    dp::TraceMatch m;
    m.by_daddr = true;
    put32(m.daddr, kServerB);
    m.proto = 17;
    m.by_dport = true;
    m.dport = 53;
    RigTrace t(r, m, 10);
    r.process(0, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53))},
                  {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40001, kServerB, 53))},
                  {r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40002, kServerB, 53, kSyn))},
                  {r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40003, kServerB, 54))},
                  {r.pods, r.from_pod(kPod11, udp_ip(kPod11, 40004, kServerB, 53))}});
    EXPECT_EQ(r.tx(r.ext1).size(), 5u);
    ASSERT_EQ(t.published(), 2u);
    dp::FrameSummary a = dp::summarize_frame(t.packet(0).before, t.packet(0).before_len);
    dp::FrameSummary b = dp::summarize_frame(t.packet(1).before, t.packet(1).before_len);
    EXPECT_EQ(a.sport, 40001);
    EXPECT_EQ(b.sport, 40004);

    // By receiving port, and by source: a reply from outside only.
    dp::TraceMatch by_port;
    by_port.by_port = true;
    by_port.port = r.ext1;
    by_port.by_saddr = true;
    put32(by_port.saddr, kServerB);
    RigTrace u(r, by_port, 10);
    r.process(0, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40001, kServerB, 53))},
                  {r.ext1, r.from_ext1(udp_ip(kServerB, 53, kIngress, 40001), kServerBMac)},
                  {r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 40000))}});
    ASSERT_EQ(u.published(), 1u);
    EXPECT_EQ(u.packet(0).rx_port, r.ext1);
    EXPECT_EQ(addr_of(dp::summarize_frame(u.packet(0).before, u.packet(0).before_len).src), kServerB);
    EXPECT_EQ(t.published(), 2u) << "the earlier trace's buffer is no longer the worker's";
}

// N bounds the trace: the packets after the Nth go untraced, and stopping takes no more.
TEST_F(DataplaneTest, TraceStopsAfterNPacketsAndOnStop) {
    Rig& r = start();
    RigTrace t(r, every_packet(), 3);
    std::vector<In> burst;
    for (uint16_t k = 0; k < 5; ++k)
        burst.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(41000 + k), kServer, 53))});
    r.process(0, burst);
    EXPECT_EQ(r.tx(r.ext1).size(), 5u);
    ASSERT_EQ(t.published(), 3u);
    for (unsigned k = 0; k < 3; ++k)
        EXPECT_EQ(dp::summarize_frame(t.packet(k).before, t.packet(k).before_len).sport, 41000 + k);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 41009, kServer, 53)));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(t.published(), 3u);

    RigTrace s(r, every_packet(), 10);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 41010, kServer, 53)));
    EXPECT_EQ(s.published(), 1u);
    s.stop();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 41011, kServer, 53)));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    EXPECT_EQ(s.published(), 1u) << "stopped";
}

// IPv6 (NAPT66) and a packet handed to the worker that owns it.
TEST_F(DataplaneTest, TraceFollowsIpv6AndHandOffs) {
    RigOptions o = std_rig6::dual_stack();
    o.workers = 2;
    Rig& r = start(o);
    r.own_flows_from_inside_on(1);
    RigTrace t(r, every_packet(), 10);
    Bytes out = udp6_ip(std_rig6::kPod10v6, 40000, std_rig6::kServerV6, 53, text("q6"));
    r.process(0, {{r.pods, std_rig6::from_pod6(std_rig6::kPod10v6, out)}});
    ASSERT_EQ(t.published(0), 1u);
    const dp::TracePacket& p = t.packet(0, 0);
    EXPECT_EQ(stages_of(p), (std::vector<ProfiledStage>{ProfiledStage::input, ProfiledStage::handoff}));
    EXPECT_EQ(next_of(p.steps[0]), Next::handoff);
    EXPECT_EQ(p.steps[0].owner, 1u);
    EXPECT_EQ(p.outcome, static_cast<uint8_t>(dp::TraceOutcome::handed_off));
    r.poll(1);
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    ASSERT_EQ(t.published(1), 1u);
    const dp::TracePacket& q = t.packet(0, 1);
    EXPECT_EQ(stages_of(q), (std::vector<ProfiledStage>{ProfiledStage::input, ProfiledStage::nat_lookup,
                                                        ProfiledStage::nat_slow, ProfiledStage::output}));
    const dp::TraceStep& slow = q.steps[2];
    EXPECT_TRUE(slow.v6);
    EXPECT_EQ(slow.session_change, static_cast<uint8_t>(dp::TraceSession::created));
    Ip6Addr nat;
    std::copy(slow.src, slow.src + 16, nat.begin());
    EXPECT_EQ(nat, std_rig6::kIngressV6) << "the NAT66 address";
    EXPECT_EQ(q.outcome, static_cast<uint8_t>(dp::TraceOutcome::queued));
    EXPECT_EQ(t.shared.taken.load(), 2u) << "each worker's view of the packet counts against N";
}

}  // namespace
}  // namespace egw::test
