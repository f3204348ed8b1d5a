// SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz.h"

namespace egw::fuzz {

std::string g_current_input;

void fail(const std::string& what) {
    if (g_current_input.empty())
        std::fprintf(stderr, "fuzz invariant violated: %s\n", what.c_str());
    else
        std::fprintf(stderr, "fuzz invariant violated by %s: %s\n", g_current_input.c_str(), what.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace egw::fuzz
