// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/queues.h"

#include <rte_ethdev.h>

#include <algorithm>

namespace egw::control {

uint64_t wanted_rss_hf() {
    return RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_FRAG_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_OTHER | RTE_ETH_RSS_NONFRAG_IPV4_TCP |
           RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_FRAG_IPV6 | RTE_ETH_RSS_NONFRAG_IPV6_OTHER |
           RTE_ETH_RSS_NONFRAG_IPV6_TCP | RTE_ETH_RSS_NONFRAG_IPV6_UDP;
}

QueuePlan plan_queues(unsigned configured, unsigned n_workers, unsigned max_rx, uint64_t rss_offloads) {
    QueuePlan p;
    p.wanted = configured ? configured : n_workers;
    unsigned n = std::min({p.wanted, n_workers, max_rx});
    p.rx_queues = static_cast<uint16_t>(n < 1 ? 1 : n);
    if (p.rx_queues > 1) p.rss_hf = wanted_rss_hf() & rss_offloads;
    return p;
}

std::string describe_rss(uint64_t rss_hf) {
    static const struct {
        uint64_t bit;
        const char* name;
    } names[] = {
        {RTE_ETH_RSS_IPV4, "ipv4"},
        {RTE_ETH_RSS_FRAG_IPV4, "ipv4-frag"},
        {RTE_ETH_RSS_NONFRAG_IPV4_OTHER, "ipv4-other"},
        {RTE_ETH_RSS_NONFRAG_IPV4_TCP, "ipv4-tcp"},
        {RTE_ETH_RSS_NONFRAG_IPV4_UDP, "ipv4-udp"},
        {RTE_ETH_RSS_IPV6, "ipv6"},
        {RTE_ETH_RSS_FRAG_IPV6, "ipv6-frag"},
        {RTE_ETH_RSS_NONFRAG_IPV6_OTHER, "ipv6-other"},
        {RTE_ETH_RSS_NONFRAG_IPV6_TCP, "ipv6-tcp"},
        {RTE_ETH_RSS_NONFRAG_IPV6_UDP, "ipv6-udp"},
    };
    std::string out;
    auto add = [&](const char* name) {
        if (!out.empty()) out.push_back(' ');
        out.append(name);
    };
    for (const auto& n : names)
        if (rss_hf & n.bit) add(n.name);
    if (rss_hf & ~wanted_rss_hf()) add("other");
    return out.empty() ? "none" : out;
}

}  // namespace egw::control
