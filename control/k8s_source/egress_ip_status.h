// SPDX-License-Identifier: Apache-2.0
//
// The leader's write of an EgressIP's status.items (docs/kubernetes.md, "EgressIP assignment").
// Upstream's EgressIP has no status subresource, so status is written with the object: a JSON
// merge patch of the EgressIP itself that replaces status.items whole and touches nothing else,
// conditional on the resourceVersion the assignment was made on.
#pragma once

#include <string>
#include <vector>

#include "control/k8s/writer.h"
#include "control/model/objects.h"

namespace egw::k8s_source {

// status.items as the API writes them: [{"node": ..., "egressIP": ...}].
nlohmann::json egress_ip_status_items_json(const std::vector<model::EgressIPStatusItem>& items);

// Writes `items` to the EgressIP `name`, as decided for the addresses `egress_ips` (its
// spec.egressIPs then) at `resource_version`. A 409 means the object changed since: it is read
// again (a fresh read, not the cache) and
//   - when spec.egressIPs is no longer `egress_ips`, nothing is written and the 409 is returned
//     (the assignment must be made again from the new spec);
//   - when status.items already says `items`, nothing is written (ok(), written = false);
//   - otherwise the write is made again on the new resourceVersion (three attempts in all).
// written is true when the last request wrote; 404 when the EgressIP is gone.
k8s::WriteResult write_egress_ip_status(k8s::Writer& writer, const std::string& name,
                                        const std::vector<net::IpAddr>& egress_ips,
                                        const std::vector<model::EgressIPStatusItem>& items,
                                        const std::string& resource_version);

}  // namespace egw::k8s_source
