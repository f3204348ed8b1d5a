// SPDX-License-Identifier: Apache-2.0
//
// Lease keeping, one thread: this gateway's liveness Lease (egw-node-<node>) and, in mode leader,
// the leader Lease (egw-leader). Part of the Controller (controller.h), which owns it, feeds it
// the cache's Lease events and tells it when to stop; the HostDecider asks it whether this egwd
// leads and since when it may decide.
//
//   liveness   renewed every retry period while this egwd serves (every kind listed and not
//              refused, and the serving check reports nothing); given up (holderIdentity "")
//              while it does not, and on a clean stop;
//   leader     a follower asks the API for the Lease only when it looks free as watched (given
//              back, or not seen to change for its duration on this egwd's clock); the holder
//              renews it, and stops leading when it cannot renew within the renew deadline or
//              cannot follow the API (then it hands the Lease back). Taken over from a holder that
//              did not hand it back, decisions wait a grace period (decide_after()).
//
// Other gateways' Leases are judged expired only on evidence (observations()): a full Lease duration
// without a change counted from when the Lease watch became unbroken and from when this egwd's own
// Lease writes were last accepted again; while its own writes fail, no Lease is judged expired.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "control/k8s/client.h"
#include "control/k8s/writer.h"
#include "control/k8s_source/decisions.h"
#include "control/k8s_source/options.h"

namespace egw::k8s_source {

// Kubernetes' MicroTime now.
std::string now_micro_time();

struct LeaseKeeperStats {
    std::string not_serving;          // why the liveness Lease is given up ("" while serving)
    std::string leader_identity;      // holder of the leader Lease as last seen ("" when unknown)
    uint64_t lease_renewals = 0;      // successful liveness Lease writes
    uint64_t leader_transitions = 0;  // times this instance became leader
};

class LeaseKeeper {
public:
    using SteadyClock = std::chrono::steady_clock;

    // `opts` as the Controller completed them (grace set); `identity` holds the leader Lease, in
    // `lease_ns`. `leadership_changed` is called on the Lease thread whenever this egwd starts or
    // stops leading (the decider wakes up to look).
    LeaseKeeper(k8s::Client& client, ControllerOptions opts, std::string identity, std::string lease_ns,
                std::function<void()> leadership_changed);
    // Stops the thread (without touching the API).
    ~LeaseKeeper();
    LeaseKeeper(const LeaseKeeper&) = delete;
    LeaseKeeper& operator=(const LeaseKeeper&) = delete;

    // See Controller::set_serving_check.
    void set_serving_check(std::function<std::string()> check);

    void start();
    // Asks the thread to stop and wakes it; join() waits for it.
    void request_stop();
    void join();

    // A Lease event of the cache (its listener's thread): when each Lease was seen to change, and
    // a follower tries at once when the leader Lease is handed back.
    void on_lease_change(const k8s::Change& c);

    // Give the Leases up, as on a clean stop (with the thread stopped).
    void release_liveness();
    void release_leader();
    // No longer leading from now on, whatever the Lease says (stopping).
    void end_leadership() { leader_until_ = 0; }

    bool leader() const;
    bool was_leader() const { return was_leader_.load(); }
    // The earliest time a leader that just took the Lease over may decide.
    SteadyClock::time_point decide_after() const;

    // Kinds not listed yet or refused by the API server, one line each ("" when none).
    std::string api_problems() const;
    // api_problems() and the serving check's.
    std::string serving_problems() const;
    LeaseObservations observations() const;
    // The gateways alive now as this egwd sees them.
    Liveness live_now(const model::ObjectSet& objs) const;

    LeaseKeeperStats stats() const;

private:
    void loop();
    bool renew_liveness();
    void try_leader();
    k8s::WriteResult write_lease(const std::string& name, nlohmann::json& cached, const k8s::Writer::LeaseMutator& m);
    // Records how this egwd's own Lease write, sent at `sent`, went: what the others' Leases can be
    // judged on. A write declined, a conflict or a missing Lease changes nothing.
    void note_own_write(const k8s::WriteResult& res, SteadyClock::time_point sent);
    void sleep(std::chrono::milliseconds d);

    k8s::Client& client_;
    const ControllerOptions opts_;
    const std::string identity_;
    const std::string lease_ns_;
    const std::function<void()> leadership_changed_;

    std::thread thread_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<bool> stopping_{false};
    std::atomic<int64_t> leader_until_{0};  // steady_clock ns; leader while now < this
    std::atomic<bool> was_leader_{false};
    std::atomic<int64_t> decide_after_{0};  // steady_clock ns; set when the Lease is taken over
    // Since when this egwd's own Lease writes have been accepted (steady_clock ns; 0 while the
    // last one failed). Another gateway's Lease that did not change is no evidence while the API
    // refuses or drops this egwd's writes: it was most likely refused the same way.
    std::atomic<int64_t> writes_accepted_since_;
    std::atomic<int64_t> write_accepted_sent_{0};  // steady_clock ns: the latest accepted write's sending
    std::atomic<bool> kick_{false};                // the leader Lease was handed back: try at once
    unsigned liveness_streak_ = 0;                 // Lease thread only
    bool liveness_released_ = false;               // Lease thread only: given up while not serving
    std::string not_serving_;                      // Lease thread only: the reasons last logged
    nlohmann::json liveness_obj_, leader_obj_;     // Lease thread only: the Leases as last written
    std::string probe_rv_;                         // Lease thread only: a leader Lease the cache does not
    SteadyClock::time_point probe_at_{};           //   hold, as last read, and since when unchanged
    mutable std::mutex check_mu_;
    std::function<std::string()> serving_check_;

    // When each Lease was last seen to change (steady clock), from the cache listener.
    mutable std::mutex seen_mu_;
    std::map<std::string, SteadyClock::time_point> lease_changes_;

    mutable std::mutex stats_mu_;
    LeaseKeeperStats stats_;
};

}  // namespace egw::k8s_source
