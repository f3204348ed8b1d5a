// SPDX-License-Identifier: Apache-2.0
//
// sessions.max_per_pod across several workers: one budget of sessions per pod that every worker
// draws on, so that the limit holds for the pod's sessions wherever its flows are owned, and a
// pod whose flows all land on one worker (IPv6 on a NIC that does not hash it, a hash that happens
// to favour one worker) still gets the whole limit there.
//
// It is a count-min sketch: two rows of counters, each pod counted in one counter of each row
// (two independent hashes of its address), its count taken as the smaller of the two. Pods that
// share a counter only make each other's count larger, never smaller, so a pod never holds more
// than the limit; a pod is refused early only when both its counters are shared with pods that
// together hold the limit, which rows at least as long as the session tables make rare. No keys,
// no insertion or deletion: a worker adds to two counters when it makes a session and subtracts
// when it closes one (SessionTable::share_pod_budget), with relaxed atomic read-modify-writes, the
// one thing on the packet path that two workers write (only on a session's creation and close).
// An admission adds first and looks at what it got, so two workers admitting the same pod at once
// cannot both take its last session.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "dataplane/ipv6.h"

namespace egw::dp {

struct PodBudget {
    // 2 * (mask + 1) counters: row 0, then row 1.
    std::atomic<uint32_t>* counts = nullptr;
    uint32_t mask = 0;

    // The two counters of a pod, from its key (pod_budget_key()): one per row.
    std::atomic<uint32_t>& first(uint64_t key) const { return counts[key & mask]; }
    std::atomic<uint32_t>& second(uint64_t key) const { return counts[mask + 1 + ((key >> 32) & mask)]; }

    // Takes one session of the pod's budget: false (nothing taken) when the pod already holds
    // `limit` sessions.
    bool admit(uint64_t key, uint32_t limit) const {
        std::atomic<uint32_t>& a = first(key);
        std::atomic<uint32_t>& b = second(key);
        uint32_t held = std::min(a.fetch_add(1, std::memory_order_relaxed), b.fetch_add(1, std::memory_order_relaxed));
        if (held < limit) return true;
        release(key);
        return false;
    }
    // Gives back a session admit() took (the session closed, or it was not made after all).
    void release(uint64_t key) const {
        first(key).fetch_sub(1, std::memory_order_relaxed);
        second(key).fetch_sub(1, std::memory_order_relaxed);
    }
    // The pod's sessions as the budget counts them (at least the true number).
    uint32_t held(uint64_t key) const {
        return std::min(first(key).load(std::memory_order_relaxed), second(key).load(std::memory_order_relaxed));
    }
};

// The counters needed for `sessions` sessions: a power of two per row, at least as many as there
// are sessions (so that on average a counter holds at most one pod's), from 1,024 up to 2^20.
inline uint32_t pod_budget_row(uint64_t sessions) {
    uint32_t row = 1024;
    while (row < sessions && row < (1u << 20))
        row <<= 1;
    return row;
}

// A pod's key: a fixed 64-bit mix of its address (the same on every worker), whose halves index
// the two rows. IPv4 and IPv6 pods are different addresses and share the rows.
inline uint64_t pod_budget_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}
inline uint64_t pod_budget_key(uint32_t pod) {
    return pod_budget_mix(pod);
}
inline uint64_t pod_budget_key(const Ip6& pod) {
    uint64_t hi, lo;
    std::memcpy(&hi, pod.b, 8);
    std::memcpy(&lo, pod.b + 8, 8);
    return pod_budget_mix(hi ^ pod_budget_mix(lo ^ 0x9e3779b97f4a7c15ull));
}

}  // namespace egw::dp
