// SPDX-License-Identifier: Apache-2.0
//
// Policy publication with RCU: the control thread swaps the snapshot pointer and waits until
// every worker has passed a quiescent state (rte_rcu_qsbr_quiescent at the end of each
// poll-loop iteration), after which no worker can still hold the old snapshot and it may be
// freed. egwd and the concurrency tests publish through this one function.
#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <thread>

#include "dataplane/worker.h"

namespace egw::dp {

// Returns once every worker has passed a quiescent state: none holds a pointer it read before.
inline void wait_for_workers(DataplaneShared& shared) {
    if (shared.qsbr) {
        // What rte_rcu_qsbr_synchronize() does, written out: that function is compiled inside
        // DPDK, where ThreadSanitizer cannot see its acquire loads of the workers' counters and
        // would take the free that follows for a race; these inline calls it sees.
        // Between checks the control thread yields: where workers share cores with it (tests,
        // oversubscribed lcores) they need the CPU to reach their quiescent state.
        uint64_t token = rte_rcu_qsbr_start(shared.qsbr);
        while (!rte_rcu_qsbr_check(shared.qsbr, token, false))
            std::this_thread::yield();
    }
}

// Publishes `next` and returns the snapshot it replaced (nullptr at the first publication),
// which no worker reads any more once this returns. Control thread only.
inline const PolicySnapshot* publish_policy(DataplaneShared& shared, const PolicySnapshot* next) {
    const PolicySnapshot* old = shared.policy.current.exchange(next, std::memory_order_acq_rel);
    wait_for_workers(shared);
    return old;
}

// The same for the peers' NAT ports (port_reservations.h); `next` may be null (none).
inline const PortReservations* publish_reservations(DataplaneShared& shared, const PortReservations* next) {
    const PortReservations* old = shared.reservations.exchange(next, std::memory_order_acq_rel);
    wait_for_workers(shared);
    return old;
}

}  // namespace egw::dp
