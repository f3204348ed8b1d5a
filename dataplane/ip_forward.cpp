// SPDX-License-Identifier: Apache-2.0
//
// Stage ip_forward: packets forwarded untranslated (cluster destinations, the default action
// `route`, the way back of such flows, and ingress to a served ingress IP toward its next hop,
// ingress.h). One forwarding body per family for all of them: the TTL rule (ip_forward.h; an
// expired packet is answered with Time Exceeded), the next hop (a route in the packet's table, or
// the configured ingress next hop), the egress port's MTU (mtu.h: fragments at output, or the
// gateway's own Fragmentation Needed for a DF datagram), and on to output. IPv6 the same body
// (family.h): the hop limit, the routes of the VRF (Ip6Map, longest prefix), Packet Too Big
// instead of fragments, a 128-bit next hop; link-local and multicast destinations never leave.
#include <rte_branch_prediction.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "dataplane/family.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

template <class F>
void forward(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    typename F::Header* ip = F::header(pk);
    if (F::unforwardable(b, i, ip)) return;
    if (unlikely(F::hop_expires(ip))) {
        reply_icmp_error(b, i, F::kTimeExceeded, DropReason::ttl_exceeded);
        return;
    }
    uint16_t port;
    typename F::HopAddress next_hop;
    uint64_t* forwarded;
    if (unlikely(pk.via_ingress)) {
        const typename F::NextHopEntry& nh = F::ingress_next_hop(p);
        port = nh.port;
        next_hop = F::ingress_gateway(nh);
        forwarded = &w.counters.ingress_in;
    } else {
        const typename F::NextHopEntry* nh = F::route(p, pk.vrf, ip);
        if (unlikely(!nh)) {
            reply_icmp_error(b, i, F::kNoRoute, DropReason::no_route);
            return;
        }
        port = nh->port;
        next_hop = F::next_hop(*nh, ip);
        forwarded = &w.counters.routed;
    }
    if (F::too_big(p, port, b.m[i], ip)) {
        F::refuse_too_big(p, b, i, port);
        return;
    }
    F::decrement_hops(ip);
    count(*forwarded);
    pk.neighbor_slot = F::kNoNeighbor;
    b.to_output(i, port, next_hop, &pk.neighbor_slot);
}

}  // namespace

void stage_ip_forward(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::ip_forward), [&](unsigned i) {
        if (b.pkt[i].v6)
            forward<Ipv6>(w, p, b, i);
        else
            forward<Ipv4>(w, p, b, i);
    });
}

}  // namespace egw::dp
