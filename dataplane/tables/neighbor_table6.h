// SPDX-License-Identifier: Apache-2.0
//
// NeighborTable6: next-hop MAC addresses per (port, IPv6 address), resolved by Neighbor
// Solicitation; the IPv6 instance of BasicNeighborTable (neighbor_table.h, which says who writes,
// who reads, how entries are published and when memory is freed). Here is what differs from
// IPv4: the key is three words, a tag (0 empty, the tombstone, else port + 1) that carries the
// slot's state, and the address's two halves.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "dataplane/tables/neighbor_table.h"

namespace egw::dp {

struct NeighborFamily6 {
    using Addr = const uint8_t*;  // 16 bytes, network order
    using AddrOut = uint8_t*;
    struct Key {
        uint64_t tag;
        uint64_t hi;  // the address's first and last 8 bytes, as memcpy reads them
        uint64_t lo;
        bool operator==(const Key&) const = default;
    };

    struct alignas(64) Slot {
        std::atomic<uint64_t> key;  // the tag
        std::atomic<uint64_t> hi;
        std::atomic<uint64_t> lo;
        std::atomic<uint64_t> mac;
        std::atomic<uint32_t> used;
    };
    static_assert(sizeof(Slot) == 64);

    static Key make_key(uint16_t port, const uint8_t* addr) {
        Key k{uint64_t{port} + 1, 0, 0};
        std::memcpy(&k.hi, addr, 8);
        std::memcpy(&k.lo, addr + 8, 8);
        return k;
    }
    static uint64_t key_word(const Key& k) { return k.tag; }
    static bool address_equal(const Slot& s, const Key& k) {
        return s.hi.load(std::memory_order_relaxed) == k.hi && s.lo.load(std::memory_order_relaxed) == k.lo;
    }
    // All three words at once, without a branch per word: the fast path's check.
    static bool mismatch(const Slot& s, const Key& k) {
        return ((s.key.load(std::memory_order_relaxed) ^ k.tag) | (s.hi.load(std::memory_order_relaxed) ^ k.hi) |
                (s.lo.load(std::memory_order_relaxed) ^ k.lo)) != 0;
    }
    static void store_address(Slot& s, const Key& k) {
        s.hi.store(k.hi, std::memory_order_relaxed);
        s.lo.store(k.lo, std::memory_order_relaxed);
    }
    static void read_key(const Slot& s, uint64_t tag, uint16_t* port, uint8_t* addr) {
        *port = static_cast<uint16_t>(tag - 1);
        uint64_t hi = s.hi.load(std::memory_order_relaxed), lo = s.lo.load(std::memory_order_relaxed);
        std::memcpy(addr, &hi, 8);
        std::memcpy(addr + 8, &lo, 8);
    }
    static uint32_t hash(const Key& k) {
        uint64_t h = (k.hi * 0x9E3779B97F4A7C15ull) ^ (k.lo * 0xC2B2AE3D27D4EB4Full) ^ (k.tag * 0x165667B19E3779F9ull);
        return static_cast<uint32_t>(h >> 40);
    }
};

using NeighborTable6 = BasicNeighborTable<NeighborFamily6>;

}  // namespace egw::dp
