// SPDX-License-Identifier: Apache-2.0
//
// TCP tracking (dataplane/tcp_track.h): the states that pick a session's timeout, and which RSTs
// are honoured. Segments carry real sequence numbers here; verdicts, sessions and counters are
// checked after each. Every test runs for IPv4 (NAPT44) and IPv6 (NAPT66, the dual-stack rig), one
// rig each: the tracking is the same code over both session tables.
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
    bool v6 = false;

    Bytes segment(bool out, uint8_t flags, uint32_t seq, uint32_t ack, const Bytes& data, uint16_t nat) {
        if (v6) {
            Bytes t = out ? tcp6_ip(std_rig6::kPod10v6, pod_port, std_rig6::kServerV6, 80, flags, data)
                          : tcp6_ip(std_rig6::kServerV6, 80, std_rig6::kIngressV6, nat, flags, data);
            // tcp6_ip numbers its segments 1000/0: set these and sum again.
            put32(&t[40 + 4], seq);
            put32(&t[40 + 8], ack);
            t[40 + 16] = t[40 + 17] = 0;
            Ip6Addr src, dst;
            std::copy(t.begin() + 8, t.begin() + 24, src.begin());
            std::copy(t.begin() + 24, t.begin() + 40, dst.begin());
            uint32_t len = static_cast<uint32_t>(t.size() - 40);
            put16(&t[40 + 16], finish(sum16(&t[40], len, pseudo_sum6(src, dst, kProtoTcp, len))));
            return out ? std_rig6::from_pod6(std_rig6::kPod10v6, t) : std_rig6::from_ext1_6(t);
        }
        return out ? r.from_pod(kPod10, ipv4(kPod10, kServer, kProtoTcp,
                                             tcp_segment(kPod10, kServer, pod_port, 80, flags, data, seq, ack)))
                   : r.from_ext1(ipv4(kServer, kIngress, kProtoTcp,
                                      tcp_segment(kServer, kIngress, 80, nat, flags, data, seq, ack)));
    }
    // A segment from the pod; returns how many frames left the outside port.
    size_t out(uint8_t flags, uint32_t seq, uint32_t ack, size_t payload = 0) {
        r.process(r.pods, segment(true, flags, seq, ack, Bytes(payload, 'x'), 0));
        auto frames = r.tx(r.ext1);
        for (const Bytes& f : frames)
            EXPECT_TRUE(checksums_valid(parse_frame(f)));
        return frames.size();
    }
    // A segment from the server to the session's NAT port; returns how many frames reached the pod.
    size_t in(uint8_t flags, uint32_t seq, uint32_t ack, size_t payload = 0) {
        r.process(r.ext1, segment(false, flags, seq, ack, Bytes(payload, 'y'), nat_port()));
        auto frames = r.tx(r.pods);
        for (const Bytes& f : frames) {
            Parsed p = parse_frame(f);
            EXPECT_TRUE(checksums_valid(p));
            EXPECT_EQ(p.seq, seq);
            EXPECT_EQ(p.tcp_flags, flags);
        }
        return frames.size();
    }
    // The session of pod_port: whether there is one, its NAT port (host order) and TCP state.
    bool find(uint16_t& nat, uint8_t& seen) {
        auto match = [&](const auto& sessions) {
            for (const auto& s : sessions)
                if (rte_be_to_cpu_16(s.pod_port) == pod_port) {
                    nat = rte_be_to_cpu_16(s.nat_port);
                    seen = s.tcp_seen;
                    return true;
                }
            return false;
        };
        return v6 ? match(r.sessions6()) : match(r.sessions());
    }
    bool exists() {
        uint16_t nat;
        uint8_t seen;
        return find(nat, seen);
    }
    uint16_t nat_port() {
        uint16_t nat = pod_port;
        uint8_t seen;
        find(nat, seen);
        return nat;
    }
    uint8_t state() {
        uint16_t nat;
        uint8_t seen = 0xff;
        return find(nat, seen) ? seen : 0xff;
    }
};

// Both families: the test body runs once on an IPv4 rig and once on a dual-stack one with IPv6
// segments.
class TcpTest : public DataplaneTest {
protected:
    template <typename Body>
    void each_family(Body body) {
        for (bool v6 : {false, true}) {
            SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
            if (rig_) {
                rig_->drain_all();
                EXPECT_EQ(rig_->mbufs_in_use(), 0);
                rig_.reset();
            }
            RigOptions o;
            if (v6) o = std_rig6::dual_stack();
            Rig& r = start(o);
            r.shared.timeouts.tcp_transitory = kTransitory;
            r.shared.timeouts.tcp_half_closed = kHalfClosed;
            r.shared.timeouts.tcp_established = kEstablished;
            body(r, v6);
        }
    }
};

// A SYN that is never answered leaves a half-open session, which ends at the transitory timeout;
// its Service counts the create and the close, the IPv6 one also as an IPv6 session (the IPv6
// twin of test_nat.cpp's TcpHalfOpenSessionUsesTransitoryTimeout).
TEST_F(TcpTest, TcpHalfOpenSessionEndsAtTheTransitoryTimeout) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40010, v6};
        EXPECT_EQ(c.out(kSyn, 1000, 0), 1u);
        EXPECT_EQ(c.state(), dp::kTcpSeenInside);
        r.advance(kTransitory / 2);
        r.sweep();
        ASSERT_TRUE(c.exists()) << "expired before the transitory timeout";
        r.advance(kTransitory);
        r.sweep();
        EXPECT_FALSE(c.exists()) << "a half-open session outlived the transitory timeout";
        EXPECT_EQ(r.w().counters.sessions_created, 1u);
        EXPECT_EQ(r.w().counters.sessions6_created, v6 ? 1u : 0u);
        EXPECT_EQ(r.w().counters.sessions_expired, 1u);
        EXPECT_EQ(r.w().counters.sessions_closed, 1u);
        EXPECT_EQ(r.svc(kWeb).sessions_created, 1u);
        EXPECT_EQ(r.svc(kWeb).sessions6_created, v6 ? 1u : 0u);
        EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u);
        EXPECT_EQ(r.total_drops(), 0u);
    });
}

// Once both sides have been seen the session is established and idles at the established
// timeout, not the transitory one; a close by both FINs brings the transitory one back (the IPv6
// twin of test_nat.cpp's TcpSessionStateFollowsHandshakeAndClose).
TEST_F(TcpTest, TcpEstablishedSessionOutlivesTheTransitoryTimeout) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40011, v6};
        EXPECT_EQ(c.out(kSyn, 1000, 0), 1u);
        EXPECT_EQ(c.in(kSyn | kAck, 5000, 1001), 1u);
        EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpSeenOutside);
        EXPECT_EQ(c.out(kAck, 1001, 5001), 1u);
        r.advance(kTransitory * 5);
        r.sweep();
        ASSERT_TRUE(c.exists()) << "an established session used the transitory timeout";
        EXPECT_EQ(r.w().counters.sessions_expired, 0u);
        EXPECT_EQ(c.out(kFin | kAck, 1001, 5001), 1u);
        EXPECT_EQ(c.in(kFin | kAck, 5001, 1002), 1u);
        EXPECT_EQ(c.state(),
                  dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinInside | dp::kTcpFinOutside | dp::kTcpClosing);
        r.advance(kTransitory * 2);
        r.sweep();
        EXPECT_FALSE(c.exists()) << "a closing session outlived the transitory timeout";
        EXPECT_EQ(r.w().counters.sessions_expired, 1u);
        EXPECT_EQ(r.svc(kWeb).sessions_closed, 1u);
        EXPECT_EQ(r.total_drops(), 0u);
    });
}

// A handshake, data both ways, then the pod's FIN: half-closed, which outlives the transitory
// timeout (the server may go on sending) and ends at the half-closed one; with both FINs the
// session is closing and the transitory timeout applies.
TEST_F(TcpTest, TcpHalfClosedUntilBothFinsThenClosing) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40000, v6};
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
        ASSERT_TRUE(c.exists()) << "a half-closed session used the transitory timeout";

        EXPECT_EQ(c.in(kFin | kAck, 5501, 1002), 1u);
        EXPECT_EQ(c.state(),
                  dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinInside | dp::kTcpFinOutside | dp::kTcpClosing);
        EXPECT_EQ(c.out(kAck, 1002, 5502), 1u);
        r.advance(kTransitory / 2);
        r.sweep();
        ASSERT_TRUE(c.exists());
        r.advance(kTransitory);
        r.sweep();
        EXPECT_FALSE(c.exists()) << "a closing session outlived the transitory timeout";
        EXPECT_EQ(r.w().counters.sessions_expired, 1u);
        EXPECT_EQ(r.total_drops(), 0u);
    });
}

// One FIN and then silence: the half-closed timeout, not the established one, ends it.
TEST_F(TcpTest, TcpHalfClosedSessionExpiresAtItsOwnTimeout) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40001, v6};
        c.out(kSyn, 1000, 0);
        c.in(kSyn | kAck, 5000, 1001);
        c.out(kAck, 1001, 5001);
        EXPECT_EQ(c.in(kFin | kAck, 5001, 1001), 1u);
        EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpSeenOutside | dp::kTcpFinOutside);
        r.advance(kHalfClosed / 2);
        r.sweep();
        ASSERT_TRUE(c.exists());
        r.advance(kHalfClosed);
        r.sweep();
        EXPECT_FALSE(c.exists()) << "a half-closed session outlived its timeout";
        EXPECT_EQ(r.w().counters.sessions_expired, 1u);
    });
}

// An RST from outside is honoured only when its sequence number is within the pod's window of
// where the server has got to; a blind one is dropped and counted, and the session stays as it
// was. The same holds for the pod's side.
TEST_F(TcpTest, TcpRstOutsideTheWindowIsDroppedAndCounted) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40002, v6};
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
        EXPECT_FALSE(c.exists());
    });
}

// A server that refuses a connection answers the SYN with an RST that acknowledges it (RFC 793):
// honoured. One that acknowledges anything else is not.
TEST_F(TcpTest, TcpRstAnsweringTheSynMustAcknowledgeIt) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40003, v6};
        EXPECT_EQ(c.out(kSyn, 7000, 0), 1u);
        EXPECT_EQ(c.in(kRst | kAck, 0, 7005), 0u);
        EXPECT_EQ(c.in(kRst, 0, 0), 0u);
        EXPECT_EQ(r.drops(DropReason::tcp_rst_out_of_window), 2u);
        EXPECT_EQ(c.state(), dp::kTcpSeenInside);
        EXPECT_EQ(c.in(kRst | kAck, 0, 7001), 1u);
        EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpClosing);
    });
}

// A session opened mid-stream (loose mode; say egwd restarted): the pod's acknowledgement says
// where the server has got to, so the server's RST, which a stack that lost the connection sends
// with the sequence number the pod acknowledged, is honoured. The pod's window scale was never
// seen, so the largest (14) is assumed: its window is 64,240 << 14, about 2^30, and only an RST
// beyond that is refused.
TEST_F(TcpTest, TcpRstOfASessionOpenedMidStreamIsCheckedAgainstThePodsAck) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40004, v6};
        EXPECT_EQ(c.out(kPsh | kAck, 3000, 9000, 10), 1u);
        EXPECT_EQ(c.in(kRst, 9000u + 0x48000000u, 0), 0u);
        EXPECT_EQ(r.drops(DropReason::tcp_rst_out_of_window), 1u);
        EXPECT_EQ(c.in(kRst, 9000, 0), 1u);
        EXPECT_EQ(c.state(), dp::kTcpSeenInside | dp::kTcpClosing);
    });
}

// A new SYN from the pod on a closing session starts it over: the old sequence space is
// forgotten, so the new connection's RST is judged against the new one.
TEST_F(TcpTest, TcpSynReusingAClosedSessionStartsItOver) {
    each_family([&](Rig& r, bool v6) {
        Tcp c{r, 40005, v6};
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
    });
}

}  // namespace
}  // namespace egw::test
