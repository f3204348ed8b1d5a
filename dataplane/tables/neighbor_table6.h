// SPDX-License-Identifier: Apache-2.0
//
// NeighborTable6: next-hop MAC addresses per (port, IPv6 address), resolved by Neighbor
// Solicitation; the IPv6 twin of NeighborTable (neighbor_table.h), with the same rules.
//
// Why a table of its own rather than one table with a wider key: IPv4's key, (port, address), is
// one 64-bit word, so its slot is 32 bytes and the fast path's key check is one compare; widening
// it to hold 128-bit addresses would make every IPv4 slot a cache line and its check three
// compares, for a family that does not need it. An IPv6 key is three words (a tag holding the
// port, and the address's two halves), which no single atomic load can read: the tag alone
// carries the slot's state (empty, tombstone, keyed), and the address words are written only
// while the slot is free and no reader may still look at its old key (below). One 64-byte slot
// holds key, MAC and the used mark.
//
// Writer: the control thread only (control/neighbor: Neighbor Advertisements handed over by the
// workers, static entries from the configuration, aging). Readers: worker lcores, lock-free, on
// every IPv6 packet they transmit; they also set a slot's `used` word (a plain store, only when it
// is clear), which the control thread reads and clears.
// Publication: in place. A new key's address words are stored before its tag (release); its MAC
// word, with its own valid bit, after the key (release). A reader takes the MAC (acquire) and then
// compares tag and address with the key it expects, so it sees "unresolved", or a complete MAC
// with the key it belongs to.
// Slots change hands: an erased entry's MAC is cleared, then its tag becomes a tombstone; the
// address words stay. The slot takes a new key (new address words, then the tag) only after every
// worker has passed a quiescent state since (the writer holds it with an RCU token and calls
// release()): a reader in the middle of find() or resolve() never sees address words of a later
// key beside the tag of the one it expects.
// Reclamation: the table is sized at start (arp.max_neighbors, as the IPv4 table) and freed at
// shutdown after the workers have stopped.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>

namespace egw::dp {

class NeighborTable6 {
public:
    static constexpr uint32_t kNone = ~uint32_t{0};

    explicit NeighborTable6(uint32_t capacity) {
        cap_ = 16;
        while (cap_ < capacity * 2)
            cap_ <<= 1;
        slots_ = std::make_unique<Slot[]>(cap_);
        state_ = std::make_unique<uint8_t[]>(cap_);
        for (uint32_t i = 0; i < cap_; ++i) {
            slots_[i].tag.store(0, std::memory_order_relaxed);
            slots_[i].hi.store(0, std::memory_order_relaxed);
            slots_[i].lo.store(0, std::memory_order_relaxed);
            slots_[i].mac.store(0, std::memory_order_relaxed);
            slots_[i].used.store(0, std::memory_order_relaxed);
            state_[i] = kFree;
        }
        limit_ = capacity;
    }

    // Reader side. The slot of (port, addr) (16 bytes, network order), or kNone.
    uint32_t find(uint16_t port, const uint8_t* addr) const {
        const uint64_t tag = tag_of(port);
        uint64_t hi, lo;
        split(addr, hi, lo);
        uint32_t i = slot_of(tag, hi, lo);
        for (uint32_t n = 0; n < cap_; ++n) {
            const Slot& s = slots_[i];
            uint64_t t = s.tag.load(std::memory_order_acquire);
            if (t == tag && s.hi.load(std::memory_order_relaxed) == hi && s.lo.load(std::memory_order_relaxed) == lo)
                return i;
            if (t == 0) return kNone;
            i = (i + 1) & (cap_ - 1);
        }
        return kNone;
    }

    // Reader side, the fast path: when `slot` holds (port, addr) with a MAC, copies the MAC to
    // `out` (6 bytes), notes that the entry is in use and returns true. False for an unresolved
    // entry and for a slot that holds another key now (look the key up again).
    bool resolve(uint32_t slot, uint16_t port, const uint8_t* addr, uint8_t* out) {
        Slot& s = slots_[slot];
        uint64_t m = s.mac.load(std::memory_order_acquire);
        if (!(m & kValid)) return false;
        uint64_t hi, lo;
        split(addr, hi, lo);
        if (((s.tag.load(std::memory_order_relaxed) ^ tag_of(port)) | (s.hi.load(std::memory_order_relaxed) ^ hi) |
             (s.lo.load(std::memory_order_relaxed) ^ lo)) != 0)
            return false;
        if (!s.used.load(std::memory_order_relaxed)) s.used.store(1, std::memory_order_relaxed);
        unpack(m, out);
        return true;
    }

    // Reader side: copies the MAC into `out` (6 bytes) when resolved, whatever the key.
    bool mac(uint32_t slot, uint8_t* out) const {
        uint64_t m = slots_[slot].mac.load(std::memory_order_acquire);
        if (!(m & kValid)) return false;
        unpack(m, out);
        return true;
    }

    // Writer side (control thread only). Returns kNone when the table is full.
    uint32_t insert(uint16_t port, const uint8_t* addr) {
        const uint64_t tag = tag_of(port);
        uint64_t hi, lo;
        split(addr, hi, lo);
        uint32_t i = slot_of(tag, hi, lo);
        uint32_t reuse = kNone;  // the first tombstone on the way that may take a key
        uint32_t n = 0;
        for (; n < cap_; ++n) {
            const Slot& s = slots_[i];
            uint64_t t = s.tag.load(std::memory_order_relaxed);
            if (t == tag && s.hi.load(std::memory_order_relaxed) == hi && s.lo.load(std::memory_order_relaxed) == lo)
                return i;
            if (t == 0) break;
            if (t == kTombstone && state_[i] == kFree && reuse == kNone) reuse = i;
            i = (i + 1) & (cap_ - 1);
        }
        if (used_ >= limit_) return kNone;
        if (reuse != kNone)
            i = reuse;
        else if (n == cap_)
            return kNone;  // tombstones everywhere, all still cooling
        ++used_;
        state_[i] = kKeyed;
        Slot& s = slots_[i];
        s.used.store(0, std::memory_order_relaxed);
        s.mac.store(0, std::memory_order_relaxed);
        s.hi.store(hi, std::memory_order_relaxed);
        s.lo.store(lo, std::memory_order_relaxed);
        s.tag.store(tag, std::memory_order_release);
        return i;
    }

    void set_mac(uint32_t slot, const uint8_t* mac6) {
        uint64_t m = kValid;
        for (int b = 0; b < 6; ++b)
            m |= uint64_t{mac6[b]} << (8 * b);
        slots_[slot].mac.store(m, std::memory_order_release);
    }

    void invalidate(uint32_t slot) { slots_[slot].mac.store(0, std::memory_order_release); }

    // Writer side: takes the entry out. The slot cools until release(slot), which the writer
    // calls once every worker has passed a quiescent state since.
    void erase(uint32_t slot) {
        if (state_[slot] != kKeyed) return;
        slots_[slot].mac.store(0, std::memory_order_release);
        slots_[slot].tag.store(kTombstone, std::memory_order_release);
        state_[slot] = kCooling;
        --used_;
    }

    // Writer side: a cooled slot may take a key again. Tombstones that end a run of slots become
    // empty again, so that lookups of absent keys keep stopping early.
    void release(uint32_t slot) {
        if (state_[slot] != kCooling) return;
        state_[slot] = kFree;
        uint32_t i = slot;
        while (slots_[(i + 1) & (cap_ - 1)].tag.load(std::memory_order_relaxed) == 0 &&
               slots_[i].tag.load(std::memory_order_relaxed) == kTombstone && state_[i] == kFree) {
            slots_[i].tag.store(0, std::memory_order_release);
            i = (i - 1) & (cap_ - 1);
            if (i == slot) break;
        }
    }

    // Writer side: whether a worker sent through the slot since the last call; clears the mark.
    bool take_used(uint32_t slot) {
        if (!slots_[slot].used.load(std::memory_order_relaxed)) return false;
        slots_[slot].used.store(0, std::memory_order_relaxed);
        return true;
    }

    uint32_t used() const { return used_; }
    uint32_t capacity() const { return limit_; }
    uint32_t slot_count() const { return cap_; }
    // For listings on the control thread: the key of a keyed slot.
    bool slot_key(uint32_t slot, uint16_t* port, uint8_t* addr) const {
        uint64_t t = slots_[slot].tag.load(std::memory_order_acquire);
        if (t == 0 || t == kTombstone) return false;
        *port = static_cast<uint16_t>(t - 1);
        uint64_t hi = slots_[slot].hi.load(std::memory_order_relaxed),
                 lo = slots_[slot].lo.load(std::memory_order_relaxed);
        std::memcpy(addr, &hi, 8);
        std::memcpy(addr + 8, &lo, 8);
        return true;
    }

private:
    static constexpr uint64_t kValid = uint64_t{1} << 63;
    // Never a tag_of() value (ports are 16 bits).
    static constexpr uint64_t kTombstone = ~uint64_t{0};
    static constexpr uint8_t kFree = 0;  // empty or a tombstone that may take a key
    static constexpr uint8_t kKeyed = 1;
    static constexpr uint8_t kCooling = 2;  // erased; workers may still be reading its old key

    struct alignas(64) Slot {
        std::atomic<uint64_t> tag;  // 0 empty, kTombstone, else port + 1
        std::atomic<uint64_t> hi;   // the address's first and last 8 bytes, as memcpy reads them
        std::atomic<uint64_t> lo;
        std::atomic<uint64_t> mac;
        std::atomic<uint32_t> used;
    };
    static_assert(sizeof(Slot) == 64);

    static uint64_t tag_of(uint16_t port) { return uint64_t{port} + 1; }
    static void split(const uint8_t* addr, uint64_t& hi, uint64_t& lo) {
        std::memcpy(&hi, addr, 8);
        std::memcpy(&lo, addr + 8, 8);
    }
    static void unpack(uint64_t m, uint8_t* out) {
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(out, &m, 6);
        } else {
            for (int b = 0; b < 6; ++b)
                out[b] = static_cast<uint8_t>(m >> (8 * b));
        }
    }
    uint32_t slot_of(uint64_t tag, uint64_t hi, uint64_t lo) const {
        uint64_t h = (hi * 0x9E3779B97F4A7C15ull) ^ (lo * 0xC2B2AE3D27D4EB4Full) ^ (tag * 0x165667B19E3779F9ull);
        return static_cast<uint32_t>(h >> 40) & (cap_ - 1);
    }

    std::unique_ptr<Slot[]> slots_;
    std::unique_ptr<uint8_t[]> state_;  // writer only
    uint32_t cap_ = 0;
    uint32_t limit_ = 0;
    uint32_t used_ = 0;
};

}  // namespace egw::dp
