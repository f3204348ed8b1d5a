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
// Linear probing over a power-of-two slot array kept at most half full, so a miss ends within a
// couple of cache lines. Keys are IPv4 addresses or packed route keys; ~0 marks an empty slot.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace egw::dp {

class FlatMap {
public:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    static constexpr uint32_t kMissing = ~uint32_t{0};

    FlatMap() { build({}); }

    // The slot count build() gives `n` keys: a power of two, at least twice `n`.
    static size_t capacity_for(size_t n) {
        size_t cap = 16;
        while (cap < n * 2)
            cap <<= 1;
        return cap;
    }

    // Later duplicates of a key overwrite earlier ones.
    void build(const std::vector<std::pair<uint64_t, uint32_t>>& items) {
        reset(capacity_for(items.size()));
        for (auto& [k, v] : items) {
            size_t i = probe(k);
            if (slots_[i].key == kEmpty) ++size_;
            slots_[i] = Slot{k, v};
        }
    }

    // Adds a key or replaces its value. Control thread, never on a published map. Grows the map
    // (allocating) to stay at most half full.
    void assign(uint64_t key, uint32_t value) {
        size_t i = probe(key);
        if (slots_[i].key == kEmpty) {
            if ((size_ + 1) * 2 > slots_.size()) {
                rehash(capacity_for(size_ + 1));
                i = probe(key);
            }
            ++size_;
        }
        slots_[i] = Slot{key, value};
    }

    // Makes room for `n` keys in all, so that a large batch of assign() grows the map once.
    // Control thread, never on a published map.
    void reserve(size_t n) {
        if (capacity_for(n) > slots_.size()) rehash(capacity_for(n));
    }

    // Removes a key; false when it was not there. Control thread, never on a published map.
    // Shrinks the map (allocating) once it is less than an eighth full, so that a map that held
    // many keys does not keep costing its size in every copy; the gap to the growth threshold
    // keeps a key that comes and goes at the boundary from rehashing every time.
    bool erase(uint64_t key) {
        size_t hole = probe(key);
        if (slots_[hole].key == kEmpty) return false;
        // Backward-shift deletion instead of tombstones: later members of the probe run move
        // into the hole unless their home slot lies after it, so a lookup can still stop at the
        // first empty slot.
        for (size_t j = (hole + 1) & mask_; slots_[j].key != kEmpty; j = (j + 1) & mask_) {
            size_t home = slot_of(slots_[j].key);
            bool home_after_hole = hole <= j ? hole < home && home <= j : hole < home || home <= j;
            if (!home_after_hole) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole] = Slot{kEmpty, 0};
        --size_;
        if (slots_.size() > 16 && size_ * 8 < slots_.size()) rehash(capacity_for(size_));
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
    size_t size() const { return size_; }
    size_t capacity() const { return slots_.size(); }
    size_t memory_bytes() const { return slots_.size() * sizeof(Slot); }

    template <class F>
    void for_each(F&& f) const {
        for (auto& s : slots_)
            if (s.key != kEmpty) f(s.key, s.value);
    }

private:
    struct Slot {
        uint64_t key;
        uint32_t value;
    };

    size_t slot_of(uint64_t key) const {
        // Fibonacci hashing: the high bits of the product are well mixed even for sequential IPs.
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
    }

    // The slot holding `key`, or the empty slot where it would go.
    size_t probe(uint64_t key) const {
        size_t i = slot_of(key);
        while (slots_[i].key != kEmpty && slots_[i].key != key)
            i = (i + 1) & mask_;
        return i;
    }

    void reset(size_t cap) {
        slots_.assign(cap, Slot{kEmpty, 0});
        mask_ = cap - 1;
        size_ = 0;
    }

    void rehash(size_t cap) {
        std::vector<Slot> old;
        old.swap(slots_);
        reset(cap);
        for (const Slot& s : old)
            if (s.key != kEmpty) {
                slots_[probe(s.key)] = s;
                ++size_;
            }
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace egw::dp
