// SPDX-License-Identifier: Apache-2.0
//
// The body of main() for unit tests that need a running EAL (memory, rings, ethdev): GoogleTest
// takes its flags first, then the EAL starts on lcore 0 without hugepages or PCI, under a file
// prefix that carries the pid so that parallel runs never meet, and its run directory is removed
// at the end. `ready` runs after the EAL is up (registrations the code under test expects) and
// fails the run by returning false. `lcores` is the EAL --lcores list when a test needs more lcores
// than the main one (it maps them onto CPUs, e.g. "0,1@0,2@0"; nothing is launched on them unless
// the test does).
#pragma once

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace egw::test {

inline int run_with_eal(int argc, char** argv, const std::string& name, unsigned memory_mb,
                        const std::function<bool()>& ready = {}, const std::string& lcores = "") {
    ::testing::InitGoogleTest(&argc, argv);
    std::vector<std::string> args = {argv[0],
                                     "--no-huge",
                                     "--no-pci",
                                     "-m",
                                     std::to_string(memory_mb),
                                     "--file-prefix=egw-" + name + "-" + std::to_string(getpid()),
                                     "--log-level=error"};
    if (lcores.empty()) {
        args.push_back("-l");
        args.push_back("0");
    } else {
        args.push_back("--lcores=" + lcores);
    }
    std::vector<char*> eal_argv;
    for (auto& a : args)
        eal_argv.push_back(a.data());
    eal_argv.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(args.size()), eal_argv.data()) < 0) {
        std::fprintf(stderr, "%s: EAL initialisation failed: %s\n", name.c_str(), rte_strerror(rte_errno));
        return 1;
    }
    int rc = 1;
    if (!ready || ready()) rc = RUN_ALL_TESTS();
    std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ec;
    std::filesystem::remove_all(runtime_dir, ec);
    return rc;
}

}  // namespace egw::test
