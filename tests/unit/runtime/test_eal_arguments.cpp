// SPDX-License-Identifier: Apache-2.0
//
// The EAL command line egwd builds from its configuration (Runtime::eal_arguments).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "control/runtime/runtime.h"

namespace egw::control {
namespace {

// The argument that follows `flag`, or "" when `flag` is absent.
std::string after(const std::vector<std::string>& a, const std::string& flag) {
    auto it = std::find(a.begin(), a.end(), flag);
    return it == a.end() || it + 1 == a.end() ? "" : *(it + 1);
}

// Fragments held for reassembly take mbufs of the pool: a configuration whose tables could hold
// more than the pool has is refused at start, naming the settings; one they fit in passes.
TEST(ReassemblyPool, TablesThatCouldHoldMoreThanThePoolAreRefused) {
    config::Config cfg;
    cfg.file = "egw.json";
    cfg.workers = {1, 2};
    cfg.reassembly.max_datagrams = 256;
    cfg.reassembly.max_fragments = 8;
    EXPECT_EQ(Runtime::reassembly_pool_shortfall(cfg, 2 * 256 * 7), "");
    EXPECT_EQ(Runtime::reassembly_pool_shortfall(cfg, 2 * 256 * 7 - 1),
              "egw.json: reassembly: the reassembly tables of 2 worker(s) may hold 3584 fragments "
              "(reassembly.max_datagrams 256 x (reassembly.max_fragments 8 - 1) each), more than the 3583 mbufs of "
              "mempool.mbufs, which must also fill the receive rings and carry the traffic: raise mempool.mbufs or "
              "lower reassembly.max_datagrams or reassembly.max_fragments");
    cfg.reassembly.max_fragments = 2;
    EXPECT_EQ(Runtime::reassembly_pool_shortfall(cfg, 2 * 256), "");
}

TEST(EalArguments, PlainLcoreListGoesToDashL) {
    config::Config cfg;
    cfg.eal.lcores = "0-2,4";
    auto a = Runtime::eal_arguments(cfg, {}, "egwd");
    EXPECT_EQ(after(a, "-l"), "0-2,4");
    EXPECT_EQ(after(a, "--lcores"), "");
}

// EAL's -l only takes ids and ranges: the mapping form the loader accepts (docs/configuration.md)
// made EAL stop with "invalid core list syntax" before it was passed as --lcores.
TEST(EalArguments, MappingFormGoesToLcores) {
    for (const char* map : {"(0-2)@(0-1)", "0@0,1@1,2@1", "1@0"}) {
        config::Config cfg;
        cfg.eal.lcores = map;
        auto a = Runtime::eal_arguments(cfg, {}, "egwd");
        EXPECT_EQ(after(a, "--lcores"), map);
        EXPECT_EQ(after(a, "-l"), "") << map;
    }
}

TEST(EalArguments, ExplicitArgumentsAreKeptAsGiven) {
    config::Config cfg;
    cfg.eal.lcores = "(0-2)@(0-1)";
    auto a = Runtime::eal_arguments(cfg, {"-l", "0-1", "--no-huge"}, "egwd");
    EXPECT_EQ(a, (std::vector<std::string>{"egwd", "-l", "0-1", "--no-huge"}));
}

}  // namespace
}  // namespace egw::control
