// SPDX-License-Identifier: Apache-2.0
#include "control/k8s_source/slice_owners.h"

namespace egw::k8s_source {

namespace {

std::string owner_of(const model::EndpointSlice& s) {
    return s.service_name.empty() ? std::string() : s.meta.namespace_ + "/" + s.service_name;
}

}  // namespace

void SliceOwners::rebuild(const model::ObjectSet& objects) {
    owner_.clear();
    by_service_.clear();
    for (const auto& [key, slice] : objects.endpoint_slices) {
        std::string owner = owner_of(slice);
        if (owner.empty()) continue;
        by_service_[owner].insert(key);
        owner_.emplace(key, std::move(owner));
    }
}

void SliceOwners::update(const model::ObjectSet& objects, const std::string& slice_key,
                         std::vector<std::string>& affected) {
    std::string now;
    if (auto it = objects.endpoint_slices.find(slice_key); it != objects.endpoint_slices.end())
        now = owner_of(it->second);
    std::string before;
    if (auto it = owner_.find(slice_key); it != owner_.end()) before = it->second;
    if (before != now) {
        if (!before.empty()) {
            auto b = by_service_.find(before);
            if (b != by_service_.end()) {
                b->second.erase(slice_key);
                if (b->second.empty()) by_service_.erase(b);
            }
            affected.push_back(before);
        }
        if (now.empty()) {
            owner_.erase(slice_key);
        } else {
            by_service_[now].insert(slice_key);
            owner_[slice_key] = now;
        }
    }
    if (!now.empty()) affected.push_back(now);
}

std::vector<const model::EndpointSlice*> SliceOwners::slices(const model::ObjectSet& objects,
                                                             const std::string& service_key) const {
    std::vector<const model::EndpointSlice*> out;
    auto it = by_service_.find(service_key);
    if (it == by_service_.end()) return out;
    for (const auto& key : it->second) {
        auto s = objects.endpoint_slices.find(key);
        if (s != objects.endpoint_slices.end()) out.push_back(&s->second);
    }
    return out;
}

model::SliceIndex SliceOwners::index(const model::ObjectSet& objects,
                                     const std::vector<std::string>& service_keys) const {
    model::SliceIndex idx;
    for (const auto& key : service_keys) {
        auto v = slices(objects, key);
        if (!v.empty()) idx[key] = std::move(v);
    }
    return idx;
}

}  // namespace egw::k8s_source
