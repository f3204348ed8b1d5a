// SPDX-License-Identifier: Apache-2.0
//
// The egress MTU rule, in one place. A datagram larger than its egress port's `mtu` leaves in
// fragments (output.cpp cuts them with rte_ip_frag), unless it says Don't Fragment: then the
// stage that chose the port refuses it before rewriting anything, with the gateway's own ICMP
// Fragmentation Needed (gateway_icmp_error.h), which quotes the packet as its sender sent it. Output checks again for
// every frame it hands to a driver, so no frame longer than the port's MTU ever reaches one.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_ip.h>

#include "dataplane/burst.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/reassembly.h"

namespace egw::dp {

// The IPv4 datagram `ip` may not leave `port` as it is, nor in fragments.
inline bool too_big_for(const PolicySnapshot& p, uint16_t port, const rte_ipv4_hdr* ip) {
    uint16_t total = rte_be_to_cpu_16(ip->total_length);
    return unlikely(total > p.smallest_mtu) && total > p.ports[port].mtu &&
           (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG));
}

// The IPv6 packet `ip6` (of mbuf `m`) may not leave `port` as it is, and IPv6 is never fragmented
// by a router (RFC 8200 5): answered with Packet Too Big instead. A datagram the gateway put
// together from fragments (reassembly.h) leaves in fragments again, no larger than the largest it
// came in: too big only when that fragment would not pass the port, as Linux judges one that
// nf_defrag_ipv6 put together.
inline bool too_big_for6(const PolicySnapshot& p, uint16_t port, const rte_mbuf* m, const rte_ipv6_hdr* ip6) {
    uint32_t total = sizeof(rte_ipv6_hdr) + rte_be_to_cpu_16(ip6->payload_len);
    if (likely(total <= p.smallest_mtu) || total <= p.ports[port].mtu) return false;
    uint16_t fragment = reassembled6_fragment_size(m);
    return fragment == 0 || fragment > p.ports[port].mtu;
}

// Refuses IPv6 packet i, too big for `port`: answered with Packet Too Big carrying the port's MTU
// (RFC 4443 3.2), quoting the packet as it arrived; counted as frag_needed when not sent.
inline void refuse_too_big6(const PolicySnapshot& p, Burst& b, unsigned i, uint16_t port) {
    reply_icmp_error(b, i, IcmpError::packet_too_big, DropReason::frag_needed, p.ports[port].mtu);
}

// Refuses packet i, too big for `port` with DF set: answered with Fragmentation Needed carrying
// the port's MTU (RFC 1191), quoting the packet as it arrived; counted as frag_needed when the
// answer is not sent (rate limit, RFC 1812's never-cases).
inline void refuse_too_big(const PolicySnapshot& p, Burst& b, unsigned i, uint16_t port) {
    reply_icmp_error(b, i, IcmpError::fragmentation_needed, DropReason::frag_needed, p.ports[port].mtu);
}

}  // namespace egw::dp
