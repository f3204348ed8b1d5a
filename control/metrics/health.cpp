// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/health.h"

#include <cstdio>

namespace egw::metrics {

void StallDetector::sample_workers(double now, const std::vector<uint64_t>& iterations) {
    if (workers_.size() != iterations.size()) workers_.assign(iterations.size(), Track{0, now});
    for (size_t i = 0; i < iterations.size(); ++i) {
        if (iterations[i] != workers_[i].last) {
            workers_[i].last = iterations[i];
            workers_[i].since = now;
        }
    }
}

void StallDetector::control_tick(double now) {
    last_tick_ = now;
}

namespace {

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", s);
    return buf;
}

}  // namespace

std::string StallDetector::problems(double now) const {
    std::string out;
    for (size_t i = 0; i < workers_.size(); ++i) {
        const Track& t = workers_[i];
        if (t.last != 0 && now - t.since >= stall_)
            out += "worker " + std::to_string(i) + " stalled: its iteration counter stayed at " +
                   std::to_string(t.last) + " for " + seconds(now - t.since) + " s\n";
    }
    if (last_tick_ >= 0 && now - last_tick_ >= stall_)
        out += "control loop stalled: no tick for " + seconds(now - last_tick_) + " s\n";
    return out;
}

std::string readiness_problems(const ReadinessInputs& in) {
    std::string out;
    if (in.generation == 0) out += "no policy generation published yet\n";
    for (const auto& [name, up] : in.ports)
        if (!up) out += "port " + name + ": link down\n";
    for (size_t i = 0; i < in.worker_iterations.size(); ++i)
        if (in.worker_iterations[i] == 0) out += "worker " + std::to_string(i) + " has not started\n";
    return out;
}

std::string startup_problems(const std::vector<uint64_t>& worker_iterations, bool control_ticked) {
    std::string out;
    for (size_t i = 0; i < worker_iterations.size(); ++i)
        if (worker_iterations[i] == 0) out += "worker " + std::to_string(i) + " has not started\n";
    if (!control_ticked) out += "control loop has not ticked yet\n";
    return out;
}

}  // namespace egw::metrics
