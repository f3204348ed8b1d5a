// SPDX-License-Identifier: Apache-2.0
//
// The worker's reassembly table (reassembly.h). rte_ip_frag does the work: a hash table of
// datagrams keyed by (source, destination, identifier), IPv4 and IPv6 ones side by side, each holding up to
// RTE_LIBRTE_IP_FRAG_MAX_FRAG fragments in any order, the first one possibly last, put together
// by chaining the mbufs (no copy, no allocation) once they cover the datagram. Fragments it will
// not keep go to a "death row" that is freed and counted here right after each call.
#include "dataplane/reassembly.h"

#include <rte_branch_prediction.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_ip_frag.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_random.h>

#include "dataplane/worker.h"

namespace egw::dp {

const unsigned kMaxFragmentsPerDatagram = RTE_LIBRTE_IP_FRAG_MAX_FRAG;
uint64_t reassembled6_flag = 0;
int reassembled6_size_field = -1;

struct Reassembly {
    rte_ip_frag_tbl* table = nullptr;
    uint32_t max_fragments = RTE_LIBRTE_IP_FRAG_MAX_FRAG;
    uint32_t next_id6 = 0;  // reassembly_fragment_id6()
    rte_ip_frag_death_row death_row;
};

namespace {

// Datagrams per hash bucket (rte_ip_frag wants a power of two); one bucket per datagram allowed,
// so a full bucket, where a new datagram is refused although the table has room, is rare.
constexpr uint32_t kBucketEntries = 4;

// A lower limit of fragments per datagram than the table's own: each fragment's first mbuf is
// marked on the way in (its other segments cleared, whatever an earlier use left there); the
// marks left in the whole datagram count its fragments, as rte_ip_frag chains every fragment's
// mbufs behind the first one's.
constexpr uint32_t kFragmentMark = 0x66726167;

inline uint32_t& mark_of(const Worker& w, rte_mbuf* m) {
    return *RTE_MBUF_DYNFIELD(m, w.shared->next_hop_field, uint32_t*);
}

void mark_fragment(const Worker& w, rte_mbuf* m) {
    for (rte_mbuf* s = m->next; s; s = s->next)
        mark_of(w, s) = 0;
    mark_of(w, m) = kFragmentMark;
}

// The fragments a whole datagram came in; the marks are cleared.
uint32_t fragments_of(const Worker& w, rte_mbuf* d) {
    uint32_t n = 0;
    for (rte_mbuf* s = d; s; s = s->next)
        if (mark_of(w, s) == kFragmentMark) {
            ++n;
            mark_of(w, s) = 0;
        }
    return n;
}

void release(Worker& w, Reassembly& r, DropReason why) {
    if (r.death_row.cnt == 0) return;
    count(w.counters.drops[static_cast<unsigned>(why)], r.death_row.cnt);
    rte_ip_frag_free_death_row(&r.death_row, 0);
}

// A fragment refused before the table sees it.
rte_mbuf* refuse(Worker& w, rte_mbuf* m) {
    count(w.counters.drops[static_cast<unsigned>(DropReason::fragment)]);
    rte_pktmbuf_free(m);
    return nullptr;
}

inline uint16_t& size_of(rte_mbuf* m) {
    return *RTE_MBUF_DYNFIELD(m, reassembled6_size_field, uint16_t*);
}

// What both families do around the table: the marks for a lower max_fragments, the counting,
// the fragments refused at once or dropped with others. `add` hands `m` to the table.
template <typename Add>
rte_mbuf* add_fragment(Worker& w, rte_mbuf* m, Add add) {
    Reassembly& r = *w.reassembly;
    const bool limited = r.max_fragments < RTE_LIBRTE_IP_FRAG_MAX_FRAG && w.shared->next_hop_field >= 0;
    if (limited) mark_fragment(w, m);
    rte_mbuf* d = add(r);
    // A fragment refused at once (no payload, a bad offset) is on the death row itself: its one
    // outcome is that drop; only a fragment the table took counts as taken in.
    bool refused = false;
    for (uint32_t k = 0; k < r.death_row.cnt; ++k)
        refused |= r.death_row.row[k] == m;
    if (!refused) count(w.counters.fragments_in);
    release(w, r, DropReason::fragment);
    if (!d) return nullptr;
    count(w.counters.reassembled);
    if (limited && unlikely(fragments_of(w, d) > r.max_fragments)) {
        count(w.counters.drops[static_cast<unsigned>(DropReason::fragment)]);
        rte_pktmbuf_free(d);
        return nullptr;
    }
    return d;
}

}  // namespace

Reassembly* reassembly_create(uint32_t max_datagrams, uint32_t max_fragments, uint64_t timeout_cycles, int socket) {
    auto* r =
        static_cast<Reassembly*>(rte_zmalloc_socket("egw_reassembly", sizeof(Reassembly), RTE_CACHE_LINE_SIZE, socket));
    if (!r) return nullptr;
    if (reassembled6_size_field < 0) {
        static const rte_mbuf_dynfield size_desc = {"egw_reassembled6_size", sizeof(uint16_t), alignof(uint16_t), 0};
        static const rte_mbuf_dynflag flag_desc = {"egw_reassembled6", 0};
        int field = rte_mbuf_dynfield_register(&size_desc);
        int bit = field >= 0 ? rte_mbuf_dynflag_register(&flag_desc) : -1;
        if (bit >= 0) {
            reassembled6_size_field = field;
            reassembled6_flag = uint64_t{1} << bit;
        }
    }
    r->next_id6 = static_cast<uint32_t>(rte_rand());
    r->max_fragments = max_fragments < RTE_LIBRTE_IP_FRAG_MAX_FRAG ? max_fragments : RTE_LIBRTE_IP_FRAG_MAX_FRAG;
    r->table = rte_ip_frag_table_create(max_datagrams, kBucketEntries, max_datagrams, timeout_cycles, socket);
    if (!r->table) {
        rte_free(r);
        return nullptr;
    }
    return r;
}

void reassembly_free(Reassembly* r) {
    if (!r) return;
    rte_ip_frag_free_death_row(&r->death_row, 0);
    rte_ip_frag_table_destroy(r->table);  // frees the fragments it holds
    rte_free(r);
}

rte_mbuf* reassembly_add(Worker& w, rte_mbuf* m, rte_ipv4_hdr* ip) {
    m->l2_len = sizeof(rte_ether_hdr);
    m->l3_len = static_cast<uint16_t>((ip->version_ihl & 0x0f) * 4u);
    // rte_ip_frag would write a total length past 65,535 bytes into 16 bits.
    uint32_t end =
        (rte_be_to_cpu_16(ip->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK) * 8u + rte_be_to_cpu_16(ip->total_length);
    if (unlikely(end > UINT16_MAX)) return refuse(w, m);
    rte_mbuf* d = add_fragment(
        w, m, [&](Reassembly& r) { return rte_ipv4_frag_reassemble_packet(r.table, &r.death_row, m, w.now, ip); });
    if (!d) return nullptr;
    // rte_ip_frag leaves the header checksum 0 and asks for it in transmit offload; egw computes
    // its checksums itself.
    auto* dip = rte_pktmbuf_mtod_offset(d, rte_ipv4_hdr*, d->l2_len);
    dip->hdr_checksum = 0;
    dip->hdr_checksum = rte_ipv4_cksum(dip);
    d->ol_flags = 0;
    return d;
}

rte_mbuf* reassembly_add6(Worker& w, rte_mbuf* m, rte_ipv6_hdr* ip6) {
    // rte_ip_frag removes the Fragment header from right behind the fixed header, and reads the
    // fragment's length as the payload length less that header alone.
    if (unlikely(ip6->proto != IPPROTO_FRAGMENT)) return refuse(w, m);
    auto* fh = reinterpret_cast<rte_ipv6_fragment_ext*>(ip6 + 1);
    const uint32_t size = sizeof(rte_ipv6_hdr) + rte_be_to_cpu_16(ip6->payload_len);
    uint32_t end = RTE_IPV6_GET_FO(rte_be_to_cpu_16(fh->frag_data)) * 8u + size - sizeof(rte_ipv6_hdr) -
                   sizeof(rte_ipv6_fragment_ext);
    if (unlikely(end > UINT16_MAX)) return refuse(w, m);
    m->l2_len = sizeof(rte_ether_hdr);
    m->l3_len = sizeof(rte_ipv6_hdr) + sizeof(rte_ipv6_fragment_ext);
    const bool sized = reassembled6_size_field >= 0;
    if (sized) {
        for (rte_mbuf* s = m->next; s; s = s->next)
            size_of(s) = 0;
        size_of(m) = static_cast<uint16_t>(size);
    }
    rte_mbuf* d = add_fragment(
        w, m, [&](Reassembly& r) { return rte_ipv6_frag_reassemble_packet(r.table, &r.death_row, m, w.now, ip6, fh); });
    if (!d) return nullptr;
    d->ol_flags = 0;
    if (sized) {
        // Each fragment's first mbuf is in the chain and holds its size; the others hold 0.
        uint16_t largest = 0;
        for (rte_mbuf* s = d; s; s = s->next)
            largest = RTE_MAX(largest, size_of(s));
        size_of(d) = largest;
        d->ol_flags = reassembled6_flag;
    }
    return d;
}

uint32_t reassembly_fragment_id6(Worker& w) {
    if (unlikely(!w.reassembly)) return static_cast<uint32_t>(w.now);
    return w.reassembly->next_id6++;
}

void reassembly_expire(Worker& w) {
    if (!w.reassembly) return;
    Reassembly& r = *w.reassembly;
    rte_ip_frag_table_del_expired_entries(r.table, &r.death_row, w.now);
    release(w, r, DropReason::fragment_timeout);
}

void reassembly_clear(Worker& w) {
    if (!w.reassembly) return;
    Reassembly& r = *w.reassembly;
    // Every entry is older than "now" plus the longest timeout there can be.
    for (int i = 0; i < 64; ++i) {
        rte_ip_frag_table_del_expired_entries(r.table, &r.death_row, UINT64_MAX);
        bool more = r.death_row.cnt != 0;
        release(w, r, DropReason::fragment_timeout);
        if (!more) break;
    }
}

}  // namespace egw::dp
