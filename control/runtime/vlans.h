// SPDX-License-Identifier: Apache-2.0
//
// The logical ports of VLANs (dataplane/vlan.h): which id each sub-port gets and which device and
// VLAN id its frames carry. Shared by the runtime and the packet-test rig, so that both set the
// data plane up alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "dataplane/vlan.h"

namespace egw::control {

// `ids[i]` is the DPDK port id of cfg.ports[i] for each port with a device (its logical id); each
// VLAN gets the lowest id no port has, in the order of cfg.ports, and becomes a sub-port of its
// parent in `vlans`. Returns what did not fit, or "" when every VLAN did.
std::string assign_vlan_ports(const config::Config& cfg, std::vector<uint16_t>& ids, dp::VlanPorts& vlans);

}  // namespace egw::control
