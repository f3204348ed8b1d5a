// SPDX-License-Identifier: Apache-2.0
//
// Transmit queues that stop taking frames. A worker takes its queue on a port for stalled once
// every burst it handed it over dp::kTxStallMs was refused whole (dataplane/output.cpp), counts
// that once and flags it until the queue accepts a frame again; the frames meanwhile are tx_full
// drops. Here the control thread sums those per port (metrics, status file, CLI) and logs each
// stall once when it begins and once when it ends.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/worker.h"

namespace egw::control {

struct PortInfo;

// One port's transmit queues, over every worker.
struct PortTx {
    uint64_t refused = 0;         // frames its queues refused (tx_full drops on this port)
    uint64_t stalls = 0;          // times one of its queues was taken for stalled
    uint64_t stalled_queues = 0;  // queues stalled now
};

// Reads the workers' counters for DPDK port `port` (relaxed loads; the workers keep running).
PortTx read_port_tx(std::span<dp::Worker* const> workers, uint16_t port);

// The log of stalls, called by the control thread now and then (every 100 ms in egwd).
class TxStallLog {
public:
    // Looks at every worker's queue on every port. A queue stalled now, or counted stalled since
    // the last look, gets one warning for the streak; once it takes frames again, one info line.
    // Returns the lines it logged.
    std::vector<std::string> check(std::span<dp::Worker* const> workers, const std::vector<PortInfo>& ports);

private:
    struct Queue {
        uint64_t stalls_seen = 0;     // tx_stalls at the last look
        uint64_t refused_seen = 0;    // tx_refused at the last look
        uint64_t refused_before = 0;  // tx_refused at the last look before the warning
        bool warned = false;          // a warning went out and no recovery line yet
    };
    std::map<std::pair<uint16_t, unsigned>, Queue> queues_;  // by (port id, worker index)
};

}  // namespace egw::control
