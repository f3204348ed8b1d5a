// SPDX-License-Identifier: Apache-2.0
//
// NeighborTable: next-hop MAC addresses per (port, IPv4 address).
//
// Writer: the control thread only (ARP replies handed over by the workers, static entries from
// the configuration). Readers: worker lcores, lock-free, on every packet they transmit.
// Publication: updated in place. A slot, once given to a (port, ip) key, keeps that key for the
// life of the process, so workers may cache slot numbers in sessions. The key word is written
// with release order after the MAC word, and the MAC word carries its own valid bit, so a reader
// sees either "unresolved" or a complete MAC, never a torn one.
// Reclamation: none needed; the table is sized at start (config arp.max_neighbors) and freed at
// shutdown after the workers have stopped.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>

namespace egw::dp {

class NeighborTable {
public:
    static constexpr uint32_t kNone = ~uint32_t{0};

    explicit NeighborTable(uint32_t capacity) {
        cap_ = 16;
        while (cap_ < capacity * 2)
            cap_ <<= 1;
        slots_ = std::make_unique<Slot[]>(cap_);
        for (uint32_t i = 0; i < cap_; ++i) {
            slots_[i].key.store(0, std::memory_order_relaxed);
            slots_[i].mac.store(0, std::memory_order_relaxed);
        }
        limit_ = capacity;
    }

    static uint64_t make_key(uint16_t port, uint32_t ip) { return (uint64_t{port} + 1) << 32 | ip; }

    // Reader side. Returns the slot of (port, ip) or kNone.
    uint32_t find(uint16_t port, uint32_t ip) const {
        uint64_t key = make_key(port, ip);
        uint32_t i = slot_of(key);
        for (uint32_t n = 0; n < cap_; ++n) {
            uint64_t k = slots_[i].key.load(std::memory_order_acquire);
            if (k == key)
                return i;
            if (k == 0)
                return kNone;
            i = (i + 1) & (cap_ - 1);
        }
        return kNone;
    }

    // Reader side: copies the MAC into `out` (6 bytes) when resolved.
    bool mac(uint32_t slot, uint8_t* out) const {
        uint64_t m = slots_[slot].mac.load(std::memory_order_acquire);
        if (!(m & kValid))
            return false;
        // Bytes were packed least significant first, so on little-endian hosts the first six
        // bytes of the word are the MAC in order.
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(out, &m, 6);
        } else {
            for (int b = 0; b < 6; ++b)
                out[b] = static_cast<uint8_t>(m >> (8 * b));
        }
        return true;
    }

    // Writer side (control thread only). Returns kNone when the table is full.
    uint32_t insert(uint16_t port, uint32_t ip) {
        uint64_t key = make_key(port, ip);
        uint32_t i = slot_of(key);
        for (;;) {
            uint64_t k = slots_[i].key.load(std::memory_order_relaxed);
            if (k == key)
                return i;
            if (k == 0)
                break;
            i = (i + 1) & (cap_ - 1);
        }
        if (used_ >= limit_)
            return kNone;
        ++used_;
        slots_[i].mac.store(0, std::memory_order_relaxed);
        slots_[i].key.store(key, std::memory_order_release);
        return i;
    }

    void set_mac(uint32_t slot, const uint8_t* mac6) {
        uint64_t m = kValid;
        for (int b = 0; b < 6; ++b)
            m |= uint64_t{mac6[b]} << (8 * b);
        slots_[slot].mac.store(m, std::memory_order_release);
    }

    void invalidate(uint32_t slot) { slots_[slot].mac.store(0, std::memory_order_release); }

    uint32_t used() const { return used_; }
    uint32_t capacity() const { return limit_; }
    uint32_t slot_count() const { return cap_; }
    // For listings on the control thread.
    bool slot_key(uint32_t slot, uint16_t* port, uint32_t* ip) const {
        uint64_t k = slots_[slot].key.load(std::memory_order_acquire);
        if (k == 0)
            return false;
        *port = static_cast<uint16_t>((k >> 32) - 1);
        *ip = static_cast<uint32_t>(k);
        return true;
    }

private:
    static constexpr uint64_t kValid = uint64_t{1} << 63;
    struct Slot {
        std::atomic<uint64_t> key;
        std::atomic<uint64_t> mac;
    };
    uint32_t slot_of(uint64_t key) const {
        return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & (cap_ - 1);
    }

    std::unique_ptr<Slot[]> slots_;
    uint32_t cap_ = 0;
    uint32_t limit_ = 0;
    uint32_t used_ = 0;
};

}  // namespace egw::dp
