// SPDX-License-Identifier: Apache-2.0
//
// The control thread's side of the workers' request words (dataplane/worker.h): session
// listings, a page at a time, and session flushes. The control thread never reads or writes a
// worker's session table itself; it posts a request and waits, bounded, for the worker to
// answer between two bursts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataplane/worker.h"

namespace egw::cli {

// Slots of a session table one listing page scans at most (the worker's pause per page).
inline constexpr uint32_t kPageScan = 65536;

// Calls `visit` for every session of every worker, worker by worker, until it returns false.
// Returns "" or what went wrong (a worker that did not answer within `timeout_ms`).
std::string for_each_session(const std::vector<dp::Worker*>& workers,
                             const std::function<bool(const dp::Worker&, const dp::SessionRecord&)>& visit,
                             unsigned timeout_ms = 2000);

struct FlushResult {
    std::string error;             // "" when every worker answered
    std::vector<uint32_t> closed;  // per worker
};

// Asks every worker to close the sessions of `service_id` (dp::kFlushAll: every session) and
// waits for all of them.
FlushResult flush_sessions(const std::vector<dp::Worker*>& workers, uint32_t service_id, unsigned timeout_ms = 5000);

}  // namespace egw::cli
