// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the configuration loader (config/loader.cpp). Any text either loads or is refused
// with a ConfigError; nothing else may escape. A configuration that loads survives the round
// trip through config::to_json unchanged (load_text(to_json(c).dump()) gives c again), and
// comparing it with itself for a reload finds no change.
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/dump.h"
#include "config/reload.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace egw;
    const std::string text(reinterpret_cast<const char*>(data), size);
    config::Config c;
    try {
        c = config::load_text(text, "fuzz/egw.json");
    } catch (const config::ConfigError&) {
        return 0;
    }
    nlohmann::json j = config::to_json(c);
    std::string dumped = j.dump();
    config::Config again;
    try {
        again = config::load_text(dumped, c.file);
    } catch (const config::ConfigError& e) {
        fuzz::fail(std::string("a loaded configuration does not load again from to_json: ") + e.what() + "\n" + dumped);
    }
    if (config::to_json(again) != j)
        fuzz::fail("to_json of the reloaded configuration differs:\n" + dumped + "\n" + config::to_json(again).dump());
    config::ConfigChanges changes = config::compare_for_reload(c, again);
    if (!changes.restart.empty() || !changes.live.empty())
        fuzz::fail("a configuration compared with its own round trip has changes:\n" + dumped);
    return 0;
}
