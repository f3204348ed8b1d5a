// SPDX-License-Identifier: Apache-2.0
//
// The `kubernetes` state source: Leases, the leader's decisions and write-backs, and the serving
// states every gateway programs. See controller.h.
#include "control/election/controller.h"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "control/k8s/log.h"
#include "control/k8s/writer.h"

namespace egw::election {

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
    : opts_(std::move(opts)) {
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
    client_ = std::make_unique<k8s::Client>(std::move(creds), std::move(client_opts));
    if (opts_.election == ElectionMode::leader)
        client_->cache().set_listener([this](const k8s::Change& c) { on_change(c); });
}

Controller::~Controller() { abandon(); }

void Controller::start() {
    std::lock_guard lk(lease_mu_);
    if (started_) return;
    started_ = true;
    k8s::logger()->info("egw {}: kubernetes source, election {}, Leases in namespace {} (duration {}s, renew "
                        "deadline {}ms, retry {}ms)",
                        opts_.node_name, to_string(opts_.election), lease_ns_, opts_.lease_duration.count(),
                        opts_.renew_deadline.count(), opts_.retry_period.count());
    client_->start();
    lease_thread_ = std::thread([this] { lease_loop(); });
    if (opts_.election == ElectionMode::leader) decide_thread_ = std::thread([this] { decide_loop(); });
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
    client_->stop();
    leader_until_ = 0;
}

void Controller::stop() {
    bool release = false;
    {
        std::lock_guard lk(lease_mu_);
        if (stopped_) return;
        stopping_ = true;
        release = opts_.release_on_stop && was_leader_.load();
    }
    lease_cv_.notify_all();
    queue_.wake();
    if (lease_thread_.joinable()) lease_thread_.join();
    if (decide_thread_.joinable()) decide_thread_.join();
    // The decider has stopped: nothing can be written on this instance's behalf any more.
    leader_until_ = 0;
    if (release) release_leader();
    abandon();
}

bool Controller::leader() const { return steady_ns(SteadyClock::now()) < leader_until_.load(); }

ControllerStats Controller::stats() const {
    std::lock_guard lk(stats_mu_);
    ControllerStats s = stats_;
    s.synced = client_->synced();
    s.leader = leader();
    return s;
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
    lease_cv_.wait_for(lk, d, [this] { return stopping_.load(); });
}

void Controller::lease_loop() {
    const auto liveness_interval =
        std::max<std::chrono::milliseconds>(std::chrono::milliseconds(100), opts_.lease_duration / 3);
    auto next_liveness = SteadyClock::now();
    while (!stopping_) {
        auto now = SteadyClock::now();
        try {
            if (now >= next_liveness) {
                bool ok = renew_liveness();
                // A failed renewal is tried again soon: the Lease must not run out.
                next_liveness = now + (ok ? liveness_interval : std::min(liveness_interval, opts_.retry_period));
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

bool Controller::renew_liveness() {
    const std::string name = std::string(kLivenessLeasePrefix) + opts_.node_name;
    const int32_t duration = static_cast<int32_t>(opts_.lease_duration.count());
    auto res = client_->writer().modify_lease(lease_ns_, name, [&](json& lease, bool exists) {
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

void Controller::try_leader() {
    const auto started = SteadyClock::now();
    const int32_t duration = static_cast<int32_t>(opts_.lease_duration.count());
    std::string holder;
    auto res = client_->writer().modify_lease(lease_ns_, kLeaderLeaseName, [&](json& lease, bool exists) {
        json& spec = lease["spec"];
        if (!spec.is_object()) spec = json::object();
        holder = lease_holder(lease);
        const auto now = std::chrono::system_clock::now();
        if (exists && !holder.empty() && holder != identity_) {
            model::Lease l;
            l.lease_duration_seconds = int_field(spec, "leaseDurationSeconds");
            if (spec.contains("renewTime") && spec["renewTime"].is_string())
                l.renew_time = spec["renewTime"].get<std::string>();
            if (lease_live(l, now)) return false;   // held by someone else and not expired
        }
        const std::string t = k8s::format_micro_time(now);
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
    });
    if (res.ok() && res.written) {
        leader_until_ = steady_ns(started + opts_.renew_deadline);
        if (!was_leader_.exchange(true)) {
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
}

// --- The data plane's input ------------------------------------------------------------------

bool Controller::wait(std::chrono::milliseconds timeout) {
    if (!client_->synced()) return client_->wait_synced(timeout);
    return client_->cache().wait_for_change(poll_generation_, timeout) != poll_generation_;
}

bool Controller::poll(std::vector<model::ServiceState>& out) {
    model::ServiceDelta delta;
    if (!poll(delta)) return false;
    out.clear();
    out.reserve(serving_.size());
    for (const auto& [key, st] : serving_) out.push_back(st);
    return true;
}

bool Controller::poll(model::ServiceDelta& out) {
    out.changed.clear();
    out.removed.clear();
    if (!client_->synced()) return false;
    k8s::Cache& cache = client_->cache();
    // Changes first, then the read: whatever changes after this is seen on the next call.
    const uint64_t gen = cache.generation();
    std::vector<k8s::Change> changes = cache.take_changes();
    poll_generation_ = gen;
    bool changed = false;
    if (!poll_initialized_) {
        cache.read([&](const model::ObjectSet& objs) {
            poll_owners_.rebuild(objs);
            poll_objects_.egress_services = objs.egress_services;
            poll_objects_.services.clear();
            for (const auto& [key, es] : objs.egress_services) {
                if (auto s = objs.services.find(key); s != objs.services.end()) poll_objects_.services.insert(*s);
                auto slices = poll_owners_.slices(objs, key);
                serving_[key] = serving_state(model::service_facts(objs, key, &slices, opts_.pod_cidrs), opts_.node_name);
            }
        });
        poll_initialized_ = true;
        out.changed.reserve(serving_.size());
        for (const auto& [key, st] : serving_) out.changed.push_back(st);
        changed = true;
    } else {
        std::vector<std::string> keys;
        cache.read([&](const model::ObjectSet& objs) {
            for (const auto& c : changes) {
                switch (c.kind) {
                case model::Kind::egress_service:
                case model::Kind::service: keys.push_back(c.key); break;
                case model::Kind::endpoint_slice: poll_owners_.update(objs, c.key, keys); break;
                default: break;
                }
            }
            std::sort(keys.begin(), keys.end());
            keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
            for (const auto& key : keys) {
                auto es = objs.egress_services.find(key);
                auto svc = objs.services.find(key);
                if (es == objs.egress_services.end()) poll_objects_.egress_services.erase(key);
                else poll_objects_.egress_services.insert_or_assign(key, es->second);
                if (es == objs.egress_services.end() || svc == objs.services.end()) poll_objects_.services.erase(key);
                else poll_objects_.services.insert_or_assign(key, svc->second);
                if (es == objs.egress_services.end()) {
                    if (serving_.erase(key) > 0) {
                        out.removed.push_back(key);
                        changed = true;
                    }
                    continue;
                }
                auto slices = poll_owners_.slices(objs, key);
                auto st = serving_state(model::service_facts(objs, key, &slices, opts_.pod_cidrs), opts_.node_name);
                auto it = serving_.find(key);
                if (it == serving_.end() || !(it->second == st)) {
                    out.changed.push_back(st);
                    serving_.insert_or_assign(key, std::move(st));
                    changed = true;
                }
            }
        });
    }
    return changed;
}

// --- The leader's decisions -------------------------------------------------------------------

void Controller::on_change(const k8s::Change& c) {
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
    alloc_view_.clear();
    decisions_.clear();
    stats_.allocations = 0;
}

void Controller::restore() {
    std::vector<std::string> keys;
    size_t kept = 0;
    client_->cache().read([&](const model::ObjectSet& objs) {
        live_ = liveness(objs, std::chrono::system_clock::now()).live;
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
    k8s::logger()->info("egw {}: deciding for {} EgressService(s); kept {} host(s) found valid, {} live gateway(s)",
                        identity_, keys.size(), kept, live_.size());
    std::lock_guard lk(stats_mu_);
    decisions_.clear();
    alloc_view_ = alloc_.hosts();
    stats_.allocations = kept;
    stats_.live_nodes = live_.size();
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
        std::string rv;
        std::string before;   // the allocation before
    };
    std::vector<Todo> todo;
    todo.reserve(keys.size());
    client_->cache().read([&](const model::ObjectSet& objs) {
        const model::SliceIndex slices = owners_.index(objs, keys);
        // What this leader wrote and the cache does not show yet.
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
                t.rv = es.meta.resource_version;
                bool says = es.has_status && es.status_host == t.d.host;
                auto w = status_written_.find(key);
                bool sent = w != status_written_.end() && w->second.value == t.d.host && w->second.resource_version == t.rv;
                t.write = !says && !sent;
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
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (;;) {
            const size_t k = next++;
            // A leader that lost its Lease writes nothing more; the decider starts over.
            if (k >= to_write.size() || stopping_ || !leader()) return;
            const Todo& t = todo[to_write[k]];
            auto [ns, name] = split_key(t.d.key);
            results[k] = client_->writer().set_egress_service_host(ns, name, t.d.host);
            attempted[k] = 1;
        }
    };
    const size_t threads = std::min<size_t>(std::max(1u, opts_.write_concurrency), to_write.size());
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();

    for (size_t k = 0; k < to_write.size(); ++k) {
        if (!attempted[k]) continue;
        const Todo& t = todo[to_write[k]];
        const k8s::WriteResult& res = results[k];
        if (res.ok() || res.not_found()) {
            if (res.ok()) {
                k8s::logger()->info("egw {}: {} status.host=\"{}\"{}", identity_, t.d.key, t.d.host,
                                    t.d.reason.empty() ? "" : " (" + t.d.reason + ")");
                std::lock_guard lk(stats_mu_);
                ++stats_.status_writes;
            }
            status_written_[t.d.key] = Written{t.d.host, t.rv};
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

void Controller::sync_labels() {
    std::vector<std::pair<LabelPatch, std::string>> patches;   // with the node's resourceVersion
    client_->cache().read([&](const model::ObjectSet& objs) {
        // A host whose status write has not gone through is not labelled yet (status first).
        std::vector<LabelPatch> all;
        if (unwritten_.empty()) {
            all = label_patches(objs, alloc_);
        } else {
            Allocations confirmed = alloc_;
            for (const auto& k : unwritten_) confirmed.release(k);
            all = label_patches(objs, confirmed);
        }
        for (auto& p : all) {
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
        auto res = client_->writer().patch_node_labels(p.node, p.labels);
        if (res.ok()) {
            k8s::logger()->info("egw {}: node {} labels {}", identity_, p.node, describe_patch(p));
            if (auto f = label_failures_.find(p.node); f != label_failures_.end()) {
                k8s::logger()->info("egw {}: node {}: labels patched again after {} failure(s)", identity_, p.node,
                                    f->second);
                label_failures_.erase(f);
            }
            labels_written_[p.node] = Written{body, rv};
            std::lock_guard lk(stats_mu_);
            ++stats_.label_writes;
        } else if (!res.not_found()) {
            if (label_failures_[p.node]++ == 0)
                k8s::logger()->warn("egw {}: node {}: cannot patch labels ({}): {} (retrying; further failures at "
                                    "debug)", identity_, p.node, describe_patch(p), res.error);
            else
                k8s::logger()->debug("egw {}: node {}: cannot patch labels ({}), {} in a row: {}", identity_, p.node,
                                     describe_patch(p), label_failures_[p.node], res.error);
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
    // Wake at least once a second, and when a live gateway's Lease runs out.
    const auto now = SteadyClock::now();
    auto deadline = now + std::chrono::seconds(1);
    if (next_expiry_) {
        auto left = std::chrono::duration_cast<SteadyClock::duration>(*next_expiry_ - std::chrono::system_clock::now() +
                                                                      std::chrono::milliseconds(1));
        deadline = std::min(deadline, now + std::max(SteadyClock::duration::zero(), left));
    }
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
        lv = liveness(objs, std::chrono::system_clock::now());
        if (lv.live != live_)
            for (const auto& [key, es] : objs.egress_services) every.push_back(key);
    });
    next_expiry_ = lv.next_change;
    if (lv.live != live_) {
        k8s::logger()->info("egw {}: {} live gateway(s)", identity_, lv.live.size());
        live_ = std::move(lv.live);
        std::lock_guard lk(stats_mu_);
        stats_.live_nodes = live_.size();
    }
    for (auto& k : every) keys.push_back(std::move(k));
    for (auto& k : due) keys.push_back(std::move(k));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (!keys.empty()) decide_batch(keys);
    if (labels_dirty_ && SteadyClock::now() >= label_retry_ && leader()) sync_labels();
}

}  // namespace egw::election
