// SPDX-License-Identifier: Apache-2.0
//
// Session sync events from a worker to the sync thread (docs/architecture.md, "Session sync"):
// one single-producer single-consumer ring per worker. The worker (the slow path on a session's
// creation, the maintenance sweep on its deletion) is the only producer and never waits: when
// the ring is full the event is dropped and counted, because a worker that blocked on the sync
// link would stop forwarding. The sync thread is the only consumer and drains in batches.
//
// Lock-free with two indexes that only grow (they wrap at 2^32; the capacity is a power of two,
// so index & mask is the slot and head - tail the fill even across the wrap). Each side keeps
// its own index on its own cache line; the producer also caches the consumer's index, so a push
// reads the consumer's line only when the cached copy says the ring looks full: one store and no
// shared read per event in the common case (the consumer reads the producer's index once per
// batch). The release store of head publishes the slot written
// before it; the release store of tail gives the slot back.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace egw::dp {

// The same numbers as the wire's event kinds (control/sync/wire.h).
enum class SyncEventKind : uint8_t { create = 1, state_change = 2, refresh = 3, remove = 4 };

// What a worker knows of a session when it changes. Addresses are 16 bytes for both families
// (IPv4 in the first 4, network order); the expiry is the worker's TSC deadline, which the sync
// thread, on the same host, turns into the time left before anything leaves the host.
struct SyncEvent {
    SyncEventKind kind;
    uint8_t family;  // 4 or 6
    uint8_t proto;
    uint8_t tcp_seen;  // TcpSeen bits (tables/session_table.h)
    uint16_t vrf;
    uint16_t inside_port, outside_port, remote_port;  // network order, as in the session
    uint32_t service_id;                              // the sync thread maps it to the epoch
    uint64_t expires_tsc;
    uint8_t inside_addr[16], outside_addr[16], remote_addr[16];
};
static_assert(sizeof(SyncEvent) == 72);

template <typename T>
class SpscRing {
public:
    // capacity: rounded up to a power of two, at least 2. Allocates: the control thread makes
    // the ring before the worker starts.
    // first_index: where both indexes start (tests start them just before the wrap).
    explicit SpscRing(size_t capacity, uint32_t first_index = 0)
        : head_(first_index),
          producer_tail_(first_index),
          tail_(first_index),
          mask_(static_cast<uint32_t>(round_up(capacity) - 1)),
          slots_(new T[mask_ + 1]) {}
    SpscRing(const SpscRing&) = delete;
    SpscRing& operator=(const SpscRing&) = delete;

    size_t capacity() const { return mask_ + 1; }

    // Producer only. False (and counted) when the ring is full.
    bool push(const T& v) {
        uint32_t head = head_.load(std::memory_order_relaxed);
        if (head - producer_tail_ > mask_) {
            producer_tail_ = tail_.load(std::memory_order_acquire);
            if (head - producer_tail_ > mask_) {
                dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
                return false;
            }
        }
        slots_[head & mask_] = v;
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

    // Consumer only: moves up to `max` events to `out`, oldest first; returns how many.
    size_t pop(T* out, size_t max) {
        uint32_t tail = tail_.load(std::memory_order_relaxed);
        size_t n = head_.load(std::memory_order_acquire) - tail;
        if (n > max) n = max;
        for (size_t i = 0; i < n; ++i)
            out[i] = slots_[(tail + i) & mask_];
        tail_.store(tail + static_cast<uint32_t>(n), std::memory_order_release);
        return n;
    }

    // Any thread: events dropped because the ring was full.
    uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

private:
    static size_t round_up(size_t n) {
        size_t c = 2;  // at most 2^31: the indexes are 32 bits
        while (c < n)
            c <<= 1;
        return c;
    }

    // The producer's line: its index, its view of the consumer's, its drop count.
    alignas(64) std::atomic<uint32_t> head_;
    uint32_t producer_tail_;
    std::atomic<uint64_t> dropped_{0};
    // The consumer's line.
    alignas(64) std::atomic<uint32_t> tail_;
    alignas(64) const uint32_t mask_;
    const std::unique_ptr<T[]> slots_;
};

using SyncEventRing = SpscRing<SyncEvent>;

}  // namespace egw::dp
