// SPDX-License-Identifier: Apache-2.0
//
// TCP tracking of a session: the state that picks its timeout (session_timeout()), and the
// sequence numbers each side has sent, against which an RST is checked before it is honoured.
// docs/architecture.md ("TCP tracking") draws the state machine.
//
// State (Session::tcp_seen): which sides have sent a segment, which have sent a FIN, and closing
// (both FINs, or an RST that was honoured). Sequence space (TcpWindow, beside the session): per
// side, the sequence number just past the last it sent, the largest window it offered and its
// window scale. An RST is honoured when its sequence number lies within the receiver's window
// of where its sender has got to, as the endpoint itself would check it (RFC 793 3.4, RFC 5961
// 3.2); one from a side that has sent nothing yet must acknowledge exactly what the other side
// sent (the answer to a SYN). Any other RST would be ignored by the endpoint too: it is dropped
// and counted (tcp_rst_out_of_window), so a blind one from outside neither tears the session
// down nor reaches the pod.
#pragma once

#include <rte_byteorder.h>
#include <rte_tcp.h>

#include "dataplane/burst.h"

namespace egw::dp {

inline bool seq_after(uint32_t a, uint32_t b) {
    return static_cast<int32_t>(a - b) > 0;
}

// The window scale a SYN offers (RFC 7323 2.2), 0 when it offers none. Options are read within
// the header, whose length the input stage checked.
inline uint8_t tcp_syn_wscale(const rte_tcp_hdr* th) {
    const uint8_t* o = reinterpret_cast<const uint8_t*>(th) + sizeof(rte_tcp_hdr);
    const uint8_t* end = reinterpret_cast<const uint8_t*>(th) + (th->data_off >> 4) * 4u;
    while (o < end) {
        if (*o == 0) break;
        if (*o == 1) {
            ++o;
            continue;
        }
        if (end - o < 2 || o[1] < 2 || o[1] > end - o) break;
        if (o[0] == 3 && o[1] == 3) return o[2] > 14 ? 14 : o[2];
        o += o[1];
    }
    return 0;
}

// The receive window side `side` has offered, as wide as it may be: its largest window field
// outside SYNs (the most a SYN may carry until then), scaled by what its SYN offered (the most a
// scale may be when its SYN was not seen).
inline uint32_t tcp_window_of(const TcpWindow& t, unsigned side) {
    uint32_t w = t.max_win[side] ? t.max_win[side] : 0xffff;
    return w << (t.wscale[side] == TcpWindow::kScaleUnknown ? 14 : t.wscale[side]);
}

// Whether an RST from `side` is one its peer would accept.
inline bool tcp_rst_acceptable(const TcpWindow& t, const rte_tcp_hdr* th, unsigned side) {
    unsigned peer = side ^ 1;
    if (!(t.known & (1u << side))) {
        // Nothing seen from this side: only the refusal of what the peer sent (RFC 793: an RST
        // in SYN-SENT is acceptable when it acknowledges the SYN).
        return (th->tcp_flags & RTE_TCP_ACK_FLAG) && (t.known & (1u << peer)) &&
               rte_be_to_cpu_32(th->recv_ack) == t.end[peer];
    }
    uint32_t win = tcp_window_of(t, peer);
    uint32_t d = rte_be_to_cpu_32(th->sent_seq) - t.end[side] + win;
    return d <= 2 * win;  // |seq - end| <= win; win < 2^30
}

// Tracks one segment of a session from the inside (pod) or outside. Returns false for an RST
// that is not honoured: the caller drops the segment.
template <class S>  // Session or Session6
inline bool track_tcp(S& s, TcpWindow& t, const PacketMeta& pk, bool from_inside) {
    auto* th = reinterpret_cast<const rte_tcp_hdr*>(pk.l4);
    uint8_t f = th->tcp_flags;
    unsigned side = from_inside ? 0 : 1;
    if (f & RTE_TCP_RST_FLAG) {
        if (!tcp_rst_acceptable(t, th, side)) return false;
        s.tcp_seen |= kTcpClosing;
        return true;
    }
    if ((f & RTE_TCP_SYN_FLAG) && !(f & RTE_TCP_ACK_FLAG) && from_inside) {
        // A new SYN from the pod starts the session over (its port reused after a close).
        s.tcp_seen = 0;
        t = TcpWindow{};
    }
    uint32_t hdr = (th->data_off >> 4) * 4u;
    uint32_t end =
        rte_be_to_cpu_32(th->sent_seq) + (pk.l4_len - hdr) + !!(f & RTE_TCP_SYN_FLAG) + !!(f & RTE_TCP_FIN_FLAG);
    if (!(t.known & (1u << side)) || seq_after(end, t.end[side])) {
        t.end[side] = end;
        t.known |= static_cast<uint8_t>(1u << side);
    }
    // What this side acknowledges is where the peer has got to, when the peer has not been seen
    // (a session opened mid-stream).
    unsigned peer = side ^ 1;
    if ((f & RTE_TCP_ACK_FLAG) && !(t.known & (1u << peer))) {
        t.end[peer] = rte_be_to_cpu_32(th->recv_ack);
        t.known |= static_cast<uint8_t>(1u << peer);
    }
    if (f & RTE_TCP_SYN_FLAG) {
        t.wscale[side] = tcp_syn_wscale(th);
    } else {
        uint16_t win = rte_be_to_cpu_16(th->rx_win);
        if (win > t.max_win[side]) t.max_win[side] = win;
    }
    s.tcp_seen |= from_inside ? kTcpSeenInside : kTcpSeenOutside;
    if (f & RTE_TCP_FIN_FLAG) s.tcp_seen |= from_inside ? kTcpFinInside : kTcpFinOutside;
    if ((s.tcp_seen & (kTcpFinInside | kTcpFinOutside)) == (kTcpFinInside | kTcpFinOutside)) s.tcp_seen |= kTcpClosing;
    return true;
}

}  // namespace egw::dp
