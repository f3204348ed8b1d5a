// SPDX-License-Identifier: Apache-2.0
//
// See egress_ip_leader.h.
#include "control/k8s_source/egress_ip_leader.h"

#include <algorithm>

#include "control/k8s/log.h"
#include "control/k8s_source/controller_internal.h"
#include "control/k8s_source/decisions.h"
#include "control/k8s_source/egress_ip_status.h"
#include "control/k8s_source/gateway_facts.h"

namespace egw::k8s_source {

namespace {

std::string describe_items(const std::vector<model::EgressIPStatusItem>& items) {
    std::string out;
    for (const auto& it : items) {
        if (!out.empty()) out += ", ";
        out += net::to_string(it.egress_ip);
        out += " on ";
        out += it.node;
    }
    return out.empty() ? "none" : out;
}

}  // namespace

EgressIPLeader::EgressIPLeader(k8s::Client& client, const LeaseKeeper& leases, EgressIPWatch& watch,
                               ControllerOptions opts, std::string identity, std::string lease_ns)
    : client_(client),
      leases_(leases),
      watch_(watch),
      opts_(std::move(opts)),
      identity_(std::move(identity)),
      lease_ns_(std::move(lease_ns)) {}

EgressIPLeader::~EgressIPLeader() {
    request_stop();
    join();
}

void EgressIPLeader::start() {
    writers_ = std::make_unique<WriterPool>(opts_.write_concurrency);
    thread_ = std::thread([this] { loop(); });
}

void EgressIPLeader::request_stop() {
    stopping_ = true;
    queue_.wake();
}

void EgressIPLeader::join() {
    if (thread_.joinable()) thread_.join();
    writers_.reset();
}

EgressIPLeaderStats EgressIPLeader::stats() const {
    std::lock_guard lk(stats_mu_);
    return stats_;
}

void EgressIPLeader::loop() {
    while (!stopping_) {
        try {
            pass_once();
        } catch (const std::exception& e) {
            // Nothing here may take the daemon down: the next pass starts from the caches again.
            k8s::logger()->error("egw {}: assigning EgressIPs: {}", identity_, e.what());
            stop_deciding("error");
            std::this_thread::sleep_for(opts_.retry_period);
        }
    }
}

bool EgressIPLeader::fresh(SteadyClock::time_point now, std::optional<SteadyClock::time_point>& ready_at) const {
    auto ready = leases_.decide_after();
    const k8s::Continuity seen[] = {client_.continuity(model::Kind::node), client_.continuity(model::Kind::lease),
                                    watch_.client().continuity(model::Kind::egress_ip)};
    for (const auto& c : seen) {
        if (!c.since) {
            ready_at.reset();
            return false;
        }
        ready = std::max(ready, *c.since + opts_.grace);
    }
    if (now < ready) {
        ready_at = ready;
        return false;
    }
    return true;
}

void EgressIPLeader::stop_deciding(const char* why) {
    if (!deciding_) return;
    deciding_ = false;
    k8s::logger()->info("egw {}: stops assigning EgressIPs ({})", identity_, why);
    // A later leadership starts from status.items again, and says again what it cannot host.
    reports_ = UnhostableReports{};
    node_problems_.clear();
    written_.clear();
    failures_.clear();
    retry_at_.clear();
    queue_.clear();
    std::lock_guard lk(stats_mu_);
    stats_.deciding = false;
    stats_.unhostable.clear();
    stats_.node_problems.clear();
}

std::vector<EgressIPNode> EgressIPLeader::gather_nodes() {
    std::vector<EgressIPNode> nodes;
    std::map<std::string, std::string> problems;
    client_.cache().read([&](const model::ObjectSet& objs) {
        const Liveness lv = leases_.live_now(objs);
        next_expiry_ = lv.next_change;
        for (const auto& [name, node] : objs.nodes) {
            EgressIPNode n;
            n.name = name;
            n.assignable = node.meta.labels.count(kEgressAssignableLabel) > 0;
            n.live = lv.live.count(name) > 0;
            auto lease = objs.leases.find(lease_ns_ + "/" + kLivenessLeasePrefix + name);
            if (lease != objs.leases.end()) {
                DecodedGatewayFacts f = decode_gateway_facts(lease->second.annotations);
                if (!f.error.empty()) problems[name] = f.error;
                n.subnets = std::move(f.facts.subnets);
                if (f.facts.capacity) n.capacity = *f.facts.capacity;
            }
            nodes.push_back(std::move(n));
        }
    });
    for (const auto& [node, why] : problems) {
        auto it = node_problems_.find(node);
        if (it == node_problems_.end() || it->second != why)
            k8s::logger()->warn("egw {}: node {} hosts no EgressIP address: its liveness Lease's {}", identity_, node,
                                why);
    }
    for (const auto& [node, why] : node_problems_)
        if (!problems.count(node))
            k8s::logger()->info("egw {}: node {}'s EgressIP facts are readable again", identity_, node);
    node_problems_ = problems;
    return nodes;
}

void EgressIPLeader::pass_once() {
    // Wake at least once a second, when a live gateway's Lease runs out, and when fresh state is due.
    const auto now = SteadyClock::now();
    auto deadline = now + std::chrono::seconds(1);
    if (next_expiry_) deadline = std::min(deadline, std::max(now, *next_expiry_ + std::chrono::milliseconds(1)));
    if (ready_at_) deadline = std::min(deadline, std::max(now, *ready_at_));
    queue_.take(deadline);  // what is due is found again below, from the caches
    if (stopping_) return;
    if (!leases_.leader()) {
        stop_deciding("not the leader");
        return;
    }
    if (!client_.synced()) return;
    if (!fresh(SteadyClock::now(), ready_at_)) {
        stop_deciding("waiting for fresh Node, Lease and EgressIP watches");
        return;
    }
    ready_at_.reset();
    if (!deciding_) {
        deciding_ = true;
        k8s::logger()->info("egw {}: assigning EgressIPs", identity_);
        std::lock_guard lk(stats_mu_);
        stats_.deciding = true;
    }

    std::map<std::string, model::EgressIP> egress_ips;
    watch_.client().cache().read([&](const model::ObjectSet& objs) { egress_ips = objs.egress_ips; });
    const std::vector<EgressIPNode> nodes = gather_nodes();
    const EgressIPAssignment assignment = assign_egress_ips(egress_ips, nodes);

    const UnhostableReports::Delta delta = reports_.update(assignment.unhostable);
    for (const auto& u : delta.reported)
        k8s::logger()->warn("egw {}: EgressIP {}: {} is not assigned: {}", identity_, u.egress_ip, net::to_string(u.ip),
                            u.reason);
    for (const auto& u : delta.resolved)
        k8s::logger()->info("egw {}: EgressIP {}: {} is no longer unhostable", identity_, u.egress_ip,
                            net::to_string(u.ip));

    // Bookkeeping of the objects gone or moved on since they were written.
    for (auto it = written_.begin(); it != written_.end();) {
        auto e = egress_ips.find(it->first);
        if (e == egress_ips.end() || e->second.meta.resource_version != it->second.decided_on)
            it = written_.erase(it);
        else
            ++it;
    }
    for (auto it = failures_.begin(); it != failures_.end();) {
        if (!egress_ips.count(it->first)) {
            retry_at_.erase(it->first);
            it = failures_.erase(it);
        } else {
            ++it;
        }
    }

    std::vector<EgressIPStatusWrite> owed;
    const auto t = SteadyClock::now();
    for (auto& w : status_writes(egress_ips, assignment)) {
        // Written already on this version, and the watch has not brought the write back yet.
        if (auto it = written_.find(w.name); it != written_.end() && it->second.items == w.items) continue;
        if (auto it = retry_at_.find(w.name); it != retry_at_.end() && it->second > t) continue;
        owed.push_back(std::move(w));
    }
    {
        std::lock_guard lk(stats_mu_);
        ++stats_.passes;
        stats_.unhostable = assignment.unhostable;
        stats_.node_problems = node_problems_;
    }
    if (!owed.empty()) write(owed);
}

void EgressIPLeader::write(const std::vector<EgressIPStatusWrite>& writes) {
    std::vector<k8s::WriteResult> results(writes.size());
    std::vector<char> attempted(writes.size(), 0);
    writers_->run(writes.size(), [&](size_t k) {
        // A leader that lost its Lease writes nothing more.
        if (stopping_ || !leases_.leader()) return false;
        const EgressIPStatusWrite& w = writes[k];
        results[k] =
            write_egress_ip_status(watch_.client().writer(), w.name, w.egress_ips, w.items, w.resource_version);
        attempted[k] = 1;
        return true;
    });
    for (size_t k = 0; k < writes.size(); ++k) {
        if (!attempted[k]) continue;
        const EgressIPStatusWrite& w = writes[k];
        const k8s::WriteResult& res = results[k];
        if (res.ok() || res.not_found()) {
            if (res.ok() && res.written) {
                k8s::logger()->info("egw {}: EgressIP {} status.items: {}", identity_, w.name, describe_items(w.items));
                std::lock_guard lk(stats_mu_);
                ++stats_.status_writes;
            }
            written_[w.name] = Written{w.resource_version, w.items};
            failures_.erase(w.name);
            retry_at_.erase(w.name);
            continue;
        }
        if (res.conflict()) {
            // spec.egressIPs changed since: the watch brings the new spec, and the next pass
            // assigns it. Look again soon even if the watch is slow.
            queue_.add_after(w.name, opts_.write_backoff_initial);
            continue;
        }
        const unsigned n = ++failures_[w.name];
        const auto delay = std::min<std::chrono::milliseconds>(
            opts_.write_backoff_max, opts_.write_backoff_initial * (1u << std::min(n - 1, 16u)));
        retry_at_[w.name] = SteadyClock::now() + delay;
        queue_.add_after(w.name, delay);
        if (n == 1)
            k8s::logger()->warn("egw {}: EgressIP {}: cannot write status.items: {} (retrying with backoff)", identity_,
                                w.name, res.error);
        else
            k8s::logger()->debug("egw {}: EgressIP {}: cannot write status.items (attempt {}): {}", identity_, w.name,
                                 n, res.error);
        std::lock_guard lk(stats_mu_);
        ++stats_.write_failures;
    }
}

}  // namespace egw::k8s_source
