// SPDX-License-Identifier: Apache-2.0
//
// Ip6Map (the IPv6 endpoints, NAT addresses, node IPs and routes of a policy snapshot): every key
// found with its value, and keys that differ only in a few bits (pods numbered in sequence in one
// /64, /64s numbered in sequence, one address under many scopes) spread over the slots instead
// of forming one long probe run that every lookup would walk.
#include <gtest/gtest.h>

#include <array>
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

}  // namespace
}  // namespace egw::dp
