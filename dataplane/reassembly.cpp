// SPDX-License-Identifier: Apache-2.0
//
// The worker's reassembly table (reassembly.h). rte_ip_frag does the work: a hash table of
// datagrams keyed by (source, destination, identifier), IPv4 and IPv6 ones side by side, each holding up to
// RTE_LIBRTE_IP_FRAG_MAX_FRAG fragments in any order, the first one possibly last, put together
// by chaining the mbufs (no copy, no allocation) once they cover the datagram. Fragments it will
// not keep go to a "death row" that is freed and counted here right after each call.
//
// Beside it, egw keeps its own ledger of the datagrams the table holds, by (source, destination,
// identification), and of how many each source holds: rte_ip_frag only knows that it is full,
// so a source sending first fragments alone (~max_datagrams / timeout of them a second) would
// fill it and block every other datagram. The ledger refuses a new datagram of a source that
// holds max_per_source already, and tells a full table from the other refusals. It follows the
// table exactly: a datagram enters it when the table takes its first fragment, and leaves it when
// the table gives the datagram back whole or puts any of its fragments on the death row (the
// table then drops all of them).
#include "dataplane/reassembly.h"

#include <rte_branch_prediction.h>
#include <rte_ether.h>
#include <rte_hash.h>
#include <rte_ip.h>
#include <rte_ip_frag.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_random.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "dataplane/worker.h"

namespace egw::dp {

const unsigned kMaxFragmentsPerDatagram = RTE_LIBRTE_IP_FRAG_MAX_FRAG;
uint64_t reassembled6_flag = 0;
int reassembled6_size_field = -1;

namespace {

// A source of either family (IPv4 in the first four bytes).
struct SourceKey {
    uint8_t addr[16];
    uint32_t v6;
};
static_assert(sizeof(SourceKey) == 20);

// A datagram, as rte_ip_frag tells them apart.
struct DatagramKey {
    SourceKey src;
    uint8_t dst[16];
    uint32_t id;
};
static_assert(sizeof(DatagramKey) == 40);

}  // namespace

struct Reassembly {
    rte_ip_frag_tbl* table = nullptr;
    uint32_t max_fragments = RTE_LIBRTE_IP_FRAG_MAX_FRAG;
    uint32_t max_datagrams = 0;
    uint32_t max_per_source = 0;
    uint32_t next_id6 = 0;  // reassembly_fragment_id6()
    // The ledger: datagrams in the table (their data: the position of their source in
    // `sources`), sources holding any (position: index into source_held), and the count.
    rte_hash* datagrams = nullptr;
    rte_hash* sources = nullptr;
    uint32_t* source_held = nullptr;
    uint32_t held = 0;
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

// The datagram a fragment belongs to, read from its headers (an Ethernet frame; IPv6 with the
// Fragment header right behind the fixed one, as the table takes them).
void key_of(const rte_mbuf* m, DatagramKey& k) {
    std::memset(&k, 0, sizeof k);
    const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
    if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6)) {
        const auto* ip6 = reinterpret_cast<const rte_ipv6_hdr*>(eth + 1);
        const auto* fh = reinterpret_cast<const rte_ipv6_fragment_ext*>(ip6 + 1);
        k.src.v6 = 1;
        std::memcpy(k.src.addr, ip6->src_addr, 16);
        std::memcpy(k.dst, ip6->dst_addr, 16);
        k.id = fh->id;
    } else {
        const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(eth + 1);
        std::memcpy(k.src.addr, &ip->src_addr, 4);
        std::memcpy(k.dst, &ip->dst_addr, 4);
        k.id = ip->packet_id;
    }
}

uint32_t held_by(const Reassembly& r, const SourceKey& src) {
    int32_t pos = rte_hash_lookup(r.sources, &src);
    return pos < 0 ? 0 : r.source_held[pos];
}

// A datagram the table took: into the ledger. Both hashes have room for max_datagrams keys
// (extendable buckets), which the table never exceeds.
void remember(Reassembly& r, const DatagramKey& k) {
    int32_t pos = rte_hash_add_key(r.sources, &k.src);
    if (unlikely(pos < 0)) return;
    if (rte_hash_add_key_data(r.datagrams, &k, reinterpret_cast<void*>(uintptr_t(pos))) != 0) {
        if (r.source_held[pos] == 0) rte_hash_del_key(r.sources, &k.src);
        return;
    }
    ++r.source_held[pos];
    ++r.held;
}

void forget(Reassembly& r, const DatagramKey& k) {
    void* data;
    if (rte_hash_lookup_data(r.datagrams, &k, &data) < 0) return;
    rte_hash_del_key(r.datagrams, &k);
    --r.held;
    auto pos = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(data));
    if (--r.source_held[pos] == 0) rte_hash_del_key(r.sources, &k.src);
}

// Frees what the table put on the death row, counted as `why`; their datagrams leave the ledger.
void release(Worker& w, Reassembly& r, DropReason why) {
    if (r.death_row.cnt == 0) return;
    for (uint32_t i = 0; i < r.death_row.cnt; ++i) {
        DatagramKey k;
        key_of(r.death_row.row[i], k);
        forget(r, k);
    }
    count(w.counters.drops[static_cast<unsigned>(why)], r.death_row.cnt);
    rte_ip_frag_free_death_row(&r.death_row, 0);
}

// A fragment refused before the table sees it.
rte_mbuf* refuse(Worker& w, rte_mbuf* m, DropReason why = DropReason::fragment) {
    count(w.counters.drops[static_cast<unsigned>(why)]);
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
    DatagramKey key;
    key_of(m, key);
    const bool known = rte_hash_lookup(r.datagrams, &key) >= 0;
    if (!known) {
        if (r.held >= r.max_datagrams) {
            // Datagrams past their time may hold the room: out first.
            rte_ip_frag_table_del_expired_entries(r.table, &r.death_row, w.now);
            release(w, r, DropReason::fragment_timeout);
        }
        if (r.held >= r.max_datagrams) return refuse(w, m, DropReason::reassembly_table_full);
        if (held_by(r, key.src) >= r.max_per_source) return refuse(w, m, DropReason::reassembly_source_limit);
    }
    const bool limited = r.max_fragments < RTE_LIBRTE_IP_FRAG_MAX_FRAG && w.shared->next_hop_field >= 0;
    if (limited) mark_fragment(w, m);
    rte_mbuf* d = add(r);
    // A fragment refused at once (a bad offset) is on the death row itself: its one outcome is
    // that drop; only a fragment the table took counts as taken in. A new datagram's first
    // fragment refused alone found no room in its hash bucket: the table is full there.
    bool refused = false;
    for (uint32_t k = 0; k < r.death_row.cnt; ++k)
        refused |= r.death_row.row[k] == m;
    if (!refused) count(w.counters.fragments_in);
    const bool no_room = !known && refused && r.death_row.cnt == 1;
    release(w, r, no_room ? DropReason::reassembly_table_full : DropReason::fragment);
    // Into the ledger when the table holds it now (also when the table gave the key's old,
    // timed-out datagram up for it on the way), out when it came back whole.
    if (d)
        forget(r, key);
    else if (!refused && rte_hash_lookup(r.datagrams, &key) < 0)
        remember(r, key);
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

namespace {

rte_hash* ledger_hash(const char* what, uint32_t key_len, uint32_t entries, int socket) {
    static std::atomic<unsigned> made{0};
    char name[RTE_HASH_NAMESIZE];
    std::snprintf(name, sizeof name, "egw_rf_%s%u", what, made.fetch_add(1));
    rte_hash_parameters params{};
    params.name = name;
    params.entries = std::max<uint32_t>(entries, 8);
    params.key_len = key_len;
    params.socket_id = socket;
    // Every key up to `entries` fits, whatever the buckets they hash to.
    params.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
    return rte_hash_create(&params);
}

}  // namespace

Reassembly* reassembly_create(uint32_t max_datagrams, uint32_t max_fragments, uint32_t max_per_source,
                              uint64_t timeout_cycles, int socket) {
    auto* r =
        static_cast<Reassembly*>(rte_zmalloc_socket("egw_reassembly", sizeof(Reassembly), RTE_CACHE_LINE_SIZE, socket));
    if (!r) return nullptr;
    r->max_datagrams = max_datagrams;
    r->max_per_source = max_per_source ? max_per_source : std::max<uint32_t>(1, max_datagrams / 4);
    r->datagrams = ledger_hash("d", sizeof(DatagramKey), max_datagrams, socket);
    r->sources = ledger_hash("s", sizeof(SourceKey), max_datagrams, socket);
    r->source_held = static_cast<uint32_t*>(rte_zmalloc_socket(
        "egw_reassembly_sources", sizeof(uint32_t) * std::max<uint32_t>(max_datagrams, 8) * 2, 0, socket));
    if (!r->datagrams || !r->sources || !r->source_held) {
        rte_hash_free(r->datagrams);
        rte_hash_free(r->sources);
        rte_free(r->source_held);
        rte_free(r);
        return nullptr;
    }
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
        reassembly_free(r);
        return nullptr;
    }
    return r;
}

void reassembly_free(Reassembly* r) {
    if (!r) return;
    rte_ip_frag_free_death_row(&r->death_row, 0);
    if (r->table) rte_ip_frag_table_destroy(r->table);  // frees the fragments it holds
    rte_hash_free(r->datagrams);
    rte_hash_free(r->sources);
    rte_free(r->source_held);
    rte_free(r);
}

uint32_t reassembly_held_by(const Reassembly& r, const uint8_t* src, bool v6) {
    SourceKey k{};
    std::memcpy(k.addr, src, v6 ? 16 : 4);
    k.v6 = v6;
    return held_by(r, k);
}

uint32_t reassembly_held(const Reassembly& r) {
    return r.held;
}

rte_mbuf* reassembly_add(Worker& w, rte_mbuf* m, rte_ipv4_hdr* ip) {
    m->l2_len = sizeof(rte_ether_hdr);
    m->l3_len = static_cast<uint16_t>((ip->version_ihl & 0x0f) * 4u);
    // rte_ip_frag would write a total length past 65,535 bytes into 16 bits.
    uint32_t end =
        (rte_be_to_cpu_16(ip->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK) * 8u + rte_be_to_cpu_16(ip->total_length);
    // An empty fragment is refused here, as the table would: a new datagram's fragment refused
    // alone there then always means no room.
    if (unlikely(end > UINT16_MAX || rte_be_to_cpu_16(ip->total_length) <= m->l3_len)) return refuse(w, m);
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
    if (unlikely(end > UINT16_MAX || size <= sizeof(rte_ipv6_hdr) + sizeof(rte_ipv6_fragment_ext))) return refuse(w, m);
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
