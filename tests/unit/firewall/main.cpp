// SPDX-License-Identifier: Apache-2.0
//
// main() for the EgressFirewall classifier tests: rte_acl allocates its contexts from EAL memory.
#include "tests/unit/eal_main.h"

int main(int argc, char** argv) {
    return egw::test::run_with_eal(argc, argv, "firewall", 512);
}
