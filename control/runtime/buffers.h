// SPDX-License-Identifier: Apache-2.0
//
// Whether a port's MTU fits the pool's buffers, in each direction, decided from the configuration
// and the device's offload capabilities alone (no DPDK call), so that every refusal can be tested
// without a device that has it. Runtime::configure_port applies the plan.
#pragma once

#include <cstdint>
#include <string>

namespace egw::control {

struct BufferPlan {
    bool rx_scatter = false;         // frames of the MTU arrive chained: turn on the device's scatter
    bool tx_multi_segs = false;      // the device sends chains: turn on its multi-segment offload
    bool single_segment_tx = false;  // it does not: chains leave copied into one buffer
    std::string error;               // why the port cannot run with this pool ("": it can)
};

// The frame a port's MTU makes (Ethernet header and one VLAN tag) against one buffer of
// `data_room` bytes less DPDK's headroom. Receive: a frame longer than a buffer needs the
// device's scatter. Transmit: a device without multi-segment transmit gets every chain
// (fragments, reassembled datagrams) copied into one buffer, which must then hold a frame of the
// MTU. `where` names the field in errors ("egwd.json: $.ports[1].mtu"); `port` and `device` name
// the port.
BufferPlan plan_buffers(const std::string& where, const std::string& port, const std::string& device, unsigned mtu,
                        unsigned data_room, uint64_t rx_offload_capa, uint64_t tx_offload_capa);

}  // namespace egw::control
