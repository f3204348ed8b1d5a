// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/vlans.h"

namespace egw::control {

std::string assign_vlan_ports(const config::Config& cfg, std::vector<uint16_t>& ids, dp::VlanPorts& vlans) {
    ids.resize(cfg.ports.size());
    uint32_t taken = 0;
    for (size_t i = 0; i < cfg.ports.size(); ++i)
        if (!cfg.ports[i].is_vlan() && ids[i] < dp::kMaxPorts) taken |= 1u << ids[i];
    for (size_t i = 0; i < cfg.ports.size(); ++i) {
        const config::PortConfig& pc = cfg.ports[i];
        if (!pc.is_vlan()) continue;
        uint16_t id = 0;
        while (id < dp::kMaxPorts && (taken >> id & 1))
            ++id;
        if (id == dp::kMaxPorts)
            return "port " + pc.name + ": no logical port id left for the VLAN (at most " +
                   std::to_string(dp::kMaxPorts) + " ports and VLANs, with DPDK port ids below that)";
        const config::PortConfig* parent = cfg.find_port(pc.parent);
        if (!parent || parent->is_vlan())
            return "port " + pc.name + ": parent " + pc.parent + " is not a port with a device";
        const uint16_t device = ids[static_cast<size_t>(parent - cfg.ports.data())];
        if (!vlans.add(device, static_cast<uint16_t>(pc.vlan), id))
            return "port " + pc.name + ": VLAN " + std::to_string(pc.vlan) + " of " + pc.parent + " cannot be added";
        taken |= 1u << id;
        ids[i] = id;
    }
    return "";
}

}  // namespace egw::control
