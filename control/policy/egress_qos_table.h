// SPDX-License-Identifier: Apache-2.0
//
// The data path's EgressQoS table (dataplane/tables/egress_qos.h) made from the selected EgressQoS
// objects and the pods the state source knows: each pod's rules in order, reduced to what its
// labels select, keyed by each of its addresses. Runs on the control thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "control/model/egress_qos.h"
#include "control/model/objects.h"
#include "dataplane/tables/egress_qos.h"

namespace egw::control {

// Pods on the host's network (their addresses are the node's) and pods that have finished
// (their addresses may already be another pod's) get no entry, nor do pods none of whose rules
// select them. A rule whose dstCIDR is of the other family is left out of an address's list.
dp::EgressQosTable build_egress_qos_table(const model::EgressQosSelection& selection,
                                          const std::map<std::string, model::Pod>& pods);

// Upstream's status strings; egw writes the first where it owns policy (the `files` source: the
// status file and `show egressqos`).
inline constexpr const char* kEgressQosApplied = "EgressQoS Rules applied";

// What the CLI and the status file say of one EgressQoS object.
struct EgressQosView {
    std::string key;                 // "namespace/name"
    std::string status;              // kEgressQosApplied, or "ignored: <why>"
    std::vector<std::string> rules;  // "dscp 46 to 192.0.2.0/24 pods app=voice", in order
    size_t pods = 0;                 // pods some rule of it selects (on the pod network, not finished)
};

// One view per object, applied and ignored alike, sorted by key.
std::vector<EgressQosView> egress_qos_views(const std::map<std::string, model::EgressQoS>& objects,
                                            const std::map<std::string, model::Pod>& pods);

}  // namespace egw::control
