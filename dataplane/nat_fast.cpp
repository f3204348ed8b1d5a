// SPDX-License-Identifier: Apache-2.0
//
// Stages nat_lookup and nat_fast: one bulk session lookup per direction for the whole burst,
// then the packets whose session was found are revalidated against the current policy and
// rewritten with the session's precomputed checksum deltas. A hit that no longer holds goes to
// the slow path untouched, which closes its session in packet order.
#include <rte_branch_prediction.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "dataplane/icmp_reply.h"
#include "dataplane/ip_forward.h"
#include "dataplane/mtu.h"
#include "dataplane/nat_rewrite.h"
#include "dataplane/nat_session.h"
#include "dataplane/stages.h"
#include "dataplane/tcp_track.h"

namespace egw::dp {

void stage_nat_lookup(Worker& w, Burst& b) {
    const FlowKey* in_keys[kBurst];
    const FlowKey* out_keys[kBurst];
    unsigned in_pos[kBurst], out_pos[kBurst];
    uint32_t found[kBurst], hashes[kBurst];
    unsigned ni = 0, no = 0;
    for_each_packet(b.pending(Next::nat_lookup), [&](unsigned i) {
        const PacketMeta& pk = b.pkt[i];
        if (pk.dir == Dir::in2out) {
            in_pos[ni] = i;
            in_keys[ni++] = &pk.key;
        } else {
            out_pos[no] = i;
            out_keys[no++] = &pk.key;
        }
    });
    // Every packet of the step leaves it, so the masks are set once for the whole burst.
    uint32_t hits = 0;
    auto settle = [&](const unsigned* pos, unsigned n) {
        for (unsigned k = 0; k < n; ++k) {
            PacketMeta& pk = b.pkt[pos[k]];
            pk.session = found[k];
            pk.key_hash = hashes[k];
            bool hit = found[k] != SessionTable::kNone;
            // A TCP hit also reads and writes its sequence space (tcp_track.h).
            if (hit && pk.kind == Kind::tcp)
                w.sessions.prefetch_tcp(found[k]);
            pk.next = hit ? Next::nat_fast : Next::nat_slow;
            hits |= uint32_t{hit} << pos[k];
        }
    };
    if (ni) {
        w.sessions.lookup_inside(in_keys, ni, found, hashes);
        settle(in_pos, ni);
    }
    if (no) {
        w.sessions.lookup_outside(out_keys, no, found, hashes);
        settle(out_pos, no);
    }
    uint32_t looked = b.pending(Next::nat_lookup);
    b.waiting[static_cast<unsigned>(Next::nat_lookup)] = 0;
    b.waiting[static_cast<unsigned>(Next::nat_fast)] |= hits;
    b.waiting[static_cast<unsigned>(Next::nat_slow)] |= looked & ~hits;
    b.created_at_lookup = w.counters.sessions_created;
    b.closed_at_lookup = w.counters.sessions_closed;
}

namespace {

void translate_in2out(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, Session& s) {
    PacketMeta& pk = b.pkt[i];
    rte_ipv4_hdr* ip = pk.ip;
    if (unlikely(ttl_expires(ip))) {
        reply_icmp_error(b, i, IcmpError::time_exceeded, DropReason::ttl_exceeded);
        return;
    }
    if (too_big_for(p, s.out_port, ip)) {
        refuse_too_big(p, b, i, s.out_port);
        return;
    }
    if (pk.kind == Kind::tcp && unlikely(!track_tcp(s, w.sessions.tcp(pk.session), pk, true))) {
        b.drop(i, DropReason::tcp_rst_out_of_window);
        return;
    }
    ip->src_addr = s.nat_ip;
    ip->hdr_checksum = csum_apply(ip->hdr_checksum, uint32_t{s.l3_delta} + ttl_decrement(ip));
    set_l4_port<true>(pk, s.nat_port, s.l4_delta);
    send_translated_out(w, b, i, s);
}

void translate_out2in(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, Session& s) {
    PacketMeta& pk = b.pkt[i];
    rte_ipv4_hdr* ip = pk.ip;
    if (unlikely(ttl_expires(ip))) {
        reply_icmp_error(b, i, IcmpError::time_exceeded, DropReason::ttl_exceeded);
        return;
    }
    if (unlikely(s.in_port == kPortUnset)) {
        // Toward the pod in the default table, where the inside routes are: the Service's VRF
        // governs its endpoints' egress ("from <endpoint> lookup <table>"), and its own default
        // route would send the reply straight back out.
        uint32_t pod = rte_be_to_cpu_32(s.pod_ip);
        const NextHop* nh = p.lookup_route(kDefaultVrf, pod);
        if (unlikely(!nh)) {
            reply_icmp_error(b, i, IcmpError::net_unreachable, DropReason::no_route);
            return;
        }
        s.in_port = nh->port;
        s.in_next_hop = nh->gateway ? nh->gateway : pod;
        s.in_neighbor = NeighborTable::kNone;
    }
    if (too_big_for(p, s.in_port, ip)) {
        refuse_too_big(p, b, i, s.in_port);
        return;
    }
    if (pk.kind == Kind::tcp && unlikely(!track_tcp(s, w.sessions.tcp(pk.session), pk, false))) {
        b.drop(i, DropReason::tcp_rst_out_of_window);
        return;
    }
    ip->dst_addr = s.pod_ip;
    ip->hdr_checksum = csum_apply(ip->hdr_checksum, uint32_t{csum_delta_invert(s.l3_delta)} + ttl_decrement(ip));
    set_l4_port<false>(pk, s.pod_port, csum_delta_invert(s.l4_delta));
    send_translated_in(w, b, i, s);
}

// Inlined into the fast path's loop (a call per packet cost ~15 instructions of register saves);
// the slow path calls it through nat_translate().
__attribute__((always_inline)) inline void translate(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i,
                                                     Session& s) {
    PacketMeta& pk = b.pkt[i];
    if (pk.kind == Kind::icmp_error)
        b.set_next(i, Next::icmp_error);
    else if (pk.dir == Dir::in2out)
        translate_in2out(w, p, b, i, s);
    else
        translate_out2in(w, p, b, i, s);
}

}  // namespace

void nat_translate(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, Session& s) { translate(w, p, b, i, s); }

void stage_nat_fast(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::nat_fast), [&](unsigned i) {
        Session& s = w.sessions.at(b.pkt[i].session);
        if (likely(session_usable(p, s)))
            translate(w, p, b, i, s);
        else
            b.set_next(i, Next::nat_slow);
    });
}

}  // namespace egw::dp
