// SPDX-License-Identifier: Apache-2.0
//
// A coalescing work queue keyed by "namespace/name". A key added while it is already waiting is
// not added twice; a key can also be added for later (a retry after a failed write), and a key
// added now while it waits for later moves forward. One consumer takes every due key at once.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace egw::k8s_source {

class WorkQueue {
public:
    using Clock = std::chrono::steady_clock;

    // Due now.
    void add(const std::string& key);
    // Due after `delay`, unless it is already due earlier.
    void add_after(const std::string& key, Clock::duration delay);
    // Waits until a key is due, wake() is called or `deadline` passes; returns the due keys, each
    // once, in the order they became waiting. Keys that are not due yet stay.
    std::vector<std::string> take(Clock::time_point deadline);
    // Ends a take() in progress (it returns what is due, perhaps nothing).
    void wake();
    // Forgets every waiting key.
    void clear();
    size_t size() const;
    // When the earliest waiting key is due, nullopt when none waits.
    std::optional<Clock::time_point> next_due() const;

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, std::pair<Clock::time_point, uint64_t>> waiting_;  // key -> (due, order)
    uint64_t order_ = 0;
    bool woken_ = false;
};

}  // namespace egw::k8s_source
