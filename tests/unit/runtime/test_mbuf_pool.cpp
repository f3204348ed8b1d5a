// SPDX-License-Identifier: Apache-2.0
//
// The mbuf pool's layout without hugepages (control/runtime/mbuf_pool.h): every mbuf header one
// cache line further into its page than the last, and buffers that still hold all they should.
#include <gtest/gtest.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "control/runtime/mbuf_pool.h"
#include "tests/unit/eal_main.h"

namespace {

using egw::control::create_mbuf_pool;
using egw::control::mbuf_pad_for_pages;

constexpr unsigned kMbufs = 1024;
constexpr uint16_t kDataRoom = RTE_MBUF_DEFAULT_BUF_SIZE;  // 2,176, egwd's default

// Which of the 64 sets of a page's worth of L1 lines each mbuf's header falls into.
std::set<uintptr_t> header_lines_in_page(const std::vector<rte_mbuf*>& ms) {
    std::set<uintptr_t> lines;
    for (const rte_mbuf* m : ms)
        lines.insert((reinterpret_cast<uintptr_t>(m) & 4095) >> 6);
    return lines;
}

std::vector<rte_mbuf*> take_all(rte_mempool* pool) {
    std::vector<rte_mbuf*> ms(kMbufs);
    EXPECT_EQ(rte_pktmbuf_alloc_bulk(pool, ms.data(), kMbufs), 0);
    return ms;
}

TEST(MbufPool, PadMakesAnMbufAPageLongOnSmallPagesOnly) {
    // rte_mbuf (128 bytes) + pad + data room = 4,096: with the mempool header, a page and a line.
    EXPECT_EQ(mbuf_pad_for_pages(2176, 4096), 1792);
    EXPECT_EQ(mbuf_pad_for_pages(2048, 4096), 1920);
    // Rounded up to the private area's alignment: one byte over a page is still packed.
    EXPECT_EQ(mbuf_pad_for_pages(2001, 4096), 1968);
    EXPECT_EQ(mbuf_pad_for_pages(2001, 4096) % RTE_MBUF_PRIV_ALIGN, 0u);
    // An mbuf a page long or longer (jumbo data rooms) is packed already.
    EXPECT_EQ(mbuf_pad_for_pages(3968, 4096), 0);
    EXPECT_EQ(mbuf_pad_for_pages(9216, 4096), 0);
    // On 2 MiB pages the pad would not fit a private area (and DPDK packs mbufs there anyway).
    EXPECT_EQ(mbuf_pad_for_pages(2176, size_t{2} << 20), 0);
}

TEST(MbufPool, WithoutHugepagesHeadersSpreadOverEveryLineOfAPage) {
    ASSERT_FALSE(rte_eal_has_hugepages());
    rte_mempool* plain = rte_pktmbuf_pool_create("plain", kMbufs, 0, 0, kDataRoom, SOCKET_ID_ANY);
    ASSERT_NE(plain, nullptr) << rte_strerror(rte_errno);
    rte_mempool* ours = create_mbuf_pool("ours", kMbufs, 0, kDataRoom, SOCKET_ID_ANY);
    ASSERT_NE(ours, nullptr) << rte_strerror(rte_errno);

    // DPDK's own layout: a page per mbuf, every header at the same offset.
    auto plain_mbufs = take_all(plain);
    EXPECT_EQ(header_lines_in_page(plain_mbufs).size(), 1u);
    // egwd's: all 64 lines of a page.
    auto our_mbufs = take_all(ours);
    EXPECT_EQ(header_lines_in_page(our_mbufs).size(), 64u);
    EXPECT_EQ(rte_pktmbuf_priv_size(ours), 1792);
    EXPECT_EQ(rte_pktmbuf_data_room_size(ours), kDataRoom);

    // Each buffer is its own: filling every data room whole leaves every other mbuf's header
    // and data as they were.
    for (unsigned i = 0; i < kMbufs; ++i)
        std::memset(our_mbufs[i]->buf_addr, static_cast<int>(i & 0xff), our_mbufs[i]->buf_len);
    for (unsigned i = 0; i < kMbufs; ++i) {
        rte_mbuf* m = our_mbufs[i];
        EXPECT_EQ(m->pool, ours);
        EXPECT_EQ(rte_mbuf_refcnt_read(m), 1);
        EXPECT_EQ(m->buf_len, kDataRoom);
        EXPECT_EQ(m->buf_addr, reinterpret_cast<uint8_t*>(m) + sizeof(rte_mbuf) + 1792);
        auto* data = static_cast<const uint8_t*>(m->buf_addr);
        EXPECT_EQ(data[0], i & 0xff);
        EXPECT_EQ(data[kDataRoom - 1], i & 0xff);
    }
    rte_pktmbuf_free_bulk(plain_mbufs.data(), kMbufs);
    rte_pktmbuf_free_bulk(our_mbufs.data(), kMbufs);
    EXPECT_EQ(rte_mempool_avail_count(ours), kMbufs);
    rte_mempool_free(plain);
    rte_mempool_free(ours);
}

}  // namespace

int main(int argc, char** argv) {
    return egw::test::run_with_eal(argc, argv, "mbuf-pool", 64);
}
