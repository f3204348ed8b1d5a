// SPDX-License-Identifier: Apache-2.0
//
// What the NAT stages share for IPv6 (NAPT66): the gateway's own ICMPv6 errors as the NAT stages
// ask for them, and the route toward a pod. The hop-limit and MTU rules are forwarding's
// (ip_forward.h, mtu.h); the rewrite itself is in nat_fast.cpp (packets) and icmp_error.cpp
// (ICMPv6 errors), sessions are made in nat_slow.cpp.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_ip.h>

#include "dataplane/burst.h"
#include "dataplane/icmp_reply.h"
#include "dataplane/ip_forward.h"
#include "dataplane/mtu.h"

namespace egw::dp {

// Refuses IPv6 packet i with the ICMPv6 twin of the IPv4 error `e` the NAT stages' shared
// classification names (icmp_reply builds it, or drops the packet under `why` where none may be
// sent); an error with no ICMPv6 twin (protocol unreachable) is a drop under `why`.
inline void refuse6(Burst& b, unsigned i, IcmpError e, DropReason why) {
    switch (e) {
    case IcmpError::time_exceeded:
        reply_icmp_error(b, i, IcmpError::time_exceeded6, why);
        return;
    case IcmpError::net_unreachable:
        reply_icmp_error(b, i, IcmpError::no_route6, why);
        return;
    case IcmpError::port_unreachable:
        reply_icmp_error(b, i, IcmpError::port_unreachable6, why);
        return;
    default:
        b.drop(i, why);
        return;
    }
}

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
