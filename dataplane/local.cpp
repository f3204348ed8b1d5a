// SPDX-License-Identifier: Apache-2.0
//
// Stage local: what is addressed to the gateway itself. ARP requests for the receiving port's
// addresses (and, on the outside ports of a Service's network, for its ingress IP while this
// gateway serves it) are answered; ARP
// replies go to the control thread, which owns the neighbour table, and so does any ARP request
// (a gratuitous one included) whose sender is a neighbour the table holds with another MAC or
// none (hand_to_control); ICMP echo requests to the
// gateway's addresses are answered back to the sender's MAC. IPv6: Neighbor Solicitations for the
// same addresses (handle_ndp), Neighbor Advertisements to the control thread as ARP replies, and
// echo requests to the port's IPv6 addresses. Anything else is dropped as local.
// Replies leave through output as finished frames (next step `transmit`).
#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstring>

#include "dataplane/chain.h"
#include "dataplane/checksum.h"
#include "dataplane/family.h"
#include "dataplane/held.h"
#include "dataplane/ipv6.h"
#include "dataplane/ndp.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

// Whether the sender of an ARP packet is a neighbour the table holds with another MAC than the one
// it gives, or with none yet: the control thread must see it (a router that failed over to a new
// MAC announces it with a gratuitous request, as keepalived and VRRP do, and Linux refreshes its
// entry from any ARP packet of a known neighbour). Any other request would only cost the control
// thread a look at something it already knows.
bool sender_moved(const Worker& w, uint16_t port, const rte_arp_hdr* arp) {
    const NeighborTable& t = *w.shared->neighbors;
    uint32_t slot = t.find(port, rte_be_to_cpu_32(arp->arp_data.arp_sip));
    if (slot == NeighborTable::kNone) return false;
    uint8_t known[6];
    return !t.mac(slot, known) || std::memcmp(known, arp->arp_data.arp_sha.addr_bytes, 6) != 0;
}

// Hands a neighbour protocol frame (ARP, a Neighbor Advertisement) to the control thread; `what`
// tells it a neighbour's frame from the answer this stage made to a moved neighbour's request
// (held.h).
void hand_to_control(Worker& w, Burst& b, unsigned i, uint32_t what) {
    rte_mbuf* m = b.m[i];
    held_of(m, w.shared->next_hop_field).what = what;
    if (rte_ring_mp_enqueue(w.shared->to_control, m) != 0) {
        b.drop(i, DropReason::neighbor_unresolved);
        return;
    }
    count(w.counters.to_control);
    b.set_next(i, Next::gone);
}

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
        hand_to_control(w, b, i, kHeldPacket);
        return;
    }
    if (op != RTE_ARP_OP_REQUEST) {
        b.drop(i, DropReason::local);
        return;
    }
    uint32_t target = rte_be_to_cpu_32(arp->arp_data.arp_tip);
    const bool moved = sender_moved(w, port, arp);
    if (!p.is_port_address(port, target) && !p.answers_arp_for_ingress(port, target)) {
        if (moved)
            hand_to_control(w, b, i, kHeldPacket);
        else
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
    // The answer to a moved neighbour leaves through the control thread, which learns the new MAC
    // from its target fields first.
    if (moved)
        hand_to_control(w, b, i, kHeldArpAnswer);
    else
        b.set_next(i, Next::transmit);
}

// The ICMPv6 checksum sum of `len` bytes at `l4` under the pseudo-header of `ip6` (not folded).
uint32_t icmp6_sum(const rte_ipv6_hdr* ip6, const uint8_t* l4, uint32_t len) {
    const uint32_t pseudo[2] = {be32(len), be32(kIp6Icmp)};
    uint32_t sum = csum_partial(ip6->src_addr, 32);
    sum = csum_partial(pseudo, sizeof pseudo, sum);
    return csum_partial(l4, len, sum);
}

// A Neighbor Advertisement (hop limit, code and checksum already checked) that passes the rest
// of RFC 4861 7.1.2 goes to the control thread, which learns the target's link-layer address when
// it asked for it (control/neighbor); the dynfield marks it as an advertisement (held.h).
void to_resolver(Worker& w, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    constexpr uint32_t kNaLen = 24;  // type, code, checksum, flags, target
    const bool solicited = pk.l4_len >= kNaLen && (pk.l4[4] & 0x40);
    if (pk.l4_len < kNaLen || ip6_is_multicast(pk.l4 + 8) || (solicited && ip6_is_multicast(pk.ip6->dst_addr))) {
        b.drop(i, DropReason::malformed);
        return;
    }
    for (uint32_t off = kNaLen; off < pk.l4_len;) {
        uint32_t len = off + 2 <= pk.l4_len ? pk.l4[off + 1] * 8u : 0;
        if (len == 0 || off + len > pk.l4_len) {
            b.drop(i, DropReason::malformed);
            return;
        }
        off += len;
    }
    hand_to_control(w, b, i, kHeldAdvertisement);
}

// Neighbor Discovery (RFC 4861): a Neighbor Solicitation for one of the receiving port's IPv6
// addresses (its link-local one included), or on an outside port of its network for an ingress
// IP this gateway serves, is answered with a Neighbor Advertisement built in the solicitation's
// own mbuf. Messages that fail the checks of RFC 4861 7.1.1 are malformed; advertisements go to
// the control thread (to_resolver); other messages (router messages, redirects) are not acted on.
void handle_ndp(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    rte_mbuf* m = b.m[i];
    PacketMeta& pk = b.pkt[i];
    rte_ipv6_hdr* ip6 = pk.ip6;
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(pk.l4);
    // The checks below and the options read the whole message through pk.l4: a message in a chain
    // longer than input made contiguous is first moved whole into its first mbuf (from a link of
    // 1,500 bytes it always fits a standard buffer), or dropped when it does not fit (chain.h).
    if (unlikely(m->nb_segs > 1) && !pull_up(m, m->pkt_len)) {
        b.drop(i, DropReason::malformed);
        return;
    }
    // Only a hop limit of 255 proves the message was not forwarded from another link.
    if (ip6->hop_limits != 255 || ih->icmp_code != 0 || csum_fold(icmp6_sum(ip6, pk.l4, pk.l4_len)) != 0xffff) {
        b.drop(i, DropReason::malformed);
        return;
    }
    if (ih->icmp_type == kNdpNeighborAdvert) {
        to_resolver(w, b, i);
        return;
    }
    if (ih->icmp_type != kNdpNeighborSolicit) {
        b.drop(i, DropReason::local);
        return;
    }
    constexpr uint32_t kNsLen = 24;  // type, code, checksum, reserved, target
    if (pk.l4_len < kNsLen || ip6_is_multicast(pk.l4 + 8)) {
        b.drop(i, DropReason::malformed);
        return;
    }
    // Duplicate address detection: from ::, to the target's solicited-node group, with no source
    // link-layer address option; answered to all nodes.
    const bool dad = ip6_is_unspecified(ip6->src_addr);
    static constexpr uint8_t kSolicitedNode[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff};
    if (dad && std::memcmp(ip6->dst_addr, kSolicitedNode, 13) != 0) {
        b.drop(i, DropReason::malformed);
        return;
    }
    for (uint32_t off = kNsLen; off < pk.l4_len;) {
        uint32_t len = off + 2 <= pk.l4_len ? pk.l4[off + 1] * 8u : 0;
        if (len == 0 || off + len > pk.l4_len || (dad && pk.l4[off] == 1)) {
            b.drop(i, DropReason::malformed);
            return;
        }
        off += len;
    }
    uint8_t target[16], peer[16];
    std::memcpy(target, pk.l4 + 8, 16);
    std::memcpy(peer, ip6->src_addr, 16);
    uint16_t port = m->port;
    if (!p.is_port_address6(port, target) && !p.answers_ndp_for_ingress(port, target)) {
        b.drop(i, DropReason::local);
        return;
    }
    // The advertisement (ndp.h): the fixed IPv6 header (any extension headers of the solicitation
    // are overwritten), 24 bytes of message and the target link-layer address option.
    if (m->nb_segs != 1 || m->buf_len < m->data_off + kNaFrameLen) {
        b.drop(i, DropReason::malformed);
        return;
    }
    m->data_len = kNaFrameLen;
    m->pkt_len = kNaFrameLen;
    auto* f = rte_pktmbuf_mtod(m, uint8_t*);
    // Router (a gateway forwards), Solicited (unless DAD: then to all nodes), Override.
    if (dad)
        write_neighbor_advert(f, kAllNodesMac, p.ports[port].mac, target, kAllNodes, kNaRouter | kNaOverride);
    else
        write_neighbor_advert(f, f + 6, p.ports[port].mac, target, peer, kNaRouter | kNaSolicited | kNaOverride);
    pk.out_port = port;
    b.set_next(i, Next::transmit);
}

// What an echo's answer changes of each family: the ICMP types, the checksum's update (ICMP keeps
// a zero result as 0xffff), and the IP header turned back to the sender with a fresh hop count
// (IPv4's header checksum recomputed; IPv6 has none, and ICMPv6's pseudo-header sums the two
// addresses either way round).
struct EchoIpv4 : Ipv4 {
    static constexpr uint8_t kRequest = RTE_IP_ICMP_ECHO_REQUEST;
    static constexpr uint8_t kReply = RTE_IP_ICMP_ECHO_REPLY;
    static uint16_t apply(uint16_t checksum, uint32_t delta) { return csum_apply_icmp(checksum, delta); }
    static void turn_around(rte_ipv4_hdr* ip) {
        uint32_t peer = ip->src_addr;
        ip->src_addr = ip->dst_addr;
        ip->dst_addr = peer;
        ip->time_to_live = 64;
        ip->hdr_checksum = 0;
        ip->hdr_checksum = rte_ipv4_cksum(ip);
    }
};

struct EchoIpv6 : Ipv6 {
    static constexpr uint8_t kRequest = kIcmp6EchoRequest;
    static constexpr uint8_t kReply = kIcmp6EchoReply;
    static uint16_t apply(uint16_t checksum, uint32_t delta) { return csum_apply(checksum, delta); }
    static void turn_around(rte_ipv6_hdr* ip6) {
        uint8_t peer[16];
        std::memcpy(peer, ip6->src_addr, 16);
        std::memcpy(ip6->src_addr, ip6->dst_addr, 16);
        std::memcpy(ip6->dst_addr, peer, 16);
        ip6->hop_limits = 64;
    }
};

// An echo request to one of the gateway's addresses, answered in place back to the sender's MAC;
// any other ICMP message that classification sent here is dropped as local (only IPv4's may be
// one: IPv6 sends only echo requests here).
template <class F>
void answer_echo(const PolicySnapshot& p, Burst& b, unsigned i) {
    rte_mbuf* m = b.m[i];
    PacketMeta& pk = b.pkt[i];
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(pk.l4);
    if (pk.l4_len < sizeof(rte_icmp_hdr) || ih->icmp_type != F::kRequest) {
        b.drop(i, DropReason::local);
        return;
    }
    uint16_t old_word, new_word;
    std::memcpy(&old_word, ih, 2);
    ih->icmp_type = F::kReply;
    std::memcpy(&new_word, ih, 2);
    ih->icmp_cksum = F::apply(ih->icmp_cksum, csum_delta16(old_word, new_word));
    F::turn_around(F::header(pk));
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
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
            handle_ndp(w, p, b, i);
        else if (b.pkt[i].v6)
            answer_echo<EchoIpv6>(p, b, i);
        else
            answer_echo<EchoIpv4>(p, b, i);
    });
}

}  // namespace egw::dp
