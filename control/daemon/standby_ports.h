// SPDX-License-Identifier: Apache-2.0
//
// The standby sessions' NAT ports, reserved in the workers (dataplane/tables/port_reservations.h):
// the control thread rebuilds the set from the sync thread's standby table when it changed and
// publishes it with RCU, no more often than every kMinInterval and, for a large table, no more
// than a tenth of its time (a million sessions take a few hundred milliseconds to gather). Then
// it checks the local sessions against the set (the workers list them, as `show sessions` does):
// a local session holding a peer's port is a conflict, counted and logged once it appears,
// because taking that peer's session over would find its port taken.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/sync/standby.h"
#include "dataplane/tables/port_reservations.h"

namespace egw::sync {
class SyncService;
struct SyncServiceStats;
}  // namespace egw::sync
namespace egw::dp {
struct DataplaneShared;
struct Worker;
}  // namespace egw::dp

namespace egw::control {

// `show sync`'s data (docs/cli.md), from the sync thread's stats.
nlohmann::json sync_json(const sync::SyncServiceStats& s);

// Every session the workers hold as a creation event, for a peer's bulk request (listed as
// `show sessions` does; the time left from the host's TSC now). `error`: a worker that did not
// answer (what the others listed is returned).
std::vector<sync::Event> session_dump(const std::vector<dp::Worker*>& workers, const dp::DataplaneShared& shared,
                                      uint64_t now_tsc, uint64_t tsc_hz, std::string& error);

// A standby session's outside key as the workers' session table makes it (network order).
dp::FlowKey outside_key4(const sync::StandbyKey& k);
dp::FlowKey6 outside_key6(const sync::StandbyKey& k);

struct StandbyPortStats {
    uint64_t reserved = 0;      // ports in the published set
    uint64_t publications = 0;  // sets published
    uint64_t conflicts = 0;     // local sessions holding a reserved port, at the last check
    uint64_t checks = 0;        // checks of the local sessions
    std::string check_error;    // a worker that did not answer the last check
};

class StandbyPorts {
public:
    static constexpr std::chrono::milliseconds kMinInterval{100};

    StandbyPorts(dp::DataplaneShared& shared, sync::SyncService& sync, std::vector<dp::Worker*> workers);
    // Takes the set back from the workers (they must still be quiescing) and frees it.
    ~StandbyPorts();
    StandbyPorts(const StandbyPorts&) = delete;
    StandbyPorts& operator=(const StandbyPorts&) = delete;

    // Control thread, every loop pass: republishes when the standby table changed and the
    // interval has passed.
    void poll(std::chrono::steady_clock::time_point now);
    const StandbyPortStats& stats() const { return stats_; }

private:
    void check_conflicts();

    dp::DataplaneShared& shared_;
    sync::SyncService& sync_;
    std::vector<dp::Worker*> workers_;
    const dp::PortReservations* current_ = nullptr;
    uint64_t published_version_ = 0;
    std::chrono::steady_clock::time_point next_{};
    StandbyPortStats stats_;
};

}  // namespace egw::control
