// SPDX-License-Identifier: Apache-2.0
//
// What the EgressIP leader needs to know of every gateway node that only the gateway itself knows
// (docs/kubernetes.md, "EgressIP assignment"): the subnets of its outside ports and VLANs, and how
// many EgressIP addresses it may host. Each egwd publishes them as annotations of the liveness
// Lease it renews anyway, so the leader reads them with the liveness it already follows: a
// gateway that stops renewing loses its addresses and its facts at the same moment, and no other
// object (or verb in RBAC) is needed.
//
//   egw.io/outside-subnets      "10.1.0.0/24,2001:db8:1::/64": networks, canonical, sorted, each once
//   egw.io/egress-ip-capacity   "12"; absent = unlimited
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/ip.h"

namespace egw::k8s_source {

inline constexpr const char* kOutsideSubnetsAnnotation = "egw.io/outside-subnets";
inline constexpr const char* kEgressIPCapacityAnnotation = "egw.io/egress-ip-capacity";

struct GatewayFacts {
    std::vector<net::IpPrefix> subnets;  // networks (host bits clear), sorted, each once
    std::optional<size_t> capacity;      // nullopt: unlimited
    bool operator==(const GatewayFacts&) const = default;
};

// The facts of a gateway from its outside interface prefixes (host bits as configured) and its
// configured capacity: the networks, sorted, each once.
GatewayFacts gateway_facts(const std::vector<net::IpPrefix>& outside_prefixes, std::optional<size_t> capacity);

// The annotations that say `facts` (the capacity's only when it is set).
std::map<std::string, std::string> encode_gateway_facts(const GatewayFacts& facts);

struct DecodedGatewayFacts {
    GatewayFacts facts;
    // Why the annotations are unusable ("" when they are fine), naming the annotation and what was
    // expected. A gateway whose facts are unusable hosts nothing: its subnets are left empty.
    std::string error;
};

// Reads the facts back from a Lease's annotations. Absent annotations are no error (an egwd that
// publishes nothing, an older one, has no outside subnet to offer).
DecodedGatewayFacts decode_gateway_facts(const std::map<std::string, std::string>& annotations);

}  // namespace egw::k8s_source
