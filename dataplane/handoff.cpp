// SPDX-License-Identifier: Apache-2.0
//
// Stage handoff: a session belongs to one worker (nat_ports.h), so a reply that arrived on
// another one is given to its owner through a single-producer/single-consumer ring before any
// session is looked up.
#include <rte_ring.h>

#include "dataplane/flow_owner.h"
#include "dataplane/ingress.h"
#include "dataplane/nat_ports.h"
#include "dataplane/stages.h"

namespace egw::dp {

unsigned owner_of_port(const DataplaneShared& shared, uint16_t port_host) {
    unsigned w = (port_host - shared.nat_port_min) / port_block_size(shared);
    return w < shared.n_workers ? w : shared.n_workers - 1;
}

void worker_assign_port_block(Worker& w) {
    const DataplaneShared& sh = *w.shared;
    uint32_t block = port_block_size(sh);
    w.port_block = block;
    w.nat_port_lo = static_cast<uint16_t>(sh.nat_port_min + w.index * block);
    // The last worker also takes the remainder of an uneven split.
    w.nat_port_hi = w.index + 1 == sh.n_workers ? sh.nat_port_max
                                                : static_cast<uint16_t>(sh.nat_port_min + (w.index + 1) * block - 1);
}

// Going out, the flow's key names its owner (flow_owner.h): the hash a NIC's RSS applies, so a
// flow's unfragmented packets arrive there already on a NIC egwd programmed (their hardware hash,
// `hw_hash`, is taken as it is), and its datagrams put together from fragments, which a NIC gave
// to a worker by their addresses alone, and the ICMP errors a pod sends about it, which quote its
// key, are handed to that same worker. Coming back, the NAT destination port names the owner
// (where rte_flow steers replies by port block this is already the receiving worker), and an
// error from outside quotes the translated packet, so its NAT port too. Packets with no key stay
// where they are, and so do replies to a port outside the NAT range (no session anywhere). A
// packet to a served ingress IP on one of its Service's ports (or an error quoting one) stays too
// although the port lies in another worker's block: no NAT port is ever given out there
// (nat_ports.h), so it is ingress, which holds no session and any worker forwards. That lookup is
// made only for a packet the block would send away, never on the block's owner. IPv6 the same
// way: its NAT ports are cut into the same blocks (docs/architecture.md).
unsigned owner_of(const Worker& w, const PolicySnapshot& p, const PacketMeta& pk, const uint32_t* hw_hash) {
    if (pk.kind == Kind::other) return w.index;
    const DataplaneShared& sh = *w.shared;
    if (pk.dir == Dir::in2out) {
        if (hw_hash) return owner_of_hash(sh.flow_owners, *hw_hash);
        return pk.v6 ? flow_owner(sh.flow_owners, pk.key6) : flow_owner(sh.flow_owners, pk.key);
    }
    uint16_t port = rte_be_to_cpu_16(pk.v6 ? pk.key6.dport : pk.key.dport);
    if (port < sh.nat_port_min || port > sh.nat_port_max) return w.index;
    unsigned block_owner = owner_of_port(sh, port);
    if (block_owner == w.index) return block_owner;
    const bool ingress = pk.v6 ? ingress_service_of<Ingress6>(p, pk, pk.key6.dst, pk.key6.dport) != Ingress6::kMissing
                               : ingress_service_of<Ingress4>(p, pk, pk.key.dst, pk.key.dport) != Ingress4::kMissing;
    return ingress ? w.index : block_owner;
}

void stage_handoff(Worker& w, Burst& b) {
    rte_mbuf* out[kMaxWorkers][kBurst];
    unsigned pos[kMaxWorkers][kBurst];
    unsigned n_out[kMaxWorkers] = {};
    for_each_packet(b.pending(Next::handoff), [&](unsigned i) {
        unsigned o = b.pkt[i].owner;
        pos[o][n_out[o]] = i;
        out[o][n_out[o]++] = b.m[i];
    });
    for (unsigned o = 0; o < w.shared->n_workers; ++o) {
        if (!n_out[o]) continue;
        unsigned sent =
            rte_ring_sp_enqueue_burst(w.handoff_out[o], reinterpret_cast<void**>(out[o]), n_out[o], nullptr);
        count(w.counters.handed_off, sent);
        for (unsigned k = 0; k < n_out[o]; ++k)
            if (k < sent)
                b.set_next(pos[o][k], Next::gone);
            else
                b.drop(pos[o][k], DropReason::handoff_full);
    }
}

}  // namespace egw::dp
