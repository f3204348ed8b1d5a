// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/pod_limit.h"

#include "dataplane/tables/pod_budget.h"

namespace egw::control {

PodLimitPlan plan_pod_limit(const config::SessionConfig& s, unsigned n_workers) {
    PodLimitPlan p;
    p.limit = s.max_per_pod;
    if (p.limit && n_workers > 1) p.budget_row = dp::pod_budget_row(uint64_t{s.max_sessions} + s.max_sessions_ipv6);
    return p;
}

}  // namespace egw::control
