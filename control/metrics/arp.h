// SPDX-License-Identifier: Apache-2.0
//
// The control thread's ARP counters in the exposition: requests it sent to resolve next hops (and
// the Neighbor Solicitations for IPv6 ones), the aging of learned entries of both families (probes,
// invalidations, frees, recycling) and the gratuitous ARPs (IPv6: unsolicited Neighbor
// Advertisements) it sent for addresses the gateway began to answer for. The control thread
// stores them at every tick (Exporter::tick); the metrics thread reads the copy.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "control/metrics/exposition.h"

namespace egw::control {
class NeighborResolver;
}  // namespace egw::control

namespace egw::metrics {

struct ArpReading {
    uint64_t requests = 0;
    uint64_t announcements = 0;
    uint64_t announcement_failures = 0;
    uint64_t announcements_pending = 0;
    uint64_t probes = 0;
    uint64_t invalidated = 0;
    uint64_t freed = 0;
    uint64_t recycled = 0;
    uint64_t neighbors = 0;
    uint64_t solicitations = 0;      // IPv6: Neighbor Solicitations sent
    uint64_t neighbors6 = 0;         // IPv6 neighbour table entries in use
    uint64_t ndp_announcements = 0;  // IPv6: unsolicited Neighbor Advertisements sent
    uint64_t ndp_announcement_failures = 0;
    uint64_t ndp_announcements_pending = 0;
};

// A copy the control thread writes and any thread reads, counter by counter.
class ArpCounters {
public:
    void store(const control::NeighborResolver& resolver);
    ArpReading load() const;

private:
    std::array<std::atomic<uint64_t>, 14> v_{};
};

void write_arp(Writer& w, const ArpReading& r);

}  // namespace egw::metrics
