// SPDX-License-Identifier: Apache-2.0
//
// How many receive queues a port gets and what RSS hashes, decided from the configuration and
// the device's capabilities alone (no DPDK call), so that the decision can be tested without a
// NIC. Runtime::setup applies it.
#pragma once

#include <cstdint>
#include <string>

namespace egw::control {

// RSS hash types egw asks for: IPv4 and IPv6 addresses and, for TCP and UDP, the ports too, so
// that the flows of one pod spread over the workers, in both families. (Without the IPv6 types a
// NIC gives every IPv6 packet to queue 0.)
uint64_t wanted_rss_hf();

struct QueuePlan {
    unsigned wanted = 1;     // from the config: `queues`, or one per worker
    uint16_t rx_queues = 1;  // what the port gets: at most the workers and the device's maximum
    uint64_t rss_hf = 0;     // wanted_rss_hf() masked by the device's RSS types; 0 with one queue
};

// `configured` is the port's `queues` (0: one per worker); `max_rx` and `rss_offloads` are the
// device's max_rx_queues and flow_type_rss_offloads.
QueuePlan plan_queues(unsigned configured, unsigned n_workers, unsigned max_rx, uint64_t rss_offloads);

// "ipv4 tcp udp"-style names of the hash types in `rss_hf` ("none" for 0), for logs and the CLI.
std::string describe_rss(uint64_t rss_hf);

}  // namespace egw::control
