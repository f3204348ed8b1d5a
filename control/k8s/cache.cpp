// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/cache.h"

#include "control/k8s/log.h"

namespace egw::k8s {

using nlohmann::json;

const ResourceType& resource_for(model::Kind kind) {
    switch (kind) {
    case model::Kind::egress_service:
        return resources::egress_services;
    case model::Kind::service:
        return resources::services;
    case model::Kind::endpoint_slice:
        return resources::endpoint_slices;
    case model::Kind::node:
        return resources::nodes;
    case model::Kind::lease:
        return resources::leases;
    case model::Kind::egress_ip:
        return resources::egress_ips;
    case model::Kind::namespace_:
        return resources::namespaces;
    case model::Kind::pod:
        return resources::pods;
    case model::Kind::egress_firewall:
        return resources::egress_firewalls;
    }
    return resources::nodes;
}

namespace {

// Calls f with the ObjectSet's map of that kind.
template <class Set, class F>
void with_map(Set& s, model::Kind kind, F&& f) {
    switch (kind) {
    case model::Kind::egress_service:
        f(s.egress_services);
        break;
    case model::Kind::service:
        f(s.services);
        break;
    case model::Kind::endpoint_slice:
        f(s.endpoint_slices);
        break;
    case model::Kind::node:
        f(s.nodes);
        break;
    case model::Kind::lease:
        f(s.leases);
        break;
    case model::Kind::egress_ip:
        f(s.egress_ips);
        break;
    case model::Kind::namespace_:
        f(s.namespaces);
        break;
    case model::Kind::pod:
        f(s.pods);
        break;
    case model::Kind::egress_firewall:
        f(s.egress_firewalls);
        break;
    }
}

// The key of a raw object, for objects the model rejects.
std::string raw_key(model::Kind kind, const json& obj) {
    std::string ns, name;
    if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
        if (auto n = m->find("namespace"); n != m->end() && n->is_string()) ns = n->get<std::string>();
        if (auto n = m->find("name"); n != m->end() && n->is_string()) name = n->get<std::string>();
    }
    return model::is_namespaced(kind) ? ns + "/" + name : name;
}

std::string raw_rv(const json& obj) {
    if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
        if (auto r = m->find("resourceVersion"); r != m->end() && r->is_string()) return r->get<std::string>();
    }
    return "";
}

// Parses one object of `kind`; nullopt (after a log line) when the model rejects it.
std::optional<model::Object> parse(model::Kind kind, const json& obj, uint64_t& invalid) {
    try {
        model::Object o = model::parse_object(obj, "$");
        if (model::kind_of(o) != kind) throw model::ObjectError("$.kind", "unexpected kind in this resource");
        return o;
    } catch (const model::ObjectError& e) {
        ++invalid;
        logger()->warn("k8s: {} {} (resourceVersion {}) is ignored: {}", model::to_string(kind), raw_key(kind, obj),
                       raw_rv(obj), e.what());
        return std::nullopt;
    }
}

// a == b apart from metadata.resourceVersion.
template <class T>
bool same_but_rv(const T& a, T b) {
    b.meta.resource_version = a.meta.resource_version;
    return a == b;
}

}  // namespace

class Cache::KindHandler : public ReflectorHandler {
public:
    KindHandler(Cache& c, model::Kind k) : cache_(c), kind_(k) {}
    void replace(std::vector<json>&& items, const std::string&) override { cache_.replace(kind_, std::move(items)); }
    void apply(EventType type, json&& obj) override { cache_.apply(kind_, type, std::move(obj)); }

private:
    Cache& cache_;
    model::Kind kind_;
};

Cache::Cache() {
    for (auto k : {model::Kind::egress_service, model::Kind::service, model::Kind::endpoint_slice, model::Kind::node,
                   model::Kind::lease, model::Kind::egress_ip, model::Kind::namespace_, model::Kind::pod,
                   model::Kind::egress_firewall})
        handlers_[k] = std::make_unique<KindHandler>(*this, k);
}

Cache::~Cache() = default;

ReflectorHandler& Cache::handler(model::Kind kind) {
    return *handlers_.at(kind);
}

void Cache::expect(model::Kind kind) {
    std::lock_guard lk(mu_);
    expected_.insert(kind);
}

bool Cache::synced() const {
    std::lock_guard lk(mu_);
    if (expected_.empty()) return false;
    for (auto k : expected_)
        if (!listed_.count(k)) return false;
    return true;
}

bool Cache::synced(model::Kind kind) const {
    std::lock_guard lk(mu_);
    return listed_.count(kind) > 0;
}

bool Cache::wait_synced(std::chrono::milliseconds timeout) const {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, timeout, [this] {
        if (expected_.empty()) return false;
        for (auto k : expected_)
            if (!listed_.count(k)) return false;
        return true;
    });
}

model::ObjectSet Cache::snapshot() const {
    std::lock_guard lk(mu_);
    return objects_;
}

uint64_t Cache::generation() const {
    std::lock_guard lk(mu_);
    return generation_;
}

uint64_t Cache::wait_for_change(uint64_t seen, std::chrono::milliseconds timeout) const {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return generation_ != seen; });
    return generation_;
}

std::vector<Change> Cache::take_changes() {
    std::lock_guard lk(mu_);
    std::vector<Change> out;
    out.reserve(pending_order_.size());
    for (auto& [kind, key] : pending_order_)
        out.push_back(Change{kind, key, !objects_.contains(kind, key)});
    pending_order_.clear();
    pending_.clear();
    return out;
}

void Cache::set_listener(std::function<void(const Change&)> listener) {
    std::lock_guard lk(listener_mu_);
    listener_ = std::move(listener);
}

std::map<std::string, std::string> Cache::resource_versions(model::Kind kind) const {
    std::lock_guard lk(mu_);
    std::map<std::string, std::string> out;
    with_map(objects_, kind, [&](const auto& m) {
        for (const auto& [key, obj] : m)
            out.emplace(key, obj.meta.resource_version);
    });
    return out;
}

uint64_t Cache::invalid_objects() const {
    std::lock_guard lk(mu_);
    return invalid_;
}

// Caller holds mu_.
void Cache::note(std::vector<Change>& out, model::Kind kind, const std::string& key, bool deleted) {
    out.push_back(Change{kind, key, deleted});
    if (pending_.emplace(kind, key).second) pending_order_.emplace_back(kind, key);
}

void Cache::publish(std::vector<Change>&& changes) {
    if (changes.empty()) return;
    std::function<void(const Change&)> listener;
    {
        std::lock_guard lk(listener_mu_);
        listener = listener_;
    }
    if (!listener) return;
    for (const auto& c : changes)
        listener(c);
}

void Cache::replace(model::Kind kind, std::vector<json>&& items) {
    // Parse outside the lock: a list may be large.
    uint64_t invalid = 0;
    std::vector<model::Object> parsed;
    parsed.reserve(items.size());
    for (const auto& item : items) {
        if (auto o = parse(kind, item, invalid)) parsed.push_back(std::move(*o));
    }
    items.clear();
    std::vector<Change> changes;
    {
        std::lock_guard lk(mu_);
        invalid_ += invalid;
        with_map(objects_, kind, [&](auto& old) {
            using Map = std::decay_t<decltype(old)>;
            using T = typename Map::mapped_type;
            Map fresh;
            for (auto& o : parsed) {
                T& t = std::get<T>(o);
                std::string key = model::key_of(t.meta);
                fresh.insert_or_assign(std::move(key), std::move(t));
            }
            for (const auto& [key, obj] : old) {
                if (!fresh.count(key)) note(changes, kind, key, true);
            }
            for (const auto& [key, obj] : fresh) {
                auto it = old.find(key);
                if (it == old.end() || !same_but_rv(it->second, obj)) note(changes, kind, key, false);
            }
            old = std::move(fresh);
        });
        const bool first = listed_.insert(kind).second;
        if (!changes.empty() || first) ++generation_;  // the first list wakes readers even when empty
    }
    cv_.notify_all();
    publish(std::move(changes));
}

void Cache::apply(model::Kind kind, EventType type, json&& obj) {
    std::vector<Change> changes;
    if (type == EventType::deleted) {
        const std::string key = raw_key(kind, obj);
        std::lock_guard lk(mu_);
        if (objects_.erase(kind, key)) {
            note(changes, kind, key, true);
            ++generation_;
        }
    } else {
        uint64_t invalid = 0;
        auto o = parse(kind, obj, invalid);
        std::lock_guard lk(mu_);
        invalid_ += invalid;
        if (!o) {
            const std::string key = raw_key(kind, obj);
            if (objects_.erase(kind, key)) {
                note(changes, kind, key, true);
                ++generation_;
            }
        } else {
            const std::string key = model::key_of(*o);
            bool changed = true;
            with_map(objects_, kind, [&](auto& m) {
                using T = typename std::decay_t<decltype(m)>::mapped_type;
                T& t = std::get<T>(*o);
                auto it = m.find(key);
                if (it != m.end() && same_but_rv(it->second, t)) {
                    it->second.meta.resource_version = t.meta.resource_version;
                    changed = false;
                } else {
                    m.insert_or_assign(key, std::move(t));
                }
            });
            if (changed) {
                note(changes, kind, key, false);
                ++generation_;
            }
        }
    }
    if (!changes.empty()) cv_.notify_all();
    publish(std::move(changes));
}

}  // namespace egw::k8s
