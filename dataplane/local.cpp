// SPDX-License-Identifier: Apache-2.0
//
// Stage local: what is addressed to the gateway itself. ARP requests for the receiving port's
// addresses (and, on the outside ports of a Service's network, for its ingress IP while this
// gateway serves it) are answered; ARP
// replies go to the control thread, which owns the neighbour table; ICMP echo requests to the
// gateway's addresses are answered back to the sender's MAC. Anything else is dropped as local.
// Replies leave through output as finished frames (next step `transmit`).
#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstring>

#include "dataplane/checksum.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

void handle_arp(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    rte_mbuf* m = b.m[i];
    if (m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr)) {
        b.drop(i, DropReason::malformed);
        return;
    }
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
    if (arp->arp_hardware != be16(RTE_ARP_HRD_ETHER) || arp->arp_protocol != be16(RTE_ETHER_TYPE_IPV4) ||
        arp->arp_hlen != 6 || arp->arp_plen != 4) {
        b.drop(i, DropReason::malformed);
        return;
    }
    uint16_t port = m->port;
    const PortPolicy& pp = p.ports[port];
    uint16_t op = rte_be_to_cpu_16(arp->arp_opcode);
    if (op == RTE_ARP_OP_REPLY) {
        if (rte_ring_mp_enqueue(w.shared->to_control, m) != 0) {
            b.drop(i, DropReason::neighbor_unresolved);
            return;
        }
        count(w.counters.to_control);
        b.set_next(i, Next::gone);
        return;
    }
    if (op != RTE_ARP_OP_REQUEST) {
        b.drop(i, DropReason::local);
        return;
    }
    uint32_t target = rte_be_to_cpu_32(arp->arp_data.arp_tip);
    if (!p.is_port_address(port, target) && !p.answers_arp_for_ingress(port, target)) {
        b.drop(i, DropReason::local);
        return;
    }
    arp->arp_opcode = be16(RTE_ARP_OP_REPLY);
    arp->arp_data.arp_tha = arp->arp_data.arp_sha;
    arp->arp_data.arp_tip = arp->arp_data.arp_sip;
    std::memcpy(arp->arp_data.arp_sha.addr_bytes, pp.mac, 6);
    arp->arp_data.arp_sip = be32(target);
    eth->dst_addr = eth->src_addr;
    std::memcpy(eth->src_addr.addr_bytes, pp.mac, 6);
    b.pkt[i].out_port = port;
    b.set_next(i, Next::transmit);
}

void answer_echo(const PolicySnapshot& p, Burst& b, unsigned i) {
    rte_mbuf* m = b.m[i];
    PacketMeta& pk = b.pkt[i];
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(pk.l4);
    if (pk.l4_len < sizeof(rte_icmp_hdr) || ih->icmp_type != RTE_IP_ICMP_ECHO_REQUEST) {
        b.drop(i, DropReason::local);
        return;
    }
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    uint16_t old_word, new_word;
    std::memcpy(&old_word, ih, 2);
    ih->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
    std::memcpy(&new_word, ih, 2);
    ih->icmp_cksum = csum_apply_icmp(ih->icmp_cksum, csum_delta16(old_word, new_word));
    uint32_t peer = pk.ip->src_addr;
    pk.ip->src_addr = pk.ip->dst_addr;
    pk.ip->dst_addr = peer;
    pk.ip->time_to_live = 64;
    pk.ip->hdr_checksum = 0;
    pk.ip->hdr_checksum = rte_ipv4_cksum(pk.ip);
    eth->dst_addr = eth->src_addr;
    std::memcpy(eth->src_addr.addr_bytes, p.ports[m->port].mac, 6);
    pk.out_port = m->port;
    b.set_next(i, Next::transmit);
}

}  // namespace

void stage_local(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::local), [&](unsigned i) {
        if (b.pkt[i].kind == Kind::arp)
            handle_arp(w, p, b, i);
        else if (b.pkt[i].kind == Kind::ndp)
            b.drop(i, DropReason::ipv6_unsupported);
        else
            answer_echo(p, b, i);
    });
}

}  // namespace egw::dp
