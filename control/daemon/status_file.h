// SPDX-License-Identifier: Apache-2.0
//
// The daemon's state as one JSON document: Services with status.host and counters, ports, drops,
// sessions and neighbours. Written atomically to --status-file for scripts and tests, and the
// same document backs the CLI and metrics once they land.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

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
    unsigned max_sessions = 1000;
};

nlohmann::json collect_status(const StatusInputs& in);

// Writes `doc` to `path` through a temporary file and rename(), so readers never see half.
bool write_status_file(const std::string& path, const nlohmann::json& doc);

}  // namespace egw::control
