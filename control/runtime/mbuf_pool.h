// SPDX-License-Identifier: Apache-2.0
//
// The packet-buffer pools, laid out so that mbuf headers do not all fall into the same few sets
// of the L1 data cache.
//
// On hugepages DPDK packs a pool's mbufs one after another (one of the default size every
// 2,368 bytes). Without them (--no-huge: the rig, the tests, a node without hugepages) the pages
// are 4 KiB and DPDK lets no object smaller than a page cross one, so each mbuf of the default
// size takes a page of its own and every header sits at the same offset in its page. The L1
// data cache picks a set by bits 6-11 of the address, the offset within the page: every mbuf
// header then competes for the same one or two sets (12 ways here), which a burst of 32
// overflows, and the headers the stages read in turn evict each other. An object longer than a
// page may cross pages, so DPDK packs those: padding each mbuf's private area until an object
// is one page and one cache line long puts each header one line further into its page than the
// one before, over every set. It costs 64 bytes per mbuf (1.6 %). docs/performance-log.md §1,
// 2026-11-30 06:00, has what it was worth.
#pragma once

#include <cstddef>
#include <cstdint>

struct rte_mempool;

namespace egw::control {

// The private-area size that makes a pool object (mempool header, rte_mbuf, private area,
// `data_room`) one page and one cache line long on pages of `page_size` bytes; 0 when an mbuf is
// as long as a page already (DPDK packs it) or the pad would not fit a private area.
uint16_t mbuf_pad_for_pages(uint32_t data_room, size_t page_size);

// A pool of `n` mbufs of `data_room` bytes as egwd makes it: rte_pktmbuf_pool_create(), with the
// padding above when DPDK runs without hugepages. nullptr with rte_errno set on failure.
rte_mempool* create_mbuf_pool(const char* name, unsigned n, unsigned cache, uint16_t data_room, int socket);

}  // namespace egw::control
