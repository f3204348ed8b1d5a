// SPDX-License-Identifier: Apache-2.0
//
// 802.1Q VLANs as sub-ports. A VLAN of a port is a logical port of its own (its own addresses,
// VRF, role, MTU, neighbours, transmit buffer and counters: everything the stages index by port)
// whose frames travel on its parent's DPDK device with a tag. Logical port ids of devices are
// their DPDK port ids; sub-ports take ids no configured device has.
//
// Input takes the tag off and makes m->port the sub-port before any stage looks at the frame, so
// every stage after it works on an untagged frame of that port; the one transmit place (output.cpp,
// send()) puts the tag back on a whole buffer at once and hands it to the parent's device. Set
// before the workers start; a change of VLANs needs a restart, as a change of ports does.
#pragma once

#include <cstdint>

#include "dataplane/tables/policy.h"

namespace egw::dp {

inline constexpr uint16_t kVlanEtherType = 0x8100;
inline constexpr uint16_t kVlanIdMask = 0x0fff;

struct VlanPorts {
    // Devices (bit = DPDK port id) that carry sub-ports: only their frames are looked at for a tag.
    static_assert(kMaxPorts <= 32, "a bit per port");
    uint32_t devices = 0;
    struct SubPort {
        uint16_t device;  // the parent's DPDK port id
        uint16_t vid;     // 1..4094
        uint16_t port;    // the sub-port's logical id
    };
    SubPort sub_ports[kMaxPorts]{};
    unsigned n_sub_ports = 0;
    // Per logical port: the DPDK port id its frames leave on, and the VLAN id they are tagged with
    // (0: untagged). A device is its own.
    uint16_t tx_device[kMaxPorts];
    uint16_t tx_vid[kMaxPorts]{};

    VlanPorts() {
        for (unsigned port = 0; port < kMaxPorts; ++port)
            tx_device[port] = static_cast<uint16_t>(port);
    }

    static constexpr uint16_t kNone = 0xffff;

    // The sub-port of `device` with VLAN id `vid`, or kNone.
    uint16_t find(uint16_t device, uint16_t vid) const {
        for (unsigned k = 0; k < n_sub_ports; ++k)
            if (sub_ports[k].device == device && sub_ports[k].vid == vid) return sub_ports[k].port;
        return kNone;
    }

    // Makes logical port `port` the VLAN `vid` of `device`; false when there is no room or the
    // pair is taken.
    bool add(uint16_t device, uint16_t vid, uint16_t port) {
        if (n_sub_ports == kMaxPorts || port >= kMaxPorts || device >= kMaxPorts || find(device, vid) != kNone)
            return false;
        sub_ports[n_sub_ports++] = {device, vid, port};
        devices |= 1u << device;
        tx_device[port] = device;
        tx_vid[port] = vid;
        return true;
    }
};

}  // namespace egw::dp
