// SPDX-License-Identifier: Apache-2.0
//
// The standby table (control/sync/standby.h): what a peer's creations, updates and deletions
// leave in it, aging with the time left each event carried, the bound, stale epochs, and what a
// standby session costs in memory.
#include <gtest/gtest.h>
#include <malloc.h>

#include "control/sync/standby.h"

namespace egw::sync {
namespace {

using std::chrono::milliseconds;

const Address kService = ipv4_address(0xC6336401);  // 198.51.100.1
const Address kOther = ipv4_address(0xC6336402);
const Address kPod = ipv4_address(0x0A800005);
const Address kRemote = ipv4_address(0xCB00710A);

Event event(EventKind kind, uint16_t nat_port, uint32_t time_left_ms, const Address& service = kService) {
    Event e;
    e.kind = kind;
    e.family = 4;
    e.protocol = 6;
    e.tcp_state = kTcpSeenInside;
    e.vrf = 3;
    e.time_left_ms = time_left_ms;
    e.service_epoch = 7;
    e.inside = {kPod, 40000};
    e.outside = {service, nat_port};
    e.remote = {kRemote, 443};
    return e;
}

TEST(Standby, CreateKeepsWhatThePeerSent) {
    StandbyTable t(10);
    auto now = Clock::now();
    Event e = event(EventKind::create, 1025, 30000);
    t.apply(2, std::span(&e, 1), now);
    ASSERT_EQ(t.size(), 1u);
    const StandbySession* s = t.find(standby_key(e));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->inside, e.inside);
    EXPECT_EQ(s->vrf, 3);
    EXPECT_EQ(s->tcp_state, kTcpSeenInside);
    EXPECT_EQ(s->service_epoch, 7u);
    EXPECT_EQ(s->peer, 2u);
    EXPECT_EQ(s->expires, now + milliseconds(30000));
    EXPECT_EQ(t.per_service().at(kService), 1u);
    EXPECT_EQ(t.stats().created, 1u);
    // Another remote port is another session (the NAT is endpoint dependent).
    Event other = e;
    other.remote.port = 444;
    EXPECT_EQ(t.find(standby_key(other)), nullptr);
}

TEST(Standby, DeleteRemovesAndUnknownDeleteIsCounted) {
    StandbyTable t(10);
    auto now = Clock::now();
    std::vector<Event> evs = {event(EventKind::create, 1025, 30000), event(EventKind::create, 1026, 30000),
                              event(EventKind::create, 1027, 30000, kOther)};
    t.apply(2, evs, now);
    EXPECT_EQ(t.size(), 3u);
    EXPECT_EQ(t.per_service().at(kService), 2u);
    EXPECT_EQ(t.per_service().at(kOther), 1u);
    uint64_t v = t.version();
    Event del = event(EventKind::remove, 1027, 0, kOther);
    t.apply(2, std::span(&del, 1), now);
    EXPECT_EQ(t.size(), 2u);
    EXPECT_FALSE(t.per_service().contains(kOther)) << "a Service with no standby session is not listed";
    EXPECT_NE(t.version(), v);
    EXPECT_EQ(t.stats().removed, 1u);
    t.apply(2, std::span(&del, 1), now);
    EXPECT_EQ(t.stats().remove_unknown, 1u);
    EXPECT_EQ(t.size(), 2u);
}

TEST(Standby, AgesWithTheTimeLeftCountedFromArrival) {
    StandbyTable t(10);
    auto t0 = Clock::now();
    std::vector<Event> evs = {event(EventKind::create, 1025, 1000), event(EventKind::create, 1026, 5000)};
    t.apply(2, evs, t0);
    EXPECT_EQ(t.age(t0 + milliseconds(999)), 0u);
    EXPECT_EQ(t.age(t0 + milliseconds(1000)), 1u);
    EXPECT_EQ(t.find(standby_key(evs[0])), nullptr);
    ASSERT_NE(t.find(standby_key(evs[1])), nullptr);
    // A refresh at 4 s with 5 s left moves its expiry to 9 s: the old 5 s entry is skipped.
    Event refresh = event(EventKind::refresh, 1026, 5000);
    t.apply(2, std::span(&refresh, 1), t0 + milliseconds(4000));
    EXPECT_EQ(t.stats().updated, 1u);
    EXPECT_EQ(t.age(t0 + milliseconds(8999)), 0u);
    EXPECT_EQ(t.size(), 1u);
    EXPECT_EQ(t.age(t0 + milliseconds(9000)), 1u);
    EXPECT_EQ(t.size(), 0u);
    EXPECT_EQ(t.stats().aged, 2u);
    EXPECT_TRUE(t.per_service().empty());
}

TEST(Standby, AnUpdateOfAnUnknownSessionCreatesIt) {
    StandbyTable t(10);
    Event e = event(EventKind::state_change, 1025, 1000);
    e.tcp_state = kTcpSeenInside | kTcpSeenOutside;
    t.apply(2, std::span(&e, 1), Clock::now());
    ASSERT_NE(t.find(standby_key(e)), nullptr);
    EXPECT_EQ(t.find(standby_key(e))->tcp_state, kTcpSeenInside | kTcpSeenOutside);
    EXPECT_EQ(t.stats().created, 1u);
}

TEST(Standby, TheBoundRefusesNewSessionsButUpdatesKnownOnes) {
    StandbyTable t(2);
    auto now = Clock::now();
    std::vector<Event> evs = {event(EventKind::create, 1025, 1000), event(EventKind::create, 1026, 1000),
                              event(EventKind::create, 1027, 1000)};
    t.apply(2, evs, now);
    EXPECT_EQ(t.size(), 2u);
    EXPECT_EQ(t.stats().full, 1u);
    EXPECT_EQ(t.find(standby_key(evs[2])), nullptr);
    Event refresh = event(EventKind::refresh, 1025, 9000);
    t.apply(2, std::span(&refresh, 1), now);
    EXPECT_EQ(t.find(standby_key(refresh))->expires, now + milliseconds(9000));
    EXPECT_EQ(t.stats().full, 1u);
    // A deletion makes room.
    Event del = event(EventKind::remove, 1026, 0);
    t.apply(2, std::span(&del, 1), now);
    t.apply(2, std::span(&evs[2], 1), now);
    EXPECT_NE(t.find(standby_key(evs[2])), nullptr);
}

TEST(Standby, AnOlderEpochChangesNothing) {
    StandbyTable t(10);
    auto now = Clock::now();
    Event e = event(EventKind::create, 1025, 1000);
    t.apply(2, std::span(&e, 1), now);
    Event old = event(EventKind::remove, 1025, 0);
    old.service_epoch = 6;
    t.apply(3, std::span(&old, 1), now);
    EXPECT_EQ(t.size(), 1u);
    old.kind = EventKind::create;
    old.inside.port = 1;
    t.apply(3, std::span(&old, 1), now);
    EXPECT_EQ(t.find(standby_key(e))->inside.port, 40000);
    EXPECT_EQ(t.find(standby_key(e))->peer, 2u);
    EXPECT_EQ(t.stats().stale_epoch, 2u);
}

TEST(Standby, RefreshesDoNotGrowTheExpiryHeapWithoutBound) {
    StandbyTable t(10);
    auto t0 = Clock::now();
    Event e = event(EventKind::create, 1025, 60000);
    for (int i = 0; i < 100000; ++i) {
        e.time_left_ms = 60000 + static_cast<uint32_t>(i);
        t.apply(2, std::span(&e, 1), t0);
        t.age(t0);
    }
    EXPECT_EQ(t.size(), 1u);
    EXPECT_EQ(t.age(t0 + milliseconds(60000 + 99998)), 0u);
    EXPECT_EQ(t.age(t0 + milliseconds(60000 + 99999)), 1u);
}

// The sizing in docs/operations.md: what the allocator hands out per standby session.
TEST(Standby, MemoryPerSessionIsWithinTheStatedSize) {
    constexpr size_t kSessions = 200000;
    std::vector<Event> evs;
    evs.reserve(kSessions);
    for (size_t i = 0; i < kSessions; ++i) {
        Event e = event(EventKind::create, static_cast<uint16_t>(1024 + i % 60000), 60000);
        e.remote.addr = ipv4_address(0xCB000000u + static_cast<uint32_t>(i / 60000));
        evs.push_back(e);
    }
    size_t before = mallinfo2().uordblks;
    {
        StandbyTable t(kSessions);
        t.apply(2, evs, Clock::now());
        ASSERT_EQ(t.size(), kSessions);
        size_t per = (mallinfo2().uordblks - before) / kSessions;
        RecordProperty("bytes_per_session", static_cast<int>(per));
        std::printf("standby: %zu bytes per session\n", per);
        EXPECT_LE(per, StandbyTable::kBytesPerSession);
    }
}

}  // namespace
}  // namespace egw::sync
