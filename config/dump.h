// SPDX-License-Identifier: Apache-2.0
//
// The inverse of the loader: a Config back in the file's own shape and key names.
#pragma once

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace egw::config {

// Every section the loader reads, with every setting spelt out (defaults included), so that
// load_text(to_json(c).dump(), c.file) returns a Config equal to `c`. The document is a complete
// configuration file: "state" holds only the keys its source accepts, an absent port MAC or route
// next hop is left out rather than written as null, "metrics" is always present (with
// "enabled": false when there is no endpoint). Paths are the loaded, absolute ones, so the
// document loads the same wherever it is written. Config::file is not part of it.
nlohmann::json to_json(const Config& c);

}  // namespace egw::config
