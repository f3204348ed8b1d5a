// SPDX-License-Identifier: Apache-2.0
//
// The leader's host decisions, one thread (in mode leader only): which gateway serves each
// EgressService, written back as status.host (its WriterPool, a few PATCHes at once) and as the
// hosts' node labels. Part of the Controller (controller.h), which owns it and feeds it the
// cache's changes; it decides only while the LeaseKeeper says this egwd leads, and only on fresh
// state: every kind's watch unbroken for the grace period (and as long after a Lease taken over,
// LeaseKeeper::decide_after()). Any watch that breaks pauses it; it starts over from the API's
// state once that is fresh again (restore_allocations: taking over reshuffles nothing).
//
// Decisions are the pure functions of decisions.h; this keeps the allocations in memory and the
// write-backs' bookkeeping: status PATCHes are conditional on the resourceVersion this leader
// last saw or wrote, node label PATCHes on the node's, a 409 re-reads the object, and a failed
// write is retried with backoff.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/k8s/client.h"
#include "control/k8s_source/decisions.h"
#include "control/k8s_source/lease_keeper.h"
#include "control/k8s_source/options.h"
#include "control/k8s_source/slice_owners.h"
#include "control/k8s_source/work_queue.h"
#include "control/k8s_source/writer_pool.h"

namespace egw::k8s_source {

struct HostDeciderStats {
    bool deciding = false;  // the leader's state is fresh and it decides
    size_t allocations = 0;
    uint64_t status_writes = 0;   // successful status PATCHes
    uint64_t label_writes = 0;    // successful node label PATCHes
    uint64_t write_failures = 0;  // failed status or label PATCHes
    uint64_t status_write_failures = 0;
    uint64_t label_write_failures = 0;
    uint64_t pauses = 0;        // times the leader paused its decisions for fresh state
    uint64_t decisions = 0;     // keys decided
    uint64_t label_passes = 0;  // passes over every node's egress-service labels (sync_labels)
};

class HostDecider {
public:
    using SteadyClock = std::chrono::steady_clock;

    // `opts` as the Controller completed them (grace set); `identity` names this egwd in the logs.
    HostDecider(k8s::Client& client, const LeaseKeeper& leases, ControllerOptions opts, std::string identity);
    // Stops the thread (without touching the API).
    ~HostDecider();
    HostDecider(const HostDecider&) = delete;
    HostDecider& operator=(const HostDecider&) = delete;

    // Makes the status writers and starts deciding.
    void start();
    void request_stop();
    // Waits for the thread, then lets the status writers go.
    void join();

    // A change of the cache (its listener's thread), for the decisions.
    void on_change(const k8s::Change& c);
    // Look again now (leadership changed).
    void wake() { queue_.wake(); }

    HostDeciderStats stats() const;
    // The allocations (empty while not deciding) and the last decision for every key decided.
    std::map<std::string, std::string> allocations() const;
    std::map<std::string, HostDecision> decisions() const;

private:
    void loop();
    void decide_once();
    bool fresh(SteadyClock::time_point now, std::optional<SteadyClock::time_point>& ready_at);
    void lose_leadership(const char* why);
    void restore();
    std::vector<std::string> keys_for(const std::vector<k8s::Change>& changes, bool& all, bool& leases);
    void decide_batch(const std::vector<std::string>& keys);
    k8s::WriteResult write_status(const std::string& key, const std::string& host, const std::string& rv);
    void sync_labels();
    bool leader() const { return leases_.leader(); }

    k8s::Client& client_;
    const LeaseKeeper& leases_;
    const ControllerOptions opts_;
    const std::string identity_;

    std::thread thread_;
    std::atomic<bool> stopping_{false};
    WorkQueue queue_;
    std::unique_ptr<WriterPool> writers_;  // the leader's status writers, made by start()
    std::mutex changes_mu_;
    std::vector<k8s::Change> changes_;  // from the cache listener
    // The rest: decider thread only.
    bool need_restore_ = true;
    Allocations alloc_;
    std::set<std::string> live_;
    std::map<std::string, std::pair<std::string, bool>> node_facts_;  // node -> (labels w/o ours, ready)
    SliceOwners owners_;
    struct Written {
        std::string value;
        std::string resource_version;  // of the object the write was decided on (the cache's)
        std::string written_version;   // of the object the write produced
    };
    std::map<std::string, Written> status_written_;       // key -> last status write
    std::map<std::string, Written> labels_written_;       // node -> last label patch
    std::map<std::string, unsigned> failures_;            // key -> failed writes in a row
    std::set<std::string> unwritten_;                     // status not yet written
    std::optional<SteadyClock::time_point> next_expiry_;  // of the first live Lease to run out
    uint64_t breaks_seen_ = 0;                            // watch breaks already paused for
    bool paused_logged_ = false;
    std::optional<SteadyClock::time_point> ready_at_;  // when the state will be fresh enough
    bool labels_dirty_ = true;
    SteadyClock::time_point label_retry_{};
    std::map<std::string, unsigned> label_failures_;  // node -> failed patches in a row
    std::set<std::string> unlabelable_;               // keys whose label key is invalid (logged)

    mutable std::mutex stats_mu_;
    HostDeciderStats stats_;
    std::map<std::string, HostDecision> decisions_;
    std::map<std::string, std::string> alloc_view_;
};

}  // namespace egw::k8s_source
