// SPDX-License-Identifier: Apache-2.0
//
// Stage ip_forward: packets forwarded untranslated (cluster destinations, the default action
// `route`, and the way back of such flows): the TTL rule (ip_forward.h; an expired packet is
// answered with Time Exceeded), a route in the packet's table, and on to output.
#include <rte_branch_prediction.h>
#include <rte_ip.h>

#include "dataplane/icmp_reply.h"
#include "dataplane/ip_forward.h"
#include "dataplane/mtu.h"
#include "dataplane/stages.h"

namespace egw::dp {

void stage_ip_forward(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::ip_forward), [&](unsigned i) {
        PacketMeta& pk = b.pkt[i];
        if (unlikely(ttl_expires(pk.ip))) {
            reply_icmp_error(b, i, IcmpError::time_exceeded, DropReason::ttl_exceeded);
            return;
        }
        uint32_t dst = rte_be_to_cpu_32(pk.ip->dst_addr);
        const NextHop* nh = p.lookup_route(pk.vrf, dst);
        if (unlikely(!nh)) {
            reply_icmp_error(b, i, IcmpError::net_unreachable, DropReason::no_route);
            return;
        }
        if (too_big_for(p, nh->port, pk.ip)) {
            refuse_too_big(p, b, i, nh->port);
            return;
        }
        pk.ip->hdr_checksum = csum_apply(pk.ip->hdr_checksum, ttl_decrement(pk.ip));
        count(w.counters.routed);
        pk.neighbor_slot = NeighborTable::kNone;
        b.to_output(i, nh->port, nh->gateway ? nh->gateway : dst, &pk.neighbor_slot);
    });
}

}  // namespace egw::dp
