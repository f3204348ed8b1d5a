// SPDX-License-Identifier: Apache-2.0
//
// Ip6Map (the IPv6 endpoints, NAT addresses, node IPs and routes of a policy snapshot): every key
// found with its value, and keys that differ only in a few bits (pods numbered in sequence in one
// /64, /64s numbered in sequence, one address under many scopes) spread over the slots instead
// of forming one long probe run that every lookup would walk.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>
#include <vector>

#include "dataplane/tables/ip6_map.h"

namespace egw::dp {
namespace {

using Addr = std::array<uint8_t, 16>;

// fd00:10:244:<net>::<host>
Addr pod(uint16_t net, uint32_t host) {
    Addr a{0xfd, 0x00, 0x00, 0x10, 0x02, 0x44, static_cast<uint8_t>(net >> 8), static_cast<uint8_t>(net)};
    for (int i = 0; i < 4; ++i)
        a[12 + i] = static_cast<uint8_t>(host >> (24 - 8 * i));
    return a;
}

Ip6Map::Item item(const Addr& a, uint16_t scope, uint32_t value) {
    Ip6Map::Item it{};
    std::copy(a.begin(), a.end(), it.addr);
    it.scope = scope;
    it.value = value;
    return it;
}

void expect_spread(const std::vector<Ip6Map::Item>& items) {
    Ip6Map m;
    m.build(items);
    ASSERT_EQ(m.size(), items.size());
    for (const auto& it : items)
        ASSERT_EQ(m.find(it.addr, it.scope), it.value);
    // Half full at most: with a hash that mixes every bit, runs stay short (tens of slots at
    // 16,384 keys; one run of all of them before the finalizer).
    EXPECT_LE(m.longest_probe(), 64u);
}

TEST(Ip6Map, PodsNumberedInSequenceSpread) {
    std::vector<Ip6Map::Item> items;
    for (uint32_t host = 1; host <= 16384; ++host)
        items.push_back(item(pod(1, host), 0, host));
    expect_spread(items);
    // Absent neighbours of the keys are not found.
    Ip6Map m;
    m.build(items);
    EXPECT_EQ(m.find(pod(1, 16385).data()), Ip6Map::kMissing);
    EXPECT_EQ(m.find(pod(2, 1).data()), Ip6Map::kMissing);
    EXPECT_EQ(m.find(pod(1, 1).data(), 1), Ip6Map::kMissing) << "another scope is another key";
}

TEST(Ip6Map, NetworksNumberedInSequenceSpread) {
    std::vector<Ip6Map::Item> items;
    for (uint16_t net = 0; net < 8192; ++net)
        items.push_back(item(pod(net, 1), 0, net));
    expect_spread(items);
}

TEST(Ip6Map, OneAddressUnderManyScopesSpreads) {
    // Routes: a VRF and a prefix length per scope, the same masked address.
    std::vector<Ip6Map::Item> items;
    for (uint16_t vrf = 0; vrf < 32; ++vrf)
        for (uint16_t len = 0; len <= 128; ++len)
            items.push_back(item(pod(0, 0), static_cast<uint16_t>(vrf << 8 | len), vrf * 1000u + len));
    expect_spread(items);
}

TEST(Ip6Map, LaterDuplicatesWin) {
    Ip6Map m;
    m.build({item(pod(1, 1), 0, 1), item(pod(1, 1), 0, 2), item(pod(1, 1), 7, 3)});
    EXPECT_EQ(m.size(), 2u);
    EXPECT_EQ(m.find(pod(1, 1).data()), 2u);
    EXPECT_EQ(m.find(pod(1, 1).data(), 7), 3u);
}

// The policy builder patches its own copies with assign() and erase(): after any sequence the map
// holds exactly what a std::map given the same calls holds, at most half full, and it shrinks
// back once emptied. Few keys in one /64 and two scopes, so probe runs overlap and wrap.
TEST(Ip6Map, AssignAndEraseMatchAMap) {
    for (uint32_t seed = 1; seed <= 10; ++seed) {
        std::mt19937 rng(seed);
        Ip6Map m;
        std::map<std::pair<Addr, uint16_t>, uint32_t> want;
        const uint32_t span = 64 + rng() % 4000;
        auto expect_same = [&] {
            ASSERT_EQ(m.size(), want.size());
            for (const auto& [k, v] : want)
                ASSERT_EQ(m.find(k.first.data(), k.second), v);
            EXPECT_LE(m.size() * 2, m.capacity());
            size_t n = 0;
            m.for_each([&](const uint8_t*, uint16_t, uint32_t) { ++n; });
            EXPECT_EQ(n, want.size());
        };
        for (int op = 0; op < 20000; ++op) {
            const Addr a = pod(1, 1 + rng() % span);
            const uint16_t scope = static_cast<uint16_t>(rng() % 2 * 443);
            // Phases that mostly add, then mostly remove, so the map grows and shrinks.
            const bool add = (op / 2500) % 2 == 0 ? rng() % 4 != 0 : rng() % 4 == 0;
            if (add) {
                const uint32_t v = static_cast<uint32_t>(rng());
                m.assign(a.data(), scope, v);
                want[{a, scope}] = v;
            } else {
                EXPECT_EQ(m.erase(a.data(), scope), want.erase({a, scope}) > 0);
            }
            if (op % 997 == 0) {
                expect_same();
                EXPECT_EQ(m.find(pod(2, 1 + rng() % span).data()), Ip6Map::kMissing);
                if (HasFatalFailure()) return;
            }
        }
        expect_same();
        Ip6Map copy = m;
        for (const auto& [k, v] : want)
            ASSERT_TRUE(copy.erase(k.first.data(), k.second));
        EXPECT_EQ(copy.size(), 0u);
        EXPECT_EQ(copy.capacity(), 16u);
        EXPECT_FALSE(copy.erase(pod(1, 1).data(), 0));
        expect_same();  // the original is untouched by its copy's changes
    }
}

}  // namespace
}  // namespace egw::dp
