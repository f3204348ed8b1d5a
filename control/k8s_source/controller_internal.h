// SPDX-License-Identifier: Apache-2.0
//
// What lease_keeper.cpp and host_decider.cpp share; not for use outside control/k8s_source.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace egw::k8s_source::detail {

using SteadyClock = std::chrono::steady_clock;

inline int64_t steady_ns(SteadyClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

inline std::string resource_version_of(const nlohmann::json& obj) {
    if (!obj.is_object()) return "";
    auto m = obj.find("metadata");
    if (m == obj.end() || !m->is_object()) return "";
    auto rv = m->find("resourceVersion");
    return rv != m->end() && rv->is_string() ? rv->get<std::string>() : "";
}

}  // namespace egw::k8s_source::detail
