// SPDX-License-Identifier: Apache-2.0
#include "control/k8s_source/work_queue.h"

#include <algorithm>

namespace egw::k8s_source {

void WorkQueue::add(const std::string& key) {
    add_after(key, Clock::duration::zero());
}

void WorkQueue::add_after(const std::string& key, Clock::duration delay) {
    const Clock::time_point due = Clock::now() + delay;
    {
        std::lock_guard lk(mu_);
        auto [it, fresh] = waiting_.try_emplace(key, due, order_);
        if (fresh)
            ++order_;
        else if (due < it->second.first)
            it->second.first = due;
        else
            return;
    }
    cv_.notify_all();
}

std::vector<std::string> WorkQueue::take(Clock::time_point deadline) {
    std::unique_lock lk(mu_);
    for (;;) {
        const Clock::time_point now = Clock::now();
        std::vector<std::pair<uint64_t, std::string>> due;
        Clock::time_point earliest = deadline;
        for (const auto& [key, when] : waiting_) {
            if (when.first <= now)
                due.emplace_back(when.second, key);
            else
                earliest = std::min(earliest, when.first);
        }
        if (!due.empty() || woken_ || now >= deadline) {
            woken_ = false;
            std::sort(due.begin(), due.end());
            std::vector<std::string> out;
            out.reserve(due.size());
            for (auto& [order, key] : due) {
                waiting_.erase(key);
                out.push_back(std::move(key));
            }
            return out;
        }
        cv_.wait_until(lk, earliest);
    }
}

void WorkQueue::wake() {
    {
        std::lock_guard lk(mu_);
        woken_ = true;
    }
    cv_.notify_all();
}

void WorkQueue::clear() {
    std::lock_guard lk(mu_);
    waiting_.clear();
}

size_t WorkQueue::size() const {
    std::lock_guard lk(mu_);
    return waiting_.size();
}

std::optional<WorkQueue::Clock::time_point> WorkQueue::next_due() const {
    std::lock_guard lk(mu_);
    std::optional<Clock::time_point> out;
    for (const auto& [key, when] : waiting_)
        if (!out || when.first < *out) out = when.first;
    return out;
}

}  // namespace egw::k8s_source
