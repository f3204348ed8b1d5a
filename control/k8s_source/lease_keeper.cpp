// SPDX-License-Identifier: Apache-2.0
//
// Lease keeping: this gateway's liveness Lease, and the leader Lease in mode leader. See lease_keeper.h.
#include "control/k8s_source/lease_keeper.h"

#include <algorithm>
#include <random>

#include "control/k8s/log.h"
#include "control/k8s/writer.h"
#include "control/k8s_source/controller_internal.h"
#include "control/k8s_source/gateway_facts.h"

namespace egw::k8s_source {

using detail::resource_version_of;
using detail::steady_ns;
using nlohmann::json;

namespace {

// An integer field of a Lease spec, 0 when absent or not an integer.
int32_t int_field(const json& spec, const char* key) {
    auto it = spec.find(key);
    return it != spec.end() && it->is_number_integer() ? it->get<int32_t>() : 0;
}

// Marks a Lease as egw's (metadata.labels app.kubernetes.io/name=egw).
void label_lease(json& lease) {
    json& meta = lease["metadata"];
    if (!meta.is_object()) meta = json::object();
    json& labels = meta["labels"];
    if (!labels.is_object()) labels = json::object();
    labels["app.kubernetes.io/name"] = "egw";
}

// Puts `facts` into the Lease's annotations, and takes out the capacity a previous run published
// when this one has none (unlimited).
void annotate_lease(json& lease, const GatewayFacts& facts) {
    json& meta = lease["metadata"];
    if (!meta.is_object()) meta = json::object();
    json& annotations = meta["annotations"];
    if (!annotations.is_object()) annotations = json::object();
    annotations.erase(kEgressIPCapacityAnnotation);
    for (const auto& [key, value] : encode_gateway_facts(facts))
        annotations[key] = value;
}

std::string lease_holder(const json& lease) {
    const json* spec = lease.contains("spec") ? &lease["spec"] : nullptr;
    if (!spec || !spec->is_object()) return "";
    auto it = spec->find("holderIdentity");
    return it != spec->end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::string now_micro_time() {
    return k8s::format_micro_time(std::chrono::system_clock::now());
}

LeaseKeeper::LeaseKeeper(k8s::Client& client, ControllerOptions opts, std::string identity, std::string lease_ns,
                         std::function<void()> leadership_changed)
    : client_(client),
      opts_(std::move(opts)),
      identity_(std::move(identity)),
      lease_ns_(std::move(lease_ns)),
      leadership_changed_(std::move(leadership_changed)),
      writes_accepted_since_(steady_ns(SteadyClock::now())) {}

LeaseKeeper::~LeaseKeeper() {
    request_stop();
    join();
}

void LeaseKeeper::set_serving_check(std::function<std::string()> check) {
    std::lock_guard lk(check_mu_);
    serving_check_ = std::move(check);
}

void LeaseKeeper::start() {
    thread_ = std::thread([this] { loop(); });
}

void LeaseKeeper::request_stop() {
    {
        std::lock_guard lk(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
}

void LeaseKeeper::join() {
    if (thread_.joinable()) thread_.join();
}

bool LeaseKeeper::leader() const {
    return steady_ns(SteadyClock::now()) < leader_until_.load();
}

LeaseKeeper::SteadyClock::time_point LeaseKeeper::decide_after() const {
    return SteadyClock::time_point(std::chrono::nanoseconds(decide_after_.load()));
}

LeaseKeeperStats LeaseKeeper::stats() const {
    std::lock_guard lk(stats_mu_);
    return stats_;
}

std::string LeaseKeeper::api_problems() const {
    std::string out;
    for (const auto& r : client_.status()) {
        if (!r.synced)
            out += r.name + ": not listed yet" + (r.last_error.empty() ? "" : " (" + r.last_error + ")") + "\n";
        else if (r.failing && r.refused)
            out += r.name + ": " + r.last_error + "\n";
    }
    return out;
}

std::string LeaseKeeper::serving_problems() const {
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

LeaseObservations LeaseKeeper::observations() const {
    LeaseObservations seen;
    // While the Lease watch is broken, or this egwd's own Lease writes fail, nothing can be judged
    // expired: count from now. After either, every gateway has a full Lease duration to renew.
    const auto now = SteadyClock::now();
    seen.view_since = client_.continuity(model::Kind::lease).since.value_or(now);
    const int64_t accepted = writes_accepted_since_.load();
    seen.view_since =
        std::max(seen.view_since, accepted == 0 ? now : SteadyClock::time_point(std::chrono::nanoseconds(accepted)));
    seen.write_accepted_sent = SteadyClock::time_point(std::chrono::nanoseconds(write_accepted_sent_.load()));
    std::lock_guard lk(seen_mu_);
    seen.changed = lease_changes_;
    return seen;
}

Liveness LeaseKeeper::live_now(const model::ObjectSet& objs) const {
    return liveness(objs, observations(), SteadyClock::now());
}

void LeaseKeeper::on_lease_change(const k8s::Change& c) {
    {
        std::lock_guard lk(seen_mu_);
        if (c.deleted)
            lease_changes_.erase(c.key);
        else
            lease_changes_[c.key] = SteadyClock::now();
    }
    // The leader Lease handed back: a follower tries at once rather than at its next round.
    if (opts_.election == ElectionMode::leader && !was_leader_.load() && c.key == lease_ns_ + "/" + kLeaderLeaseName) {
        bool free = client_.cache().read([&](const model::ObjectSet& objs) {
            auto it = objs.leases.find(c.key);
            return it == objs.leases.end() || it->second.holder_identity.empty();
        });
        if (free) {
            kick_ = true;
            cv_.notify_all();
        }
    }
}

void LeaseKeeper::sleep(std::chrono::milliseconds d) {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, d, [this] { return stopping_.load() || kick_.exchange(false); });
}

void LeaseKeeper::loop() {
    // The liveness Lease is renewed every retry period, like the leader Lease: a gateway that dies
    // is seen dead leaseDurationSeconds after its last renewal (docs/kubernetes.md, Timings).
    auto next_liveness = SteadyClock::now();
    while (!stopping_) {
        auto now = SteadyClock::now();
        try {
            if (now >= next_liveness) {
                std::string problems = serving_problems();
                if (problems.empty()) {
                    // The stats say serving before the Lease is taken back, so whoever sees the
                    // Lease held again also sees why (a reader of both never sees them disagree).
                    not_serving_.clear();
                    {
                        std::lock_guard lk(stats_mu_);
                        stats_.not_serving.clear();
                    }
                    if (renew_liveness() && liveness_released_) {
                        k8s::logger()->info("egw {}: serving; liveness Lease held", opts_.node_name);
                        liveness_released_ = false;
                    }
                } else {
                    std::string oneline = problems;
                    while (!oneline.empty() && oneline.back() == '\n')
                        oneline.pop_back();
                    for (size_t i = 0; (i = oneline.find('\n', i)) != std::string::npos;)
                        oneline.replace(i, 1, "; ");
                    if (oneline != not_serving_) {
                        // Before the first renewal this is start-up, not news.
                        if (stats().lease_renewals == 0)
                            k8s::logger()->info("egw {}: not serving yet ({})", opts_.node_name, oneline);
                        else
                            k8s::logger()->warn("egw {}: not serving ({}); the liveness Lease is given up until it is",
                                                opts_.node_name, oneline);
                    }
                    not_serving_ = oneline;
                    // Only a Lease this process renewed is given up: one left by the previous run
                    // of this gateway (a restart) runs out by itself if serving takes that long.
                    {
                        std::lock_guard lk(stats_mu_);
                        stats_.not_serving = not_serving_;
                    }
                    if (!liveness_released_ && stats().lease_renewals > 0) release_liveness();
                }
                next_liveness = now + opts_.retry_period;
            }
            if (stopping_) break;
            if (opts_.election == ElectionMode::leader) try_leader();
        } catch (const std::exception& e) {
            // Nothing here may take the daemon down; the next round tries again.
            k8s::logger()->error("egw {}: Lease renewal: {}", identity_, e.what());
        }
        now = SteadyClock::now();
        auto next = std::min(next_liveness, now + opts_.retry_period);
        sleep(std::chrono::duration_cast<std::chrono::milliseconds>(next - now));
    }
}

k8s::WriteResult LeaseKeeper::write_lease(const std::string& name, json& cached, const k8s::Writer::LeaseMutator& m) {
    // The Lease as this egwd last wrote it is the one to update (one PUT); a 409 or 404 means
    // someone else wrote it since: read it again (modify_lease) and decide on what is there.
    if (cached.is_object()) {
        json lease = cached;
        if (!m(lease, true)) {
            k8s::WriteResult r;
            r.status = 200;
            r.object = cached;
            return r;
        }
        auto res = client_.writer().update_lease(lease_ns_, lease);
        if (res.ok()) {
            cached = res.object;
            return res;
        }
        cached = json();
        if (!res.conflict() && !res.not_found()) return res;
    }
    auto res = client_.writer().modify_lease(lease_ns_, name, m);
    if (res.ok() && res.written) cached = res.object;
    return res;
}

void LeaseKeeper::note_own_write(const k8s::WriteResult& res, SteadyClock::time_point sent) {
    if (res.ok() && !res.written) return;
    if (!res.ok() && (res.conflict() || res.not_found())) return;
    if (!res.ok()) {
        if (writes_accepted_since_.exchange(0) != 0)
            k8s::logger()->info(
                "egw {}: this egwd's Lease writes fail: no gateway's Lease is judged expired until they "
                "are accepted again and a Lease duration has passed",
                identity_);
        return;
    }
    const int64_t sent_ns = steady_ns(sent);
    for (int64_t prev = write_accepted_sent_.load(); prev < sent_ns;)
        if (write_accepted_sent_.compare_exchange_weak(prev, sent_ns)) break;
    int64_t failing = 0;
    if (writes_accepted_since_.compare_exchange_strong(failing, steady_ns(SteadyClock::now())))
        k8s::logger()->info(
            "egw {}: Lease writes accepted again; every gateway has {} s to renew before its Lease is "
            "judged",
            identity_, opts_.lease_duration.count());
}

bool LeaseKeeper::renew_liveness() {
    const std::string name = std::string(kLivenessLeasePrefix) + opts_.node_name;
    const int32_t duration = static_cast<int32_t>(opts_.lease_duration.count());
    const auto sent = SteadyClock::now();
    const std::optional<GatewayFacts> facts =
        opts_.watch_egress_ips ? std::optional(gateway_facts(opts_.outside_prefixes, opts_.egress_ip_capacity))
                               : std::nullopt;
    auto res = write_lease(name, liveness_obj_, [&](json& lease, bool exists) {
        json& spec = lease["spec"];
        if (!spec.is_object()) spec = json::object();
        const std::string now = now_micro_time();
        if (!exists || lease_holder(lease) != opts_.node_name) spec["acquireTime"] = now;
        spec["holderIdentity"] = opts_.node_name;
        spec["leaseDurationSeconds"] = duration;
        spec["renewTime"] = now;
        label_lease(lease);
        if (facts) annotate_lease(lease, *facts);
        return true;
    });
    note_own_write(res, sent);
    unsigned& streak = liveness_streak_;
    if (res.ok()) {
        if (streak > 0)
            k8s::logger()->info("egw {}: liveness Lease {}/{} renewed again after {} failure(s)", opts_.node_name,
                                lease_ns_, name, streak);
        streak = 0;
        std::lock_guard lk(stats_mu_);
        ++stats_.lease_renewals;
        return true;
    }
    if (streak++ == 0)
        k8s::logger()->warn("egw {}: cannot renew liveness Lease {}/{}: {} (retrying; further failures at debug)",
                            opts_.node_name, lease_ns_, name, res.error);
    else
        k8s::logger()->debug("egw {}: cannot renew liveness Lease {}/{}: {}", opts_.node_name, lease_ns_, name,
                             res.error);
    return false;
}

void LeaseKeeper::release_liveness() {
    // As client-go's ReleaseOnCancel: no holder and a 1 s duration. Every leader sees at once that
    // no egwd runs here.
    const std::string name = std::string(kLivenessLeasePrefix) + opts_.node_name;
    auto res = write_lease(name, liveness_obj_, [&](json& lease, bool exists) {
        if (!exists || lease_holder(lease) != opts_.node_name) return false;
        json& spec = lease["spec"];
        spec["holderIdentity"] = "";
        spec["leaseDurationSeconds"] = 1;
        spec["renewTime"] = now_micro_time();
        return true;
    });
    if (res.ok() || res.not_found()) {
        liveness_released_ = true;  // given up, or there was none to give up
        if (res.ok() && res.written)
            k8s::logger()->info("egw {}: gave the liveness Lease {}/{} up", opts_.node_name, lease_ns_, name);
    } else {
        k8s::logger()->warn("egw {}: could not give the liveness Lease {}/{} up: {}", opts_.node_name, lease_ns_, name,
                            res.error);
    }
}

void LeaseKeeper::try_leader() {
    const auto started = SteadyClock::now();
    const int32_t duration = static_cast<int32_t>(opts_.lease_duration.count());
    const std::string key = lease_ns_ + "/" + kLeaderLeaseName;

    // Only an egwd that has every kind listed and is not refused by the API server leads: one
    // that cannot decide must not keep the others from it.
    if (std::string problems = api_problems(); !problems.empty()) {
        if (was_leader_.load()) {
            k8s::logger()->warn("egw {}: cannot follow the API ({}); handing the leader Lease back", identity_,
                                problems.substr(0, problems.find('\n')));
            leader_until_ = 0;
            leadership_changed_();
            release_leader();
        }
        return;
    }

    // A follower asks the API only when the leader Lease, as watched, looks free: given back, or
    // not seen to change for its duration (on this egwd's clock, never by its renewTime).
    std::string seen_rv;
    bool seen = false;
    if (!was_leader_.load() && client_.synced()) {
        bool busy = false;
        std::string holder;
        const auto seen_at = observations();
        client_.cache().read([&](const model::ObjectSet& objs) {
            auto it = objs.leases.find(key);
            if (it == objs.leases.end()) return;
            seen = true;
            seen_rv = it->second.meta.resource_version;
            holder = it->second.holder_identity;
            if (holder.empty() || holder == identity_) return;
            auto expiry = observed_expiry(it->second, seen_at);
            busy = expiry && started < *expiry;
        });
        if (busy) {
            std::lock_guard lk(stats_mu_);
            stats_.leader_identity = holder;
            return;
        }
    }

    std::string holder;
    bool handed_back = false;
    auto mutate = [&](json& lease, bool exists) {
        json& spec = lease["spec"];
        if (!spec.is_object()) spec = json::object();
        holder = lease_holder(lease);
        handed_back = !exists || holder.empty();
        if (exists && !holder.empty() && holder != identity_) {
            // Someone else's: take it only when it is the very version watched to run out.
            const std::string rv = resource_version_of(lease);
            if (seen) {
                if (rv != seen_rv) return false;  // renewed since it was watched running out
            } else if (rv != probe_rv_) {
                // Not in the cache (the model refuses it): take it once it has not changed for a
                // Lease duration between reads, on this egwd's clock.
                probe_rv_ = rv;
                probe_at_ = started;
                return false;
            } else if (started - probe_at_ < opts_.lease_duration) {
                return false;
            }
        }
        const std::string t = now_micro_time();
        if (holder != identity_) {
            spec["acquireTime"] = t;
            int32_t transitions = int_field(spec, "leaseTransitions");
            if (exists) ++transitions;  // as client-go counts them: every change of holder
            spec["leaseTransitions"] = transitions;
        }
        spec["holderIdentity"] = identity_;
        spec["leaseDurationSeconds"] = duration;
        spec["renewTime"] = t;
        label_lease(lease);
        return true;
    };
    auto res = was_leader_.load() ? write_lease(kLeaderLeaseName, leader_obj_, mutate)
                                  : client_.writer().modify_lease(lease_ns_, kLeaderLeaseName, mutate);
    note_own_write(res, started);
    if (res.ok() && res.written) {
        if (!was_leader_.load()) leader_obj_ = res.object;
        leader_until_ = steady_ns(started + opts_.renew_deadline);
        if (!was_leader_.exchange(true)) {
            // Taken from a holder that did not hand it back (it died, or nobody could renew for a
            // while): the Lease view may be old news; observe a grace period before deciding.
            decide_after_ = handed_back ? 0 : steady_ns(SteadyClock::now() + opts_.grace);
            k8s::logger()->info("egw {}: became the leader (Lease {}/{}{})", identity_, lease_ns_, kLeaderLeaseName,
                                holder.empty() || holder == identity_ ? "" : ", taken over from " + holder);
            std::lock_guard lk(stats_mu_);
            ++stats_.leader_transitions;
            stats_.leader_identity = identity_;
        }
        leadership_changed_();
        return;
    }
    if (res.ok() || res.not_found()) {
        // Declined: someone else holds it.
        leader_until_ = 0;
        leader_obj_ = json();
        {
            std::lock_guard lk(stats_mu_);
            stats_.leader_identity = holder;
        }
        if (was_leader_.exchange(false))
            k8s::logger()->warn("egw {}: no longer the leader: the Lease is held by {}", identity_, holder);
        leadership_changed_();
        return;
    }
    // The API server could not be reached or refused: keep deciding until the deadline, not after.
    if (was_leader_.load() && !leader()) {
        was_leader_ = false;
        leader_obj_ = json();
        k8s::logger()->warn("egw {}: could not renew the leader Lease within {} ms ({}); stopped deciding", identity_,
                            opts_.renew_deadline.count(), res.error);
        leadership_changed_();
    } else {
        k8s::logger()->debug("egw {}: leader Lease: {}", identity_, res.error);
    }
}

void LeaseKeeper::release_leader() {
    auto res = client_.writer().modify_lease(lease_ns_, kLeaderLeaseName, [&](json& lease, bool exists) {
        if (!exists || lease_holder(lease) != identity_) return false;
        json& spec = lease["spec"];
        spec["holderIdentity"] = "";
        spec["leaseDurationSeconds"] = 1;
        spec["renewTime"] = now_micro_time();
        return true;
    });
    if (res.ok() && res.written)
        k8s::logger()->info("egw {}: gave the leader Lease back", identity_);
    else if (!res.ok())
        k8s::logger()->warn("egw {}: could not give the leader Lease back: {}", identity_, res.error);
    was_leader_ = false;
    leader_obj_ = json();
}

}  // namespace egw::k8s_source
