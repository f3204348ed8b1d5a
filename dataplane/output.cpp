// SPDX-License-Identifier: Apache-2.0
//
// Stage output, the one place where a burst's packets leave the pipeline, in packet order:
//   - `output`: the Ethernet header toward the next hop's MAC from the neighbour table (the slot
//     is cached in the session and checked against the next hop, since slots change hands; the
//     burst's last next hop of each family is remembered, so a burst through one gateway reads
//     the table once), then the transmit buffer of the port; a next hop not resolved yet sends
//     the packet to the control thread, which holds it until ARP (IPv6: Neighbor Solicitation)
//     answers. IPv6 next hops are 128-bit addresses in a table of their own (neighbor_table6.h),
//     EtherType 0x86DD;
//   - `transmit`: finished frames (ARP and echo replies) go to the transmit buffer as they are;
//   - `drop`: counted under its reason and freed.
// Every frame is held against its port's MTU (emit(); to_next_hop() with the port's limit kept
// for the burst): an IPv4 datagram
// larger than the MTU is cut into fragments with rte_ip_frag, one that may not be (DF set, not
// IPv4: routers never fragment IPv6) is dropped, so no frame longer than the MTU reaches a driver;
// an IPv6 datagram the gateway put together from fragments is cut again (fragment6()). The stages refuse DF
// packets that are too big before they rewrite them (mtu.h); the check here also covers the
// frames that went round the stages (held for ARP, injected).
// The transmit buffers are sent by worker_flush() after the burst (or here when one fills up);
// a VLAN sub-port's buffer gets its 802.1Q tag then and leaves on its parent's device (send()).
#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_ip_frag.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>

#include <bit>
#include <cstring>

#include "dataplane/held.h"
#include "dataplane/reassembly.h"
#include "dataplane/stages.h"
#include "dataplane/vlan.h"

namespace egw::dp {

namespace {

inline void free_drop(Worker& w, rte_mbuf* m, DropReason r) {
    count(w.counters.drops[static_cast<unsigned>(r)]);
    rte_pktmbuf_free(m);
}

// A burst the queue refused whole. Once the refusals in a row span tx_stall_ticks, the queue is
// taken for stalled: counted once, and flagged until it accepts a frame again. Read off the
// worker's clock, no system call; the control thread logs the change (control/runtime/tx_stall.h).
void refused_whole(Worker& w, uint16_t port) {
    if (w.tx_refused_bursts[port]++ == 0) {
        w.tx_refused_since[port] = w.now;
        return;
    }
    uint64_t limit = w.shared->tx_stall_ticks;
    if (limit == 0 || w.counters.tx_stalled[port] || w.now - w.tx_refused_since[port] < limit) return;
    count(w.counters.tx_stalls[port]);
    store(w.counters.tx_stalled[port], 1);
}

// A chained frame copied into one mbuf of frag_direct (the runtime checked that a frame of the
// port's MTU fits one); nullptr when there is no mbuf or room.
rte_mbuf* copied_whole(Worker& w, rte_mbuf* m) {
    if (unlikely(m->pkt_len > UINT16_MAX)) return nullptr;
    rte_mbuf* c = rte_pktmbuf_alloc(w.shared->frag_direct);
    if (unlikely(!c)) return nullptr;
    char* d = rte_pktmbuf_append(c, static_cast<uint16_t>(m->pkt_len));
    if (unlikely(!d)) {
        rte_pktmbuf_free(c);
        return nullptr;
    }
    for (const rte_mbuf* s = m; s; s = s->next) {
        std::memcpy(d, rte_pktmbuf_mtod(s, const char*), s->data_len);
        d += s->data_len;
    }
    c->port = m->port;
    return c;
}

// A port whose device cannot transmit chained mbufs: each chained frame of the buffer leaves as
// a copy in one mbuf, or is dropped when there is none. Checked per burst, so ports that can
// send chains pay one test.
static_assert(kMaxPorts <= 32, "DataplaneShared::single_segment_tx holds a bit per port");
void single_segments(Worker& w, TxBuffer& b) {
    uint16_t kept = 0;
    for (uint16_t i = 0; i < b.n; ++i) {
        rte_mbuf* m = b.pkts[i];
        if (unlikely(m->nb_segs > 1)) {
            rte_mbuf* c = copied_whole(w, m);
            if (!c) {
                free_drop(w, m, DropReason::tx_chain_not_copied);
                continue;
            }
            rte_pktmbuf_free(m);
            m = c;
        }
        b.pkts[kept++] = m;
    }
    b.n = kept;
}

// The 802.1Q tag of VLAN `vid` in every frame of the buffer of a sub-port (vlan.h), behind the
// addresses: the frames were made, cut and held to the MTU as the sub-port's untagged ones, and
// only their way onto the parent's device adds the tag.
void tag(Worker& w, TxBuffer& b, uint16_t port, uint16_t vid) {
    const rte_be16_t tpid = RTE_BE16(kVlanEtherType), tci = rte_cpu_to_be_16(vid);
    uint16_t kept = 0;
    for (uint16_t i = 0; i < b.n; ++i) {
        rte_mbuf* m = b.pkts[i];
        const char* untagged = rte_pktmbuf_mtod(m, const char*);
        auto* eth = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, sizeof(rte_vlan_hdr)));
        if (unlikely(!eth)) {
            free_drop(w, m, DropReason::vlan_no_headroom);
            continue;
        }
        std::memmove(eth, untagged, 2 * RTE_ETHER_ADDR_LEN);
        std::memcpy(eth + 2 * RTE_ETHER_ADDR_LEN, &tpid, sizeof tpid);
        std::memcpy(eth + 2 * RTE_ETHER_ADDR_LEN + sizeof tpid, &tci, sizeof tci);
        b.pkts[kept++] = m;
    }
    b.n = kept;
    count(w.counters.vlan_tx_packets[port], kept);
}

void send(Worker& w, uint16_t port) {
    TxBuffer& b = w.tx[port];
    const VlanPorts& vlans = w.shared->vlans;
    if (unlikely(w.shared->single_segment_tx >> port & 1)) {
        single_segments(w, b);
        if (b.n == 0) return;
    }
    if (unlikely(vlans.tx_vid[port] != 0)) {
        tag(w, b, port, vlans.tx_vid[port]);
        if (b.n == 0) return;
    }
    uint16_t sent = rte_eth_tx_burst(vlans.tx_device[port], static_cast<uint16_t>(w.index), b.pkts, b.n);
    count(w.counters.tx_packets, sent);
    if (unlikely(sent < b.n)) {
        count(w.counters.tx_refused[port], b.n - sent);
        for (uint16_t i = sent; i < b.n; ++i)
            free_drop(w, b.pkts[i], DropReason::tx_full);
    }
    if (unlikely(sent == 0)) {
        refused_whole(w, port);
    } else if (unlikely(w.tx_refused_bursts[port] != 0)) {
        w.tx_refused_bursts[port] = 0;
        if (w.counters.tx_stalled[port]) store(w.counters.tx_stalled[port], 0);
    }
    b.n = 0;
}

// `b` is one of w.tx: its port is its index there.
inline void tx_enqueue(Worker& w, TxBuffer& b, rte_mbuf* m) {
    if (unlikely(b.n == kTxBufferSize)) send(w, static_cast<uint16_t>(&b - w.tx));
    b.pkts[b.n++] = m;
}

inline void tx_enqueue(Worker& w, rte_mbuf* m, uint16_t port) {
    tx_enqueue(w, w.tx[port], m);
}

// The most fragments one datagram may be cut into (a 16,128-byte jumbo datagram at the minimum
// MTU of 576 makes 29; a 65,535-byte IPv6 datagram at IPv6's minimum of 1,280 makes 54).
constexpr uint16_t kMaxFragmentsOut = 56;

// Cuts the IPv4 datagram of frame `m` into fragments of at most `mtu` bytes and queues them on
// `port`, each behind a copy of the frame's Ethernet header and with its own header checksum.
void fragment(Worker& w, rte_mbuf* m, uint16_t port, uint16_t mtu) {
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    if (eth->ether_type != RTE_BE16(RTE_ETHER_TYPE_IPV4) || (ip->fragment_offset & RTE_BE16(RTE_IPV4_HDR_DF_FLAG))) {
        free_drop(w, m, DropReason::frag_needed);
        return;
    }
    rte_ether_hdr l2 = *eth;
    rte_pktmbuf_adj(m, sizeof l2);
    rte_mbuf* frags[kMaxFragmentsOut];
    int n = rte_ipv4_fragment_packet(m, frags, kMaxFragmentsOut, mtu, w.shared->frag_direct, w.shared->frag_indirect);
    if (unlikely(n <= 0)) {
        free_drop(w, m, DropReason::fragment_failed);
        return;
    }
    // The fragments refer to the datagram's data; it is freed when the last of them is.
    rte_pktmbuf_free(m);
    count(w.counters.fragmented);
    count(w.counters.fragments_out, static_cast<unsigned>(n));
    for (int k = 0; k < n; ++k) {
        rte_mbuf* f = frags[k];
        auto* fe = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_prepend(f, sizeof l2));
        *fe = l2;
        auto* fip = reinterpret_cast<rte_ipv4_hdr*>(fe + 1);
        fip->hdr_checksum = 0;
        fip->hdr_checksum = rte_ipv4_cksum(fip);
        f->ol_flags = 0;
        tx_enqueue(w, f, port);
    }
}

// Cuts an IPv6 datagram the gateway put together (reassembly.h) into fragments of at most
// `size` bytes, each behind the fixed header and a Fragment header of this worker's next
// identification, and queues them on `port`. rte_ip_frag copies only the fixed header into each
// fragment, which is all a datagram put together here has in front of its fragmentable part.
void fragment6(Worker& w, rte_mbuf* m, uint16_t port, uint16_t size) {
    rte_ether_hdr l2 = *rte_pktmbuf_mtod(m, rte_ether_hdr*);
    rte_pktmbuf_adj(m, sizeof l2);
    rte_mbuf* frags[kMaxFragmentsOut];
    int n = rte_ipv6_fragment_packet(m, frags, kMaxFragmentsOut, size, w.shared->frag_direct, w.shared->frag_indirect);
    if (unlikely(n <= 0)) {
        free_drop(w, m, DropReason::fragment_failed);
        return;
    }
    rte_pktmbuf_free(m);
    count(w.counters.fragmented);
    count(w.counters.fragments_out, static_cast<unsigned>(n));
    const rte_be32_t id = rte_cpu_to_be_32(reassembly_fragment_id6(w));
    for (int k = 0; k < n; ++k) {
        rte_mbuf* f = frags[k];
        auto* fe = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_prepend(f, sizeof l2));
        *fe = l2;
        reinterpret_cast<rte_ipv6_fragment_ext*>(reinterpret_cast<rte_ipv6_hdr*>(fe + 1) + 1)->id = id;
        f->ol_flags = 0;
        tx_enqueue(w, f, port);
    }
}

// The one way a frame that is not a next hop's reaches a transmit buffer; next hops' frames take
// the same steps with their port's limits kept for the burst (to_next_hop()).
inline void emit(Worker& w, const PolicySnapshot& p, rte_mbuf* m, uint16_t port) {
    uint16_t mtu = p.ports[port].mtu;
    // An IPv6 datagram put together here leaves no larger than the largest fragment it came in,
    // as Linux's nf_defrag_ipv6 does (the sender cut it for its path), never below IPv6's minimum
    // MTU (which every link carries, and rte_ip_frag's least); the stages refused it with Packet
    // Too Big when that fragment does not pass the port (mtu.h).
    if (unlikely(m->ol_flags & reassembled6_flag)) {
        uint16_t size = RTE_MAX(reassembled6_fragment_size(m), uint16_t{RTE_IPV6_MIN_MTU});
        size = RTE_MIN(size, mtu);
        if (m->pkt_len > uint32_t{size} + sizeof(rte_ether_hdr)) {
            fragment6(w, m, port, size);
            return;
        }
        m->ol_flags = 0;
    }
    if (unlikely(m->pkt_len > uint32_t{mtu} + sizeof(rte_ether_hdr))) {
        fragment(w, m, port, mtu);
        return;
    }
    tx_enqueue(w, m, port);
}

// To the control thread, to wait there until the next hop answers ARP or NS (held.h); the
// dynfield carries the next hop.
inline void hold(Worker& w, rte_mbuf* m) {
    if (rte_ring_mp_enqueue(w.shared->to_control, m) != 0) {
        free_drop(w, m, DropReason::neighbor_unresolved);
        return;
    }
    count(w.counters.held);
}

// The Ethernet header of a frame in two 8-byte stores: the neighbour's MAC word (its first six
// bytes are the MAC; the other two are overwritten next), then the port's source MAC and
// EtherType word (PolicySnapshot::eth_src4, eth_src6).
inline void write_ethernet(rte_ether_hdr* eth, uint64_t mac_word, uint64_t src_word) {
    if constexpr (std::endian::native == std::endian::little) {
        auto* b = reinterpret_cast<uint8_t*>(eth);
        std::memcpy(b, &mac_word, 8);
        std::memcpy(b + 6, &src_word, 8);
    } else {
        for (int k = 0; k < 6; ++k)
            eth->dst_addr.addr_bytes[k] = static_cast<uint8_t>(mac_word >> (8 * k));
        std::memcpy(&eth->src_addr, &src_word, 8);
    }
}

// The last next hop of each family a burst's output resolved: its key and MAC word, and its
// port's source word, largest unfragmented frame and transmit buffer. Most of a burst leaves
// through one next hop (a node's default gateway), so the packets after the first skip the
// neighbour table and the port's policy. A MAC the control thread changes during the burst
// reaches the packets of the next burst, as it would have had they come a few microseconds
// sooner; the policy does not change within a burst. No key is all zero: make_key() puts port + 1
// in it.
template <class Key>
struct LastHop {
    Key key{};
    uint64_t mac = 0;
    uint64_t src = 0;
    uint32_t frame_max = 0;
    TxBuffer* tx = nullptr;

    void remember(Worker& w, const PolicySnapshot& p, const Key& k, uint64_t mac_word, uint64_t src_word,
                  uint16_t port) {
        *this = LastHop{k, mac_word, src_word, static_cast<uint32_t>(p.ports[port].mtu + sizeof(rte_ether_hdr)),
                        &w.tx[port]};
    }
};
using LastHop4 = LastHop<NeighborTable::Key>;
using LastHop6 = LastHop<NeighborTable6::Key>;

// IPv6: the same with the IPv6 table, the slot cache checked against (port, next hop) alike.
void to_next_hop6(Worker& w, const PolicySnapshot& p, rte_mbuf* m, const PacketMeta& pk, LastHop6& last) {
    const uint8_t* nh = pk.next_hop6.b;
    const NeighborTable6::Key key = NeighborTable6::make_key(pk.out_port, nh);
    if (unlikely(key != last.key)) {
        NeighborTable6* nt = w.shared->neighbors6;
        uint32_t slot = nt ? *pk.neighbor : NeighborTable6::kNone;
        uint64_t mac;
        if (nt && (slot == NeighborTable6::kNone || !nt->resolve_word(slot, key, mac))) {
            slot = nt->find(pk.out_port, nh);
            *pk.neighbor = slot;
            if (slot == NeighborTable6::kNone || !nt->resolve_word(slot, key, mac)) slot = NeighborTable6::kNone;
        }
        if (unlikely(slot == NeighborTable6::kNone)) {
            rte_pktmbuf_mtod(m, rte_ether_hdr*)->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV6);
            m->port = pk.out_port;
            HeldNextHop& h = held_of(m, w.shared->next_hop_field);
            h.v4 = 0;
            h.what = kHeldPacket;
            std::memcpy(h.v6, pk.next_hop6.b, 16);
            hold(w, m);
            return;
        }
        last.remember(w, p, key, mac, p.eth_src6[pk.out_port], pk.out_port);
    }
    write_ethernet(rte_pktmbuf_mtod(m, rte_ether_hdr*), last.mac, last.src);
    // A datagram put together here leaves by emit(), in fragments if need be.
    if (unlikely((m->ol_flags & reassembled6_flag) || m->pkt_len > last.frame_max))
        emit(w, p, m, pk.out_port);
    else
        tx_enqueue(w, *last.tx, m);
}

inline void to_next_hop(Worker& w, const PolicySnapshot& p, rte_mbuf* m, const PacketMeta& pk, LastHop4& last,
                        LastHop6& last6) {
    if (pk.v6) {
        to_next_hop6(w, p, m, pk, last6);
        return;
    }
    const uint64_t key = NeighborTable::make_key(pk.out_port, pk.next_hop);
    if (unlikely(key != last.key)) {
        NeighborTable& nt = *w.shared->neighbors;
        // The cached slot is a hint: the table may have given it to another next hop since (aged
        // out, recycled); resolve() checks the key and a mismatch means a fresh lookup.
        uint32_t slot = *pk.neighbor;
        uint64_t mac;
        if (unlikely(slot == NeighborTable::kNone || !nt.resolve_word(slot, key, mac))) {
            slot = nt.find(pk.out_port, pk.next_hop);
            *pk.neighbor = slot;
            if (slot == NeighborTable::kNone || !nt.resolve_word(slot, key, mac)) slot = NeighborTable::kNone;
        }
        if (unlikely(slot == NeighborTable::kNone)) {
            m->port = pk.out_port;
            HeldNextHop& h = held_of(m, w.shared->next_hop_field);
            h.v4 = pk.next_hop;
            h.what = kHeldPacket;
            hold(w, m);
            return;
        }
        last.remember(w, p, key, mac, p.eth_src4[pk.out_port], pk.out_port);
    }
    write_ethernet(rte_pktmbuf_mtod(m, rte_ether_hdr*), last.mac, last.src);
    if (unlikely(m->pkt_len > last.frame_max))
        fragment(w, m, pk.out_port, p.ports[pk.out_port].mtu);
    else
        tx_enqueue(w, *last.tx, m);
}

}  // namespace

void stage_output(Worker& w, const PolicySnapshot& p, Burst& b) {
    uint32_t mask = b.pending(Next::output) | b.pending(Next::transmit) | b.pending(Next::drop);
    LastHop4 last;
    LastHop6 last6;
    for_each_packet(mask, [&](unsigned i) {
        const PacketMeta& pk = b.pkt[i];
        // Most packets go toward a next hop: one test for them, not a switch.
        if (likely(pk.next == Next::output))
            to_next_hop(w, p, b.m[i], pk, last, last6);
        else if (pk.next == Next::transmit)
            emit(w, p, b.m[i], pk.out_port);
        else
            free_drop(w, b.m[i], pk.reason);
    });
}

void output_frames(Worker& w, const PolicySnapshot& p, rte_mbuf* const* pkts, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
        if (pkts[i]->port < w.n_ports)
            emit(w, p, pkts[i], pkts[i]->port);
        else
            free_drop(w, pkts[i], DropReason::local);
    }
}

void worker_flush(Worker& w) {
    for (uint16_t port = 0; port < w.n_ports; ++port)
        if (uint16_t n = w.tx[port].n) run_stage(w, ProfiledStage::flush, n, [&] { send(w, port); });
}

}  // namespace egw::dp
