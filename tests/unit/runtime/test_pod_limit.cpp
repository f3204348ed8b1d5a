// SPDX-License-Identifier: Apache-2.0
//
// How the workers apply sessions.max_per_pod (control/runtime/pod_limit.h): the whole limit on
// every worker, one shared budget when there are several.
#include <gtest/gtest.h>

#include "control/runtime/pod_limit.h"

namespace egw::control {
namespace {

TEST(PodLimitPlan, SeveralWorkersShareTheWholeLimit) {
    config::SessionConfig s;
    s.max_per_pod = 1000;
    s.max_sessions = 100000;
    s.max_sessions_ipv6 = 50000;
    // Not 250 each: a pod whose flows all land on one of 4 workers may still open 1,000.
    PodLimitPlan p = plan_pod_limit(s, 4);
    EXPECT_EQ(p.limit, 1000u);
    EXPECT_EQ(p.budget_row, 262144u) << "a counter per session of both tables, rounded up";
    // One worker counts in its own tables.
    p = plan_pod_limit(s, 1);
    EXPECT_EQ(p.limit, 1000u);
    EXPECT_EQ(p.budget_row, 0u);
    // No limit, no budget.
    s.max_per_pod = 0;
    p = plan_pod_limit(s, 4);
    EXPECT_EQ(p.limit, 0u);
    EXPECT_EQ(p.budget_row, 0u);
}

TEST(PodLimitPlan, BudgetRowsAreBounded) {
    config::SessionConfig s;
    s.max_per_pod = 10;
    s.max_sessions = 10;
    s.max_sessions_ipv6 = 0;
    EXPECT_EQ(plan_pod_limit(s, 2).budget_row, 1024u);
    s.max_sessions = 1u << 28;
    s.max_sessions_ipv6 = 1u << 28;
    EXPECT_EQ(plan_pod_limit(s, 2).budget_row, 1u << 20);
}

}  // namespace
}  // namespace egw::control
