// SPDX-License-Identifier: Apache-2.0
//
// main() for the CLI tests that need DPDK memory (session tables).
#include "tests/unit/eal_main.h"

int main(int argc, char** argv) {
    return egw::test::run_with_eal(argc, argv, "unit-cli", 128);
}
