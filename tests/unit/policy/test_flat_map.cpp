// SPDX-License-Identifier: Apache-2.0
//
// FlatMap's in-place changes (what the PolicyBuilder patches its copy with) against std::map,
// over random inserts, overwrites and erases of clustered keys (long probe runs, wrap-around).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "dataplane/tables/flat_map.h"

namespace egw::dp {
namespace {

void expect_same(const FlatMap& m, const std::map<uint64_t, uint32_t>& want) {
    ASSERT_EQ(m.size(), want.size());
    size_t seen = 0;
    m.for_each([&](uint64_t k, uint32_t v) {
        ++seen;
        auto it = want.find(k);
        ASSERT_NE(it, want.end()) << k;
        EXPECT_EQ(it->second, v) << k;
    });
    EXPECT_EQ(seen, want.size());
    for (const auto& [k, v] : want)
        ASSERT_EQ(m.find(k), v) << k;
    // At most half full, and no larger than needed once it has shrunk.
    EXPECT_LE(m.size() * 2, m.capacity());
    EXPECT_EQ(m.capacity() & (m.capacity() - 1), 0u);
}

TEST(FlatMap, AssignAndEraseMatchAMap) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
        std::mt19937 rng(seed);
        FlatMap m;
        std::map<uint64_t, uint32_t> want;
        // Few distinct keys, dense: probe runs overlap and wrap around the end of the slots.
        const uint64_t span = 64 + rng() % 4000;
        for (int op = 0; op < 20000; ++op) {
            uint64_t k = 0x0a000000u + rng() % span;
            // Phases that mostly add, then mostly remove, so the map grows and shrinks.
            bool add = (op / 2500) % 2 == 0 ? rng() % 4 != 0 : rng() % 4 == 0;
            if (add) {
                uint32_t v = static_cast<uint32_t>(rng());
                m.assign(k, v);
                want[k] = v;
            } else {
                EXPECT_EQ(m.erase(k), want.erase(k) > 0);
            }
            if (op % 997 == 0) {
                expect_same(m, want);
                // Lookups of absent keys end.
                for (int i = 0; i < 50; ++i) {
                    uint64_t a = 0x0b000000u + rng() % span;
                    EXPECT_EQ(m.find(a), FlatMap::kMissing);
                }
                if (HasFatalFailure()) return;
            }
        }
        expect_same(m, want);
        // A copy patched apart from the original leaves the original as it was.
        FlatMap copy = m;
        for (const auto& [k, v] : want)
            copy.erase(k);
        EXPECT_EQ(copy.size(), 0u);
        expect_same(m, want);
    }
}

TEST(FlatMap, ReserveGrowsOnceAndKeepsTheKeys) {
    FlatMap m;
    m.assign(7, 70);
    m.reserve(1000);
    EXPECT_EQ(m.capacity(), FlatMap::capacity_for(1000));
    EXPECT_EQ(m.find(7), 70u);
    for (uint64_t k = 0; k < 1000; ++k)
        m.assign(k + 100, 1);
    EXPECT_EQ(m.capacity(), FlatMap::capacity_for(1000));
    m.reserve(10);  // never shrinks
    EXPECT_EQ(m.capacity(), FlatMap::capacity_for(1000));
    EXPECT_EQ(m.size(), 1001u);
}

TEST(FlatMap, EmptiedMapShrinksBack) {
    FlatMap m;
    for (uint64_t k = 0; k < 100000; ++k)
        m.assign(k, 1);
    EXPECT_EQ(m.capacity(), FlatMap::capacity_for(100000));
    for (uint64_t k = 0; k < 100000; ++k)
        ASSERT_TRUE(m.erase(k));
    EXPECT_EQ(m.size(), 0u);
    EXPECT_EQ(m.capacity(), 16u);
    EXPECT_FALSE(m.erase(5));
}

}  // namespace
}  // namespace egw::dp
