// SPDX-License-Identifier: Apache-2.0
//
// Stages nat_lookup and nat_fast: one bulk session lookup per direction for the whole burst,
// then the packets whose session was found are revalidated against the current policy and
// rewritten with the session's precomputed checksum deltas. A hit that no longer holds goes to
// the slow path untouched, which closes its session in packet order.
#include <rte_branch_prediction.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/family.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/nat_rewrite.h"
#include "dataplane/nat_session.h"
#include "dataplane/stages.h"
#include "dataplane/tcp_track.h"

namespace egw::dp {

void stage_nat_lookup(Worker& w, Burst& b) {
    // Input queued the keys by table and direction, hashed, their buckets found and prefetched.
    // Every packet of the step leaves it, so the masks are set once for the whole burst.
    uint32_t hits = 0;
    // Each packet's result as the table confirms it, while the later sessions are on their way.
    auto settle = [&](const auto& table, const auto& q) {
        return [&](unsigned k, uint32_t idx) {
            unsigned i = q.pos[k];
            PacketMeta& pk = b.pkt[i];
            pk.session = idx;
            bool hit = idx != SessionTable::kNone;
            // A TCP hit also reads and writes its sequence space (tcp_track.h).
            if (hit && pk.kind == Kind::tcp) table.prefetch_tcp(idx);
            pk.next = hit ? Next::nat_fast : Next::nat_slow;
            hits |= uint32_t{hit} << i;
        };
    };
    if (auto& q = b.lookup4[0]; q.n)
        w.sessions.probe_begun<true>(q.key, q.n, q.hash, q.home, q.cand, q.scanned, settle(w.sessions, q));
    if (auto& q = b.lookup4[1]; q.n)
        w.sessions.probe_begun<false>(q.key, q.n, q.hash, q.home, q.cand, q.scanned, settle(w.sessions, q));
    const uint32_t hits4 = hits;
    if (auto& q = b.lookup6[0]; unlikely(q.n))
        w.sessions6.probe_begun<true>(q.key, q.n, q.hash, q.home, q.cand, q.scanned, settle(w.sessions6, q));
    if (auto& q = b.lookup6[1]; unlikely(q.n))
        w.sessions6.probe_begun<false>(q.key, q.n, q.hash, q.home, q.cand, q.scanned, settle(w.sessions6, q));
    uint32_t looked = b.pending(Next::nat_lookup);
    b.waiting[static_cast<unsigned>(Next::nat_lookup)] = 0;
    b.waiting[static_cast<unsigned>(Next::nat_fast)] |= hits;
    b.fast6 = hits & ~hits4;
    b.waiting[static_cast<unsigned>(Next::nat_slow)] |= looked & ~hits;
    b.created_at_lookup = w.counters.sessions_created;
    b.closed_at_lookup = w.counters.sessions_closed;
}

namespace {

// One body for both families (family.h) and both ways (`Out`: from the pod toward the remote
// side, else back toward the pod): the hop rule, the way back to the pod on a session's first
// reply, the egress MTU, the TCP tracking, then the rewrite. `Marked`: a packet that leaves for
// output is only marked (Burst::mark_output()), for the fast path's loop, which moves its marked
// packets at its end.
template <class F, bool Out, bool Marked>
__attribute__((always_inline)) inline void translate_way(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i,
                                                         typename F::SessionEntry& s) {
    PacketMeta& pk = b.pkt[i];
    typename F::Header* ip = F::header(pk);
    if (unlikely(F::hop_expires(ip))) {
        reply_icmp_error(b, i, F::kTimeExceeded, DropReason::ttl_exceeded);
        return;
    }
    if constexpr (!Out) {
        if (unlikely(s.in_port == kPortUnset) && !F::route_to_pod(p, s)) {
            reply_icmp_error(b, i, F::kNoRoute, DropReason::no_route);
            return;
        }
    }
    const uint16_t egress = Out ? s.out_port : s.in_port;
    if (F::too_big(p, egress, b.m[i], ip)) {
        F::refuse_too_big(p, b, i, egress);
        return;
    }
    if (pk.kind == Kind::tcp && unlikely(!track_tcp(s, F::sessions(w).tcp(pk.session), pk, Out))) {
        b.drop(i, DropReason::tcp_rst_out_of_window);
        return;
    }
    // What the rewrite needs, read before its first store: a store into the packet may alias the
    // metadata and the session as the compiler sees it, which made it read them again after each.
    const Kind kind = pk.kind;
    uint8_t* const l4 = pk.l4;
    const uint16_t port = Out ? s.nat_port : s.pod_port;
    const uint16_t l4_delta = Out ? s.l4_delta : csum_delta_invert(s.l4_delta);
    if constexpr (Out)
        F::translate_source(ip, s);
    else
        F::translate_destination(ip, s);
    set_l4_port<Out>(kind, l4, port, l4_delta);
    send_translated<Out, Marked>(w, b, i, s);
}

// Inlined into the fast path's loop, with the two translations above (a call per packet costs
// ~15 instructions of register saves, and the compiler stopped inlining them on its own once the
// IPv6 translations sat beside them); the slow path calls it through nat_translate().
template <class F, bool Marked>
__attribute__((always_inline)) inline void translate(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i,
                                                     typename F::SessionEntry& s) {
    PacketMeta& pk = b.pkt[i];
    if (pk.kind == Kind::icmp_error)
        b.set_next(i, Next::icmp_error);
    else if (pk.dir == Dir::in2out)
        translate_way<F, true, Marked>(w, p, b, i, s);
    else
        translate_way<F, false, Marked>(w, p, b, i, s);
}

// The fast path's loop over the hits of one family: a hit of the current epoch is translated,
// one of an earlier epoch goes to the slow path. Returns the packets marked for output.
template <class F>
__attribute__((always_inline)) inline uint32_t translate_hits(Worker& w, const PolicySnapshot& p, Burst& b,
                                                              uint32_t hits) {
    uint32_t marked = 0;
    const uint32_t gen = static_cast<uint32_t>(p.generation);
    for_each_packet(hits, [&](unsigned i) {
        typename F::SessionEntry& s = F::sessions(w).at(b.pkt[i].session);
        if (likely(s.epoch == gen)) {
            translate<F, true>(w, p, b, i, s);
            marked |= uint32_t{b.pkt[i].next == Next::output} << i;
        } else {
            b.set_next(i, Next::nat_slow);
        }
    });
    return marked;
}

}  // namespace

void nat_translate(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, Session& s) {
    translate<Ipv4, false>(w, p, b, i, s);
}

void nat_translate(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, Session6& s) {
    translate<Ipv6, false>(w, p, b, i, s);
}

void stage_nat_fast(Worker& w, const PolicySnapshot& p, Burst& b) {
    // The hits translated toward output are marked and moved together at the end; every other
    // outcome moves its packet at once, as elsewhere.
    // Each family in a loop of its own: an IPv6 branch in the IPv4 loop cost every IPv4 hit 2-6
    // instructions (callgrind).
    // A hit of an earlier epoch goes to the slow path, which filters its addresses and checks
    // its policy and routes again (nat_session.h).
    const uint32_t pending = b.pending(Next::nat_fast);
    const uint32_t six = pending & b.fast6;
    uint32_t marked = translate_hits<Ipv4>(w, p, b, pending & ~six);
    marked |= translate_hits<Ipv6>(w, p, b, six);
    b.settle_marked(Next::nat_fast, marked);
}

}  // namespace egw::dp
