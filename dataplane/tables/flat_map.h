// SPDX-License-Identifier: Apache-2.0
//
// FlatMap: an immutable open-addressing map from 64-bit keys to 32-bit values.
//
// Writer: the control thread builds one while preparing a policy version (build() allocates).
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

    // Later duplicates of a key overwrite earlier ones.
    void build(const std::vector<std::pair<uint64_t, uint32_t>>& items) {
        size_t cap = 16;
        while (cap < items.size() * 2)
            cap <<= 1;
        slots_.assign(cap, Slot{kEmpty, 0});
        mask_ = cap - 1;
        size_ = 0;
        for (auto& [k, v] : items) {
            size_t i = slot_of(k);
            while (slots_[i].key != kEmpty && slots_[i].key != k)
                i = (i + 1) & mask_;
            if (slots_[i].key == kEmpty)
                ++size_;
            slots_[i] = Slot{k, v};
        }
    }

    uint32_t find(uint64_t key) const {
        size_t i = slot_of(key);
        for (;;) {
            const Slot& s = slots_[i];
            if (s.key == key)
                return s.value;
            if (s.key == kEmpty)
                return kMissing;
            i = (i + 1) & mask_;
        }
    }

    bool contains(uint64_t key) const { return find(key) != kMissing; }
    size_t size() const { return size_; }
    size_t memory_bytes() const { return slots_.size() * sizeof(Slot); }

    template <class F>
    void for_each(F&& f) const {
        for (auto& s : slots_)
            if (s.key != kEmpty)
                f(s.key, s.value);
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

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace egw::dp
