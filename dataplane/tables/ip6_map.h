// SPDX-License-Identifier: Apache-2.0
//
// Ip6Map: an immutable open-addressing map from (IPv6 address, 16-bit scope) to 32-bit values,
// the IPv6 counterpart of FlatMap. The scope tells apart keys that share an address: a route's
// VRF and prefix length, 0 elsewhere.
//
// Writer: the control thread, while preparing a policy version: build() from a list, or a copy of
// its own previous map patched with assign()/erase() (all three may allocate), as FlatMap.
// Readers: worker lcores, through the PolicySnapshot that owns it, without locks.
// Publication: never modified after the snapshot holding it is published; a change builds a new
// snapshot (see policy.h). Reclamation: freed with its snapshot after an RCU grace period.
//
// Linear probing over a power-of-two array of 24-byte slots kept at most half full (LinearProbe,
// which FlatMap shares); the whole key
// is in the slot, so a lookup reads no other memory. The slot is the top bits of a multiplicative
// (Fibonacci) hash of both halves and the scope: every bit of the key reaches the top bits of a
// product, so addresses handed out in sequence, which differ only in their last bytes (pods of
// one /64), spread over the array instead of piling up in one probe run (the index was bits 32 and
// up, which the last bytes of an address never reach).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/tables/linear_probe.h"

namespace egw::dp {

struct Ip6MapSlot {
    uint64_t hi = 0;
    uint64_t lo = 0;
    uint32_t value = 0;
    uint16_t scope = 0;
    uint16_t used = 0;
};
static_assert(sizeof(Ip6MapSlot) == 24);

class Ip6Map : public LinearProbe<Ip6Map, Ip6MapSlot> {
public:
    static constexpr uint32_t kMissing = ~uint32_t{0};

    struct Item {
        uint8_t addr[16];
        uint16_t scope;
        uint32_t value;
    };

    Ip6Map() { build({}); }

    // Later duplicates of a key overwrite earlier ones.
    void build(const std::vector<Item>& items) {
        reset(capacity_for(items.size()));
        for (const Item& it : items) {
            const Slot s = slot(it.addr, it.scope, it.value);
            size_t i = probe_slot(s);
            if (vacant(slots_[i])) ++size_;
            slots_[i] = s;
        }
    }

    // Adds a key or replaces its value. Control thread, never on a published map. Grows the map
    // (allocating) to stay at most half full.
    void assign(const uint8_t* addr, uint16_t scope, uint32_t value) {
        const Slot s = slot(addr, scope, value);
        place(probe_slot(s), s, [&] { return probe_slot(s); });
    }

    // Removes a key; false when it was not there. Control thread, never on a published map.
    // Backward-shift deletion and shrinking below an eighth full, as FlatMap (LinearProbe::vacate).
    bool erase(const uint8_t* addr, uint16_t scope) {
        size_t at = probe_slot(slot(addr, scope, 0));
        if (vacant(slots_[at])) return false;
        vacate(at);
        return true;
    }

    uint32_t find(const uint8_t* addr, uint16_t scope = 0) const {
        uint64_t hi, lo;
        std::memcpy(&hi, addr, 8);
        std::memcpy(&lo, addr + 8, 8);
        const Slot& s = slots_[probe(hi, lo, scope)];
        return s.used ? s.value : kMissing;
    }
    bool contains(const uint8_t* addr, uint16_t scope = 0) const { return find(addr, scope) != kMissing; }
    // A hint for a find() to come, as FlatMap::prefetch(): loads the key's home slot (a 24-byte
    // slot may straddle two lines; the first is the one its key starts in).
    void prefetch(const uint8_t* addr, uint16_t scope = 0) const {
        uint64_t hi, lo;
        std::memcpy(&hi, addr, 8);
        std::memcpy(&lo, addr + 8, 8);
        __builtin_prefetch(&slots_[slot_of(hi, lo, scope)], 0, 3);
    }

    // The most slots a lookup of a present key reads (1: none is displaced), for tests.
    size_t longest_probe() const {
        size_t longest = 0;
        for (size_t at = 0; at < slots_.size(); ++at) {
            const Slot& s = slots_[at];
            if (!s.used) continue;
            longest = std::max(longest, ((at - home(s)) & mask_) + 1);
        }
        return longest;
    }

    // Every entry, for listings on the control thread.
    template <class F>
    void for_each(F&& f) const {
        for (const Slot& s : slots_) {
            if (!s.used) continue;
            uint8_t a[16];
            std::memcpy(a, &s.hi, 8);
            std::memcpy(a + 8, &s.lo, 8);
            f(a, s.scope, s.value);
        }
    }

private:
    using Slot = Ip6MapSlot;
    friend class LinearProbe<Ip6Map, Ip6MapSlot>;

    static Slot slot(const uint8_t* addr, uint16_t scope, uint32_t value) {
        Slot s;
        std::memcpy(&s.hi, addr, 8);
        std::memcpy(&s.lo, addr + 8, 8);
        s.value = value;
        s.scope = scope;
        s.used = 1;
        return s;
    }
    static bool vacant(const Slot& s) { return !s.used; }
    size_t home(const Slot& s) const { return slot_of(s.hi, s.lo, s.scope); }
    size_t probe_slot(const Slot& s) const { return probe(s.hi, s.lo, s.scope); }
    void resized(size_t cap) { shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(cap)); }

    size_t slot_of(uint64_t hi, uint64_t lo, uint16_t scope) const {
        uint64_t h =
            (hi * 0x9E3779B97F4A7C15ull) ^ (lo * 0xC2B2AE3D27D4EB4Full) ^ (uint64_t{scope} * 0x165667B19E3779F9ull);
        return static_cast<size_t>(h >> shift_);
    }
    size_t probe(uint64_t hi, uint64_t lo, uint16_t scope) const {
        return probe_from(slot_of(hi, lo, scope),
                          [&](const Slot& s) { return s.hi == hi && s.lo == lo && s.scope == scope; });
    }

    unsigned shift_ = 60;  // 64 - log2(slots): the product's top bits index the slots
};

}  // namespace egw::dp
