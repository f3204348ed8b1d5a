// SPDX-License-Identifier: Apache-2.0
//
// Stage icmp_error: an ICMP error (unreachable, time exceeded, parameter problem, source quench;
// ICMPv6 destination unreachable, packet too big, time exceeded, parameter problem) quotes the
// packet it reports on; that quoted packet's tuple found the session (input.cpp
// builds the key from it). Both the outer header and the quoted one are translated.
//
// The ICMP checksum covers the whole message, which may be long (an error may quote a whole
// datagram) and held in a chain of mbufs (a reassembled error, a scattered jumbo frame): it is
// verified once over the chain (chain.h), and an error whose checksum is wrong is dropped
// (icmp_checksum) rather than given a valid one. It is then updated incrementally by what the
// translation changed: the quoted headers, which input made contiguous in the first mbuf, and for
// ICMPv6 the outer address its pseudo-header covers.
#include <rte_branch_prediction.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/chain.h"
#include "dataplane/ip_forward.h"
#include "dataplane/ipv6.h"
#include "dataplane/family.h"
#include "dataplane/nat_rewrite.h"
#include "dataplane/nat_session.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

// How much of the quote starting at `quote` a translation may change: the quoted IP header (and
// an IPv6 quote's Fragment header), and of the transport header the ports or identifier and the
// checksum, which end at byte 18 of a TCP header; less when less is quoted. At most 60 + 18 bytes
// of IPv4 or 48 + 18 of IPv6 behind the outer headers, all within what input makes contiguous.
inline uint32_t quote_span(const void* quote, const PacketMeta& pk) {
    return static_cast<uint32_t>(pk.inner_l4 - static_cast<const uint8_t*>(quote)) + RTE_MIN(pk.inner_l4_len, 18u);
}

// The one's complement sum of the quote's span, folded: taken before and after the rewrite, the
// two give the ICMP checksum's update (RFC 1624).
inline uint16_t span_sum(const void* quote, uint32_t span) {
    return csum_fold(csum_partial(quote, span));
}

// Whether the ICMP or ICMPv6 message's own checksum is right, summed over the whole message
// however many mbufs hold it; ICMPv6's over its pseudo-header too (RFC 4443 2.3).
template <class F>
bool icmp_checksum_ok(const rte_mbuf* m, const PacketMeta& pk) {
    uint32_t sum = 0;
    if constexpr (F::kIpv6) {
        const uint32_t pseudo[2] = {rte_cpu_to_be_32(pk.l4_len), rte_cpu_to_be_32(kIp6Icmp)};
        sum = csum_partial(pk.ip6->src_addr, 32);
        sum = csum_partial(pseudo, sizeof pseudo, sum);
    }
    return csum_fold(chain_sum(m, frame_offset(m, pk.l4), pk.l4_len, sum)) == 0xffff;
}

inline void update_icmp_checksum(const PacketMeta& pk, uint32_t delta) {
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(pk.l4);
    ih->icmp_cksum = csum_apply(ih->icmp_cksum, delta);
}

// A pod reports an error about a packet it received from the remote: the quoted packet's
// destination is the pod and must become the NAT address and port again. The error may come from
// a router in front of the pod (path MTU discovery), so the outer source is not necessarily the
// pod: its checksum delta is taken from the address being replaced. IPv6 the same way (family.h):
// its headers have no checksum; the quoted transport header's checksum covers the quoted
// pseudo-header, so the session's one delta (address and port) applies to it; the ICMPv6
// checksum covers the outer pseudo-header and the whole message: it changes by the outer address
// replaced and by the quote's span.
template <class F>
void error_in2out(Worker& w, Burst& b, unsigned i, typename F::SessionEntry& s) {
    PacketMeta& pk = b.pkt[i];
    const uint32_t outer_delta = F::error_outer_source(F::header(pk), s);
    typename F::Header* in = F::quote_header(pk);
    const uint32_t span = quote_span(in, pk);
    const uint16_t before = span_sum(in, span);
    F::quote_destination(in, s);
    set_inner_port(s.proto, pk.inner_l4, pk.inner_l4_len, false, s.nat_port, s.l4_delta);
    update_icmp_checksum(pk, outer_delta + csum_delta16(before, span_sum(in, span)));
    send_translated_out(w, b, i, s);
}

// An error about a packet we translated: its quoted source is the NAT address and port. It is
// matched by the quote, so its outer destination need not be the session's NAT address: that
// delta too is taken from the address being replaced.
template <class F>
void error_out2in(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, typename F::SessionEntry& s) {
    PacketMeta& pk = b.pkt[i];
    if (s.in_port == kPortUnset && !F::route_to_pod(p, s)) {
        b.drop(i, DropReason::no_route);
        return;
    }
    const uint32_t outer_delta = F::error_outer_destination(F::header(pk), s);
    typename F::Header* in = F::quote_header(pk);
    const uint32_t span = quote_span(in, pk);
    const uint16_t before = span_sum(in, span);
    F::quote_source(in, s);
    set_inner_port(s.proto, pk.inner_l4, pk.inner_l4_len, true, s.pod_port, csum_delta_invert(s.l4_delta));
    update_icmp_checksum(pk, outer_delta + csum_delta16(before, span_sum(in, span)));
    send_translated_in(w, b, i, s);
}

// One ICMP or ICMPv6 error about a session's packet: the hop rule and the message's checksum
// checked before anything is rewritten, then translated by the session it quotes.
template <class F>
void translate_error(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    if (unlikely(F::hop_expires(F::header(pk)))) {
        b.drop(i, DropReason::ttl_exceeded);
        return;
    }
    if (unlikely(!icmp_checksum_ok<F>(b.m[i], pk))) {
        b.drop(i, DropReason::icmp_checksum);
        return;
    }
    // A create in nat_slow may have reclaimed an expired session to make room, and this
    // error's session may be that one (an error does not refresh the session it quotes).
    if (unlikely(w.counters.sessions_closed != b.closed_at_lookup)) {
        pk.session = lookup_again(w, pk);
        if (pk.session == SessionTable::kNone) {
            b.drop(i, DropReason::no_session);
            return;
        }
    }
    typename F::SessionEntry& s = F::sessions(w).at(pk.session);
    if (pk.dir == Dir::in2out)
        error_in2out<F>(w, b, i, s);
    else
        error_out2in<F>(w, p, b, i, s);
}

}  // namespace

void stage_icmp_error(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::icmp_error), [&](unsigned i) {
        if (b.pkt[i].v6)
            translate_error<Ipv6>(w, p, b, i);
        else
            translate_error<Ipv4>(w, p, b, i);
    });
}

}  // namespace egw::dp
