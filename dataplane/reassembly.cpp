// SPDX-License-Identifier: Apache-2.0
//
// The worker's reassembly table (reassembly.h). rte_ip_frag does the work: a hash table of
// datagrams keyed by (source, destination, identifier), each holding up to
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

#include "dataplane/worker.h"

namespace egw::dp {

const unsigned kMaxFragmentsPerDatagram = RTE_LIBRTE_IP_FRAG_MAX_FRAG;

struct Reassembly {
    rte_ip_frag_tbl* table = nullptr;
    uint32_t max_fragments = RTE_LIBRTE_IP_FRAG_MAX_FRAG;
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

}  // namespace

Reassembly* reassembly_create(uint32_t max_datagrams, uint32_t max_fragments, uint64_t timeout_cycles, int socket) {
    auto* r =
        static_cast<Reassembly*>(rte_zmalloc_socket("egw_reassembly", sizeof(Reassembly), RTE_CACHE_LINE_SIZE, socket));
    if (!r) return nullptr;
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
    Reassembly& r = *w.reassembly;
    m->l2_len = sizeof(rte_ether_hdr);
    m->l3_len = static_cast<uint16_t>((ip->version_ihl & 0x0f) * 4u);
    const bool limited = r.max_fragments < RTE_LIBRTE_IP_FRAG_MAX_FRAG && w.shared->next_hop_field >= 0;
    if (limited) mark_fragment(w, m);
    rte_mbuf* d = rte_ipv4_frag_reassemble_packet(r.table, &r.death_row, m, w.now, ip);
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
    // rte_ip_frag leaves the header checksum 0 and asks for it in transmit offload; egw computes
    // its checksums itself.
    auto* dip = rte_pktmbuf_mtod_offset(d, rte_ipv4_hdr*, d->l2_len);
    dip->hdr_checksum = 0;
    dip->hdr_checksum = rte_ipv4_cksum(dip);
    d->ol_flags = 0;
    return d;
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
