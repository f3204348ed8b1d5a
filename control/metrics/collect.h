// SPDX-License-Identifier: Apache-2.0
//
// egwd's metric families and the code that fills them from a ControlView and Readings. Each
// section of collect.cpp declares its descriptors right above the loop that writes them; the
// list with meanings is docs/metrics.md.
#pragma once

#include <string>
#include <vector>

#include "control/metrics/exposition.h"
#include "control/metrics/state.h"

namespace egw::metrics {

// rte_eth_stats of one port plus its link state, read by the exporter (DPDK calls stay there).
struct PortReading {
    bool ok = false;  // rte_eth_stats_get succeeded
    bool link_up = false;
    uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0;
    uint64_t rx_missed = 0, rx_errors = 0, tx_errors = 0, rx_nombuf = 0;
    // egw's own, from the workers (control/runtime/tx_stall.h): frames the port's transmit
    // queues refused, stalls of those queues, and how many are stalled now.
    uint64_t tx_refused = 0, tx_stalls = 0, tx_stalled_queues = 0;
};

struct ProcessInfo {
    std::string version;       // egw's (meson project version)
    std::string dpdk_version;  // rte_version() without the "DPDK " prefix
    double start_unix = 0;     // when egwd started
    uint64_t tsc_hz = 0;
};

// A VLAN sub-port (dataplane/vlan.h): what the configuration says of it, and the tagged frames
// the workers took to it and sent for it (their parent's device counts them too).
struct VlanReading {
    std::string name, parent, role, vrf;
    unsigned vlan = 0;
    uint16_t id = 0;  // its logical port id
    uint64_t rx_packets = 0, tx_packets = 0, tx_refused = 0;
};

// egw_vlan_info and egw_vlan_packets_total, one series per VLAN (the families with no VLAN).
void write_vlans(Writer& w, const std::vector<VlanReading>& vlans);

// egw_egress_qos_rules and egw_egress_qos_pods, one series per namespace with an applied EgressQoS,
// and egw_egress_qos_ignored (the families with no EgressQoS).
void write_egress_qos(Writer& w, const std::vector<EgressQosEntry>& objects);

// Writes every family egwd itself exports. `ports` is parallel to view.ports.
void write_metrics(Writer& w, const ControlView& view, const Readings& r, const std::vector<PortReading>& ports,
                   const ProcessInfo& process);

}  // namespace egw::metrics
