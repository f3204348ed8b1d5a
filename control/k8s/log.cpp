// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/log.h"

#include <mutex>

namespace egw::k8s {

namespace {
std::mutex g_mu;
std::shared_ptr<spdlog::logger> g_logger;
}  // namespace

std::shared_ptr<spdlog::logger> logger() {
    std::lock_guard lk(g_mu);
    return g_logger ? g_logger : spdlog::default_logger();
}

void set_logger(std::shared_ptr<spdlog::logger> l) {
    std::lock_guard lk(g_mu);
    g_logger = std::move(l);
}

}  // namespace egw::k8s
