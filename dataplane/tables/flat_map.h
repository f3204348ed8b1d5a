// SPDX-License-Identifier: Apache-2.0
//
// FlatMap: an immutable open-addressing map from 64-bit keys to 32-bit values.
//
// Writer: the control thread, while preparing a policy version: build() from a list, or a copy of
// its own previous map patched with assign()/erase() (all three may allocate).
// Readers: worker lcores, through the PolicySnapshot that owns it, without locks.
// Publication: never modified after the snapshot holding it is published; a change builds a new
// snapshot (see policy.h). Reclamation: freed with its snapshot after an RCU grace period.
//
// Linear probing over a power-of-two slot array kept at most half full (LinearProbe, which Ip6Map
// shares), so a miss ends within a couple of cache lines. Keys are IPv4 addresses or packed route keys; ~0 marks an
// empty slot.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "dataplane/tables/linear_probe.h"

namespace egw::dp {

struct FlatMapSlot {
    uint64_t key = ~uint64_t{0};  // ~0: vacant
    uint32_t value = 0;
};

class FlatMap : public LinearProbe<FlatMap, FlatMapSlot> {
public:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    static constexpr uint32_t kMissing = ~uint32_t{0};

    FlatMap() { build({}); }

    // Later duplicates of a key overwrite earlier ones.
    void build(const std::vector<std::pair<uint64_t, uint32_t>>& items) {
        reset(capacity_for(items.size()));
        for (auto& [k, v] : items) {
            size_t i = probe(k);
            if (vacant(slots_[i])) ++size_;
            slots_[i] = Slot{k, v};
        }
    }

    // Adds a key or replaces its value. Control thread, never on a published map. Grows the map
    // (allocating) to stay at most half full.
    void assign(uint64_t key, uint32_t value) {
        place(probe(key), Slot{key, value}, [&] { return probe(key); });
    }

    // Makes room for `n` keys in all, so that a large batch of assign() grows the map once.
    // Control thread, never on a published map.
    void reserve(size_t n) {
        if (capacity_for(n) > slots_.size()) rehash(capacity_for(n));
    }

    // Removes a key; false when it was not there. Control thread, never on a published map.
    // Shrinks the map (allocating) once it is less than an eighth full (LinearProbe::vacate).
    bool erase(uint64_t key) {
        size_t at = probe(key);
        if (vacant(slots_[at])) return false;
        vacate(at);
        return true;
    }

    uint32_t find(uint64_t key) const {
        size_t i = slot_of(key);
        for (;;) {
            const Slot& s = slots_[i];
            if (s.key == key) return s.value;
            if (s.key == kEmpty) return kMissing;
            i = (i + 1) & mask_;
        }
    }

    bool contains(uint64_t key) const { return find(key) != kMissing; }

    // A hint for a find() to come: loads the key's home slot, so that a batch of lookups waits
    // for memory once rather than once per key. Changes nothing.
    void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[slot_of(key)], 0, 3); }
    size_t memory_bytes() const { return slots_.size() * sizeof(Slot); }

    template <class F>
    void for_each(F&& f) const {
        for (auto& s : slots_)
            if (s.key != kEmpty) f(s.key, s.value);
    }

private:
    using Slot = FlatMapSlot;
    friend class LinearProbe<FlatMap, FlatMapSlot>;

    static bool vacant(const Slot& s) { return s.key == kEmpty; }
    size_t home(const Slot& s) const { return slot_of(s.key); }
    size_t probe_slot(const Slot& s) const { return probe(s.key); }

    size_t slot_of(uint64_t key) const {
        // Fibonacci hashing: the high bits of the product are well mixed even for sequential IPs.
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
    }

    // The slot holding `key`, or the empty slot where it would go.
    size_t probe(uint64_t key) const {
        return probe_from(slot_of(key), [key](const Slot& s) { return s.key == key; });
    }
};

}  // namespace egw::dp
