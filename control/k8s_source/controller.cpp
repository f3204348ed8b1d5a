// SPDX-License-Identifier: Apache-2.0
//
// The `kubernetes` state source: making, starting and stopping it, what it reports, and the
// data plane's input (ServingView). See controller.h.
#include "control/k8s_source/controller.h"

#include <stdexcept>

#include "control/k8s/log.h"

namespace egw::k8s_source {

using nlohmann::json;

const char* to_string(ElectionMode m) {
    return m == ElectionMode::external ? "external" : "leader";
}

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
    if (opts_.watch_egress_ips) egress_ips_ = std::make_unique<EgressIPWatch>(creds, client_opts);
    client_ = std::make_unique<k8s::Client>(std::move(creds), std::move(client_opts));
    leases_ = std::make_unique<LeaseKeeper>(*client_, opts_, identity_, lease_ns_, [this] { decider_->wake(); });
    decider_ = std::make_unique<HostDecider>(*client_, *leases_, opts_, identity_);
    if (egress_ips_ && opts_.election == ElectionMode::leader) {
        egress_ip_leader_ =
            std::make_unique<EgressIPLeader>(*client_, *leases_, *egress_ips_, opts_, identity_, lease_ns_);
        egress_ips_->set_egress_ip_listener([this] { egress_ip_leader_->wake(); });
    }
    client_->cache().set_listener([this](const k8s::Change& c) { on_change(c); });
}

std::vector<AssignedEgressIP> Controller::assigned_egress_ips() const {
    if (!egress_ips_) return {};
    return egress_ips_->assigned_to(opts_.node_name);
}

void Controller::on_change(const k8s::Change& c) {
    if (c.kind == model::Kind::lease) leases_->on_lease_change(c);
    if (opts_.election != ElectionMode::leader) return;
    decider_->on_change(c);
    // Liveness, the facts on the Leases and the egress-assignable label.
    if (egress_ip_leader_ && (c.kind == model::Kind::lease || c.kind == model::Kind::node)) egress_ip_leader_->wake();
}

void Controller::set_serving_check(std::function<std::string()> check) {
    leases_->set_serving_check(std::move(check));
}

Controller::~Controller() {
    abandon();
}

void Controller::start() {
    std::lock_guard lk(mu_);
    if (started_) return;
    started_ = true;
    k8s::logger()->info(
        "egw {}: kubernetes source, election {}, Leases in namespace {} (duration {}s, renew "
        "deadline {}ms, retry {}ms, grace {}ms)",
        opts_.node_name, to_string(opts_.election), lease_ns_, opts_.lease_duration.count(),
        opts_.renew_deadline.count(), opts_.retry_period.count(), opts_.grace.count());
    client_->start();
    if (egress_ips_) egress_ips_->start();
    leases_->start();
    if (opts_.election == ElectionMode::leader) decider_->start();
    if (egress_ip_leader_) egress_ip_leader_->start();
}

void Controller::abandon() {
    {
        std::lock_guard lk(mu_);
        if (stopped_) return;
        stopped_ = true;
    }
    leases_->request_stop();
    decider_->request_stop();
    if (egress_ip_leader_) egress_ip_leader_->request_stop();
    leases_->join();
    decider_->join();
    if (egress_ip_leader_) egress_ip_leader_->join();
    client_->stop();
    if (egress_ips_) egress_ips_->stop();
    leases_->end_leadership();
}

void Controller::stop() {
    bool release = false, release_lead = false;
    {
        std::lock_guard lk(mu_);
        if (stopped_) return;
        release = opts_.release_on_stop && started_;
        release_lead = release && leases_->was_leader();
    }
    leases_->request_stop();
    decider_->request_stop();
    if (egress_ip_leader_) egress_ip_leader_->request_stop();
    leases_->join();
    decider_->join();
    if (egress_ip_leader_) egress_ip_leader_->join();
    // The decider has stopped: nothing can be written on this instance's behalf any more. The
    // liveness Lease goes first: the leader (this one or another) moves the Services at once.
    leases_->end_leadership();
    if (release && leases_->stats().lease_renewals > 0) leases_->release_liveness();
    if (release_lead) leases_->release_leader();
    abandon();
}

bool Controller::leader() const {
    return leases_->leader();
}

ControllerStats Controller::stats() const {
    // Liveness as this egwd sees it now, the same on a leader and a follower.
    size_t live = 0;
    if (client_->synced())
        client_->cache().read([&](const model::ObjectSet& objs) { live = leases_->live_now(objs).live.size(); });
    const LeaseKeeperStats l = leases_->stats();
    const HostDeciderStats d = decider_->stats();
    ControllerStats s;
    s.synced = client_->synced();
    s.leader = leader();
    s.deciding = d.deciding && s.leader;
    s.not_serving = l.not_serving;
    s.leader_identity = l.leader_identity;
    s.live_nodes = live;
    s.allocations = d.allocations;
    s.status_writes = d.status_writes;
    s.label_writes = d.label_writes;
    s.write_failures = d.write_failures;
    s.status_write_failures = d.status_write_failures;
    s.label_write_failures = d.label_write_failures;
    s.lease_renewals = l.lease_renewals;
    s.leader_transitions = l.leader_transitions;
    s.pauses = d.pauses;
    s.decisions = d.decisions;
    s.label_passes = d.label_passes;
    return s;
}

std::string Controller::serving_problems() const {
    return leases_->serving_problems();
}

std::map<std::string, std::string> Controller::allocations() const {
    return decider_->allocations();
}

std::map<std::string, HostDecision> Controller::decisions() const {
    return decider_->decisions();
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
    for (const auto& [key, st] : view_.states())
        out.push_back(st);
    return true;
}

bool Controller::poll(model::ServiceDelta& out) {
    out.changed.clear();
    out.removed.clear();
    if (!client_->synced()) return false;
    return view_.update(client_->cache(), out);
}

}  // namespace egw::k8s_source
