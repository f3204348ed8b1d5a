// SPDX-License-Identifier: Apache-2.0
//
// Header rewrites shared by the NAT stages: ports and identifiers with their checksum deltas
// (the session precomputes the deltas of its address and port change, RFC 1624), the quoted
// header of ICMP errors, and the TCP flags the session tracks.
#pragma once

#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "dataplane/burst.h"
#include "dataplane/checksum.h"

namespace egw::dp {

// The source (Source = true) or destination port of a TCP/UDP packet of kind `kind` whose
// transport header is at `l4`, or the identifier of an ICMP echo, with the L4 checksum.
template <bool Source>
inline void set_l4_port(Kind kind, uint8_t* l4, uint16_t port_be, uint16_t delta) {
    if (kind == Kind::tcp) {
        auto* th = reinterpret_cast<rte_tcp_hdr*>(l4);
        (Source ? th->src_port : th->dst_port) = port_be;
        th->cksum = csum_apply(th->cksum, delta);
    } else if (kind == Kind::udp) {
        auto* uh = reinterpret_cast<rte_udp_hdr*>(l4);
        (Source ? uh->src_port : uh->dst_port) = port_be;
        uh->dgram_cksum = csum_apply_udp(uh->dgram_cksum, delta);
    } else {
        auto* ih = reinterpret_cast<rte_icmp_hdr*>(l4);
        ih->icmp_ident = port_be;
        ih->icmp_cksum = csum_apply_icmp(ih->icmp_cksum, delta);
    }
}

template <bool Source>
inline void set_l4_port(const PacketMeta& pk, uint16_t port_be, uint16_t delta) {
    set_l4_port<Source>(pk.kind, pk.l4, port_be, delta);
}

// Rewrites a port of the quoted header of an ICMP error, and its checksum when the quote is long
// enough to hold it (RFC 792 only promises 8 bytes, which covers UDP's but not TCP's).
inline void set_inner_port(uint8_t proto, uint8_t* l4, uint32_t len, bool source, uint16_t port_be, uint16_t delta) {
    if (proto == IPPROTO_TCP) {
        auto* th = reinterpret_cast<rte_tcp_hdr*>(l4);
        (source ? th->src_port : th->dst_port) = port_be;
        if (len >= 18) th->cksum = csum_apply(th->cksum, delta);
    } else if (proto == IPPROTO_UDP) {
        auto* uh = reinterpret_cast<rte_udp_hdr*>(l4);
        (source ? uh->src_port : uh->dst_port) = port_be;
        uh->dgram_cksum = csum_apply_udp(uh->dgram_cksum, delta);
    } else {
        auto* ih = reinterpret_cast<rte_icmp_hdr*>(l4);
        ih->icmp_ident = port_be;
        ih->icmp_cksum = csum_apply_icmp(ih->icmp_cksum, delta);
    }
}

// The checksum delta of replacing IPv6 address `old` by `now` (eight 16-bit words), as the
// pseudo-header of every IPv6 transport checksum sees it.
inline uint32_t csum_delta_ip6(const uint8_t* old, const uint8_t* now) {
    uint32_t d = 0;
    for (unsigned k = 0; k < 16; k += 2) {
        uint16_t o, n;
        __builtin_memcpy(&o, old + k, 2);
        __builtin_memcpy(&n, now + k, 2);
        d += csum_delta16(o, n);
    }
    return d;
}

// The end every translated packet shares: the session is seen, its Service counts the packet,
// and the packet goes on toward the side it was translated for (`Out`: the remote side, else the
// pod). `Marked`: only marked for output (Burst::mark_output()), for a stage that settles its
// masks once at its end. `S`: Session or Session6, whose next hops say the family to output.
template <bool Out, bool Marked = false, class S>
inline void send_translated(Worker& w, Burst& b, unsigned i, S& s) {
    s.last_seen = w.now;
    ServiceCounters& sc = w.service_counters[s.service_id];
    count(Out ? sc.packets_out : sc.packets_in);
    count(Out ? sc.bytes_out : sc.bytes_in, b.m[i]->pkt_len);
    const uint16_t port = Out ? s.out_port : s.in_port;
    const auto& next_hop = Out ? s.out_next_hop : s.in_next_hop;
    uint32_t* neighbor = Out ? &s.out_neighbor : &s.in_neighbor;
    if constexpr (Marked)
        b.mark_output(i, port, next_hop, neighbor);
    else
        b.to_output(i, port, next_hop, neighbor);
}

template <class S>
inline void send_translated_out(Worker& w, Burst& b, unsigned i, S& s) {
    send_translated<true>(w, b, i, s);
}

template <class S>
inline void send_translated_in(Worker& w, Burst& b, unsigned i, S& s) {
    send_translated<false>(w, b, i, s);
}

}  // namespace egw::dp
