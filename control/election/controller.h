// SPDX-License-Identifier: Apache-2.0
//
// The `kubernetes` state source: what one egwd does against the API server.
//
//   every egwd    renews the liveness Lease of its node (egw-node-<node>) and programs its own data
//                 plane from status.host (poll(), called by the daemon's control thread);
//   the leader    (mode leader only) holds the Lease egw-leader, and alone elects hosts, writes
//                 status.host (merge patch on /status) and sets or removes the node labels. A
//                 leader that cannot renew before its renew deadline stops deciding at once;
//   external      another controller writes status.host; egwd only follows it.
//
// Threads: the client's reflectors (one per kind), one that renews the Leases and one that decides
// (the leader's work queue). poll() runs on the caller's thread.
//
// Decisions are the pure functions of decisions.h. The decider keeps the allocations in memory;
// a new leader starts from the hosts it finds (restore_allocations), so taking over reshuffles
// nothing. Write-backs are idempotent (nothing is written when the object already says it) and
// conflict-free (merge patches; Leases go through Writer::modify_lease, which re-reads on 409).
// A failed write is retried with backoff.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "control/election/decisions.h"
#include "control/election/slice_owners.h"
#include "control/election/work_queue.h"
#include "control/k8s/client.h"
#include "control/model/rules.h"

namespace egw::election {

enum class ElectionMode { leader, external };

const char* to_string(ElectionMode m);   // "leader", "external"

struct ControllerOptions {
    std::string node_name;                      // this gateway's node (required)
    std::string identity;                       // holder of the leader Lease; "" = node_name
    std::string lease_namespace;                // "" = the credentials' namespace, else "default"
    ElectionMode election = ElectionMode::leader;
    std::chrono::seconds lease_duration{15};    // of both Leases (leaseDurationSeconds)
    std::chrono::milliseconds renew_deadline{10000};  // a leader that has not renewed for this long stops
    std::chrono::milliseconds retry_period{2000};     // Lease renewal and acquisition attempts
    std::vector<config::Ipv4Prefix> pod_cidrs;  // cluster-networked endpoints (SPEC section 2)
    bool release_on_stop = true;                // stop() hands the leader Lease back (fast failover)
    unsigned write_concurrency = 4;             // status PATCHes in flight at once
    std::chrono::milliseconds write_backoff_initial{200};
    std::chrono::milliseconds write_backoff_max{10000};
};

struct ControllerStats {
    bool synced = false;
    bool leader = false;
    std::string leader_identity;   // holder of the leader Lease as last seen ("" when unknown)
    size_t live_nodes = 0;
    size_t allocations = 0;
    uint64_t status_writes = 0;    // successful status PATCHes
    uint64_t label_writes = 0;     // successful node label PATCHes
    uint64_t write_failures = 0;   // failed status or label PATCHes
    uint64_t status_write_failures = 0;
    uint64_t label_write_failures = 0;
    uint64_t lease_renewals = 0;   // successful liveness Lease writes
    uint64_t leader_transitions = 0;   // times this instance became leader
    uint64_t decisions = 0;        // keys decided
    uint64_t label_passes = 0;     // passes over every node's egress-service labels (sync_labels)
};

class Controller {
public:
    // Creates the client (it throws k8s::CredentialError when a credential file is unreadable).
    // The client's lease namespace is set from the options.
    Controller(k8s::Credentials creds, ControllerOptions opts, k8s::ClientOptions client_opts = {});
    ~Controller();
    Controller(const Controller&) = delete;
    Controller& operator=(const Controller&) = delete;

    void start();
    // Stops every thread. With release_on_stop, a leader gives the Lease up first. Idempotent.
    void stop();
    // Stops every thread without touching the API (a crash, for tests).
    void abandon();

    // The data plane's input. Returns true and fills `out` (every EgressService, sorted by key)
    // when it changed since the last call; false until every kind has been listed once.
    bool poll(std::vector<model::ServiceState>& out);
    // The same, with only what changed since the last call of either (the first time, every
    // EgressService), in key order: a change costs a copy of the states that changed, not of all.
    bool poll(model::ServiceDelta& out);
    // Waits up to `timeout` for something poll() would report (cheap; for loops that block).
    bool wait(std::chrono::milliseconds timeout);

    // The EgressServices and Services as of the last poll() that reported a change (for the CLI's
    // `show service`). Read it on the thread that calls poll().
    const model::ObjectSet& objects() const { return poll_objects_; }

    bool leader() const;
    ControllerStats stats() const;
    // The leader's allocations (empty on a follower).
    std::map<std::string, std::string> allocations() const;
    // The last decision for every key the leader decided (why a Service has no host).
    std::map<std::string, HostDecision> decisions() const;
    const std::string& lease_namespace() const { return lease_ns_; }
    const ControllerOptions& options() const { return opts_; }
    k8s::Client& client() { return *client_; }

private:
    void on_change(const k8s::Change& c);
    void lease_loop();
    bool renew_liveness();
    void try_leader();
    void release_leader();
    void decide_loop();
    void decide_once();
    void lose_leadership(const char* why);
    void restore();
    std::vector<std::string> keys_for(const std::vector<k8s::Change>& changes, bool& all, bool& leases);
    void decide_batch(const std::vector<std::string>& keys);
    void sync_labels();
    void sleep_leases(std::chrono::milliseconds d);

    ControllerOptions opts_;
    std::string identity_;
    std::string lease_ns_;
    std::unique_ptr<k8s::Client> client_;

    // Leases.
    std::thread lease_thread_;
    std::mutex lease_mu_;
    std::condition_variable lease_cv_;
    std::atomic<bool> stopping_{false};
    bool started_ = false;
    bool stopped_ = false;
    std::atomic<int64_t> leader_until_{0};   // steady_clock ns; leader while now < this
    std::atomic<bool> was_leader_{false};
    unsigned liveness_streak_ = 0;             // lease thread only

    // Decider.
    std::thread decide_thread_;
    WorkQueue queue_;
    std::mutex changes_mu_;
    std::vector<k8s::Change> changes_;        // from the cache listener, for the decider
    bool need_restore_ = true;
    Allocations alloc_;                        // decider thread only
    std::set<std::string> live_;               // decider thread only
    std::map<std::string, std::pair<std::string, bool>> node_facts_;   // node -> (labels w/o ours, ready)
    SliceOwners owners_;                                               // decider thread only
    struct Written {
        std::string value;
        std::string resource_version;          // of the object before the write
    };
    std::map<std::string, Written> status_written_;                    // key -> last status write
    std::map<std::string, Written> labels_written_;                    // node -> last label patch
    std::map<std::string, unsigned> failures_;                         // key -> failed writes in a row
    std::set<std::string> unwritten_;                                  // status not yet written
    std::optional<std::chrono::system_clock::time_point> next_expiry_;  // of the first live Lease to run out
    bool labels_dirty_ = true;
    std::chrono::steady_clock::time_point label_retry_{};
    std::map<std::string, unsigned> label_failures_;                  // node -> failed patches in a row
    std::set<std::string> unlabelable_;                                // keys whose label key is invalid (logged)

    // poll() (caller's thread).
    bool poll_initialized_ = false;
    std::map<std::string, model::ServiceState> serving_;
    SliceOwners poll_owners_;
    model::ObjectSet poll_objects_;            // EgressServices and Services only
    uint64_t poll_generation_ = 0;

    mutable std::mutex stats_mu_;
    ControllerStats stats_;
    std::map<std::string, HostDecision> decisions_;
    std::map<std::string, std::string> alloc_view_;
};

// Kubernetes' MicroTime now.
std::string now_micro_time();

}  // namespace egw::election
