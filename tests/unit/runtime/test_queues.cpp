// SPDX-License-Identifier: Apache-2.0
//
// Receive queues and RSS per port (control/runtime/queues.h): a queue per worker unless the
// config says fewer, never more than the device offers, RSS hash types limited to the device's.
#include <gtest/gtest.h>
#include <rte_ethdev.h>

#include "control/runtime/queues.h"

namespace egw::control {
namespace {

constexpr uint64_t kAllRss = ~uint64_t{0};

TEST(QueuePlan, OneQueuePerWorkerByDefault) {
    QueuePlan p = plan_queues(0, 4, 64, kAllRss);
    EXPECT_EQ(p.wanted, 4u);
    EXPECT_EQ(p.rx_queues, 4u);
    EXPECT_EQ(p.rss_hf, wanted_rss_hf());
}

TEST(QueuePlan, ClampedToTheDevice) {
    QueuePlan p = plan_queues(0, 4, 2, kAllRss);
    EXPECT_EQ(p.wanted, 4u);
    EXPECT_EQ(p.rx_queues, 2u);
    p = plan_queues(0, 4, 1, kAllRss);
    EXPECT_EQ(p.rx_queues, 1u);
    EXPECT_EQ(p.rss_hf, 0u) << "one queue: no RSS";
}

TEST(QueuePlan, ConfiguredCountWinsButNeverExceedsTheWorkers) {
    EXPECT_EQ(plan_queues(2, 4, 64, kAllRss).rx_queues, 2u);
    QueuePlan p = plan_queues(8, 4, 64, kAllRss);
    EXPECT_EQ(p.wanted, 8u);
    EXPECT_EQ(p.rx_queues, 4u);
    EXPECT_EQ(plan_queues(1, 4, 64, kAllRss).rx_queues, 1u);
}

TEST(QueuePlan, RssLimitedToWhatTheDeviceHashes) {
    // A device hashing TCP and UDP ports but not other IPv4, and IPv6 TCP only, gets exactly those.
    uint64_t dev = RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_NONFRAG_IPV6_TCP |
                   RTE_ETH_RSS_L2_PAYLOAD;
    QueuePlan p = plan_queues(0, 2, 16, dev);
    EXPECT_EQ(p.rss_hf, RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_NONFRAG_IPV6_TCP);
    EXPECT_EQ(describe_rss(p.rss_hf), "ipv4-tcp ipv4-udp ipv6-tcp");
    // A device with several queues and no RSS (net_af_packet spreads flows itself).
    p = plan_queues(0, 2, 16, 0);
    EXPECT_EQ(p.rx_queues, 2u);
    EXPECT_EQ(p.rss_hf, 0u);
    EXPECT_EQ(describe_rss(0), "none");
}

TEST(QueuePlan, WantedHashesCoverAddressesAndPortsOfBothFamilies) {
    EXPECT_EQ(describe_rss(wanted_rss_hf()),
              "ipv4 ipv4-frag ipv4-other ipv4-tcp ipv4-udp ipv6 ipv6-frag ipv6-other ipv6-tcp ipv6-udp");
    // Without the IPv6 types a NIC puts every IPv6 packet on queue 0, whatever its flow.
    for (uint64_t t : {RTE_ETH_RSS_IPV6, RTE_ETH_RSS_FRAG_IPV6, RTE_ETH_RSS_NONFRAG_IPV6_TCP,
                       RTE_ETH_RSS_NONFRAG_IPV6_UDP, RTE_ETH_RSS_NONFRAG_IPV6_OTHER})
        EXPECT_EQ(plan_queues(0, 4, 4, kAllRss).rss_hf & t, t) << t;
}

}  // namespace
}  // namespace egw::control
