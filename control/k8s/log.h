// SPDX-License-Identifier: Apache-2.0
//
// The logger of the Kubernetes client. By default spdlog's default logger; egwd (or a test) may
// install its own.
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace egw::k8s {

// The logger every part of egw::k8s writes to.
std::shared_ptr<spdlog::logger> logger();
// Replaces it; nullptr goes back to spdlog's default logger.
void set_logger(std::shared_ptr<spdlog::logger> l);

}  // namespace egw::k8s
