// SPDX-License-Identifier: Apache-2.0
//
// NeighborTable and NeighborTable6: next-hop MAC addresses per (port, IPv4 address), resolved by
// ARP, and per (port, IPv6 address), resolved by Neighbor Solicitation; two tables of one design
// (BasicNeighborTable below, one instance per family; the IPv6 family is in neighbor_table6.h).
//
// Why two tables rather than one with a wider key: IPv4's key, (port, address), is one 64-bit
// word, so its slot is 32 bytes and the fast path's key check is one compare; widening it to hold
// 128-bit addresses would make every IPv4 slot a cache line and its check three compares, for a
// family that does not need it. An IPv6 key is three words (a tag holding the port, and the
// address's two halves), which no single atomic load can read. So each slot has one key word that
// alone carries the slot's state (empty, tombstone, keyed): IPv4's whole key, IPv6's tag; IPv6's
// address words are written only while the slot is free and no reader may still look at its old
// key (below). IPv6's 64-byte slot holds key, MAC and the used mark on one cache line, as IPv4's.
//
// Writer: the control thread only (control/neighbor: ARP replies and Neighbor Advertisements
// handed over by the workers, static entries from the configuration, aging). Readers: worker
// lcores, lock-free, for each next hop of every burst they transmit (output.cpp keeps the MAC for
// the rest of the burst); they also set a slot's `used` word (a plain store, and only when it is
// clear), which the control thread reads and clears to know which entries carry traffic.
// Publication: in place. A new key's address words (IPv6) are stored before its key word
// (release); the MAC word carries its own valid bit and is written after the key with release
// order. A reader takes the MAC (acquire) and then compares the key with the one it expects, so
// it sees either "unresolved" or a complete MAC with the key it belongs to, never a torn one.
// Slots change hands: an entry that ages out or is recycled is erased (MAC cleared, then the key
// word replaced by a tombstone; IPv6's address words stay), and its slot may later hold another
// (port, address). Workers cache slot numbers in sessions, so a cached slot is only a hint:
// resolve() reads the MAC word and then the key, and takes the MAC only when the key is still the
// one the caller expects; otherwise the caller looks the next hop up again with find(). The
// session's (port, next hop), which it keeps anyway, is the check, so the IPv4 fast path pays one
// compare on the cache line it reads the MAC from. A slot changes key only when the MAC was
// cleared first.
// Reclamation: an erased slot is not given a new key until every worker has passed a quiescent
// state since (the writer holds it with an RCU token and calls release()); so a reader in the
// middle of find() or resolve() cannot see a MAC or address words of a later key together with
// the key word it expects after the slot went round to another key and back. The tables
// themselves are sized at start (config arp.max_neighbors, each) and freed at shutdown after the
// workers have stopped.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>

namespace egw::dp {

// What the table needs to know of a family: its address and key types, its slot, how a slot's key
// is compared, stored and read back beyond the key word, and the hash.
struct NeighborFamily4 {
    using Addr = uint32_t;      // host order
    using AddrOut = uint32_t*;  // where slot_key() writes it
    using Key = uint64_t;       // port + 1 above the address: the key word itself

    // Key, MAC and the used mark on one cache line.
    struct alignas(32) Slot {
        std::atomic<uint64_t> key;
        std::atomic<uint64_t> mac;
        std::atomic<uint32_t> used;
    };
    static_assert(sizeof(Slot) == 32);

    static Key make_key(uint16_t port, uint32_t ip) { return (uint64_t{port} + 1) << 32 | ip; }
    static uint64_t key_word(Key k) { return k; }
    // The key word is the whole key.
    static bool address_equal(const Slot&, Key) { return true; }
    static bool mismatch(const Slot& s, Key k) { return s.key.load(std::memory_order_relaxed) != k; }
    static void store_address(Slot&, Key) {}
    static void read_key(const Slot&, uint64_t k, uint16_t* port, uint32_t* ip) {
        *port = static_cast<uint16_t>((k >> 32) - 1);
        *ip = static_cast<uint32_t>(k);
    }
    static uint32_t hash(Key k) { return static_cast<uint32_t>((k * 0x9E3779B97F4A7C15ull) >> 40); }
};

template <class F>
class BasicNeighborTable {
public:
    using Addr = typename F::Addr;
    using Key = typename F::Key;
    static constexpr uint32_t kNone = ~uint32_t{0};

    explicit BasicNeighborTable(uint32_t capacity) {
        cap_ = 16;
        while (cap_ < capacity * 2)
            cap_ <<= 1;
        slots_ = std::make_unique<Slot[]>(cap_);
        state_ = std::make_unique<uint8_t[]>(cap_);
        for (uint32_t i = 0; i < cap_; ++i) {
            slots_[i].key.store(0, std::memory_order_relaxed);
            F::store_address(slots_[i], Key{});
            slots_[i].mac.store(0, std::memory_order_relaxed);
            slots_[i].used.store(0, std::memory_order_relaxed);
            state_[i] = kFree;
        }
        limit_ = capacity;
    }

    static Key make_key(uint16_t port, Addr ip) { return F::make_key(port, ip); }

    // Reader side. Returns the slot of (port, ip) or kNone.
    uint32_t find(uint16_t port, Addr ip) const {
        const Key key = make_key(port, ip);
        uint32_t i = slot_of(key);
        for (uint32_t n = 0; n < cap_; ++n) {
            const Slot& s = slots_[i];
            uint64_t k = s.key.load(std::memory_order_acquire);
            if (k == F::key_word(key) && F::address_equal(s, key)) return i;
            if (k == 0) return kNone;
            i = (i + 1) & (cap_ - 1);
        }
        return kNone;
    }

    // Reader side, the fast path: when `slot` holds `key` (make_key) with a MAC, copies the MAC to
    // `out` (6 bytes), notes that the entry is in use and returns true. False for an unresolved
    // entry and for a slot that holds another key now (look the key up again).
    bool resolve(uint32_t slot, const Key& key, uint8_t* out) {
        Slot& s = slots_[slot];
        uint64_t m = s.mac.load(std::memory_order_acquire);
        if (!(m & kValid) || F::mismatch(s, key)) return false;
        if (!s.used.load(std::memory_order_relaxed)) s.used.store(1, std::memory_order_relaxed);
        unpack(m, out);
        return true;
    }

    bool resolve(uint32_t slot, uint16_t port, Addr ip, uint8_t* out) { return resolve(slot, make_key(port, ip), out); }

    // The same, giving the MAC word itself: on little-endian hosts its first six bytes in memory
    // are the MAC (the other two are the valid bit's: a caller storing the word overwrites them).
    bool resolve_word(uint32_t slot, const Key& key, uint64_t& word) {
        Slot& s = slots_[slot];
        uint64_t m = s.mac.load(std::memory_order_acquire);
        if (!(m & kValid) || F::mismatch(s, key)) return false;
        if (!s.used.load(std::memory_order_relaxed)) s.used.store(1, std::memory_order_relaxed);
        word = m;
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
    uint32_t insert(uint16_t port, Addr ip) {
        const Key key = make_key(port, ip);
        uint32_t i = slot_of(key);
        uint32_t reuse = kNone;  // the first tombstone on the way that may take a key
        uint32_t n = 0;
        for (; n < cap_; ++n) {
            const Slot& s = slots_[i];
            uint64_t k = s.key.load(std::memory_order_relaxed);
            if (k == F::key_word(key) && F::address_equal(s, key)) return i;
            if (k == 0) break;
            if (k == kTombstone && state_[i] == kFree && reuse == kNone) reuse = i;
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
        F::store_address(s, key);
        s.key.store(F::key_word(key), std::memory_order_release);
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
        slots_[slot].key.store(kTombstone, std::memory_order_release);
        state_[slot] = kCooling;
        --used_;
    }

    // Writer side: a cooled slot may take a key again. Tombstones that end a run of slots become
    // empty again, so that lookups of absent keys keep stopping early.
    void release(uint32_t slot) {
        if (state_[slot] != kCooling) return;
        state_[slot] = kFree;
        uint32_t i = slot;
        while (slots_[(i + 1) & (cap_ - 1)].key.load(std::memory_order_relaxed) == 0 &&
               slots_[i].key.load(std::memory_order_relaxed) == kTombstone && state_[i] == kFree) {
            // No key lives past an empty slot that its probe would have to cross, so none needs
            // this tombstone.
            slots_[i].key.store(0, std::memory_order_release);
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
    bool slot_key(uint32_t slot, uint16_t* port, typename F::AddrOut ip) const {
        uint64_t k = slots_[slot].key.load(std::memory_order_acquire);
        if (k == 0 || k == kTombstone) return false;
        F::read_key(slots_[slot], k, port, ip);
        return true;
    }

private:
    using Slot = typename F::Slot;
    static constexpr uint64_t kValid = uint64_t{1} << 63;
    // Never a key word (ports are 16 bits).
    static constexpr uint64_t kTombstone = ~uint64_t{0};
    // The writer's view of a slot (state_).
    static constexpr uint8_t kFree = 0;  // empty or a tombstone that may take a key
    static constexpr uint8_t kKeyed = 1;
    static constexpr uint8_t kCooling = 2;  // erased; workers may still be reading its old key

    static void unpack(uint64_t m, uint8_t* out) {
        // Bytes were packed least significant first, so on little-endian hosts the first six
        // bytes of the word are the MAC in order.
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(out, &m, 6);
        } else {
            for (int b = 0; b < 6; ++b)
                out[b] = static_cast<uint8_t>(m >> (8 * b));
        }
    }
    uint32_t slot_of(const Key& key) const { return F::hash(key) & (cap_ - 1); }

    std::unique_ptr<Slot[]> slots_;
    std::unique_ptr<uint8_t[]> state_;  // writer only
    uint32_t cap_ = 0;
    uint32_t limit_ = 0;
    uint32_t used_ = 0;
};

using NeighborTable = BasicNeighborTable<NeighborFamily4>;

}  // namespace egw::dp
