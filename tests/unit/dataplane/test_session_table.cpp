// SPDX-License-Identifier: Apache-2.0
//
// dataplane/tables/session_table: the per-worker session index under churn, through its own
// interface (create, destroy, single and bulk lookups).
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_memory.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "dataplane/tables/session_table.h"

namespace egw::test {
namespace {

using dp::FlowKey;
using dp::Session;
using dp::SessionTable;

Session random_session(std::mt19937& rng) {
    Session s{};
    s.pod_ip = rng();
    s.remote_ip = rng();
    s.pod_port = static_cast<uint16_t>(rng());
    s.remote_port = static_cast<uint16_t>(rng());
    s.nat_ip = rng();
    s.nat_port = static_cast<uint16_t>(rng());
    s.proto = rng() % 2 ? 6 : 17;
    return s;
}

// Runs `f` on another thread; a lookup that never returns is reported, and since a spinning
// thread cannot be stopped, the test program ends there.
template <class F>
void must_finish(const std::string& what, F f) {
    auto done = std::async(std::launch::async, f);
    if (done.wait_for(std::chrono::seconds(20)) == std::future_status::ready) {
        done.get();
        return;
    }
    std::fprintf(stderr, "FATAL: %s did not return within 20 s\n", what.c_str());
    std::fflush(nullptr);
    // No EAL cleanup with a thread still spinning in its memory; the run directory is ours alone.
    std::error_code ec;
    std::filesystem::remove_all(rte_eal_get_runtime_dir(), ec);
    std::_Exit(1);
}

TEST(SessionTable, LookupsStayCorrectAndFiniteUnderChurn) {
    constexpr uint32_t kCapacity = 64;
    SessionTable t;
    ASSERT_TRUE(t.init("st_churn", kCapacity, SOCKET_ID_ANY));
    std::mt19937 rng(1234);

    // Fill to capacity and empty again, many times over, with fresh tuples each time.
    for (int cycle = 0; cycle < 20000; ++cycle) {
        std::vector<std::pair<uint32_t, Session>> live;
        std::set<std::tuple<uint32_t, uint32_t, uint16_t, uint16_t>> in_keys, out_keys;
        while (live.size() < kCapacity) {
            Session s = random_session(rng);
            if (!in_keys.insert({s.pod_ip, s.remote_ip, s.pod_port, s.remote_port}).second ||
                !out_keys.insert({s.remote_ip, s.nat_ip, s.remote_port, s.nat_port}).second)
                continue;
            uint32_t idx = t.create(s);
            ASSERT_NE(idx, SessionTable::kNone) << "cycle " << cycle;
            live.emplace_back(idx, s);
        }
        ASSERT_EQ(t.create(random_session(rng)), SessionTable::kNone) << "created beyond capacity";
        ASSERT_EQ(t.active(), kCapacity);
        if (cycle % 500 == 0) {
            must_finish("session lookups after " + std::to_string(cycle) + " cycles", [&] {
            for (auto& [idx, s] : live) {
                ASSERT_EQ(t.find_inside(SessionTable::inside_key(s)), idx);
                ASSERT_EQ(t.find_outside(SessionTable::outside_key(s)), idx);
            }
            // Bulk lookups agree, hits and misses mixed.
            FlowKey keys[SessionTable::kBulk];
            const FlowKey* kp[SessionTable::kBulk];
            uint32_t got[SessionTable::kBulk];
            for (unsigned i = 0; i < SessionTable::kBulk; ++i) {
                keys[i] = i % 2 ? SessionTable::outside_key(live[i].second) : SessionTable::outside_key(random_session(rng));
                kp[i] = &keys[i];
            }
            t.lookup_outside(kp, SessionTable::kBulk, got);
            for (unsigned i = 0; i < SessionTable::kBulk; ++i)
                ASSERT_EQ(got[i], i % 2 ? live[i].first : SessionTable::kNone) << "cycle " << cycle << " key " << i;
            });
            if (HasFatalFailure())
                return;
        }
        std::shuffle(live.begin(), live.end(), rng);
        for (auto& [idx, s] : live)
            t.destroy(idx);
        ASSERT_EQ(t.active(), 0u);
    }

    // After all that churn, looking up tuples that are not there must still end, and say so.
    must_finish("a session lookup of a missing tuple", [&] {
        for (int i = 0; i < 1000; ++i) {
            Session s = random_session(rng);
            EXPECT_EQ(t.find_inside(SessionTable::inside_key(s)), SessionTable::kNone);
            EXPECT_EQ(t.find_outside(SessionTable::outside_key(s)), SessionTable::kNone);
        }
        FlowKey keys[SessionTable::kBulk];
        const FlowKey* kp[SessionTable::kBulk];
        uint32_t got[SessionTable::kBulk];
        for (unsigned i = 0; i < SessionTable::kBulk; ++i) {
            keys[i] = SessionTable::inside_key(random_session(rng));
            kp[i] = &keys[i];
        }
        t.lookup_inside(kp, SessionTable::kBulk, got);
        for (unsigned i = 0; i < SessionTable::kBulk; ++i)
            EXPECT_EQ(got[i], SessionTable::kNone);
    });
}

TEST(SessionTable, DestroyedSessionIsNotFoundAndItsSlotIsReused) {
    SessionTable t;
    ASSERT_TRUE(t.init("st_reuse", 8, SOCKET_ID_ANY));
    std::mt19937 rng(42);
    Session a = random_session(rng), b = random_session(rng);
    uint32_t ia = t.create(a);
    uint32_t ib = t.create(b);
    ASSERT_NE(ia, SessionTable::kNone);
    ASSERT_NE(ib, SessionTable::kNone);
    EXPECT_NE(ia, ib);
    EXPECT_TRUE(t.at(ia).in_use & dp::kSessionInUse);
    t.destroy(ia);
    EXPECT_FALSE(t.at(ia).in_use & dp::kSessionInUse);
    EXPECT_EQ(t.find_inside(SessionTable::inside_key(a)), SessionTable::kNone);
    EXPECT_EQ(t.find_outside(SessionTable::outside_key(a)), SessionTable::kNone);
    EXPECT_EQ(t.find_inside(SessionTable::inside_key(b)), ib);
    t.destroy(ia);  // twice: no effect
    EXPECT_EQ(t.active(), 1u);
    Session c = random_session(rng);
    uint32_t ic = t.create(c);
    EXPECT_EQ(t.find_outside(SessionTable::outside_key(c)), ic);
    EXPECT_EQ(t.active(), 2u);
}

}  // namespace
}  // namespace egw::test
