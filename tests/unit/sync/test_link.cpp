// SPDX-License-Identifier: Apache-2.0
//
// The FT-FW style reliability of control/sync/link.*: two Links talk through a "wire" the test
// controls (it drops, reorders and replays datagrams), with an injected clock.
#include "control/sync/link.h"

#include <gtest/gtest.h>

namespace {

using namespace egw::sync;
using namespace std::chrono_literals;

LinkConfig config(uint32_t self, uint32_t peer, size_t capacity = 1024, uint32_t ack_every = 32) {
    LinkConfig c;
    c.self = self;
    c.peer = peer;
    c.boot = 100 + self;
    c.first_counter = 1000 * self;
    c.resend_capacity = capacity;
    c.ack_every = ack_every;
    return c;
}

// One event whose time_left_ms tells datagrams apart.
std::vector<Event> events(uint32_t tag) {
    Event e;
    e.inside.addr = ipv4_address(0x0a000001);
    e.outside.addr = ipv4_address(0xc0a80001);
    e.remote.addr = ipv4_address(0x08080808);
    e.time_left_ms = tag;
    return {e};
}

struct Pair {
    explicit Pair(size_t capacity = 1024, uint32_t ack_every = 32)
        : a(config(1, 2, capacity, ack_every)), b(config(2, 1, capacity, ack_every)) {}
    Link a, b;
    Clock::time_point now = Clock::time_point{} + 1h;
    std::vector<uint32_t> b_applied;  // time_left_ms tags of the events b delivered, in order

    // b receives d; returns b's replies.
    std::vector<Datagram> to_b(const Datagram& d) {
        auto r = b.receive(d, now);
        if (r.deliver)
            for (const Event& e : d.events)
                b_applied.push_back(e.time_left_ms);
        return r.replies;
    }
    std::vector<Datagram> to_a(const Datagram& d) { return a.receive(d, now).replies; }
};

TEST(SyncLink, InOrderDatagramsAreDeliveredAndAcknowledgedCumulatively) {
    Pair p;
    for (uint32_t i = 1; i <= 3; ++i) {
        Datagram d = p.a.send(events(i), p.now);
        EXPECT_EQ(d.header.sequence, i);
        EXPECT_TRUE(p.to_b(d).empty()) << "no reply needed for an in-order datagram";
    }
    EXPECT_EQ(p.b_applied, (std::vector<uint32_t>{1, 2, 3}));
    EXPECT_EQ(p.a.unacknowledged(), 3u);
    // b's keep-alive a second later carries the acknowledgement.
    p.now += 1s;
    auto ka = p.b.tick(p.now);
    ASSERT_EQ(ka.size(), 1u);
    EXPECT_TRUE(ka[0].header.flags & kFlagAck);
    EXPECT_EQ(ka[0].header.ack, 3u);
    EXPECT_TRUE(ka[0].events.empty());
    p.to_a(ka[0]);
    EXPECT_EQ(p.a.unacknowledged(), 0u);
    // Each waited 1 s for its acknowledgement: the bucket up to 1 s holds all three.
    std::array<uint64_t, kAckLagBounds.size() + 1> lag{};
    lag[9] = 3;
    EXPECT_EQ(kAckLagBounds[9], 1.0);
    EXPECT_EQ(p.a.stats().ack_lag, lag);
    EXPECT_DOUBLE_EQ(p.a.stats().ack_lag_seconds, 3.0);
}

TEST(SyncLink, AcknowledgesOnItsOwnAfterAckEveryDatagrams) {
    Pair p(1024, 4);
    std::vector<Datagram> replies;
    for (uint32_t i = 1; i <= 4; ++i)
        replies = p.to_b(p.a.send(events(i), p.now));
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].header.ack, 4u);
    EXPECT_EQ(p.b.stats().acks_sent, 1u);
    p.to_a(replies[0]);
    EXPECT_EQ(p.a.unacknowledged(), 0u);
    EXPECT_EQ(p.a.stats().ack_lag[0], 4u) << "acknowledged at once: the first bucket";
    EXPECT_DOUBLE_EQ(p.a.stats().ack_lag_seconds, 0.0);
    // The acknowledgement also rides on b's own data: the counter starts again.
    EXPECT_TRUE(p.to_b(p.a.send(events(5), p.now)).empty());
    Datagram from_b = p.b.send(events(50), p.now);
    EXPECT_EQ(from_b.header.ack, 5u);
}

TEST(SyncLink, AGapIsNackedAndResentWithTheSameEvents) {
    Pair p;
    std::vector<Datagram> sent;
    for (uint32_t i = 1; i <= 5; ++i)
        sent.push_back(p.a.send(events(i), p.now));
    p.to_b(sent[0]);
    p.to_b(sent[1]);
    // sent[2] (sequence 3) is lost.
    auto replies = p.to_b(sent[3]);
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].header.flags, kFlagAck | kFlagNack);
    EXPECT_EQ(replies[0].header.ack, 2u);
    EXPECT_EQ(replies[0].header.range_first, 3u);
    EXPECT_EQ(replies[0].header.range_last, 3u);
    EXPECT_TRUE(p.to_b(sent[4]).empty()) << "the same gap is not asked for twice at once";
    EXPECT_EQ(p.b_applied, (std::vector<uint32_t>{1, 2, 4, 5})) << "what arrived is applied at once";

    auto resent = p.to_a(replies[0]);
    ASSERT_EQ(resent.size(), 1u);
    EXPECT_EQ(resent[0].header.sequence, 3u);
    EXPECT_EQ(resent[0].events, events(3));
    EXPECT_GT(resent[0].header.counter, sent[4].header.counter) << "a resend is a new datagram";
    EXPECT_EQ(p.a.unacknowledged(), 3u) << "1 and 2 acknowledged by the NACK's ack";
    p.to_b(resent[0]);
    EXPECT_EQ(p.b.expected(), 6u);
    EXPECT_EQ(p.b_applied.back(), 3u);
    EXPECT_EQ(p.b.stats().gaps, 1u);
    EXPECT_EQ(p.a.stats().resent, 1u);
}

TEST(SyncLink, ALostTailIsFoundByTheKeepAlive) {
    Pair p;
    p.to_b(p.a.send(events(1), p.now));
    p.a.send(events(2), p.now);  // lost
    p.now += 999ms;
    EXPECT_TRUE(p.a.tick(p.now).empty()) << "no keep-alive within the second";
    p.now += 1ms;
    auto ka = p.a.tick(p.now);
    ASSERT_EQ(ka.size(), 1u);
    EXPECT_TRUE(ka[0].events.empty());
    EXPECT_EQ(ka[0].header.sequence, 2u) << "a keep-alive carries the last sequence number sent";
    auto nack = p.to_b(ka[0]);
    ASSERT_EQ(nack.size(), 1u);
    EXPECT_EQ(nack[0].header.range_first, 2u);
    EXPECT_EQ(nack[0].header.range_last, 2u);
    auto resent = p.to_a(nack[0]);
    ASSERT_EQ(resent.size(), 1u);
    p.to_b(resent[0]);
    EXPECT_EQ(p.b_applied, (std::vector<uint32_t>{1, 2}));
    EXPECT_EQ(p.b.expected(), 3u);
}

TEST(SyncLink, ALostNackIsRepeatedAfterTheRetryInterval) {
    Pair p;
    p.to_b(p.a.send(events(1), p.now));
    p.a.send(events(2), p.now);  // lost
    auto first = p.to_b(p.a.send(events(3), p.now));
    ASSERT_EQ(first.size(), 1u);  // the NACK, lost too
    p.now += 199ms;
    for (const Datagram& d : p.b.tick(p.now))
        EXPECT_FALSE(d.header.flags & kFlagNack) << "too soon";
    p.now += 1ms;
    auto again = p.b.tick(p.now);
    ASSERT_FALSE(again.empty());
    EXPECT_TRUE(again[0].header.flags & kFlagNack);
    EXPECT_EQ(again[0].header.range_first, 2u);
    EXPECT_EQ(again[0].header.range_last, 2u);
    auto resent = p.to_a(again[0]);
    ASSERT_EQ(resent.size(), 1u);
    p.to_b(resent[0]);
    EXPECT_EQ(p.b.expected(), 4u);
    p.now += 200ms;
    for (const Datagram& d : p.b.tick(p.now))
        EXPECT_FALSE(d.header.flags & kFlagNack) << "gap closed";
}

TEST(SyncLink, ReorderedDatagramsAreAppliedOnceEach) {
    Pair q;
    Datagram s1 = q.a.send(events(1), q.now);
    Datagram s2 = q.a.send(events(2), q.now);
    Datagram s3 = q.a.send(events(3), q.now);
    q.to_b(s1);
    auto nack = q.to_b(s3);
    ASSERT_EQ(nack.size(), 1u);
    EXPECT_TRUE(q.to_b(s2).empty());
    EXPECT_EQ(q.b.expected(), 4u);
    // The resend the NACK asked for arrives after the original did: not applied twice.
    auto resent = q.to_a(nack[0]);
    ASSERT_EQ(resent.size(), 1u);
    q.to_b(resent[0]);
    EXPECT_EQ(q.b_applied, (std::vector<uint32_t>{1, 3, 2}));
    EXPECT_EQ(q.b.stats().duplicates, 1u);
}

TEST(SyncLink, TheResendBufferIsBoundedAndWhatItDroppedIsAnnouncedLost) {
    Pair p(4);
    p.to_b(p.a.send(events(1), p.now));
    std::vector<Datagram> sent;
    for (uint32_t i = 2; i <= 7; ++i)
        sent.push_back(p.a.send(events(i), p.now));
    EXPECT_EQ(p.a.unacknowledged(), 4u);  // 4..7
    EXPECT_EQ(p.a.stats().evicted, 3u);   // 1, 2, 3
    auto nack = p.to_b(sent[3]);          // sequence 5
    ASSERT_EQ(nack.size(), 1u);
    EXPECT_EQ(nack[0].header.range_first, 2u);
    EXPECT_EQ(nack[0].header.range_last, 4u);
    auto answer = p.to_a(nack[0]);
    ASSERT_EQ(answer.size(), 2u);
    EXPECT_EQ(answer[0].header.flags & kFlagLost, kFlagLost);
    EXPECT_EQ(answer[0].header.range_first, 2u);
    EXPECT_EQ(answer[0].header.range_last, 3u);
    EXPECT_EQ(answer[1].header.sequence, 4u);
    EXPECT_EQ(p.a.stats().lost_announced, 2u);
    p.to_b(answer[0]);
    EXPECT_EQ(p.b.stats().lost, 2u);
    EXPECT_EQ(p.b.expected(), 4u) << "b moves past what cannot come";
    p.to_b(answer[1]);
    EXPECT_EQ(p.b.expected(), 6u);
    EXPECT_EQ(p.b_applied, (std::vector<uint32_t>{1, 5, 4}));
}

TEST(SyncLink, FarAheadOfTheWindowGivesUpTheGapInsteadOfAskingForever) {
    Pair p(4);
    p.to_b(p.a.send(events(1), p.now));
    for (uint32_t i = 2; i <= 9; ++i)
        p.a.send(events(i), p.now);
    auto replies = p.to_b(p.a.send(events(10), p.now));
    EXPECT_TRUE(replies.empty());
    EXPECT_EQ(p.b.stats().lost, 8u);
    EXPECT_EQ(p.b.expected(), 11u);
    EXPECT_EQ(p.b_applied, (std::vector<uint32_t>{1, 10}));
}

TEST(SyncLink, ReplayedDatagramsAreRefusedAndChangeNothing) {
    Pair p;
    Datagram d1 = p.a.send(events(1), p.now);
    Datagram d2 = p.a.send(events(2), p.now);
    Datagram d3 = p.a.send(events(3), p.now);
    p.to_b(d1);
    p.to_b(d3);
    p.to_b(d2);  // an older counter than d3's, within the window: accepted once
    EXPECT_EQ(p.b_applied, (std::vector<uint32_t>{1, 3, 2}));
    auto r = p.b.receive(d2, p.now);
    EXPECT_TRUE(r.replayed);
    EXPECT_FALSE(r.deliver);
    EXPECT_TRUE(r.replies.empty());
    EXPECT_TRUE(p.b.receive(d3, p.now).replayed);
    EXPECT_EQ(p.b.stats().replayed, 2u);

    // An old datagram whose sequence number was changed to a new one is still a replay (in
    // practice its tag would not match either).
    Datagram old = d1;
    old.header.sequence = 4;
    EXPECT_TRUE(p.b.receive(old, p.now).replayed);
    EXPECT_EQ(p.b.expected(), 4u);

    // Counters further back than the window are refused even if never seen.
    Datagram d;
    for (int i = 0; i < 70; ++i)
        d = p.a.send(events(100 + i), p.now);
    p.to_b(d);
    Datagram stale = d;
    stale.header.counter -= Link::kReplayWindow;
    EXPECT_TRUE(p.b.receive(stale, p.now).replayed);
    stale.header.counter += 1;
    EXPECT_FALSE(p.b.receive(stale, p.now).replayed) << "the oldest counter inside the window";
}

TEST(SyncLink, ARestartedPeerIsFollowedFromItsNewSequence) {
    Pair p;
    for (uint32_t i = 1; i <= 3; ++i)
        p.to_b(p.a.send(events(i), p.now));
    LinkConfig restarted = config(1, 2);
    restarted.boot = 555;
    restarted.first_counter = 5000;  // the wall clock moved on
    Link a2(restarted);
    p.to_b(a2.send(events(9), p.now));
    EXPECT_EQ(p.b.stats().peer_restarts, 1u);
    EXPECT_EQ(p.b.expected(), 2u);
    EXPECT_EQ(p.b_applied.back(), 9u);
}

TEST(SyncLink, ABulkDumpIsCompleteOnceItsEndAndEverythingBeforeItArrived) {
    Pair p;
    // b asks a for a dump.
    p.to_a(p.b.control(kFlagBulkRequest, p.now));
    EXPECT_TRUE(p.a.take_bulk_request());
    EXPECT_FALSE(p.a.take_bulk_request()) << "once per request";
    Datagram d1 = p.a.send(events(1), p.now), d2 = p.a.send(events(2), p.now), d3 = p.a.send(events(3), p.now);
    Datagram end = p.a.control(kFlagBulkEnd, p.now);
    EXPECT_EQ(end.header.sequence, 3u);
    p.to_b(d1);
    p.to_b(d3);  // d2 lost for now
    auto replies = p.to_b(end);
    EXPECT_TRUE(p.b.bulk_end_seen());
    EXPECT_FALSE(p.b.bulk_complete()) << "sequence 2 is missing";
    p.to_b(d2);
    EXPECT_TRUE(p.b.bulk_complete());
    EXPECT_EQ(p.b_applied, (std::vector<uint32_t>{1, 3, 2}));
    // Asking again forgets the end seen: only the next dump's end counts.
    p.b.control(kFlagBulkRequest, p.now);
    EXPECT_FALSE(p.b.bulk_complete());
    p.to_b(p.a.control(kFlagBulkEnd, p.now));
    EXPECT_TRUE(p.b.bulk_complete());
}

TEST(SyncLink, SequenceNumbersWrapAround) {
    Link b(config(2, 1));
    Clock::time_point now{};
    auto data = [&](uint32_t seq, uint64_t counter) {
        Datagram d;
        d.header.sender = 1;
        d.header.boot = 101;
        d.header.sequence = seq;
        d.header.counter = counter;
        d.events = events(seq);
        return d;
    };
    EXPECT_TRUE(b.receive(data(0xfffffffeu, 1), now).deliver);
    EXPECT_TRUE(b.receive(data(0xffffffffu, 2), now).deliver);
    auto r = b.receive(data(1, 3), now);  // 0 is missing
    EXPECT_TRUE(r.deliver);
    ASSERT_EQ(r.replies.size(), 1u);
    EXPECT_EQ(r.replies[0].header.range_first, 0u);
    EXPECT_EQ(r.replies[0].header.range_last, 0u);
    EXPECT_TRUE(b.receive(data(0, 4), now).deliver);
    EXPECT_EQ(b.expected(), 2u);
    EXPECT_FALSE(b.receive(data(0xffffffffu, 5), now).deliver) << "before the wrap: a duplicate";
}

TEST(SyncLink, APeerIsAliveForThreeKeepAliveIntervals) {
    Pair p;
    EXPECT_FALSE(p.b.peer_alive(p.now));
    for (const Datagram& d : p.a.tick(p.now))
        p.to_b(d);
    EXPECT_TRUE(p.b.peer_alive(p.now));
    EXPECT_TRUE(p.b.peer_alive(p.now + 2999ms));
    EXPECT_FALSE(p.b.peer_alive(p.now + 3s));
}

}  // namespace
