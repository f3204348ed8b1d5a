// SPDX-License-Identifier: Apache-2.0
//
// The leader's host decisions and their write-backs: status.host, node labels. See host_decider.h.
#include "control/k8s_source/host_decider.h"

#include <algorithm>

#include "control/k8s/log.h"
#include "control/k8s/writer.h"
#include "control/k8s_source/controller_internal.h"

namespace egw::k8s_source {

using detail::resource_version_of;
using nlohmann::json;

namespace {

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
    for (const auto& [k, v] : p.labels)
        j[k] = v ? json(*v) : json(nullptr);
    return j;
}

}  // namespace

// --- The leader's decisions -------------------------------------------------------------------

HostDecider::HostDecider(k8s::Client& client, const LeaseKeeper& leases, ControllerOptions opts, std::string identity)
    : client_(client), leases_(leases), opts_(std::move(opts)), identity_(std::move(identity)) {}

HostDecider::~HostDecider() {
    request_stop();
    join();
}

void HostDecider::start() {
    writers_ = std::make_unique<WriterPool>(opts_.write_concurrency);
    thread_ = std::thread([this] { loop(); });
}

void HostDecider::request_stop() {
    stopping_ = true;
    queue_.wake();
}

void HostDecider::join() {
    if (thread_.joinable()) thread_.join();
    writers_.reset();
}

void HostDecider::on_change(const k8s::Change& c) {
    {
        std::lock_guard lk(changes_mu_);
        changes_.push_back(c);
    }
    queue_.wake();
}

HostDeciderStats HostDecider::stats() const {
    std::lock_guard lk(stats_mu_);
    return stats_;
}

std::map<std::string, std::string> HostDecider::allocations() const {
    std::lock_guard lk(stats_mu_);
    return alloc_view_;
}

std::map<std::string, HostDecision> HostDecider::decisions() const {
    std::lock_guard lk(stats_mu_);
    return decisions_;
}

void HostDecider::lose_leadership(const char* why) {
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

void HostDecider::restore() {
    std::vector<std::string> keys;
    size_t kept = 0;
    client_.cache().read([&](const model::ObjectSet& objs) {
        live_ = leases_.live_now(objs).live;
        owners_.rebuild(objs);
        const model::SliceIndex slices = model::index_endpoint_slices(objs);
        ClusterView view{objs, slices, live_, opts_.pod_cidrs};
        alloc_ = restore_allocations(view);
        kept = alloc_.hosts().size();
        node_facts_.clear();
        for (const auto& [name, node] : objs.nodes)
            node_facts_[name] = node_fact(node);
        for (const auto& [key, es] : objs.egress_services)
            keys.push_back(key);
    });
    status_written_.clear();
    labels_written_.clear();
    failures_.clear();
    unwritten_.clear();
    for (const auto& k : keys)
        queue_.add(k);
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

bool HostDecider::fresh(SteadyClock::time_point now, std::optional<SteadyClock::time_point>& ready_at) {
    // Every kind's watch unbroken for the grace period: the Lease view has seen a renewal of every
    // live gateway since it was (re)established, and the other kinds are current again.
    uint64_t breaks = 0;
    std::string broken;
    auto ready = leases_.decide_after();
    for (auto kind : k8s::Client::all_kinds()) {
        k8s::Continuity c = client_.continuity(kind);
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

std::vector<std::string> HostDecider::keys_for(const std::vector<k8s::Change>& changes, bool& all, bool& leases) {
    std::vector<std::string> keys;
    client_.cache().read([&](const model::ObjectSet& objs) {
        std::vector<std::string> affected;
        for (const auto& c : changes) {
            switch (c.kind) {
            case model::Kind::egress_service:
                keys.push_back(c.key);
                break;
            case model::Kind::service:
                affected.push_back(c.key);
                break;
            case model::Kind::endpoint_slice:
                owners_.update(objs, c.key, affected);
                break;
            case model::Kind::node: {
                labels_dirty_ = true;  // scrub labels on every node event
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
            case model::Kind::lease:
                leases = true;
                break;
            case model::Kind::egress_ip:
            case model::Kind::namespace_:
            case model::Kind::pod:
            case model::Kind::egress_firewall:
                break;  // EgressIP selection (its own client) does not touch EgressService decisions
            }
        }
        // A Service or its endpoints matter only with an EgressService of the same name (or one
        // that was just deleted and still holds a node).
        for (auto& k : affected)
            if (objs.egress_services.count(k) || alloc_.host_of(k)) keys.push_back(std::move(k));
        if (all)
            for (const auto& [key, es] : objs.egress_services)
                keys.push_back(key);
    });
    return keys;
}

void HostDecider::decide_batch(const std::vector<std::string>& keys) {
    struct Todo {
        HostDecision d;
        bool write = false;
        std::string rv;       // the write's precondition: the object's version as last seen or written
        std::string seen_rv;  // the cache's version
        std::string before;   // the allocation before
    };
    std::vector<Todo> todo;
    todo.reserve(keys.size());
    client_.cache().read([&](const model::ObjectSet& objs) {
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
            if (t.d.exists)
                decisions_[t.d.key] = t.d;
            else
                decisions_.erase(t.d.key);
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

k8s::WriteResult HostDecider::write_status(const std::string& key, const std::string& host, const std::string& rv) {
    // Conditional on the version the decision was made on. A 409 means the object changed since
    // (the cache lags, or someone edited it): read it again and write only if it does not already
    // say `host`.
    auto [ns, name] = split_key(key);
    std::string version = rv;
    k8s::WriteResult res;
    for (int attempt = 0; attempt < 3; ++attempt) {
        res = client_.writer().set_egress_service_host(ns, name, host, version);
        if (!res.conflict()) return res;
        k8s::WriteResult got = client_.writer().read(k8s::resources::egress_services, ns, name);
        if (!got.ok()) return got.not_found() ? got : res;
        const json& obj = got.object;
        version = resource_version_of(obj);
        const json* st = obj.contains("status") && obj["status"].is_object() ? &obj["status"] : nullptr;
        if (st && st->contains("host") && (*st)["host"].is_string() && (*st)["host"].get<std::string>() == host) {
            got.written = false;
            return got;  // it says so already
        }
    }
    return res;
}

void HostDecider::sync_labels() {
    std::vector<std::pair<LabelPatch, std::string>> patches;  // with the node's resourceVersion
    std::map<std::string, std::set<std::string>> wanted;
    client_.cache().read([&](const model::ObjectSet& objs) {
        // A host whose status write has not gone through is not labelled yet (status first).
        Allocations confirmed = alloc_;
        for (const auto& k : unwritten_)
            confirmed.release(k);
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
            k8s::logger()->warn(
                "egw {}: {}: host {} gets no node label: the key \"{}\" is not a valid label key "
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
        auto res = client_.writer().patch_node_labels(p.node, p.labels, rv);
        LabelPatch sent = p;
        if (res.conflict()) {
            auto got = client_.writer().read(k8s::resources::nodes, "", p.node);
            if (got.ok()) {
                try {
                    auto node = std::get<model::Node>(model::parse_object(got.object, "$"));
                    static const std::set<std::string> none;
                    auto it = wanted.find(p.node);
                    auto fresh = label_patch(node, it == wanted.end() ? none : it->second);
                    if (!fresh) continue;  // it says so already
                    sent = *fresh;
                    res = client_.writer().patch_node_labels(p.node, sent.labels, node.meta.resource_version);
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
                k8s::logger()->warn(
                    "egw {}: node {}: cannot patch labels ({}): {} (retrying; further failures at "
                    "debug)",
                    identity_, p.node, describe_patch(sent), res.error);
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

void HostDecider::loop() {
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

void HostDecider::decide_once() {
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
    if (!client_.synced()) return;
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
    client_.cache().read([&](const model::ObjectSet& objs) {
        lv = leases_.live_now(objs);
        if (lv.live != live_)
            for (const auto& [key, es] : objs.egress_services)
                every.push_back(key);
    });
    next_expiry_ = lv.next_change;
    if (lv.live != live_) {
        k8s::logger()->info("egw {}: {} live gateway(s)", identity_, lv.live.size());
        live_ = std::move(lv.live);
    }
    for (auto& k : every)
        keys.push_back(std::move(k));
    for (auto& k : due)
        keys.push_back(std::move(k));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (!keys.empty()) decide_batch(keys);
    if (labels_dirty_ && SteadyClock::now() >= label_retry_ && leader()) sync_labels();
}

}  // namespace egw::k8s_source
