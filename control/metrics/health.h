// SPDX-License-Identifier: Apache-2.0
//
// Liveness and readiness as Kubernetes probes see them (/livez, /readyz on the metrics port).
//
// Live: every worker lcore that has started keeps advancing its poll-loop iteration counter, and
// the control loop keeps ticking. A worker stuck in a PMD call or a spin, or a control thread
// that stopped, makes /livez fail once nothing moved for `stall` seconds, so the kubelet
// restarts the pod. A worker that has not started yet is not judged (readiness covers start-up).
//
// Ready: the first policy generation is published, every port's link is up, and every worker
// has run at least one iteration.
//
// Pure logic over numbers the caller samples, so the tests drive it with a fake clock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace egw::metrics {

class StallDetector {
public:
    explicit StallDetector(double stall_seconds) : stall_(stall_seconds) {}

    // Records the workers' iteration counters at time `now` (seconds, monotonic).
    void sample_workers(double now, const std::vector<uint64_t>& iterations);
    // Records that the control loop ran at `now`.
    void control_tick(double now);

    // Empty when live; otherwise what stalled, for the probe's body and the log.
    std::string problems(double now) const;

private:
    struct Track {
        uint64_t last = 0;
        double since = 0;  // when `last` was first seen
    };
    double stall_;
    std::vector<Track> workers_;
    double last_tick_ = -1;  // < 0: the control loop has not ticked yet
};

struct ReadinessInputs {
    uint64_t generation = 0;
    std::vector<std::pair<std::string, bool>> ports;  // name, link up
    std::vector<uint64_t> worker_iterations;
};

// Empty when ready; otherwise what is missing.
std::string readiness_problems(const ReadinessInputs& in);

// Started (/startz, the kubelet's startup probe): every worker has run at least one poll-loop
// iteration and the control loop has ticked, so /livez judges every one of them from then on.
// Unlike readiness, it does not wait for the first policy generation (a long first sync) nor for
// links, and once true it stays true. Empty when started; otherwise what has not started.
std::string startup_problems(const std::vector<uint64_t>& worker_iterations, bool control_ticked);

}  // namespace egw::metrics
