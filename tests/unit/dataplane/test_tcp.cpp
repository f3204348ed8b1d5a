// SPDX-License-Identifier: Apache-2.0
//
// TCP tracking (dataplane/tcp_track.h): the states that pick a session's timeout, and which RSTs
// are honoured. Segments carry real sequence numbers here; verdicts, sessions and counters are
// checked after each.
#include <gtest/gtest.h>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

constexpr uint64_t kTransitory = 1000, kHalfClosed = 100000, kEstablished = 10000000;

struct Tcp {
    Rig& r;
    uint16_t pod_port;

    // A segment from the pod; returns how many frames left the outside port.
    size_t out(uint8_t flags, uint32_t seq, uint32_t ack, size_t payload = 0) {
        Bytes data(payload, 'x');
        r.process(r.pods, r.from_pod(kPod10, ipv4(kPod10, kServer, kProtoTcp,
                                                  tcp_segment(kPod10, kServer, pod_port, 80, flags, data, seq, ack))));
        auto frames = r.tx(r.ext1);
        for (const Bytes& f : frames)
            EXPECT_TRUE(checksums_valid(parse_frame(f)));
        return frames.size();
    }
    // A segment from the server to the session's NAT port; returns how many frames reached the pod.
    size_t in(uint8_t flags, uint32_t seq, uint32_t ack, size_t payload = 0) {
        Bytes data(payload, 'y');
        uint16_t nat = nat_port();
        r.process(r.ext1, r.from_ext1(ipv4(kServer, kIngress, kProtoTcp,
                                           tcp_segment(kServer, kIngress, 80, nat, flags, data, seq, ack))));
        auto frames = r.tx(r.pods);
        for (const Bytes& f : frames) {
            Parsed p = parse_frame(f);
            EXPECT_TRUE(checksums_valid(p));
            EXPECT_EQ(p.seq, seq);
            EXPECT_EQ(p.tcp_flags, flags);
        }
        return frames.size();
    }
    const dp::Session* session() {
        for (const auto& s : r.sessions())
            if (rte_be_to_cpu_16(s.pod_port) == pod_port) {
                last = s;
                return &last;
            }
        return nullptr;
    }
    uint16_t nat_port() {
        const dp::Session* s = session();
        return s ? rte_be_to_cpu_16(s->nat_port) : pod_port;
    }
    uint8_t state() {
        const dp::Session* s = session();
        return s ? s->tcp_seen : 0xff;
    }
    dp::Session last{};
};

Rig& with_tcp_timeouts(Rig& r) {
    r.shared.timeouts.tcp_transitory = kTransitory;
    r.shared.timeouts.tcp_half_closed = kHalfClosed;
    r.shared.timeouts.tcp_established = kEstablished;
    return r;
}

// A handshake, data both ways, then the pod's FIN: half-closed, which outlives the transitory
// timeout (the server may go on sending) and ends at the half-closed one; with both FINs the
// session is closing and the transitory timeout applies.
TEST_F(DataplaneTest, TcpHalfClosedUntilBothFinsThenClosing) {
    Rig& r = with_tcp_timeouts(start());
    Tcp c{r, 40000};
    EXPECT_EQ(c.out(kSyn, 1000, 0), 1u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside);
    EXPECT_EQ(c.in(kSyn | kAck, 5000, 1001), 1u);
    EXPECT_EQ(c.out(kAck, 1001, 5001), 1u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpSeenOutside);

    EXPECT_EQ(c.out(kFin | kAck, 1001, 5001), 1u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinInside);
    // The server keeps sending into the half-closed connection.
    EXPECT_EQ(c.in(kPsh | kAck, 5001, 1002, 500), 1u);
    r.advance(kTransitory * 10);
    r.sweep();
    ASSERT_NE(c.session(), nullptr) << "a half-closed session used the transitory timeout";

    EXPECT_EQ(c.in(kFin | kAck, 5501, 1002), 1u);
    EXPECT_EQ(c.state(),
              dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinInside | dp::kTcpFinOutside | dp::kTcpClosing);
    EXPECT_EQ(c.out(kAck, 1002, 5502), 1u);
    r.advance(kTransitory / 2);
    r.sweep();
    ASSERT_NE(c.session(), nullptr);
    r.advance(kTransitory);
    r.sweep();
    EXPECT_EQ(c.session(), nullptr) << "a closing session outlived the transitory timeout";
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// One FIN and then silence: the half-closed timeout, not the established one, ends it.
TEST_F(DataplaneTest, TcpHalfClosedSessionExpiresAtItsOwnTimeout) {
    Rig& r = with_tcp_timeouts(start());
    Tcp c{r, 40001};
    c.out(kSyn, 1000, 0);
    c.in(kSyn | kAck, 5000, 1001);
    c.out(kAck, 1001, 5001);
    EXPECT_EQ(c.in(kFin | kAck, 5001, 1001), 1u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinOutside);
    r.advance(kHalfClosed / 2);
    r.sweep();
    ASSERT_NE(c.session(), nullptr);
    r.advance(kHalfClosed);
    r.sweep();
    EXPECT_EQ(c.session(), nullptr) << "a half-closed session outlived its timeout";
    EXPECT_EQ(r.w().counters.sessions_expired, 1u);
}

// An RST from outside is honoured only when its sequence number is within the pod's window of
// where the server has got to; a blind one is dropped and counted, and the session stays as it
// was. The same holds for the pod's side.
TEST_F(DataplaneTest, TcpRstOutsideTheWindowIsDroppedAndCounted) {
    Rig& r = with_tcp_timeouts(start());
    Tcp c{r, 40002};
    c.out(kSyn, 1000, 0);
    c.in(kSyn | kAck, 5000, 1001);
    c.out(kAck, 1001, 5001);
    EXPECT_EQ(c.out(kPsh | kAck, 1001, 5001, 100), 1u);
    EXPECT_EQ(c.in(kPsh | kAck, 5001, 1101, 200), 1u);
    const uint8_t established = dp::kTcpSeenInside | dp::kTcpSeenOutside;
    ASSERT_EQ(c.state(), established);

    // The window both sides offered is 64,240 (no scaling: the SYNs carried no option).
    for (uint32_t seq : {5201u + 64241u, 5201u + 1000000u, 5201u - 64241u, 0x80000000u}) {
        EXPECT_EQ(c.in(kRst, seq, 0), 0u) << "seq " << seq;
        EXPECT_EQ(c.in(kRst | kAck, seq, 1101), 0u) << "seq " << seq;
    }
    EXPECT_EQ(r.drops(DropReason::tcp_rst_out_of_window), 8u);
    EXPECT_EQ(c.state(), established);
    EXPECT_EQ(r.total_drops(), 8u);
    // The pod's side: a reset far from where the pod has got to.
    EXPECT_EQ(c.out(kRst, 1101 + 70000, 0), 0u);
    EXPECT_EQ(r.drops(DropReason::tcp_rst_out_of_window), 9u);
    EXPECT_EQ(c.state(), established);

    // The server's own reset, at the end of what it sent (or inside the window): honoured.
    EXPECT_EQ(c.in(kRst, 5201 + 30000, 0), 1u);
    EXPECT_EQ(c.state(), established | dp::kTcpClosing);
    EXPECT_EQ(r.drops(DropReason::tcp_rst_out_of_window), 9u);
    r.advance(kTransitory * 2);
    r.sweep();
    EXPECT_EQ(c.session(), nullptr);
}

// A server that refuses a connection answers the SYN with an RST that acknowledges it (RFC 793):
// honoured. One that acknowledges anything else is not.
TEST_F(DataplaneTest, TcpRstAnsweringTheSynMustAcknowledgeIt) {
    Rig& r = with_tcp_timeouts(start());
    Tcp c{r, 40003};
    EXPECT_EQ(c.out(kSyn, 7000, 0), 1u);
    EXPECT_EQ(c.in(kRst | kAck, 0, 7005), 0u);
    EXPECT_EQ(c.in(kRst, 0, 0), 0u);
    EXPECT_EQ(r.drops(DropReason::tcp_rst_out_of_window), 2u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside);
    EXPECT_EQ(c.in(kRst | kAck, 0, 7001), 1u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpClosing);
}

// A session opened mid-stream (loose mode; say egwd restarted): the pod's acknowledgement says
// where the server has got to, so the server's RST, which a stack that lost the connection sends
// with the sequence number the pod acknowledged, is honoured. The pod's window scale was never
// seen, so the largest (14) is assumed: its window is 64,240 << 14, about 2^30, and only an RST
// beyond that is refused.
TEST_F(DataplaneTest, TcpRstOfASessionOpenedMidStreamIsCheckedAgainstThePodsAck) {
    Rig& r = with_tcp_timeouts(start());
    Tcp c{r, 40004};
    EXPECT_EQ(c.out(kPsh | kAck, 3000, 9000, 10), 1u);
    EXPECT_EQ(c.in(kRst, 9000u + 0x48000000u, 0), 0u);
    EXPECT_EQ(r.drops(DropReason::tcp_rst_out_of_window), 1u);
    EXPECT_EQ(c.in(kRst, 9000, 0), 1u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpClosing);
}

// A new SYN from the pod on a closing session starts it over: the old sequence space is
// forgotten, so the new connection's RST is judged against the new one.
TEST_F(DataplaneTest, TcpSynReusingAClosedSessionStartsItOver) {
    Rig& r = with_tcp_timeouts(start());
    Tcp c{r, 40005};
    c.out(kSyn, 1000, 0);
    c.in(kSyn | kAck, 5000, 1001);
    c.out(kAck, 1001, 5001);
    c.out(kFin | kAck, 1001, 5001);
    c.in(kFin | kAck, 5001, 1002);
    ASSERT_TRUE(c.state() & dp::kTcpClosing);
    EXPECT_EQ(c.out(kSyn, 800000000, 0), 1u);
    EXPECT_EQ(c.state(), dp::kTcpSeenInside);
    EXPECT_EQ(c.in(kRst | kAck, 0, 1002), 0u) << "judged against the old connection";
    EXPECT_EQ(c.in(kRst | kAck, 0, 800000001), 1u);
    EXPECT_EQ(r.w().counters.sessions_created, 1u);
}

}  // namespace
}  // namespace egw::test
