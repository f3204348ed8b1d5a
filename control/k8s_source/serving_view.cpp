// SPDX-License-Identifier: Apache-2.0
#include "control/k8s_source/serving_view.h"

#include <algorithm>
#include <utility>

#include "control/k8s_source/decisions.h"

namespace egw::k8s_source {

ServingView::ServingView(std::string node_name, std::vector<net::IpPrefix> pod_cidrs)
    : node_name_(std::move(node_name)), pod_cidrs_(std::move(pod_cidrs)) {}

bool ServingView::update(k8s::Cache& cache, model::ServiceDelta& out) {
    out.changed.clear();
    out.removed.clear();
    // Changes first, then the read: whatever changes after this is seen on the next call.
    const uint64_t gen = cache.generation();
    std::vector<k8s::Change> changes = cache.take_changes();
    generation_ = gen;
    bool changed = false;
    if (!initialized_) {
        cache.read([&](const model::ObjectSet& objs) {
            owners_.rebuild(objs);
            objects_.egress_services = objs.egress_services;
            objects_.services.clear();
            for (const auto& [key, es] : objs.egress_services) {
                if (auto s = objs.services.find(key); s != objs.services.end()) objects_.services.insert(*s);
                auto slices = owners_.slices(objs, key);
                serving_[key] = serving_state(model::service_facts(objs, key, &slices, pod_cidrs_), node_name_);
            }
        });
        initialized_ = true;
        out.changed.reserve(serving_.size());
        for (const auto& [key, st] : serving_)
            out.changed.push_back(st);
        changed = true;
    } else {
        std::vector<std::string> keys;
        cache.read([&](const model::ObjectSet& objs) {
            for (const auto& c : changes) {
                switch (c.kind) {
                case model::Kind::egress_service:
                case model::Kind::service:
                    keys.push_back(c.key);
                    break;
                case model::Kind::endpoint_slice:
                    owners_.update(objs, c.key, keys);
                    break;
                default:
                    break;
                }
            }
            std::sort(keys.begin(), keys.end());
            keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
            for (const auto& key : keys) {
                auto es = objs.egress_services.find(key);
                auto svc = objs.services.find(key);
                if (es == objs.egress_services.end())
                    objects_.egress_services.erase(key);
                else
                    objects_.egress_services.insert_or_assign(key, es->second);
                if (es == objs.egress_services.end() || svc == objs.services.end())
                    objects_.services.erase(key);
                else
                    objects_.services.insert_or_assign(key, svc->second);
                if (es == objs.egress_services.end()) {
                    if (serving_.erase(key) > 0) {
                        out.removed.push_back(key);
                        changed = true;
                    }
                    continue;
                }
                auto slices = owners_.slices(objs, key);
                auto st = serving_state(model::service_facts(objs, key, &slices, pod_cidrs_), node_name_);
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

}  // namespace egw::k8s_source
