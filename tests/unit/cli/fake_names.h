// SPDX-License-Identifier: Apache-2.0
//
// Live names for grammar tests, settable per test.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "control/cli/grammar.h"

namespace egw::test {

class FakeNames : public cli::NameSource {
public:
    std::map<cli::NameSet, std::vector<std::string>> sets;
    std::vector<std::string> names(cli::NameSet set) const override {
        auto it = sets.find(set);
        return it == sets.end() ? std::vector<std::string>{} : it->second;
    }
};

}  // namespace egw::test
