// SPDX-License-Identifier: Apache-2.0
//
// Command-line helpers the benchmark programs share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace egw::bench {

// "10000,1000000" -> {10000, 1000000}; std::stoul throws on a value that is not a number.
inline std::vector<uint32_t> parse_list(const char* s) {
    std::vector<uint32_t> v;
    std::string str(s);
    size_t pos = 0;
    while (pos <= str.size()) {
        size_t comma = str.find(',', pos);
        v.push_back(static_cast<uint32_t>(std::stoul(str.substr(pos, comma - pos))));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return v;
}

}  // namespace egw::bench
