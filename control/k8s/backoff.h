// SPDX-License-Identifier: Apache-2.0
//
// Exponential backoff with jitter for retries against the API server.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace egw::k8s {

class Backoff {
public:
    // Delays grow initial, initial*factor, ... up to max; each is stretched by a random
    // fraction in [0, jitter) of itself so that many clients do not retry in step.
    Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double factor = 2.0, double jitter = 0.5)
        : initial_(initial),
          max_(std::max(initial, max)),
          factor_(factor),
          jitter_(jitter),
          rng_(std::random_device{}()) {}

    // The delay before the next attempt.
    std::chrono::milliseconds next() {
        double base = static_cast<double>(initial_.count());
        for (unsigned i = 0; i < attempts_ && base < static_cast<double>(max_.count()); ++i)
            base *= factor_;
        base = std::min(base, static_cast<double>(max_.count()));
        ++attempts_;
        std::uniform_real_distribution<double> u(0.0, jitter_);
        return std::chrono::milliseconds(static_cast<long long>(base * (1.0 + u(rng_))));
    }
    // After a success: the next delay is `initial` again.
    void reset() { attempts_ = 0; }
    unsigned attempts() const { return attempts_; }

private:
    std::chrono::milliseconds initial_, max_;
    double factor_, jitter_;
    unsigned attempts_ = 0;
    std::mt19937_64 rng_;
};

}  // namespace egw::k8s
