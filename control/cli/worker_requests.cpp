// SPDX-License-Identifier: Apache-2.0
#include "control/cli/worker_requests.h"

#include <rte_pause.h>

#include <chrono>

namespace egw::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Waits until `done` reaches `want`. The acquire load pairs with the worker's release store,
// so what it wrote before answering is visible afterwards.
bool wait_for(const std::atomic<uint32_t>& done, uint32_t want, Clock::time_point deadline) {
    while (done.load(std::memory_order_acquire) != want) {
        if (Clock::now() >= deadline) return false;
        rte_pause();
    }
    return true;
}

std::string silent(const dp::Worker& w) {
    return "worker " + std::to_string(w.index) + " did not answer";
}

}  // namespace

std::string for_each_session(const std::vector<dp::Worker*>& workers,
                             const std::function<bool(const dp::Worker&, const dp::SessionRecord&)>& visit,
                             unsigned timeout_ms) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (dp::Worker* w : workers) {
        // A listing asked for earlier (the status file's) may still be pending: let it finish
        // before the paging fields change under the worker.
        if (!wait_for(w->dump_done, w->dump_request.load(std::memory_order_relaxed), deadline)) return silent(*w);
        uint32_t capacity = dp::dump_slots(*w);
        uint32_t start = 0;
        bool more = true;
        std::string error;
        while (more && start < capacity) {
            w->dump_start = start;
            w->dump_scan = kPageScan;
            uint32_t want = w->dump_request.fetch_add(1, std::memory_order_release) + 1;
            if (!wait_for(w->dump_done, want, deadline)) {
                error = silent(*w);
                break;
            }
            for (uint32_t i = 0; i < w->dump_count && more; ++i)
                more = visit(*w, w->dump_buffer[i]);
            // A page that filled the buffer stopped early; the next one starts where it stopped.
            start = w->dump_next > start ? w->dump_next : capacity;
        }
        // Other readers (the status file) expect a listing from the start of the table. Only
        // safe to reset once the worker has answered; otherwise it is still reading them.
        if (error.empty()) {
            w->dump_start = 0;
            w->dump_scan = 0;
        }
        if (!error.empty()) return error;
        if (!more) break;
    }
    return "";
}

FlushResult flush_sessions(const std::vector<dp::Worker*>& workers, uint32_t service_id, unsigned timeout_ms) {
    FlushResult r;
    r.closed.assign(workers.size(), 0);
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<uint32_t> want(workers.size(), 0);
    std::vector<bool> posted(workers.size(), false);
    for (size_t i = 0; i < workers.size(); ++i) {
        dp::Worker* w = workers[i];
        uint32_t pending = w->flush_request.load(std::memory_order_relaxed);
        if (w->flush_done.load(std::memory_order_acquire) != pending) {
            r.error = "worker " + std::to_string(w->index) + " is still busy with an earlier clear";
            continue;  // its flush fields are the worker's until it answers
        }
        w->flush_service = service_id;
        w->flush_cursor = 0;
        w->flush_closed = 0;
        want[i] = w->flush_request.fetch_add(1, std::memory_order_release) + 1;
        posted[i] = true;
    }
    // All workers flush in parallel; collect them in turn.
    for (size_t i = 0; i < workers.size(); ++i) {
        if (!posted[i]) continue;
        if (!wait_for(workers[i]->flush_done, want[i], deadline)) {
            if (r.error.empty()) r.error = silent(*workers[i]);
            continue;
        }
        r.closed[i] = workers[i]->flush_closed;
    }
    return r;
}

}  // namespace egw::cli
