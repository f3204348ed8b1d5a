// SPDX-License-Identifier: Apache-2.0
//
// The workers' session sync event ring (dataplane/sync_events.h): order, the full ring dropping
// and counting instead of waiting, the index wrap, and a producer and a consumer on two threads
// (scripts/test.sh also runs this program under ThreadSanitizer).
#include "dataplane/sync_events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using egw::dp::SpscRing;
using egw::dp::SyncEvent;
using egw::dp::SyncEventKind;

SyncEvent event(uint32_t n) {
    SyncEvent e{};
    e.kind = SyncEventKind::create;
    e.family = 4;
    e.proto = 6;
    e.service_id = n;
    e.expires_tsc = uint64_t{n} * 3 + 1;
    for (int i = 0; i < 16; ++i) {
        e.inside_addr[i] = static_cast<uint8_t>(n + i);
        e.remote_addr[i] = static_cast<uint8_t>(n ^ i);
    }
    e.outside_port = static_cast<uint16_t>(n);
    return e;
}

// True when every field of `e` is the one event(n) wrote: no half-copied slot.
bool whole(const SyncEvent& e, uint32_t n) {
    SyncEvent want = event(n);
    return std::memcmp(&e, &want, sizeof e) == 0;
}

TEST(SyncEventRing, CapacityIsAPowerOfTwo) {
    EXPECT_EQ(SpscRing<SyncEvent>(1).capacity(), 2u);
    EXPECT_EQ(SpscRing<SyncEvent>(1000).capacity(), 1024u);
    EXPECT_EQ(SpscRing<SyncEvent>(4096).capacity(), 4096u);
}

TEST(SyncEventRing, AFullRingDropsAndCountsAndKeepsWhatItHad) {
    SpscRing<SyncEvent> ring(4);
    for (uint32_t i = 0; i < 4; ++i)
        EXPECT_TRUE(ring.push(event(i)));
    EXPECT_FALSE(ring.push(event(4)));
    EXPECT_FALSE(ring.push(event(5)));
    EXPECT_EQ(ring.dropped(), 2u);
    SyncEvent out[8];
    ASSERT_EQ(ring.pop(out, 3), 3u);
    for (uint32_t i = 0; i < 3; ++i)
        EXPECT_TRUE(whole(out[i], i));
    EXPECT_TRUE(ring.push(event(6)));  // room again
    ASSERT_EQ(ring.pop(out, 8), 2u);
    EXPECT_TRUE(whole(out[0], 3));
    EXPECT_TRUE(whole(out[1], 6));
    EXPECT_EQ(ring.pop(out, 8), 0u);
    EXPECT_EQ(ring.dropped(), 2u);
}

TEST(SyncEventRing, IndexesWrapAround) {
    SpscRing<SyncEvent> ring(8, 0xfffffffau);
    uint32_t next_in = 0, next_out = 0;
    SyncEvent out[8];
    for (int round = 0; round < 10; ++round) {
        for (int i = 0; i < 5; ++i)
            ASSERT_TRUE(ring.push(event(next_in++)));
        size_t n = ring.pop(out, 8);
        ASSERT_EQ(n, 5u);
        for (size_t i = 0; i < n; ++i)
            EXPECT_TRUE(whole(out[i], next_out++));
    }
    for (int i = 0; i < 8; ++i)
        ASSERT_TRUE(ring.push(event(next_in++)));
    EXPECT_FALSE(ring.push(event(999))) << "full across the wrap";
}

TEST(SyncEventRing, AProducerAndAConsumerOnTwoThreads) {
    // The verdict does not depend on the speed of either side: whatever is not dropped arrives
    // whole, once, in order.
    constexpr uint32_t kEvents = 200000;
    SpscRing<SyncEvent> ring(256);
    std::atomic<bool> done{false};
    std::thread producer([&] {
        for (uint32_t i = 0; i < kEvents; ++i)
            ring.push(event(i));
        done.store(true, std::memory_order_release);
    });
    std::vector<uint32_t> got;
    got.reserve(kEvents);
    bool torn = false;
    SyncEvent out[32];
    for (;;) {
        bool finished = done.load(std::memory_order_acquire);
        size_t n = ring.pop(out, 32);
        for (size_t i = 0; i < n; ++i) {
            got.push_back(out[i].service_id);
            torn |= !whole(out[i], out[i].service_id);
        }
        if (n == 0 && finished) break;
        if (n == 0) std::this_thread::yield();
    }
    producer.join();
    EXPECT_FALSE(torn);
    EXPECT_EQ(got.size() + ring.dropped(), kEvents);
    for (size_t i = 1; i < got.size(); ++i)
        ASSERT_LT(got[i - 1], got[i]) << "at " << i;
}

}  // namespace
