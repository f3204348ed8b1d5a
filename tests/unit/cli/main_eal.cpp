// SPDX-License-Identifier: Apache-2.0
//
// main() for the CLI tests that need DPDK memory (session tables): GoogleTest flags first, then
// the EAL on lcore 0 without hugepages or PCI, under a file prefix of its own.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    std::vector<std::string> args = {argv[0], "--no-huge", "--no-pci", "-m", "128",
                                     "--file-prefix=egw-unit-cli-" + std::to_string(getpid()), "-l", "0",
                                     "--log-level=error"};
    std::vector<char*> eal_argv;
    for (auto& a : args)
        eal_argv.push_back(a.data());
    eal_argv.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(args.size()), eal_argv.data()) < 0) {
        std::fprintf(stderr, "test_cli_workers: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    int rc = RUN_ALL_TESTS();
    std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ec;
    std::filesystem::remove_all(runtime_dir, ec);
    return rc;
}
