// SPDX-License-Identifier: Apache-2.0
//
// How the workers apply sessions.max_per_pod, decided from the configuration alone (no DPDK
// call), so that it can be tested without a NIC. Runtime::setup applies it.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace egw::control {

struct PodLimitPlan {
    uint32_t limit = 0;       // DataplaneShared::pod_session_limit: the whole max_per_pod (0: none)
    uint32_t budget_row = 0;  // counters per row of the shared pod budget; 0: none (one worker)
};

// The limit is the configured one on every worker, never a share of it: which worker owns a
// pod's flow depends on the flow's hash and on what the NIC hashes (a NIC without IPv6 RSS gives
// every IPv6 flow to one queue), so a share per worker refused a pod's flows long before the
// limit. With several workers they count against one budget per pod (dataplane/tables/pod_budget.h),
// with a row of counters for each session the tables of both families may hold.
PodLimitPlan plan_pod_limit(const config::SessionConfig& s, unsigned n_workers);

}  // namespace egw::control
