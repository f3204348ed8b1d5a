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
// With ControllerOptions::watch_egress_ips, it also owns the EgressIPWatch (egress_ip_watch.h:
// EgressIP sources and selection, with a client of its own), which touches none of the above, and
// in mode leader the EgressIPLeader (egress_ip_leader.h: the leader's status.items), which reads
// the Nodes and Leases of this client and the EgressIPs of that one.
//
// Parts: the Controller owns the client, the LeaseKeeper (lease_keeper.h: both Leases), the
// HostDecider (host_decider.h: the leader's decisions and write-backs) and the ServingView
// (serving_view.h: what this gateway programs); it makes, starts and stops them, feeds them the
// cache's changes, and reports for them all (stats()).
//
// Threads: the client's reflectors (one per kind), the LeaseKeeper's and the HostDecider's (the
// leader's work queue) with its status writers (writer_pool.h, started once). poll() runs on the
// caller's thread.
//
// Faults (docs/kubernetes.md, "Election under faults"):
//   - a Lease is judged on this egwd's monotonic clock: live until leaseDurationSeconds after it was
//     last seen to change, or after the Lease watch last became unbroken, whichever is later;
//   - the leader decides only on fresh state: every kind's watch unbroken for a grace period
//     (2 retry periods by default), and as long after taking the leader Lease over from a holder
//     that did not hand it back; any watch that breaks (410 relist, failure, backoff) pauses the
//     decisions, which start over from the API's state once it is fresh again;
//   - liveness means serving: the liveness Lease is renewed only while every kind is listed and
//     not refused (403, ...) and the data plane check (set_serving_check) reports nothing; else it
//     is given up (holderIdentity "") until that is over. stop() gives up both Leases.
//
// Decisions are the pure functions of decisions.h. The decider keeps the allocations in memory;
// a new leader starts from the hosts it finds (restore_allocations), so taking over reshuffles
// nothing. Write-backs compare with the API's object: status PATCHes are conditional on the
// resourceVersion this leader last saw or wrote, node label PATCHes on the node's, and a 409
// re-reads the object. Leases go through Writer::modify_lease, which re-reads on 409. A failed
// write is retried with backoff.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "control/k8s_source/decisions.h"
#include "control/k8s_source/egress_ip_leader.h"
#include "control/k8s_source/egress_ip_watch.h"
#include "control/k8s_source/host_decider.h"
#include "control/k8s_source/lease_keeper.h"
#include "control/k8s_source/options.h"
#include "control/k8s_source/serving_view.h"
#include "control/k8s_source/slice_owners.h"
#include "control/k8s_source/work_queue.h"
#include "control/k8s_source/writer_pool.h"
#include "control/k8s/client.h"
#include "control/model/rules.h"

namespace egw::k8s_source {

struct ControllerStats {
    bool synced = false;
    bool leader = false;
    bool deciding = false;        // the leader's state is fresh and it decides (see ControllerOptions::grace)
    std::string not_serving;      // why the liveness Lease is given up ("" while serving)
    std::string leader_identity;  // holder of the leader Lease as last seen ("" when unknown)
    size_t live_nodes = 0;        // live liveness Leases as this egwd sees them (leader or not)
    size_t allocations = 0;
    uint64_t status_writes = 0;   // successful status PATCHes
    uint64_t label_writes = 0;    // successful node label PATCHes
    uint64_t write_failures = 0;  // failed status or label PATCHes
    uint64_t status_write_failures = 0;
    uint64_t label_write_failures = 0;
    uint64_t lease_renewals = 0;      // successful liveness Lease writes
    uint64_t leader_transitions = 0;  // times this instance became leader
    uint64_t pauses = 0;              // times the leader paused its decisions for fresh state
    uint64_t decisions = 0;           // keys decided
    uint64_t label_passes = 0;        // passes over every node's egress-service labels (sync_labels)
};

class Controller {
public:
    // Creates the client (it throws k8s::CredentialError when a credential file is unreadable).
    // The client's lease namespace is set from the options.
    Controller(k8s::Credentials creds, ControllerOptions opts, k8s::ClientOptions client_opts = {});
    ~Controller();
    Controller(const Controller&) = delete;
    Controller& operator=(const Controller&) = delete;

    // What keeps the data plane from serving ("" when it serves: workers advance, outside ports have
    // link). Called on the Lease thread before every renewal and by serving_problems(); setting
    // another (nullptr: none) waits for a call in progress.
    void set_serving_check(std::function<std::string()> check);

    void start();
    // Stops every thread. With release_on_stop, the liveness Lease and (on a leader) the leader
    // Lease are given up first, so the Services move at once. Idempotent.
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
    const model::ObjectSet& objects() const { return view_.objects(); }

    bool leader() const;
    ControllerStats stats() const;
    // Why this egwd does not renew its liveness Lease, one line each: kinds not listed or refused
    // by the API server, then the data plane check's. "" while it serves. /readyz says the same.
    std::string serving_problems() const;
    // The leader's allocations (empty on a follower).
    std::map<std::string, std::string> allocations() const;
    // The last decision for every key the leader decided (why a Service has no host).
    std::map<std::string, HostDecision> decisions() const;
    const std::string& lease_namespace() const { return lease_ns_; }
    const ControllerOptions& options() const { return opts_; }
    k8s::Client& client() { return *client_; }
    // EgressIP sources and selection; nullptr unless ControllerOptions::watch_egress_ips.
    EgressIPWatch* egress_ips() { return egress_ips_.get(); }
    // The leader's EgressIP assignment; nullptr unless watch_egress_ips in mode leader.
    const EgressIPLeader* egress_ip_leader() const { return egress_ip_leader_.get(); }
    // The EgressIP addresses status.items assigns to this gateway's node, in both election modes
    // (EgressIPWatch::assigned_to); empty without watch_egress_ips.
    std::vector<AssignedEgressIP> assigned_egress_ips() const;

private:
    void on_change(const k8s::Change& c);

    ControllerOptions opts_;
    std::string identity_;
    std::string lease_ns_;
    std::unique_ptr<k8s::Client> client_;
    std::unique_ptr<LeaseKeeper> leases_;   // the Lease thread
    std::unique_ptr<HostDecider> decider_;  // the decider thread (started in mode leader only)
    std::unique_ptr<EgressIPWatch> egress_ips_;
    std::unique_ptr<EgressIPLeader> egress_ip_leader_;  // its thread (mode leader with watch_egress_ips)

    std::mutex mu_;  // start() and stop()
    bool started_ = false;
    bool stopped_ = false;

    ServingView view_;  // poll() (caller's thread)
};

}  // namespace egw::k8s_source
