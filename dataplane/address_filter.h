// SPDX-License-Identifier: Apache-2.0
//
// Addresses the gateway never translates, forwards or answers: multicast, limited and directed
// broadcast, and the martian ranges (RFC 1812 4.2.2.11 and 5.3.7, RFC 3927 2.7 for link-local).
// Addresses are host order.
#pragma once

#include <rte_branch_prediction.h>

#include <cstdint>

#include "dataplane/drop_reason.h"
#include "dataplane/ipv6.h"
#include "dataplane/tables/policy.h"

namespace egw::dp {

// 224.0.0.0/4
inline bool is_multicast(uint32_t a) {
    return (a >> 28) == 0xe;
}
// 255.255.255.255
inline bool is_limited_broadcast(uint32_t a) {
    return a == 0xffffffffu;
}
// 240.0.0.0/4, reserved (it holds the limited broadcast)
inline bool is_reserved_class_e(uint32_t a) {
    return (a >> 28) == 0xf;
}
// 0.0.0.0/8, "this network"
inline bool is_this_network(uint32_t a) {
    return (a >> 24) == 0;
}
// 127.0.0.0/8
inline bool is_loopback(uint32_t a) {
    return (a >> 24) == 127;
}
// 169.254.0.0/16
inline bool is_link_local(uint32_t a) {
    return (a >> 16) == 0xa9fe;
}

// The broadcast address of the subnet of one of the addresses of ports 0..n_ports-1 (a prefix of
// /30 or shorter has one; /31 and /32 do not).
// The snapshot lists them (PolicySnapshot::port_broadcasts), so this is a comparison per port
// address, and none for three addresses in four.
inline bool is_directed_broadcast(const PolicySnapshot& p, unsigned n_ports, uint32_t a) {
    if ((a & 3) != 3) return false;  // the host part of a broadcast address is all ones, and at least two bits long
    for (unsigned k = 0; k < p.n_port_broadcasts; ++k)
        if (p.port_broadcasts[k].addr == a && p.port_broadcasts[k].port < n_ports) return true;
    return false;
}

// Whether `a` names one host, as RFC 1812 4.3.2.7 asks of the source of a packet the gateway
// would answer with an ICMP error: not 0.0.0.0/8, 127.0.0.0/8, multicast, 240.0.0.0/4 (with the
// limited broadcast), nor a directed broadcast.
inline bool is_single_host(const PolicySnapshot& p, unsigned n_ports, uint32_t a) {
    return !is_this_network(a) && !is_loopback(a) && !is_multicast(a) && !is_reserved_class_e(a) &&
           !is_directed_broadcast(p, n_ports, a);
}

// First octets filter_addresses() may drop for, whatever the rest of the address: 0, 127, 169
// (169.254.0.0/16 link-local; the rest of 169/8 is not filtered), 224 and above.
struct FirstOctetTable {
    bool filtered[256];
    constexpr FirstOctetTable() : filtered{} {
        filtered[0] = filtered[127] = filtered[169] = true;
        for (unsigned o = 224; o < 256; ++o)
            filtered[o] = true;
    }
};
inline constexpr FirstOctetTable kFirstOctet{};

// Whether `a` (host order) certainly passes every address test: two table reads, its first
// octet against the martian ranges and its last against the last octets of the ports' directed
// broadcasts. An address either flags (one in 256 ends like a /24's broadcast) is judged exactly.
inline bool address_cleared(const PolicySnapshot& p, uint32_t a) {
    return !(kFirstOctet.filtered[a >> 24] | p.broadcast_last_octet[a & 0xff]);
}

// What input (or, for the packets its common path takes, nat_slow) drops before any stage may
// translate, forward or answer a packet, by reason: its destination first (a DHCP discover from
// 0.0.0.0 is a broadcast), then its source, then a unicast datagram that came in a link-layer
// broadcast or multicast frame (RFC 1812 5.3.4). DropReason::count when the packet goes on. The
// common packet costs four table reads.
inline DropReason filter_addresses(const PolicySnapshot& p, unsigned n_ports, uint32_t src, uint32_t dst,
                                   bool link_broadcast) {
    if (likely(address_cleared(p, dst) && address_cleared(p, src) && !link_broadcast)) return DropReason::count;
    uint32_t d8 = dst >> 24, s8 = src >> 24;
    if (unlikely(d8 >= 224))
        return d8 < 240                    ? DropReason::multicast
               : is_limited_broadcast(dst) ? DropReason::broadcast
                                           : DropReason::martian_destination;
    if (unlikely(d8 == 0 || d8 == 127)) return DropReason::martian_destination;
    if (unlikely(s8 == 0 || s8 == 127 || s8 >= 224)) return DropReason::martian_source;
    if (unlikely(is_link_local(dst) || is_link_local(src))) return DropReason::link_local;
    if (is_directed_broadcast(p, n_ports, dst)) return DropReason::directed_broadcast;
    if (is_directed_broadcast(p, n_ports, src)) return DropReason::martian_source;
    if (unlikely(link_broadcast)) return DropReason::link_broadcast;
    return DropReason::count;
}

// Whether filter_addresses() lets `a` (host order) pass as the source or as the destination of a
// unicast frame: the two reject the same addresses, for different reasons.
inline bool address_passes(const PolicySnapshot& p, unsigned n_ports, uint32_t a) {
    return filter_addresses(p, n_ports, a, a, false) == DropReason::count;
}

// Addresses an IPv6 router never forwards or answers (RFC 4291 2.5.2, 2.5.3, 2.5.5.2, 2.5.6; RFC
// 8200), judged like filter_addresses() for IPv4: destination, then source, then the frame.
// Neighbor Discovery does not come here (its multicast, link-local and unspecified addresses are
// the local stage's to check). `to_port` says the destination is one of the receiving port's own
// addresses: a link-local source or destination is then a neighbour talking to the gateway on its
// link (an echo to the port's link-local address), delivered, not forwarded.
inline DropReason filter_addresses6(const uint8_t* src, const uint8_t* dst, bool link_broadcast, bool to_port) {
    if (ip6_is_multicast(dst)) return DropReason::multicast;
    if (unlikely(ip6_is_unspecified(dst) || ip6_is_loopback(dst) || ip6_is_v4_mapped(dst)))
        return DropReason::martian_destination;
    if (unlikely(ip6_is_multicast(src) || ip6_is_unspecified(src) || ip6_is_loopback(src) || ip6_is_v4_mapped(src)))
        return DropReason::martian_source;
    if (unlikely((ip6_is_link_local(dst) || ip6_is_link_local(src)) && !to_port)) return DropReason::link_local;
    if (unlikely(link_broadcast)) return DropReason::link_broadcast;
    return DropReason::count;
}

// The same for a packet that arrived on `port` (a port of the snapshot): `to_port` from the
// port's own addresses.
inline DropReason filter_addresses6(const PolicySnapshot& p, uint16_t port, const uint8_t* src, const uint8_t* dst,
                                    bool link_broadcast) {
    bool link_local = ip6_is_link_local(dst) || ip6_is_link_local(src);
    return filter_addresses6(src, dst, link_broadcast, link_local && p.is_port_address6(port, dst));
}

// Whether filter_addresses6() lets `a` pass as the source or the destination of a unicast frame
// whatever port it came in on: the two reject the same addresses, and a link-local one passes
// only toward the receiving port's own addresses, which this does not count on (to_port false).
inline bool address6_passes(const uint8_t* a) {
    return filter_addresses6(a, a, false, false) == DropReason::count;
}

}  // namespace egw::dp
