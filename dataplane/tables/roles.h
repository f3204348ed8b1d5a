// SPDX-License-Identifier: Apache-2.0
//
// The two enumerations the configuration and the data plane share: what a port is for, and what
// happens to pod traffic of no EgressService. Declared once here; config/config.h names them
// config::PortRole and config::DefaultAction, so the loader's value is the snapshot's value.
#pragma once

#include <cstdint>

namespace egw::dp {

// `none` only in a snapshot's unused port slots; a configured port is inside or outside.
enum class PortRole : uint8_t { none, inside, outside };
enum class DefaultAction : uint8_t { route, masquerade, drop };

}  // namespace egw::dp
