// SPDX-License-Identifier: Apache-2.0
//
// main() for the data-plane tests: a running EAL, plus the mbuf dynamic field the worker keeps
// the next hop in.
#include <rte_errno.h>
#include <rte_mbuf_dyn.h>

#include <cstdio>

#include "dataplane/held.h"
#include "tests/unit/dataplane/rig.h"
#include "tests/unit/eal_main.h"

int main(int argc, char** argv) {
    return egw::test::run_with_eal(argc, argv, "unit", 512, [] {
        // The same registration as control::Runtime::setup.
        int field = rte_mbuf_dynfield_register(&egw::dp::next_hop_dynfield());
        if (field < 0) {
            std::fprintf(stderr, "test_dataplane: cannot register the next-hop dynfield: %s\n",
                         rte_strerror(rte_errno));
            return false;
        }
        egw::test::set_next_hop_field(field);
        return true;
    });
}
