// SPDX-License-Identifier: Apache-2.0
//
// What this gateway programs, as every egwd (leader or not) sees it: from the cache's
// EgressServices, Services and EndpointSlices, each Service's serving state (decisions.h,
// serving_state(): status.host alone says who serves), kept up to date from the cache's changes
// so that a change costs the Services it touches, not all of them. Also the copy of the
// EgressServices and Services the CLI shows. Runs on the control thread (Controller::poll()).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/ip.h"
#include "control/k8s/cache.h"
#include "control/k8s_source/slice_owners.h"
#include "control/model/rules.h"

namespace egw::k8s_source {

class ServingView {
public:
    ServingView(std::string node_name, std::vector<net::IpPrefix> pod_cidrs);

    // Takes the cache's changes and fills `out` with what changed since the last call (the first
    // time, every EgressService), in key order. Returns whether anything did. The cache must have
    // listed every kind.
    bool update(k8s::Cache& cache, model::ServiceDelta& out);

    // Every EgressService's serving state, by key, as of the last update().
    const std::map<std::string, model::ServiceState>& states() const { return serving_; }
    // The EgressServices and Services as of the last update().
    const model::ObjectSet& objects() const { return objects_; }
    // The cache generation the last update() read.
    uint64_t generation() const { return generation_; }

private:
    std::string node_name_;
    std::vector<net::IpPrefix> pod_cidrs_;
    bool initialized_ = false;
    std::map<std::string, model::ServiceState> serving_;
    SliceOwners owners_;
    model::ObjectSet objects_;  // EgressServices and Services only
    uint64_t generation_ = 0;
};

}  // namespace egw::k8s_source
