// SPDX-License-Identifier: Apache-2.0
//
// The `kubernetes` state source: making, starting and stopping it, what it reports, and the
// data plane's input (ServingView). See controller.h.
#include "control/k8s_source/controller.h"

#include <stdexcept>

#include "control/k8s/log.h"
#include "control/k8s/writer.h"
#include "control/k8s_source/controller_internal.h"

namespace egw::k8s_source {

using nlohmann::json;
using detail::steady_ns;

const char* to_string(ElectionMode m) { return m == ElectionMode::external ? "external" : "leader"; }

std::string now_micro_time() { return k8s::format_micro_time(std::chrono::system_clock::now()); }

Controller::Controller(k8s::Credentials creds, ControllerOptions opts, k8s::ClientOptions client_opts)
    : opts_(std::move(opts)), view_(opts_.node_name, opts_.pod_cidrs) {
    if (opts_.node_name.empty()) throw std::invalid_argument("the kubernetes state source needs the node's name");
    if (opts_.lease_duration.count() < 1) throw std::invalid_argument("lease duration must be at least 1 s");
    if (opts_.renew_deadline >= opts_.lease_duration)
        throw std::invalid_argument("the renew deadline must be shorter than the lease duration");
    if (opts_.retry_period >= opts_.renew_deadline)
        throw std::invalid_argument("the retry period must be shorter than the renew deadline");
    identity_ = opts_.identity.empty() ? opts_.node_name : opts_.identity;
    lease_ns_ = !opts_.lease_namespace.empty() ? opts_.lease_namespace
                : !creds.namespace_.empty()    ? creds.namespace_
                                               : "default";
    client_opts.lease_namespace = lease_ns_;
    if (opts_.grace.count() <= 0) opts_.grace = 2 * opts_.retry_period;
    client_ = std::make_unique<k8s::Client>(std::move(creds), std::move(client_opts));
    client_->cache().set_listener([this](const k8s::Change& c) { on_change(c); });
}

void Controller::set_serving_check(std::function<std::string()> check) {
    std::lock_guard lk(check_mu_);
    serving_check_ = std::move(check);
}

Controller::~Controller() { abandon(); }

void Controller::start() {
    std::lock_guard lk(lease_mu_);
    if (started_) return;
    started_ = true;
    k8s::logger()->info("egw {}: kubernetes source, election {}, Leases in namespace {} (duration {}s, renew "
                        "deadline {}ms, retry {}ms, grace {}ms)",
                        opts_.node_name, to_string(opts_.election), lease_ns_, opts_.lease_duration.count(),
                        opts_.renew_deadline.count(), opts_.retry_period.count(), opts_.grace.count());
    client_->start();
    lease_thread_ = std::thread([this] { lease_loop(); });
    if (opts_.election == ElectionMode::leader) {
        writers_ = std::make_unique<WriterPool>(opts_.write_concurrency);
        decide_thread_ = std::thread([this] { decide_loop(); });
    }
}

void Controller::abandon() {
    {
        std::lock_guard lk(lease_mu_);
        if (stopped_) return;
        stopped_ = true;
        stopping_ = true;
    }
    lease_cv_.notify_all();
    queue_.wake();
    if (lease_thread_.joinable()) lease_thread_.join();
    if (decide_thread_.joinable()) decide_thread_.join();
    writers_.reset();
    client_->stop();
    leader_until_ = 0;
}

void Controller::stop() {
    bool release = false, release_lead = false;
    {
        std::lock_guard lk(lease_mu_);
        if (stopped_) return;
        stopping_ = true;
        release = opts_.release_on_stop && started_;
        release_lead = release && was_leader_.load();
    }
    lease_cv_.notify_all();
    queue_.wake();
    if (lease_thread_.joinable()) lease_thread_.join();
    if (decide_thread_.joinable()) decide_thread_.join();
    // The decider has stopped: nothing can be written on this instance's behalf any more. The
    // liveness Lease goes first: the leader (this one or another) moves the Services at once.
    leader_until_ = 0;
    if (release && stats().lease_renewals > 0) release_liveness();
    if (release_lead) release_leader();
    abandon();
}

bool Controller::leader() const { return steady_ns(SteadyClock::now()) < leader_until_.load(); }

ControllerStats Controller::stats() const {
    // Liveness as this egwd sees it now, the same on a leader and a follower.
    size_t live = 0;
    if (client_->synced()) client_->cache().read([&](const model::ObjectSet& objs) { live = live_now(objs).live.size(); });
    std::lock_guard lk(stats_mu_);
    ControllerStats s = stats_;
    s.synced = client_->synced();
    s.leader = leader();
    s.deciding = s.deciding && s.leader;
    s.live_nodes = live;
    return s;
}

std::string Controller::api_problems() const {
    std::string out;
    for (const auto& r : client_->status()) {
        if (!r.synced)
            out += r.name + ": not listed yet" + (r.last_error.empty() ? "" : " (" + r.last_error + ")") + "\n";
        else if (r.failing && k8s::refused_by_server(r.failure_status))
            out += r.name + ": " + r.last_error + "\n";
    }
    return out;
}

std::string Controller::serving_problems() const {
    std::string out = api_problems();
    // Called under the lock, so that set_serving_check(nullptr) waits for a call in progress.
    std::lock_guard lk(check_mu_);
    if (serving_check_) {
        std::string dp = serving_check_();
        if (!dp.empty() && dp.back() != '\n') dp += '\n';
        out += dp;
    }
    return out;
}

LeaseObservations Controller::observations() const {
    LeaseObservations seen;
    // While the Lease watch is broken nothing can be judged expired: count from now.
    seen.view_since = client_->continuity(model::Kind::lease).since.value_or(SteadyClock::now());
    std::lock_guard lk(seen_mu_);
    seen.changed = lease_changes_;
    return seen;
}

Liveness Controller::live_now(const model::ObjectSet& objs) const {
    return liveness(objs, observations(), SteadyClock::now());
}

std::map<std::string, std::string> Controller::allocations() const {
    std::lock_guard lk(stats_mu_);
    return alloc_view_;
}

std::map<std::string, HostDecision> Controller::decisions() const {
    std::lock_guard lk(stats_mu_);
    return decisions_;
}

// --- The data plane's input ------------------------------------------------------------------

bool Controller::wait(std::chrono::milliseconds timeout) {
    if (!client_->synced()) return client_->wait_synced(timeout);
    const uint64_t seen = view_.generation();
    return client_->cache().wait_for_change(seen, timeout) != seen;
}

bool Controller::poll(std::vector<model::ServiceState>& out) {
    model::ServiceDelta delta;
    if (!poll(delta)) return false;
    out.clear();
    out.reserve(view_.states().size());
    for (const auto& [key, st] : view_.states()) out.push_back(st);
    return true;
}

bool Controller::poll(model::ServiceDelta& out) {
    out.changed.clear();
    out.removed.clear();
    if (!client_->synced()) return false;
    return view_.update(client_->cache(), out);
}

}  // namespace egw::k8s_source
