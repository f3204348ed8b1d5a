// SPDX-License-Identifier: Apache-2.0
//
// Frames held in chains of mbufs: a jumbo frame a NIC scattered over several buffers, a datagram
// reassembly put together from its fragments. Input moves the first kContiguous bytes of every
// chain into its first mbuf (pull_up), so every header a stage reads through a pointer is there;
// what lies beyond (the rest of a long ICMP message, Neighbor Discovery options) is read through
// these helpers or pulled up first, never through a pointer past the first segment's data
// (docs/architecture.md, "Chained buffers").
#pragma once

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>

#include "dataplane/checksum.h"

namespace egw::dp {

// How much of a chained frame input makes contiguous in its first mbuf: every header the stages
// read through pointers (an IPv6 header with 256 bytes of extension headers, an ICMPv6 error's
// quoted header behind it), and the part of an ICMP message an error of the gateway's own may
// quote (576 bytes, RFC 1812 4.3.2.3).
inline constexpr uint32_t kContiguous = sizeof(rte_ether_hdr) + 576;

// Moves the first `want` bytes of a chained frame into its first mbuf, taking them from the
// start of the next ones (a segment left empty leaves the chain). false when the first mbuf has
// no room for them. Pointers into the first segment's data stay valid: its data only grows.
inline bool pull_up(rte_mbuf* m, uint32_t want) {
    if (want > m->pkt_len) want = m->pkt_len;
    if (m->data_len >= want) return true;
    if (rte_pktmbuf_tailroom(m) < want - m->data_len) return false;
    auto* dst = rte_pktmbuf_mtod_offset(m, uint8_t*, m->data_len);
    while (m->data_len < want) {
        rte_mbuf* s = m->next;
        uint16_t k = static_cast<uint16_t>(RTE_MIN(uint32_t{s->data_len}, want - m->data_len));
        std::memcpy(dst, rte_pktmbuf_mtod(s, const uint8_t*), k);
        dst += k;
        m->data_len = static_cast<uint16_t>(m->data_len + k);
        s->data_off = static_cast<uint16_t>(s->data_off + k);
        s->data_len = static_cast<uint16_t>(s->data_len - k);
        if (s->data_len == 0) {
            m->next = s->next;
            --m->nb_segs;
            s->next = nullptr;
            s->nb_segs = 1;
            rte_pktmbuf_free_seg(s);
        }
    }
    return true;
}

// Cuts a frame, chained or not, to its first `len` bytes (len > 0): what follows an IP datagram
// (Ethernet padding, or any bytes a sender put past the datagram's length) may span several
// segments, and rte_pktmbuf_trim() only cuts within the last one.
inline void trim_frame(rte_mbuf* m, uint32_t len) {
    if (m->pkt_len <= len) return;
    m->pkt_len = len;
    rte_mbuf* s = m;
    uint32_t kept = 0;
    uint16_t segs = 1;
    while (kept + s->data_len < len) {
        kept += s->data_len;
        s = s->next;
        ++segs;
    }
    s->data_len = static_cast<uint16_t>(len - kept);
    if (s->next) {
        rte_pktmbuf_free(s->next);
        s->next = nullptr;
    }
    m->nb_segs = segs;
}

// The offset in the frame of `p`, a pointer into the first segment's data.
inline uint32_t frame_offset(const rte_mbuf* m, const void* p) {
    return static_cast<uint32_t>(static_cast<const uint8_t*>(p) - rte_pktmbuf_mtod(m, const uint8_t*));
}

// Whether `len` bytes at `p` (in the first segment) end within it.
inline bool in_first_segment(const rte_mbuf* m, const void* p, uint32_t len) {
    return frame_offset(m, p) + len <= m->data_len;
}

// The one's complement sum (not folded, added to `sum`) of the `len` bytes at frame offset `off`,
// across the segments of the chain; the caller has checked that the frame holds them. A segment
// that starts at an odd offset of the summed range has its words summed the other way round, so
// its folded sum is swapped back (RFC 1071 2(B)). DPDK's rte_raw_cksum_mbuf() swaps the unfolded
// sum truncated to 16 bits and loses its carries; this folds first.
inline uint32_t chain_sum(const rte_mbuf* m, uint32_t off, uint32_t len, uint32_t sum = 0) {
    while (off >= m->data_len) {
        off -= m->data_len;
        m = m->next;
    }
    uint32_t done = 0;
    while (done < len) {
        uint32_t here = RTE_MIN(uint32_t{m->data_len} - off, len - done);
        uint16_t part = csum_fold(csum_partial(rte_pktmbuf_mtod_offset(m, const uint8_t*, off), here));
        sum += (done & 1) ? rte_bswap16(part) : part;
        done += here;
        off = 0;
        m = m->next;
    }
    return sum;
}

}  // namespace egw::dp
