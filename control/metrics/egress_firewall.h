// SPDX-License-Identifier: Apache-2.0
//
// The EgressFirewall metric families (docs/metrics.md, "EgressFirewall"): per namespace with a
// firewall in force, the flows it denied and allowed and its rule count. egwd registers them with
// Exporter::add_families() and hands a copy of the per-namespace counts taken under the firewall
// state's lock (control/firewall/firewall_state.h); the label is the namespace, one series per
// namespace that has an EgressFirewall named "default", at most kMaxFirewallNamespaceSeries of
// them (the rest summed under namespace="").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/metrics/exposition.h"

namespace egw::metrics {

struct FirewallNamespaceCounts {
    std::string namespace_;
    uint64_t denied = 0;
    uint64_t allowed = 0;
    uint64_t rules = 0;
};

inline constexpr size_t kMaxFirewallNamespaceSeries = 1000;

// `namespaces` sorted by namespace, as the firewall state gives them.
void write_egress_firewall(Writer& w, const std::vector<FirewallNamespaceCounts>& namespaces);

}  // namespace egw::metrics
