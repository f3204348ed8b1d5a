// SPDX-License-Identifier: Apache-2.0
//
// The data-plane tests need a running EAL (memory, rings, hashes, ethdev), so they bring their
// own main(): GoogleTest takes its flags first, then the EAL starts on lcore 0 without hugepages
// or PCI, under a file prefix of its own so that parallel runs never meet.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf_dyn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/unit/dataplane/rig.h"

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);

    std::vector<std::string> args = {argv[0],
                                     "--no-huge",
                                     "--no-pci",
                                     "-m",
                                     "512",
                                     "--file-prefix=egw-unit-" + std::to_string(getpid()),
                                     "-l",
                                     "0",
                                     "--log-level=error"};
    std::vector<char*> eal_argv;
    for (auto& a : args)
        eal_argv.push_back(a.data());
    eal_argv.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(args.size()), eal_argv.data()) < 0) {
        std::fprintf(stderr, "test_dataplane: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    // The same registration as control::Runtime::setup.
    static const rte_mbuf_dynfield next_hop_desc = {"egw_next_hop", sizeof(uint32_t), alignof(uint32_t), 0};
    int field = rte_mbuf_dynfield_register(&next_hop_desc);
    if (field < 0) {
        std::fprintf(stderr, "test_dataplane: cannot register the next-hop dynfield: %s\n", rte_strerror(rte_errno));
        rte_eal_cleanup();
        return 1;
    }
    egw::test::set_next_hop_field(field);

    int rc = RUN_ALL_TESTS();

    std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    // The run directory belongs to this process alone (its file prefix carries the pid).
    std::error_code ec;
    std::filesystem::remove_all(runtime_dir, ec);
    return rc;
}
