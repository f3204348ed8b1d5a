// SPDX-License-Identifier: Apache-2.0
//
// What the NAT stages share for IPv6 (NAPT66): the route toward a pod. The classification of a
// new flow, with the gateway's own ICMPv6 errors it asks for, is classify.h's; the hop-limit and
// MTU rules are forwarding's (ip_forward.h, mtu.h); the rewrite itself is in nat_fast.cpp
// (packets) and nat_icmp_error.cpp (ICMPv6 errors), sessions are made in nat_slow.cpp.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_ip.h>

#include "dataplane/burst.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/ip_forward.h"
#include "dataplane/mtu.h"

namespace egw::dp {

// Fills a session's way back to its pod, on its first reply: in the default table, where the
// inside routes are (as for IPv4, nat_fast.cpp). False when there is no route.
inline bool route_to_pod(const PolicySnapshot& p, Session6& s) {
    const NextHop6* nh = p.lookup_route6(kDefaultVrf, s.pod_ip.b);
    if (unlikely(!nh)) return false;
    s.in_port = nh->port;
    s.in_next_hop = nh->on_link ? s.pod_ip : nh->gateway;
    s.in_neighbor = NeighborTable6::kNone;
    return true;
}

}  // namespace egw::dp
