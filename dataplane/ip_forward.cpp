// SPDX-License-Identifier: Apache-2.0
//
// Stage ip_forward: packets forwarded untranslated (cluster destinations, the default action
// `route`, the way back of such flows, and ingress to a served ingress IP toward its next hop,
// ingress.h). One forwarding body per family for all of them: the TTL rule (ip_forward.h; an
// expired packet is answered with Time Exceeded), the next hop (a route in the packet's table, or
// the configured ingress next hop), the egress port's MTU (mtu.h: fragments at output, or the
// gateway's own Fragmentation Needed for a DF datagram), and on to output. IPv6 the same way
// (forward6): the hop limit, the routes of the VRF (Ip6Map, longest prefix), Packet Too Big
// instead of fragments, a 128-bit next hop; link-local and multicast destinations never leave.
#include <rte_branch_prediction.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "dataplane/gateway_icmp_error.h"
#include "dataplane/ip_forward.h"
#include "dataplane/ipv6.h"
#include "dataplane/mtu.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

void forward6(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    rte_ipv6_hdr* ip6 = pk.ip6;
    const uint8_t* dst = ip6->dst_addr;
    // Input filters these already; whatever sends a packet here, they never leave (RFC 4291 2.5.6).
    if (unlikely(ip6_is_multicast(dst))) {
        b.drop(i, DropReason::multicast);
        return;
    }
    if (unlikely(ip6_is_link_local(dst) || ip6_is_link_local(ip6->src_addr))) {
        b.drop(i, DropReason::link_local);
        return;
    }
    if (unlikely(hop_limit_expires(ip6))) {
        reply_icmp_error(b, i, IcmpError::time_exceeded6, DropReason::ttl_exceeded);
        return;
    }
    uint16_t port;
    const uint8_t* next_hop;
    uint64_t* forwarded;
    if (unlikely(pk.via_ingress)) {
        port = p.ingress_next_hop6.port;
        next_hop = p.ingress_next_hop6.gateway.b;
        forwarded = &w.counters.ingress_in;
    } else {
        const NextHop6* nh = p.lookup_route6(pk.vrf, dst);
        if (unlikely(!nh)) {
            reply_icmp_error(b, i, IcmpError::no_route6, DropReason::no_route);
            return;
        }
        port = nh->port;
        next_hop = nh->on_link ? dst : nh->gateway.b;
        forwarded = &w.counters.routed;
    }
    if (too_big_for6(p, port, b.m[i], ip6)) {
        refuse_too_big6(p, b, i, port);
        return;
    }
    --ip6->hop_limits;
    count(*forwarded);
    pk.neighbor_slot = NeighborTable6::kNone;
    b.to_output6(i, port, next_hop, &pk.neighbor_slot);
}

void forward4(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    if (unlikely(ttl_expires(pk.ip))) {
        reply_icmp_error(b, i, IcmpError::time_exceeded, DropReason::ttl_exceeded);
        return;
    }
    uint16_t port;
    uint32_t next_hop;
    uint64_t* forwarded;
    if (unlikely(pk.via_ingress)) {
        port = p.ingress_next_hop.port;
        next_hop = p.ingress_next_hop.gateway;
        forwarded = &w.counters.ingress_in;
    } else {
        uint32_t dst = rte_be_to_cpu_32(pk.ip->dst_addr);
        const NextHop* nh = p.lookup_route(pk.vrf, dst);
        if (unlikely(!nh)) {
            reply_icmp_error(b, i, IcmpError::net_unreachable, DropReason::no_route);
            return;
        }
        port = nh->port;
        next_hop = nh->gateway ? nh->gateway : dst;
        forwarded = &w.counters.routed;
    }
    if (too_big_for(p, port, pk.ip)) {
        refuse_too_big(p, b, i, port);
        return;
    }
    pk.ip->hdr_checksum = csum_apply(pk.ip->hdr_checksum, ttl_decrement(pk.ip));
    count(*forwarded);
    pk.neighbor_slot = NeighborTable::kNone;
    b.to_output(i, port, next_hop, &pk.neighbor_slot);
}

}  // namespace

void stage_ip_forward(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::ip_forward), [&](unsigned i) {
        if (b.pkt[i].v6)
            forward6(w, p, b, i);
        else
            forward4(w, p, b, i);
    });
}

}  // namespace egw::dp
