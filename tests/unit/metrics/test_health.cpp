// SPDX-License-Identifier: Apache-2.0
//
// Liveness and readiness (control/metrics/health.h) with a fake clock.
#include "control/metrics/health.h"

#include <gtest/gtest.h>

namespace {

using namespace egw::metrics;

TEST(Liveness, AdvancingWorkersAreLive) {
    StallDetector d(5);
    for (int t = 0; t < 20; ++t)
        d.sample_workers(t, {uint64_t(100 + t), uint64_t(7 + 2 * t)});
    EXPECT_EQ(d.problems(20), "");
}

TEST(Liveness, AWorkerStuckForTheThresholdIsReported) {
    StallDetector d(5);
    d.sample_workers(0, {10, 10});
    d.sample_workers(1, {11, 12});
    d.sample_workers(4, {11, 20});
    EXPECT_EQ(d.problems(5.9), "");
    d.sample_workers(6, {11, 30});
    EXPECT_EQ(d.problems(6), "worker 0 stalled: its iteration counter stayed at 11 for 5.0 s\n");
    d.sample_workers(7, {12, 31});  // it recovers
    EXPECT_EQ(d.problems(7), "");
}

TEST(Liveness, WorkersThatNeverStartedAreNotJudged) {
    StallDetector d(5);
    d.sample_workers(0, {0, 0});
    d.sample_workers(100, {0, 0});
    EXPECT_EQ(d.problems(100), "");
}

TEST(Liveness, TheControlLoopMustKeepTicking) {
    StallDetector d(5);
    EXPECT_EQ(d.problems(1000), "");  // never ticked yet: start-up (the first list may take a while)
    d.control_tick(10);
    EXPECT_EQ(d.problems(14), "");
    EXPECT_EQ(d.problems(15.5), "control loop stalled: no tick for 5.5 s\n");
    d.control_tick(15.6);
    EXPECT_EQ(d.problems(15.7), "");
}

TEST(Liveness, WorkerCountChangeRestartsTracking) {
    StallDetector d(5);
    d.sample_workers(0, {5});
    d.sample_workers(10, {5, 9});
    EXPECT_EQ(d.problems(10), "");
}

TEST(Readiness, AllThreeConditions) {
    ReadinessInputs in;
    in.generation = 1;
    in.ports = {{"pods", true}, {"ext1", true}};
    in.worker_iterations = {5, 9};
    EXPECT_EQ(readiness_problems(in), "");
    in.generation = 0;
    in.ports[1].second = false;
    in.worker_iterations[0] = 0;
    EXPECT_EQ(readiness_problems(in),
              "no policy generation published yet\nport ext1: link down\nworker 0 has not started\n");
}

// Started needs neither a policy generation nor links: only that every thread /livez judges runs.
TEST(Startup, EveryWorkerAndTheControlLoop) {
    EXPECT_EQ(startup_problems({5, 9}, true), "");
    EXPECT_EQ(startup_problems({}, true), "");
    EXPECT_EQ(startup_problems({5, 0}, true), "worker 1 has not started\n");
    EXPECT_EQ(startup_problems({0, 9}, false), "worker 0 has not started\ncontrol loop has not ticked yet\n");
}

}  // namespace
