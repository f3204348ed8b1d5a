// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/buffers.h"

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

namespace egw::control {

BufferPlan plan_buffers(const std::string& where, const std::string& port, const std::string& device, unsigned mtu,
                        unsigned data_room, uint64_t rx_offload_capa, uint64_t tx_offload_capa) {
    BufferPlan plan;
    unsigned buffer = data_room > RTE_PKTMBUF_HEADROOM ? data_room - RTE_PKTMBUF_HEADROOM : 0;
    unsigned frame = mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN;
    std::string needed = std::to_string(frame + RTE_PKTMBUF_HEADROOM);
    if (frame > buffer) {
        if (!(rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER)) {
            plan.error = where + ": an MTU of " + std::to_string(mtu) + " needs mempool.data_room of at least " +
                         needed + " (port " + port + " cannot chain mbufs on receive), got " +
                         std::to_string(data_room);
            return plan;
        }
        plan.rx_scatter = true;
    }
    if (tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) {
        plan.tx_multi_segs = true;
        return plan;
    }
    if (frame > buffer) {
        plan.error = where + ": port " + port + " (" + device +
                     ") cannot transmit chained mbufs, so a frame of its MTU of " + std::to_string(mtu) +
                     " must fit one buffer: mempool.data_room of at least " + needed + ", got " +
                     std::to_string(data_room);
        return plan;
    }
    plan.single_segment_tx = true;
    return plan;
}

}  // namespace egw::control
