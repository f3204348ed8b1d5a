// SPDX-License-Identifier: Apache-2.0
//
// The daemon's state as one JSON document: Services with status.host and counters, ports, drops,
// sessions and neighbours. Written atomically to --status-file for scripts and tests, and the
// same document backs the CLI and metrics once they land.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dataplane/worker.h"

namespace egw::control {

class Runtime;
class PolicyBuilder;
class NeighborResolver;

struct StatusInputs {
    Runtime& runtime;
    const PolicyBuilder& policy;
    const NeighborResolver& neighbors;
    bool ready = false;
    bool workers_stopped = false;  // list sessions from this thread instead of asking the workers
    unsigned max_sessions = 1000;  // 0: no session listing at all (the CLI pages through them itself)
    unsigned listing_timeout_ms = 250;
};

nlohmann::json collect_status(const StatusInputs& in);

// The session listing of the status file: asks every worker for its sessions (after a request
// still pending from an earlier listing, which it lets finish first), waits up to `timeout_ms`
// in all for the answers, and returns {"sessions": [row(worker, record)...], "session_listing":
// {"complete", "active", "listed", "missing_workers", "reason"}}. A worker that did not answer
// in time is named there rather than left out silently, and so is a listing cut short by
// `max_sessions` or by a worker's listing buffer. `workers_stopped`: serve the requests from
// this thread.
nlohmann::json list_sessions(const std::vector<dp::Worker*>& workers, unsigned max_sessions, unsigned timeout_ms,
                             bool workers_stopped,
                             const std::function<nlohmann::json(const dp::Worker&, const dp::SessionRecord&)>& row);

// Writes `doc` to `path` through a temporary file and rename(), so readers never see half.
bool write_status_file(const std::string& path, const nlohmann::json& doc);

}  // namespace egw::control
