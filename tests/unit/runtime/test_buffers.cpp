// SPDX-License-Identifier: Apache-2.0
//
// A port's MTU against the pool's buffers (control/runtime/buffers.h), for device capabilities
// that no virtual device here has together: receive scatter without multi-segment transmit.
#include <gtest/gtest.h>
#include <rte_ethdev.h>

#include "control/runtime/buffers.h"

namespace egw::control {
namespace {

constexpr uint64_t kScatter = RTE_ETH_RX_OFFLOAD_SCATTER;
constexpr uint64_t kMultiSegs = RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
const std::string kWhere = "egwd.json: $.ports[1].mtu";

BufferPlan plan(unsigned mtu, unsigned data_room, uint64_t rx, uint64_t tx) {
    return plan_buffers(kWhere, "ext1", "net_x0", mtu, data_room, rx, tx);
}

TEST(BufferPlan, AFrameOfTheMtuInOneBufferNeedsNoOffload) {
    // 1500 + 14 + 4 = 1518 bytes, in 2176 - 128 = 2048.
    BufferPlan p = plan(1500, 2176, 0, kMultiSegs);
    EXPECT_EQ(p.error, "");
    EXPECT_FALSE(p.rx_scatter);
    EXPECT_TRUE(p.tx_multi_segs);
    EXPECT_FALSE(p.single_segment_tx);
}

TEST(BufferPlan, AJumboMtuTurnsOnScatterWhereTheDeviceHasIt) {
    BufferPlan p = plan(9000, 2176, kScatter, kMultiSegs);
    EXPECT_EQ(p.error, "");
    EXPECT_TRUE(p.rx_scatter);
    EXPECT_TRUE(p.tx_multi_segs);
}

TEST(BufferPlan, AJumboMtuWithoutScatterIsRefusedNamingTheFieldAndTheDataRoomNeeded) {
    BufferPlan p = plan(9000, 2176, 0, kMultiSegs);
    EXPECT_EQ(p.error,
              "egwd.json: $.ports[1].mtu: an MTU of 9000 needs mempool.data_room of at least 9146 (port ext1 cannot "
              "chain mbufs on receive), got 2176");
}

TEST(BufferPlan, NoMultiSegmentTransmitCopiesChainsWhenAFrameFitsOneBuffer) {
    BufferPlan p = plan(1500, 2176, 0, 0);
    EXPECT_EQ(p.error, "");
    EXPECT_FALSE(p.tx_multi_segs);
    EXPECT_TRUE(p.single_segment_tx);
    // Exactly fitting: 1646 - 128 = 1518 = 1500 + 18.
    EXPECT_TRUE(plan(1500, 1646, 0, 0).single_segment_tx);
    EXPECT_EQ(plan(1500, 1646, 0, 0).error, "");
}

TEST(BufferPlan, NoMultiSegmentTransmitWithFramesLongerThanABufferIsRefused) {
    // The device receives chains, but could not send one, nor a copy of one in a single buffer:
    // refused at start, not dropped at output frame by frame.
    BufferPlan p = plan(9000, 2176, kScatter, 0);
    EXPECT_EQ(p.error,
              "egwd.json: $.ports[1].mtu: port ext1 (net_x0) cannot transmit chained mbufs, so a frame of its MTU of "
              "9000 must fit one buffer: mempool.data_room of at least 9146, got 2176");
    EXPECT_FALSE(p.single_segment_tx);
    // One byte short of the exact fit.
    EXPECT_NE(plan(1500, 1645, kScatter, 0).error, "");
}

}  // namespace
}  // namespace egw::control
