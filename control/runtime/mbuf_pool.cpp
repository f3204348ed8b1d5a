// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/mbuf_pool.h"

#include <rte_eal.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <limits>

namespace egw::control {

uint16_t mbuf_pad_for_pages(uint32_t data_room, size_t page_size) {
    size_t mbuf = sizeof(rte_mbuf) + data_room;
    if (mbuf >= page_size) return 0;
    // The mempool header before each object is one cache line, so the object is a page and a
    // line long when the mbuf itself is a page long.
    size_t pad = RTE_ALIGN_CEIL(page_size - mbuf, RTE_MBUF_PRIV_ALIGN);
    return pad > std::numeric_limits<uint16_t>::max() ? 0 : static_cast<uint16_t>(pad);
}

rte_mempool* create_mbuf_pool(const char* name, unsigned n, unsigned cache, uint16_t data_room, int socket) {
    // Without hugepages DPDK's memory is made of the system's pages.
    uint16_t pad =
        rte_eal_has_hugepages() ? 0 : mbuf_pad_for_pages(data_room, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
    return rte_pktmbuf_pool_create(name, n, cache, pad, data_room, socket);
}

}  // namespace egw::control
