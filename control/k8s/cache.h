// SPDX-License-Identifier: Apache-2.0
//
// The typed cache: what the reflectors learn, parsed by model::parse_object into a
// model::ObjectSet (the same structs the `files` state source produces). It is "synced" once the
// first list of every expected kind is in. Readers wake up on changes through a generation
// counter (wait_for_change), a per-object change set (take_changes) or a listener callback.
//
// An object the model rejects (model::ObjectError) is logged with its path and kept out of the
// cache, as if it did not exist, until a valid version arrives. A change that only moves
// metadata.resourceVersion (a field egw does not read changed) updates the stored object without
// counting as a change.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/k8s/reflector.h"
#include "control/k8s/resources.h"
#include "control/model/objects.h"

namespace egw::k8s {

// The API resource of each kind egw reads.
const ResourceType& resource_for(model::Kind kind);

struct Change {
    model::Kind kind;
    std::string key;       // model::key_of(): "namespace/name", or the node's name
    bool deleted = false;  // the object is gone (or no longer valid)
};

class Cache {
public:
    Cache();
    ~Cache();
    Cache(const Cache&) = delete;
    Cache& operator=(const Cache&) = delete;

    // Declares a kind whose first list synced() waits for (Client::start does this).
    void expect(model::Kind kind);
    // Every expected kind has been listed at least once (false while none is expected).
    bool synced() const;
    bool synced(model::Kind kind) const;
    bool wait_synced(std::chrono::milliseconds timeout) const;

    // A copy of everything.
    model::ObjectSet snapshot() const;
    // Runs f(const model::ObjectSet&) under the cache's lock, without copying. Keep it short:
    // the reflectors wait for it.
    template <class F>
    auto read(F&& f) const {
        std::lock_guard lk(mu_);
        return f(static_cast<const model::ObjectSet&>(objects_));
    }

    // Bumped on every change of the ObjectSet.
    uint64_t generation() const;
    // Waits until generation() differs from `seen` or the timeout passes; returns generation().
    uint64_t wait_for_change(uint64_t seen, std::chrono::milliseconds timeout) const;
    // The objects changed since the last call, each once, in the order they first changed.
    std::vector<Change> take_changes();
    // Called after each change, on the reflector's thread, outside the cache's lock.
    void set_listener(std::function<void(const Change&)> listener);

    // metadata.resourceVersion of every cached object of a kind, by key.
    std::map<std::string, std::string> resource_versions(model::Kind kind) const;
    // Objects rejected by the model so far.
    uint64_t invalid_objects() const;

    // The sink a Reflector for `kind` writes into.
    ReflectorHandler& handler(model::Kind kind);

private:
    class KindHandler;
    friend class KindHandler;

    void replace(model::Kind kind, std::vector<nlohmann::json>&& items);
    void apply(model::Kind kind, EventType type, nlohmann::json&& obj);
    void note(std::vector<Change>& out, model::Kind kind, const std::string& key, bool deleted);
    void publish(std::vector<Change>&& changes);

    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    model::ObjectSet objects_;
    uint64_t generation_ = 0;
    uint64_t invalid_ = 0;
    std::set<model::Kind> expected_;
    std::set<model::Kind> listed_;
    std::vector<std::pair<model::Kind, std::string>> pending_order_;
    std::set<std::pair<model::Kind, std::string>> pending_;
    std::function<void(const Change&)> listener_;
    std::mutex listener_mu_;
    std::map<model::Kind, std::unique_ptr<KindHandler>> handlers_;
};

}  // namespace egw::k8s
