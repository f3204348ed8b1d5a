// SPDX-License-Identifier: Apache-2.0
//
// Which gateway node hosts each address of each EgressIP (docs/kubernetes.md, "EgressIP
// assignment"), as a pure function of what the leader knows: the EgressIPs with the status.items
// they carry, and every node with its egress-assignable label, its liveness, the subnets of its
// outside ports (and VLANs) and its capacity.
//
// The rules, after OVN-Kubernetes' cluster manager:
//   - a node can host an address when it is live, labelled egress-assignable, has an outside
//     subnet that contains the address, has room under its capacity, and hosts no other address
//     of the same EgressIP;
//   - an address keeps the node its status.items names while that node can host it (sticky: a
//     node coming back or a new node moves nothing);
//   - the others go, in EgressIP name order then spec order, to the node that can host them with
//     the fewest addresses (ties: the node whose name sorts first);
//   - an address no node can host is reported with the reason, never guessed.
//
// It talks to nothing; the leader writes its result to status.items.
#pragma once

#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/ip.h"
#include "control/model/objects.h"

namespace egw::k8s_source {

// The label that makes a node a candidate, as upstream names it.
inline constexpr const char* kEgressAssignableLabel = "k8s.ovn.org/egress-assignable";

struct EgressIPNode {
    std::string name;
    bool assignable = false;                               // carries kEgressAssignableLabel
    bool live = false;                                     // its egwd renews its liveness Lease
    std::vector<net::IpPrefix> subnets;                    // of its outside ports and VLANs
    size_t capacity = std::numeric_limits<size_t>::max();  // addresses it may host at most
};

struct UnhostableEgressIP {
    std::string egress_ip;  // the object's name
    net::IpAddr ip;
    std::string reason;
    bool operator==(const UnhostableEgressIP&) const = default;
};

struct EgressIPAssignment {
    // Per EgressIP (every one given, by name): its status.items, in the order of spec.egressIPs,
    // without the addresses no node can host.
    std::map<std::string, std::vector<model::EgressIPStatusItem>> items;
    std::vector<UnhostableEgressIP> unhostable;  // in EgressIP name order, then spec order
    std::map<std::string, size_t> load;          // node -> addresses it hosts (nodes with none left out)
};

EgressIPAssignment assign_egress_ips(const std::map<std::string, model::EgressIP>& egress_ips,
                                     const std::vector<EgressIPNode>& nodes);

// One status write the leader owes: the items for `name`, decided on its spec.egressIPs and
// resourceVersion (write_egress_ip_status() in egress_ip_status.h takes exactly these).
struct EgressIPStatusWrite {
    std::string name;
    std::vector<net::IpAddr> egress_ips;
    std::vector<model::EgressIPStatusItem> items;
    std::string resource_version;
    bool operator==(const EgressIPStatusWrite&) const = default;
};

// The EgressIPs whose status.items differ from the assignment's, by name. The order of the items
// does not count: status that holds the same pairs in another order is not written again.
std::vector<EgressIPStatusWrite> status_writes(const std::map<std::string, model::EgressIP>& egress_ips,
                                               const EgressIPAssignment& assignment);

// Says each unhostable address once: update() returns the addresses that became unhostable (or
// whose reason changed) since the last call, and those that no longer are (hosted now, or gone).
class UnhostableReports {
public:
    struct Delta {
        std::vector<UnhostableEgressIP> reported;
        std::vector<UnhostableEgressIP> resolved;  // with the reason they had
    };
    Delta update(const std::vector<UnhostableEgressIP>& now);

private:
    std::map<std::pair<std::string, net::IpAddr>, std::string> current_;  // (EgressIP, address) -> reason
};

}  // namespace egw::k8s_source
