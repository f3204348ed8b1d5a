// SPDX-License-Identifier: Apache-2.0
//
// The `kubernetes` state source: Leases, the leader's decisions and write-backs, and the serving
// states every gateway programs. See controller.h.
#include "control/k8s_source/controller.h"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "control/k8s/log.h"
#include "control/k8s/writer.h"

namespace egw::k8s_source {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

int64_t steady_ns(SteadyClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::pair<std::string, std::string> split_key(const std::string& key) {
    auto slash = key.find('/');
    if (slash == std::string::npos) return {"", key};
    return {key.substr(0, slash), key.substr(slash + 1)};
}

// The labels of a node that are not egw's, with its Ready condition: what host eligibility reads.
std::pair<std::string, bool> node_fact(const model::Node& n) {
    std::string labels;
    const std::string_view prefix = model::kNodeLabelPrefix;
    for (const auto& [k, v] : n.meta.labels) {
        if (std::string_view(k).substr(0, prefix.size()) == prefix) continue;
        labels += k;
        labels += '=';
        labels += v;
        labels += '\n';
    }
    return {labels, n.ready};
}

std::string describe_patch(const LabelPatch& p) {
    std::string out;
    for (const auto& [k, v] : p.labels) {
        if (!out.empty()) out += ' ';
        out += (v ? "+" : "-") + k;
    }
    return out;
}

json patch_json(const LabelPatch& p) {
    json j = json::object();
    for (const auto& [k, v] : p.labels) j[k] = v ? json(*v) : json(nullptr);
    return j;
}

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

std::string resource_version_of(const json& obj) {
    if (!obj.is_object()) return "";
    auto m = obj.find("metadata");
    if (m == obj.end() || !m->is_object()) return "";
    auto rv = m->find("resourceVersion");
    return rv != m->end() && rv->is_string() ? rv->get<std::string>() : "";
}

std::string lease_holder(const json& lease) {
    const json* spec = lease.contains("spec") ? &lease["spec"] : nullptr;
    if (!spec || !spec->is_object()) return "";
    auto it = spec->find("holderIdentity");
    return it != spec->end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

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

// --- Leases ----------------------------------------------------------------------------------

void Controller::sleep_leases(std::chrono::milliseconds d) {
    std::unique_lock lk(lease_mu_);
    lease_cv_.wait_for(lk, d, [this] { return stopping_.load() || lease_kick_.exchange(false); });
}

void Controller::lease_loop() {
    // The liveness Lease is renewed every retry period, like the leader Lease: a gateway that dies
    // is seen dead leaseDurationSeconds after its last renewal (docs/kubernetes.md, Timings).
    auto next_liveness = SteadyClock::now();
    while (!stopping_) {
        auto now = SteadyClock::now();
        try {
            if (now >= next_liveness) {
                std::string problems = serving_problems();
                if (problems.empty()) {
                    if (renew_liveness() && liveness_released_) {
                        k8s::logger()->info("egw {}: serving; liveness Lease held", opts_.node_name);
                        liveness_released_ = false;
                    }
                    not_serving_.clear();
                } else {
                    std::string oneline = problems;
                    while (!oneline.empty() && oneline.back() == '\n') oneline.pop_back();
                    for (size_t i = 0; (i = oneline.find('\n', i)) != std::string::npos;) oneline.replace(i, 1, "; ");
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
                    if (!liveness_released_ && stats().lease_renewals > 0) release_liveness();
                }
                {
                    std::lock_guard lk(stats_mu_);
                    stats_.not_serving = not_serving_;
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
        sleep_leases(std::chrono::duration_cast<std::chrono::milliseconds>(next - now));
    }
}

k8s::WriteResult Controller::write_lease(const std::string& name, json& cached, const k8s::Writer::LeaseMutator& m) {
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
        auto res = client_->writer().update_lease(lease_ns_, lease);
        if (res.ok()) {
            cached = res.object;
            return res;
        }
        cached = json();
        if (!res.conflict() && !res.not_found()) return res;
    }
    auto res = client_->writer().modify_lease(lease_ns_, name, m);
    if (res.ok() && res.written) cached = res.object;
    return res;
}

bool Controller::renew_liveness() {
    const std::string name = std::string(kLivenessLeasePrefix) + opts_.node_name;
    const int32_t duration = static_cast<int32_t>(opts_.lease_duration.count());
    auto res = write_lease(name, liveness_obj_, [&](json& lease, bool exists) {
        json& spec = lease["spec"];
        if (!spec.is_object()) spec = json::object();
        const std::string now = now_micro_time();
        if (!exists || lease_holder(lease) != opts_.node_name) spec["acquireTime"] = now;
        spec["holderIdentity"] = opts_.node_name;
        spec["leaseDurationSeconds"] = duration;
        spec["renewTime"] = now;
        label_lease(lease);
        return true;
    });
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

void Controller::release_liveness() {
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
        liveness_released_ = true;   // given up, or there was none to give up
        if (res.ok() && res.written)
            k8s::logger()->info("egw {}: gave the liveness Lease {}/{} up", opts_.node_name, lease_ns_, name);
    } else {
        k8s::logger()->warn("egw {}: could not give the liveness Lease {}/{} up: {}", opts_.node_name, lease_ns_, name,
                            res.error);
    }
}

void Controller::try_leader() {
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
            queue_.wake();
            release_leader();
        }
        return;
    }

    // A follower asks the API only when the leader Lease, as watched, looks free: given back, or
    // not seen to change for its duration (on this egwd's clock, never by its renewTime).
    std::string seen_rv;
    bool seen = false;
    if (!was_leader_.load() && client_->synced()) {
        bool busy = false;
        std::string holder;
        const auto seen_at = observations();
        client_->cache().read([&](const model::ObjectSet& objs) {
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
                if (rv != seen_rv) return false;   // renewed since it was watched running out
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
            if (exists) ++transitions;   // as client-go counts them: every change of holder
            spec["leaseTransitions"] = transitions;
        }
        spec["holderIdentity"] = identity_;
        spec["leaseDurationSeconds"] = duration;
        spec["renewTime"] = t;
        label_lease(lease);
        return true;
    };
    auto res = was_leader_.load() ? write_lease(kLeaderLeaseName, leader_obj_, mutate)
                                  : client_->writer().modify_lease(lease_ns_, kLeaderLeaseName, mutate);
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
        queue_.wake();
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
        queue_.wake();
        return;
    }
    // The API server could not be reached or refused: keep deciding until the deadline, not after.
    if (was_leader_.load() && !leader()) {
        was_leader_ = false;
        leader_obj_ = json();
        k8s::logger()->warn("egw {}: could not renew the leader Lease within {} ms ({}); stopped deciding",
                            identity_, opts_.renew_deadline.count(), res.error);
        queue_.wake();
    } else {
        k8s::logger()->debug("egw {}: leader Lease: {}", identity_, res.error);
    }
}

void Controller::release_leader() {
    auto res = client_->writer().modify_lease(lease_ns_, kLeaderLeaseName, [&](json& lease, bool exists) {
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

// --- The leader's decisions -------------------------------------------------------------------

void Controller::on_change(const k8s::Change& c) {
    if (c.kind == model::Kind::lease) {
        {
            std::lock_guard lk(seen_mu_);
            if (c.deleted) lease_changes_.erase(c.key);
            else lease_changes_[c.key] = SteadyClock::now();
        }
        // The leader Lease handed back: a follower tries at once rather than at its next round.
        if (opts_.election == ElectionMode::leader && !was_leader_.load() &&
            c.key == lease_ns_ + "/" + kLeaderLeaseName) {
            bool free = client_->cache().read([&](const model::ObjectSet& objs) {
                auto it = objs.leases.find(c.key);
                return it == objs.leases.end() || it->second.holder_identity.empty();
            });
            if (free) {
                lease_kick_ = true;
                lease_cv_.notify_all();
            }
        }
    }
    if (opts_.election != ElectionMode::leader) return;
    {
        std::lock_guard lk(changes_mu_);
        changes_.push_back(c);
    }
    queue_.wake();
}

void Controller::lose_leadership(const char* why) {
    if (need_restore_) return;
    k8s::logger()->info("egw {}: stopped deciding ({})", identity_, why);
    need_restore_ = true;
    alloc_.clear();
    queue_.clear();
    std::lock_guard lk(stats_mu_);
    stats_.deciding = false;
    alloc_view_.clear();
    decisions_.clear();
    stats_.allocations = 0;
}

void Controller::restore() {
    std::vector<std::string> keys;
    size_t kept = 0;
    client_->cache().read([&](const model::ObjectSet& objs) {
        live_ = live_now(objs).live;
        owners_.rebuild(objs);
        const model::SliceIndex slices = model::index_endpoint_slices(objs);
        ClusterView view{objs, slices, live_, opts_.pod_cidrs};
        alloc_ = restore_allocations(view);
        kept = alloc_.hosts().size();
        node_facts_.clear();
        for (const auto& [name, node] : objs.nodes) node_facts_[name] = node_fact(node);
        for (const auto& [key, es] : objs.egress_services) keys.push_back(key);
    });
    status_written_.clear();
    labels_written_.clear();
    failures_.clear();
    unwritten_.clear();
    for (const auto& k : keys) queue_.add(k);
    labels_dirty_ = true;
    need_restore_ = false;
    paused_logged_ = false;
    k8s::logger()->info("egw {}: deciding for {} EgressService(s); kept {} host(s) found valid, {} live gateway(s)",
                        identity_, keys.size(), kept, live_.size());
    std::lock_guard lk(stats_mu_);
    decisions_.clear();
    alloc_view_ = alloc_.hosts();
    stats_.allocations = kept;
    stats_.deciding = true;
}

bool Controller::fresh(SteadyClock::time_point now, std::optional<SteadyClock::time_point>& ready_at) {
    // Every kind's watch unbroken for the grace period: the Lease view has seen a renewal of every
    // live gateway since it was (re)established, and the other kinds are current again.
    uint64_t breaks = 0;
    std::string broken;
    auto ready = SteadyClock::time_point(std::chrono::nanoseconds(decide_after_.load()));
    for (auto kind : k8s::Client::all_kinds()) {
        k8s::Continuity c = client_->continuity(kind);
        breaks += c.breaks;
        if (!c.since) {
            if (broken.empty()) broken = model::to_string(kind);
        } else {
            ready = std::max(ready, *c.since + opts_.grace);
        }
    }
    if (breaks != breaks_seen_) {
        // A watch relisted or went through a backoff: what the cache said may be old news. Start
        // over from the API's state once it is fresh again.
        breaks_seen_ = breaks;
        if (!need_restore_) {
            k8s::logger()->info("egw {}: a watch was interrupted; decisions pause until every kind is fresh again",
                                identity_);
            need_restore_ = true;
            alloc_.clear();
            queue_.clear();
            std::lock_guard lk(stats_mu_);
            ++stats_.pauses;
            stats_.deciding = false;
            alloc_view_.clear();
            stats_.allocations = 0;
        }
    }
    if (!broken.empty() || now < ready) {
        if (!paused_logged_ && need_restore_) {
            paused_logged_ = true;
            if (!broken.empty())
                k8s::logger()->info("egw {}: waiting for the {} watch before deciding", identity_, broken);
            else
                k8s::logger()->info("egw {}: observing the Leases for {} ms before deciding", identity_,
                                    std::chrono::duration_cast<std::chrono::milliseconds>(ready - now).count());
        }
        ready_at = broken.empty() ? std::optional(ready) : std::nullopt;
        return false;
    }
    return true;
}

std::vector<std::string> Controller::keys_for(const std::vector<k8s::Change>& changes, bool& all, bool& leases) {
    std::vector<std::string> keys;
    client_->cache().read([&](const model::ObjectSet& objs) {
        std::vector<std::string> affected;
        for (const auto& c : changes) {
            switch (c.kind) {
            case model::Kind::egress_service: keys.push_back(c.key); break;
            case model::Kind::service: affected.push_back(c.key); break;
            case model::Kind::endpoint_slice: owners_.update(objs, c.key, affected); break;
            case model::Kind::node: {
                labels_dirty_ = true;   // scrub labels on every node event
                auto it = objs.nodes.find(c.key);
                auto known = node_facts_.find(c.key);
                if (it == objs.nodes.end()) {
                    if (known != node_facts_.end()) {
                        node_facts_.erase(known);
                        all = true;
                    }
                } else {
                    auto fact = node_fact(it->second);
                    if (known == node_facts_.end() || known->second != fact) {
                        node_facts_[c.key] = std::move(fact);
                        all = true;
                    }
                }
                break;
            }
            case model::Kind::lease: leases = true; break;
            }
        }
        // A Service or its endpoints matter only with an EgressService of the same name (or one
        // that was just deleted and still holds a node).
        for (auto& k : affected)
            if (objs.egress_services.count(k) || alloc_.host_of(k)) keys.push_back(std::move(k));
        if (all)
            for (const auto& [key, es] : objs.egress_services) keys.push_back(key);
    });
    return keys;
}

void Controller::decide_batch(const std::vector<std::string>& keys) {
    struct Todo {
        HostDecision d;
        bool write = false;
        std::string rv;        // the write's precondition: the object's version as last seen or written
        std::string seen_rv;   // the cache's version
        std::string before;    // the allocation before
    };
    std::vector<Todo> todo;
    todo.reserve(keys.size());
    client_->cache().read([&](const model::ObjectSet& objs) {
        const model::SliceIndex slices = owners_.index(objs, keys);
        // What this leader wrote and the cache does not show yet: the API's object is the one the
        // write produced, not the cache's.
        std::map<std::string, std::string> written;
        for (const auto& key : keys) {
            auto w = status_written_.find(key);
            auto es = objs.egress_services.find(key);
            if (w != status_written_.end() && es != objs.egress_services.end() &&
                w->second.resource_version == es->second.meta.resource_version)
                written[key] = w->second.value;
        }
        ClusterView view{objs, slices, live_, opts_.pod_cidrs, &written};
        for (const auto& key : keys) {
            Todo t;
            if (const std::string* h = alloc_.host_of(key)) t.before = *h;
            t.d = decide_host(view, key, alloc_);
            apply(alloc_, t.d);
            if (t.d.exists) {
                const model::EgressService& es = objs.egress_services.at(key);
                bool has = es.has_status;
                std::string now_host = es.status_host;
                t.rv = es.meta.resource_version;
                t.seen_rv = t.rv;
                if (auto w = written.find(key); w != written.end()) {
                    has = true;
                    now_host = w->second;
                    t.rv = status_written_.at(key).written_version;
                }
                t.write = !(has && now_host == t.d.host);
            }
            todo.push_back(std::move(t));
        }
    });

    {
        std::lock_guard lk(stats_mu_);
        stats_.decisions += todo.size();
        for (const auto& t : todo) {
            if (t.d.exists) decisions_[t.d.key] = t.d;
            else decisions_.erase(t.d.key);
        }
        alloc_view_ = alloc_.hosts();
        stats_.allocations = alloc_view_.size();
    }

    // Bookkeeping first; the writes go out together, a few at a time (the API server answers
    // them in parallel), and their results are applied in order.
    std::vector<size_t> to_write;
    for (size_t i = 0; i < todo.size(); ++i) {
        const Todo& t = todo[i];
        const std::string after = alloc_.host_of(t.d.key) ? *alloc_.host_of(t.d.key) : "";
        if (after != t.before) labels_dirty_ = true;
        if (!t.d.exists) {
            status_written_.erase(t.d.key);
            failures_.erase(t.d.key);
            unwritten_.erase(t.d.key);
        } else if (!t.write) {
            unwritten_.erase(t.d.key);
            if (t.d.reelect) queue_.add(t.d.key);
        } else {
            to_write.push_back(i);
        }
    }
    if (to_write.empty()) return;

    std::vector<k8s::WriteResult> results(to_write.size());
    std::vector<char> attempted(to_write.size(), 0);
    writers_->run(to_write.size(), [&](size_t k) {
        // A leader that lost its Lease writes nothing more; the decider starts over.
        if (stopping_ || !leader()) return false;
        const Todo& t = todo[to_write[k]];
        results[k] = write_status(t.d.key, t.d.host, t.rv);
        attempted[k] = 1;
        return true;
    });

    for (size_t k = 0; k < to_write.size(); ++k) {
        if (!attempted[k]) continue;
        const Todo& t = todo[to_write[k]];
        const k8s::WriteResult& res = results[k];
        if (res.ok() || res.not_found()) {
            if (res.ok() && res.written) {
                k8s::logger()->info("egw {}: {} status.host=\"{}\"{}", identity_, t.d.key, t.d.host,
                                    t.d.reason.empty() ? "" : " (" + t.d.reason + ")");
                std::lock_guard lk(stats_mu_);
                ++stats_.status_writes;
            }
            status_written_[t.d.key] = Written{t.d.host, t.seen_rv, res.ok() ? resource_version_of(res.object) : ""};
            failures_.erase(t.d.key);
            if (unwritten_.erase(t.d.key)) labels_dirty_ = true;
            if (t.d.reelect) queue_.add(t.d.key);
            continue;
        }
        unsigned n = ++failures_[t.d.key];
        if (unwritten_.insert(t.d.key).second) labels_dirty_ = true;
        auto delay = std::min<std::chrono::milliseconds>(opts_.write_backoff_max,
                                                         opts_.write_backoff_initial * (1u << std::min(n - 1, 16u)));
        if (n == 1)
            k8s::logger()->warn("egw {}: {}: cannot write status.host=\"{}\": {} (retrying with backoff)", identity_,
                                t.d.key, t.d.host, res.error);
        else
            k8s::logger()->debug("egw {}: {}: cannot write status.host (attempt {}): {}", identity_, t.d.key, n,
                                 res.error);
        {
            std::lock_guard lk(stats_mu_);
            ++stats_.write_failures;
            ++stats_.status_write_failures;
        }
        queue_.add_after(t.d.key, delay);
    }
}

k8s::WriteResult Controller::write_status(const std::string& key, const std::string& host, const std::string& rv) {
    // Conditional on the version the decision was made on. A 409 means the object changed since
    // (the cache lags, or someone edited it): read it again and write only if it does not already
    // say `host`.
    auto [ns, name] = split_key(key);
    std::string version = rv;
    k8s::WriteResult res;
    for (int attempt = 0; attempt < 3; ++attempt) {
        res = client_->writer().set_egress_service_host(ns, name, host, version);
        if (!res.conflict()) return res;
        k8s::WriteResult got = client_->writer().read(k8s::resources::egress_services, ns, name);
        if (!got.ok()) return got.not_found() ? got : res;
        const json& obj = got.object;
        version = resource_version_of(obj);
        const json* st = obj.contains("status") && obj["status"].is_object() ? &obj["status"] : nullptr;
        if (st && st->contains("host") && (*st)["host"].is_string() && (*st)["host"].get<std::string>() == host) {
            got.written = false;
            return got;   // it says so already
        }
    }
    return res;
}

void Controller::sync_labels() {
    std::vector<std::pair<LabelPatch, std::string>> patches;   // with the node's resourceVersion
    std::map<std::string, std::set<std::string>> wanted;
    client_->cache().read([&](const model::ObjectSet& objs) {
        // A host whose status write has not gone through is not labelled yet (status first).
        Allocations confirmed = alloc_;
        for (const auto& k : unwritten_) confirmed.release(k);
        wanted = desired_labels(confirmed);
        for (auto& p : label_patches(objs, confirmed)) {
            std::string rv = objs.nodes.at(p.node).meta.resource_version;
            patches.emplace_back(std::move(p), std::move(rv));
        }
    });
    labels_dirty_ = false;
    {
        std::lock_guard lk(stats_mu_);
        ++stats_.label_passes;
    }
    // A host whose label key the API server would refuse gets no label (desired_labels leaves it
    // out): said once per Service while it stays allocated.
    std::set<std::string> unlabelable;
    for (const auto& [key, node] : alloc_.hosts()) {
        const std::string label = model::node_label_for(key);
        const std::string problem = model::label_key_problem(label);
        if (problem.empty()) continue;
        unlabelable.insert(key);
        if (!unlabelable_.count(key))
            k8s::logger()->warn("egw {}: {}: host {} gets no node label: the key \"{}\" is not a valid label key "
                                "({}); as in OVN-Kubernetes it is not shortened, so shorten the namespace or name "
                                "to have the host labelled",
                                identity_, key, node, label, problem);
    }
    unlabelable_ = std::move(unlabelable);
    for (auto& [p, rv] : patches) {
        const std::string body = patch_json(p).dump();
        auto w = labels_written_.find(p.node);
        if (w != labels_written_.end() && w->second.value == body && w->second.resource_version == rv) continue;
        if (stopping_ || !leader()) {
            labels_dirty_ = true;
            return;
        }
        // Conditional on the node as the cache has it; a 409 (the cache lags) reads the node again
        // and patches what that one needs.
        auto res = client_->writer().patch_node_labels(p.node, p.labels, rv);
        LabelPatch sent = p;
        if (res.conflict()) {
            auto got = client_->writer().read(k8s::resources::nodes, "", p.node);
            if (got.ok()) {
                try {
                    auto node = std::get<model::Node>(model::parse_object(got.object, "$"));
                    static const std::set<std::string> none;
                    auto it = wanted.find(p.node);
                    auto fresh = label_patch(node, it == wanted.end() ? none : it->second);
                    if (!fresh) continue;   // it says so already
                    sent = *fresh;
                    res = client_->writer().patch_node_labels(p.node, sent.labels, node.meta.resource_version);
                } catch (const std::exception& e) {
                    res.error = std::string("reading the node again: ") + e.what();
                }
            } else {
                res = got;
            }
        }
        if (res.ok()) {
            k8s::logger()->info("egw {}: node {} labels {}", identity_, p.node, describe_patch(sent));
            if (auto f = label_failures_.find(p.node); f != label_failures_.end()) {
                k8s::logger()->info("egw {}: node {}: labels patched again after {} failure(s)", identity_, p.node,
                                    f->second);
                label_failures_.erase(f);
            }
            labels_written_[p.node] = Written{body, rv, resource_version_of(res.object)};
            std::lock_guard lk(stats_mu_);
            ++stats_.label_writes;
        } else if (!res.not_found()) {
            if (label_failures_[p.node]++ == 0)
                k8s::logger()->warn("egw {}: node {}: cannot patch labels ({}): {} (retrying; further failures at "
                                    "debug)", identity_, p.node, describe_patch(sent), res.error);
            else
                k8s::logger()->debug("egw {}: node {}: cannot patch labels ({}), {} in a row: {}", identity_, p.node,
                                     describe_patch(sent), label_failures_[p.node], res.error);
            labels_dirty_ = true;
            label_retry_ = SteadyClock::now() + opts_.write_backoff_initial * 5;
            std::lock_guard lk(stats_mu_);
            ++stats_.write_failures;
            ++stats_.label_write_failures;
        }
    }
}

void Controller::decide_loop() {
    while (!stopping_) {
        try {
            decide_once();
        } catch (const std::exception& e) {
            // Nothing here may take the daemon down: start over from the cache.
            k8s::logger()->error("egw {}: deciding: {}; starting over", identity_, e.what());
            lose_leadership("error");
            std::this_thread::sleep_for(opts_.retry_period);
        }
    }
}

void Controller::decide_once() {
    // Wake at least once a second, when a live gateway's Lease runs out, and when fresh state is due.
    const auto now = SteadyClock::now();
    auto deadline = now + std::chrono::seconds(1);
    if (next_expiry_) deadline = std::min(deadline, std::max(now, *next_expiry_ + std::chrono::milliseconds(1)));
    if (ready_at_) deadline = std::min(deadline, std::max(now, *ready_at_));
    if (labels_dirty_ && label_retry_ > now) deadline = std::min(deadline, label_retry_);
    std::vector<std::string> due = queue_.take(deadline);
    if (stopping_) return;

    std::vector<k8s::Change> changes;
    {
        std::lock_guard lk(changes_mu_);
        changes.swap(changes_);
    }
    if (!leader()) {
        lose_leadership("not the leader");
        return;
    }
    if (!client_->synced()) return;
    ready_at_.reset();
    if (!fresh(SteadyClock::now(), ready_at_)) return;
    if (need_restore_) {
        restore();
        return;
    }

    bool all = false, leases = false;
    std::vector<std::string> keys = keys_for(changes, all, leases);
    // Liveness runs out by the clock alone: look at it on every pass.
    Liveness lv;
    std::vector<std::string> every;
    client_->cache().read([&](const model::ObjectSet& objs) {
        lv = live_now(objs);
        if (lv.live != live_)
            for (const auto& [key, es] : objs.egress_services) every.push_back(key);
    });
    next_expiry_ = lv.next_change;
    if (lv.live != live_) {
        k8s::logger()->info("egw {}: {} live gateway(s)", identity_, lv.live.size());
        live_ = std::move(lv.live);
    }
    for (auto& k : every) keys.push_back(std::move(k));
    for (auto& k : due) keys.push_back(std::move(k));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (!keys.empty()) decide_batch(keys);
    if (labels_dirty_ && SteadyClock::now() >= label_retry_ && leader()) sync_labels();
}

}  // namespace egw::k8s_source
