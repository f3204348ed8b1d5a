// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/tx_stall.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "control/runtime/runtime.h"

namespace egw::control {

namespace {

uint64_t load(const uint64_t& v) {
    return __atomic_load_n(&v, __ATOMIC_RELAXED);
}

}  // namespace

PortTx read_port_tx(std::span<dp::Worker* const> workers, uint16_t port) {
    PortTx t;
    if (port >= dp::kMaxPorts) return t;
    for (const dp::Worker* w : workers) {
        t.refused += load(w->counters.tx_refused[port]);
        t.stalls += load(w->counters.tx_stalls[port]);
        t.stalled_queues += load(w->counters.tx_stalled[port]) ? 1 : 0;
    }
    return t;
}

std::vector<std::string> TxStallLog::check(std::span<dp::Worker* const> workers, const std::vector<PortInfo>& ports) {
    std::vector<std::string> lines;
    for (const PortInfo& p : ports) {
        if (p.id >= dp::kMaxPorts) continue;
        for (const dp::Worker* w : workers) {
            Queue& q = queues_[{p.id, w->index}];
            uint64_t stalls = load(w->counters.tx_stalls[p.id]);
            bool stalled = load(w->counters.tx_stalled[p.id]) != 0;
            uint64_t refused = load(w->counters.tx_refused[p.id]);
            // A stall that began and ended between two looks is still logged, begin and end.
            if (!q.warned && (stalled || stalls != q.stalls_seen)) {
                std::string line = fmt::format(
                    "port {} ({}): the transmit queue of worker {} has accepted no frame for {} ms or more; its "
                    "frames are dropped as tx_full until it takes them again",
                    p.name, p.device, w->index, dp::kTxStallMs);
                spdlog::warn("{}", line);
                lines.push_back(std::move(line));
                q.warned = true;
                q.refused_before = q.refused_seen;
            }
            q.stalls_seen = stalls;
            q.refused_seen = refused;
            if (q.warned && !stalled) {
                std::string line = fmt::format(
                    "port {} ({}): the transmit queue of worker {} takes frames again ({} frames refused meanwhile)",
                    p.name, p.device, w->index, refused - q.refused_before);
                spdlog::info("{}", line);
                lines.push_back(std::move(line));
                q.warned = false;
            }
        }
    }
    return lines;
}

}  // namespace egw::control
