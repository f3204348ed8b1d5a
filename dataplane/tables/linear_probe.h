// SPDX-License-Identifier: Apache-2.0
//
// LinearProbe: the slot array that FlatMap (64-bit keys) and Ip6Map (IPv6 address and scope)
// share, written once for both: a power-of-two array kept at most half full, growth and shrinking,
// and deletion by backward shift. Each map keeps its own key, hash and lookup, which are what
// differ between them and what the packet path reads.
//
// `Map` (CRTP) provides
//   static bool vacant(const Slot&)        whether a slot holds no key;
//   size_t home(const Slot&) const         the slot its key hashes to;
//   size_t probe_slot(const Slot&) const   the slot holding its key, or the vacant one where
//                                          it would go;
//   void resized(size_t slots)             (optional work) after the array changed size.
// A default-constructed Slot is vacant.
//
// Writer and readers as the maps': the control thread changes it, never once published.
#pragma once

#include <cstddef>
#include <vector>

namespace egw::dp {

template <class Map, class Slot>
class LinearProbe {
public:
    // The slot count a map of `n` keys gets: a power of two, at least twice `n`.
    static size_t capacity_for(size_t n) {
        size_t cap = 16;
        while (cap < n * 2)
            cap <<= 1;
        return cap;
    }

    size_t size() const { return size_; }
    size_t capacity() const { return slots_.size(); }

protected:
    // The first slot from `i` on that is vacant or that `holds` accepts.
    template <class Holds>
    size_t probe_from(size_t i, Holds&& holds) const {
        while (!Map::vacant(slots_[i]) && !holds(slots_[i]))
            i = (i + 1) & mask_;
        return i;
    }

    // Puts `s` at `i`, the slot probing found for its key; when that slot was vacant, first grows
    // the array (allocating) to stay at most half full, and asks `reprobe` where the key goes in
    // the new one.
    template <class Reprobe>
    void place(size_t i, const Slot& s, Reprobe&& reprobe) {
        if (Map::vacant(slots_[i])) {
            if ((size_ + 1) * 2 > slots_.size()) {
                rehash(capacity_for(size_ + 1));
                i = reprobe();
            }
            ++size_;
        }
        slots_[i] = s;
    }

    // Empties slot `hole`, which holds a key. Backward-shift deletion instead of tombstones:
    // later members of the probe run move into the hole unless their home slot lies after it, so
    // a lookup can still stop at the first vacant slot. Shrinks the array (allocating) once it is
    // less than an eighth full, so that a map that held many keys does not keep costing its size
    // in every copy; the gap to the growth threshold keeps a key that comes and goes at the
    // boundary from rehashing every time.
    void vacate(size_t hole) {
        for (size_t j = (hole + 1) & mask_; !Map::vacant(slots_[j]); j = (j + 1) & mask_) {
            size_t home = map().home(slots_[j]);
            bool home_after_hole = hole <= j ? hole < home && home <= j : hole < home || home <= j;
            if (!home_after_hole) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole] = Slot{};
        --size_;
        if (slots_.size() > 16 && size_ * 8 < slots_.size()) rehash(capacity_for(size_));
    }

    void reset(size_t cap) {
        slots_.assign(cap, Slot{});
        mask_ = cap - 1;
        size_ = 0;
        map().resized(cap);
    }

    void rehash(size_t cap) {
        std::vector<Slot> old;
        old.swap(slots_);
        reset(cap);
        for (const Slot& s : old)
            if (!Map::vacant(s)) {
                slots_[map().probe_slot(s)] = s;
                ++size_;
            }
    }

    void resized(size_t) {}

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;

private:
    Map& map() { return static_cast<Map&>(*this); }
    const Map& map() const { return static_cast<const Map&>(*this); }
};

}  // namespace egw::dp
