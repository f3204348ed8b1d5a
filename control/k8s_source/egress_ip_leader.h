// SPDX-License-Identifier: Apache-2.0
//
// The leader's EgressIP assignment, one thread (in mode leader, when the EgressIP sources are
// watched): on every change of the EgressIPs, of the nodes' egress-assignable label, of the
// gateways' liveness or of the facts they publish on their liveness Leases (gateway_facts.h), and
// at least once a second (liveness runs out by the clock), it runs assign_egress_ips() over what
// the caches hold and writes what status_writes() says is owed with write_egress_ip_status():
// conditional on the resourceVersion it decided on, a 409 read again from the API server, a few
// writes at once (WriterPool), a failed write retried with backoff. Addresses no node can host are
// logged once each (UnhostableReports) and shown by stats() (`show egressips`, the status file).
//
// It decides only while the LeaseKeeper says this egwd leads, and only on fresh state: the Node,
// Lease and EgressIP watches unbroken for the grace period, and not before decide_after() (a Lease
// taken over). Stickiness comes from status.items itself, so a new leader moves nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/k8s/client.h"
#include "control/k8s_source/egress_ip_assignment.h"
#include "control/k8s_source/egress_ip_watch.h"
#include "control/k8s_source/lease_keeper.h"
#include "control/k8s_source/options.h"
#include "control/k8s_source/work_queue.h"
#include "control/k8s_source/writer_pool.h"

namespace egw::k8s_source {

struct EgressIPLeaderStats {
    bool deciding = false;                             // leads, and the state is fresh
    uint64_t passes = 0;                               // assignments run
    uint64_t status_writes = 0;                        // status.items written
    uint64_t write_failures = 0;                       // writes that failed (retried with backoff)
    std::vector<UnhostableEgressIP> unhostable;        // as of the last pass (empty while not deciding)
    std::map<std::string, std::string> node_problems;  // node -> why its published facts are unusable
};

class EgressIPLeader {
public:
    using SteadyClock = std::chrono::steady_clock;

    // `client` follows Nodes and Leases (the Controller's), `watch` the EgressIPs; the Leases are in
    // `lease_ns`. `opts` as the Controller completed them (grace set).
    EgressIPLeader(k8s::Client& client, const LeaseKeeper& leases, EgressIPWatch& watch, ControllerOptions opts,
                   std::string identity, std::string lease_ns);
    ~EgressIPLeader();
    EgressIPLeader(const EgressIPLeader&) = delete;
    EgressIPLeader& operator=(const EgressIPLeader&) = delete;

    void start();
    void request_stop();
    void join();
    // Something it assigns from changed (any thread).
    void wake() { queue_.wake(); }

    EgressIPLeaderStats stats() const;

private:
    void loop();
    void pass_once();
    // The state is fresh enough to decide on; else `ready_at` says when it will be (nullopt: a
    // watch is broken).
    bool fresh(SteadyClock::time_point now, std::optional<SteadyClock::time_point>& ready_at) const;
    void stop_deciding(const char* why);
    std::vector<EgressIPNode> gather_nodes();
    void write(const std::vector<EgressIPStatusWrite>& writes);

    k8s::Client& client_;
    const LeaseKeeper& leases_;
    EgressIPWatch& watch_;
    const ControllerOptions opts_;
    const std::string identity_;
    const std::string lease_ns_;

    std::thread thread_;
    std::atomic<bool> stopping_{false};
    WorkQueue queue_;  // EgressIP names whose write waits out a backoff
    std::unique_ptr<WriterPool> writers_;
    // The rest: the thread's own.
    bool deciding_ = false;
    std::optional<SteadyClock::time_point> next_expiry_, ready_at_;
    UnhostableReports reports_;
    std::map<std::string, std::string> node_problems_;  // as last logged
    struct Written {
        std::string decided_on;  // resourceVersion the assignment was made on
        std::vector<model::EgressIPStatusItem> items;
    };
    std::map<std::string, Written> written_;    // until the cache shows another version
    std::map<std::string, unsigned> failures_;  // name -> failed writes in a row
    std::map<std::string, SteadyClock::time_point> retry_at_;

    mutable std::mutex stats_mu_;
    EgressIPLeaderStats stats_;
};

}  // namespace egw::k8s_source
