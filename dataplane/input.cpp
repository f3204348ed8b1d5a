// SPDX-License-Identifier: Apache-2.0
//
// Stage input: validates each frame's Ethernet, IPv4 or IPv6 (extension headers walked within a
// bound) and L4 headers, builds its flow key and picks its first next step. It never transmits and never frees: a bad
// frame is marked as a drop with its reason, ARP goes to the local stage.
#include <rte_branch_prediction.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <cstddef>
#include <cstring>

#include "dataplane/address_filter.h"
#include "dataplane/chain.h"
#include "dataplane/checksum.h"
#include "dataplane/ipv6.h"
#include "dataplane/reassembly.h"
#include "dataplane/stages.h"
#include "dataplane/vlan.h"

namespace egw::dp {

namespace {

// Takes the 802.1Q tag off a frame of a device that has sub-ports (the tag in the frame, or as
// the device delivered it in m->vlan_tci) and makes the frame its VLAN's, so that every stage
// after input sees an untagged frame of that sub-port. A priority tag (VLAN id 0) and an untagged
// frame stay on the device's own port. False for a VLAN id that is no sub-port of the device.
inline bool untag(Worker& w, const VlanPorts& v, rte_mbuf* m) {
    uint16_t vid;
    if (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) {
        vid = m->vlan_tci & kVlanIdMask;
        m->ol_flags &= ~(RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED);
    } else {
        // Shorter, or a chain that splits the tag: parse() drops it for its tag.
        if (unlikely(m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr))) return true;
        auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
        if (eth->ether_type != RTE_BE16(kVlanEtherType)) return true;
        vid = rte_be_to_cpu_16(reinterpret_cast<const rte_vlan_hdr*>(eth + 1)->vlan_tci) & kVlanIdMask;
        // The addresses move up over the tag; the frame then starts four bytes later.
        std::memmove(reinterpret_cast<uint8_t*>(eth) + sizeof(rte_vlan_hdr), eth, 2 * RTE_ETHER_ADDR_LEN);
        rte_pktmbuf_adj(m, sizeof(rte_vlan_hdr));
    }
    if (vid == 0) return true;
    uint16_t port = v.find(m->port, vid);
    if (unlikely(port == VlanPorts::kNone)) return false;
    m->port = port;
    count(w.counters.vlan_rx_packets[port]);
    return true;
}

inline bool same_mac(const uint8_t* a, const uint8_t* b) {
    uint32_t a4, b4;
    uint16_t a2, b2;
    std::memcpy(&a4, a, 4);
    std::memcpy(&b4, b, 4);
    std::memcpy(&a2, a + 4, 2);
    std::memcpy(&b2, b + 4, 2);
    return ((a4 ^ b4) | (a2 ^ b2)) == 0;
}

// Header checksum check without a loop for the common 20-byte header: two 8-byte words and a
// 4-byte one summed with the carries wrapped around (add, add-with-carry), then halved twice the
// same way. A one's complement sum of 32- or 64-bit words folds to the sum of its 16-bit words.
inline bool ipv4_header_checksum_ok(const rte_ipv4_hdr* ip, uint32_t ihl) {
    if (likely(ihl == sizeof(rte_ipv4_hdr))) {
        uint64_t a, b;
        uint32_t c;
        std::memcpy(&a, ip, 8);
        std::memcpy(&b, reinterpret_cast<const uint8_t*>(ip) + 8, 8);
        std::memcpy(&c, reinterpret_cast<const uint8_t*>(ip) + 16, 4);
        uint64_t sum;
        bool carry = __builtin_add_overflow(a, b, &sum);
        carry = __builtin_add_overflow(sum, uint64_t{c} + carry, &sum);
        sum += carry;  // cannot carry again: a carry out leaves the sum below 2^33
        uint32_t half;
        carry = __builtin_add_overflow(static_cast<uint32_t>(sum), static_cast<uint32_t>(sum >> 32), &half);
        half += carry;
        return csum_add(static_cast<uint16_t>(half), static_cast<uint16_t>(half >> 16)) == 0xffff;
    }
    return csum_fold(csum_partial(ip, ihl)) == 0xffff;
}

inline bool is_icmp_error(uint8_t type) {
    return type == 3 /* destination unreachable */ || type == 11 /* time exceeded */ ||
           type == 12 /* parameter problem */ || type == 4 /* source quench */;
}

// The ports of a datagram quoted in an ICMP or ICMPv6 error (pk.inner_l4, at least 8 bytes):
// TCP and UDP ports, or for an echo (`echo_proto`) its identifier on the side that chose it, since
// the quote is an echo request we (out2in) or the remote (in2out) sent. False for other protocols.
inline bool quoted_ports(const PacketMeta& pk, uint8_t proto, uint8_t echo_proto, uint16_t& isport, uint16_t& idport) {
    if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
        std::memcpy(&isport, pk.inner_l4, 2);
        std::memcpy(&idport, pk.inner_l4 + 2, 2);
        return true;
    }
    if (proto != echo_proto) return false;
    auto* iih = reinterpret_cast<const rte_icmp_hdr*>(pk.inner_l4);
    isport = pk.dir == Dir::out2in ? iih->icmp_ident : 0;
    idport = pk.dir == Dir::out2in ? 0 : iih->icmp_ident;
    return true;
}

// TCP and UDP headers of either family: kind and ports. Returns a drop reason, or count when the
// packet goes on; `other` (count, kind unset) for any other protocol.
DropReason parse_ports(PacketMeta& pk, uint8_t proto, uint16_t& sport, uint16_t& dport) {
    switch (proto) {
    case IPPROTO_TCP: {
        if (unlikely(pk.l4_len < sizeof(rte_tcp_hdr))) return DropReason::malformed;
        auto* th = reinterpret_cast<rte_tcp_hdr*>(pk.l4);
        uint32_t off = (th->data_off >> 4) * 4u;
        if (unlikely(off < sizeof(rte_tcp_hdr) || off > pk.l4_len)) return DropReason::malformed;
        pk.kind = Kind::tcp;
        sport = th->src_port;
        dport = th->dst_port;
        return DropReason::count;
    }
    case IPPROTO_UDP: {
        auto* uh = reinterpret_cast<rte_udp_hdr*>(pk.l4);
        if (unlikely(pk.l4_len < sizeof(rte_udp_hdr) || rte_be_to_cpu_16(uh->dgram_len) < sizeof(rte_udp_hdr) ||
                     rte_be_to_cpu_16(uh->dgram_len) > pk.l4_len))
            return DropReason::malformed;
        // IPv6 has no "no checksum" (RFC 8200 8.1).
        if (unlikely(pk.v6 && uh->dgram_cksum == 0)) return DropReason::malformed;
        pk.kind = Kind::udp;
        sport = uh->src_port;
        dport = uh->dst_port;
        return DropReason::count;
    }
    default:
        pk.kind = Kind::other;
        return DropReason::count;
    }
}

// The L4 part of a valid IPv4 packet: kind and key ports. Returns a drop reason, or count when
// the packet goes on.
DropReason parse_l4(PacketMeta& pk) {
    switch (pk.ip->next_proto_id) {
    case IPPROTO_TCP:
    case IPPROTO_UDP:
        return parse_ports(pk, pk.ip->next_proto_id, pk.key.sport, pk.key.dport);
    case IPPROTO_ICMP:
        break;
    default:
        pk.kind = Kind::other;
        return DropReason::count;
    }
    if (unlikely(pk.l4_len < sizeof(rte_icmp_hdr))) return DropReason::malformed;
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(pk.l4);
    uint8_t want_echo = pk.dir == Dir::in2out ? RTE_IP_ICMP_ECHO_REQUEST : RTE_IP_ICMP_ECHO_REPLY;
    if (ih->icmp_type == want_echo) {
        pk.kind = Kind::icmp_echo;
        // The identifier plays the pod-side port: source on the way out, destination back.
        if (pk.dir == Dir::in2out)
            pk.key.sport = ih->icmp_ident;
        else
            pk.key.dport = ih->icmp_ident;
        return DropReason::count;
    }
    if (!is_icmp_error(ih->icmp_type)) {
        pk.kind = Kind::other;
        return DropReason::count;
    }
    // The quoted datagram: an IPv4 header and at least 8 bytes of its L4 header.
    uint32_t room = pk.l4_len - sizeof(rte_icmp_hdr);
    auto* in = reinterpret_cast<rte_ipv4_hdr*>(pk.l4 + sizeof(rte_icmp_hdr));
    uint32_t in_ihl = (in->version_ihl & 0x0f) * 4u;
    if (unlikely(room < sizeof(rte_ipv4_hdr) || (in->version_ihl >> 4) != 4 || in_ihl < sizeof(rte_ipv4_hdr) ||
                 room < in_ihl + 8))
        return DropReason::malformed;
    pk.kind = Kind::icmp_error;
    pk.inner_ip = in;
    pk.inner_l4 = reinterpret_cast<uint8_t*>(in) + in_ihl;
    pk.inner_l4_len = room - in_ihl;
    uint16_t isport, idport;
    if (!quoted_ports(pk, in->next_proto_id, IPPROTO_ICMP, isport, idport)) {
        pk.kind = Kind::other;
        return DropReason::count;
    }
    // The quoted packet travelled the other way, so its tuple is reversed into our key.
    pk.key.src = in->dst_addr;
    pk.key.dst = in->src_addr;
    pk.key.sport = idport;
    pk.key.dport = isport;
    pk.key.proto = in->next_proto_id;
    return DropReason::count;
}

// The ICMPv6 part of a valid IPv6 packet: echo (the identifier plays the pod-side port), errors
// (the quoted packet's tuple turned around, as for IPv4), Neighbor Discovery.
DropReason parse_icmp6(PacketMeta& pk) {
    if (unlikely(pk.l4_len < sizeof(rte_icmp_hdr))) return DropReason::malformed;
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(pk.l4);
    uint8_t type = ih->icmp_type;
    if (type == (pk.dir == Dir::in2out ? kIcmp6EchoRequest : kIcmp6EchoReply)) {
        pk.kind = Kind::icmp_echo;
        if (pk.dir == Dir::in2out)
            pk.key6.sport = ih->icmp_ident;
        else
            pk.key6.dport = ih->icmp_ident;
        return DropReason::count;
    }
    if (is_ndp(type)) {
        pk.kind = Kind::ndp;
        return DropReason::count;
    }
    if (!is_icmp6_error(type)) {
        pk.kind = Kind::other;
        return DropReason::count;
    }
    // The quoted packet: its fixed header and at least 8 bytes of a transport header right behind
    // it, or behind the Fragment header of a first fragment (output cuts the datagrams it put
    // together, and an error about one of them quotes it); a quote with other extension headers,
    // or of a later fragment (no ports), is not translated.
    uint32_t room = pk.l4_len - sizeof(rte_icmp_hdr);
    auto* in = reinterpret_cast<rte_ipv6_hdr*>(pk.l4 + sizeof(rte_icmp_hdr));
    if (unlikely(room < sizeof(rte_ipv6_hdr) + 8 || (in->vtc_flow & be32(0xf0000000)) != be32(0x60000000)))
        return DropReason::malformed;
    uint8_t in_proto = in->proto;
    uint32_t in_off = sizeof(rte_ipv6_hdr);
    if (in_proto == kIp6Fragment && room >= sizeof(rte_ipv6_hdr) + 8 + 8) {
        auto* fh = reinterpret_cast<const uint8_t*>(in + 1);
        if ((fh[2] << 8 | fh[3]) >> 3 == 0) {
            in_proto = fh[0];
            in_off += 8;
        }
    }
    pk.kind = Kind::icmp_error;
    pk.inner_ip6 = in;
    pk.inner_l4 = reinterpret_cast<uint8_t*>(in) + in_off;
    pk.inner_l4_len = room - in_off;
    uint16_t isport, idport;
    if (!quoted_ports(pk, in_proto, kIp6Icmp, isport, idport)) {
        pk.kind = Kind::other;
        return DropReason::count;
    }
    std::memcpy(pk.key6.src, in->dst_addr, 16);
    std::memcpy(pk.key6.dst, in->src_addr, 16);
    pk.key6.sport = idport;
    pk.key6.dport = isport;
    pk.key6.proto = in_proto;
    return DropReason::count;
}

// An IPv6 frame after the Ethernet header (`len` bytes): the fixed header, the extension headers
// within their bound, the filters, the transport header.
DropReason parse_ipv6(const PolicySnapshot& p, rte_mbuf* m, rte_ether_hdr* eth, uint32_t len, PacketMeta& pk) {
    auto* ip6 = reinterpret_cast<rte_ipv6_hdr*>(eth + 1);
    if (unlikely(len < sizeof(rte_ipv6_hdr) || (ip6->vtc_flow & be32(0xf0000000)) != be32(0x60000000)))
        return DropReason::malformed;
    uint32_t total = sizeof(rte_ipv6_hdr) + rte_be_to_cpu_16(ip6->payload_len);
    if (unlikely(total > len)) return DropReason::malformed;
    if (len > total) trim_frame(m, sizeof(rte_ether_hdr) + total);
    // The extension headers up to the transport header. Hop-by-Hop options are only allowed first
    // (RFC 8200 4.1); their options are not acted on, as a router in the fast path does not.
    const uint8_t* base = reinterpret_cast<const uint8_t*>(ip6);
    uint8_t nh = ip6->proto;
    uint32_t off = sizeof(rte_ipv6_hdr);
    // `fragment`: a Fragment header with an offset or more fragments to come; an atomic one (RFC
    // 6946: neither) is the whole datagram, taken as it is.
    bool fragment = false, frag_header = false, later_fragment = false, segments_left = false;
    for (unsigned n = 0;; ++n) {
        if (nh != kIp6HopByHop && nh != kIp6Routing && nh != kIp6Fragment && nh != kIp6DestOpts) break;
        if (unlikely(nh == kIp6HopByHop && n != 0)) return DropReason::malformed;
        if (unlikely(n == kIp6MaxExtHeaders)) return DropReason::ipv6_extension_header;
        if (unlikely(off + 8 > total)) return DropReason::malformed;
        uint32_t hlen = nh == kIp6Fragment ? 8 : (base[off + 1] + 1u) * 8;
        if (nh == kIp6Fragment) {
            frag_header = true;
            fragment |= ((base[off + 2] << 8 | base[off + 3]) & 0xfff9) != 0;
            later_fragment |= ((base[off + 2] << 8 | base[off + 3]) & 0xfff8) != 0;
        }
        // A routing header with segments left names further destinations, for the node the
        // destination address names alone to act on (RFC 8200 4.4): checked below.
        segments_left |= nh == kIp6Routing && base[off + 3] != 0;
        nh = base[off];
        off += hlen;
        if (unlikely(off - sizeof(rte_ipv6_hdr) > kIp6MaxExtBytes)) return DropReason::ipv6_extension_header;
        if (unlikely(off > total)) return DropReason::malformed;
    }
    // Addressed to the gateway (a port's address or a NAT address): translating or answering its
    // current destination would ignore the route it asks for, which egw does not follow. On its
    // way elsewhere it is forwarded like any packet, as IPv4 options are.
    if (unlikely(segments_left) &&
        (p.is_port_address6(m->port, ip6->dst_addr) || p.nat_addresses6.find(ip6->dst_addr) != Ip6Map::kMissing))
        return DropReason::ipv6_extension_header;
    pk.v6 = true;
    pk.dir = p.ports[m->port].role == PortRole::inside ? Dir::in2out : Dir::out2in;
    pk.ip = nullptr;
    pk.ip6 = ip6;
    pk.l4_proto = nh;
    pk.l4 = reinterpret_cast<uint8_t*>(ip6) + off;
    pk.l4_len = total - off;
    std::memset(&pk.key6, 0, sizeof pk.key6);
    std::memcpy(pk.key6.src, ip6->src_addr, 16);
    std::memcpy(pk.key6.dst, ip6->dst_addr, 16);
    pk.key6.proto = nh;
    // Neighbor Discovery goes to the local stage, which checks its addresses and hop limit; in a
    // Fragment header (a first or an atomic fragment: a later one shows no ICMPv6 type) it is
    // dropped, as RFC 6980 says, before reassembly could take the header away.
    if (nh == kIp6Icmp && !later_fragment && pk.l4_len >= sizeof(rte_icmp_hdr) &&
        is_ndp(reinterpret_cast<const rte_icmp_hdr*>(pk.l4)->icmp_type)) {
        if (unlikely(frag_header)) return DropReason::ndp_fragmented;
        pk.kind = Kind::ndp;
        return DropReason::count;
    }
    DropReason filtered = filter_addresses6(p, m->port, ip6->src_addr, ip6->dst_addr, eth->dst_addr.addr_bytes[0] & 1);
    if (unlikely(filtered != DropReason::count)) return filtered;
    if (unlikely(fragment)) return DropReason::fragment;
    if (nh == kIp6Icmp) return parse_icmp6(pk);
    return parse_ports(pk, nh, pk.key6.sport, pk.key6.dport);
}

// One frame: returns a drop reason, or count when the packet goes on (pk.kind set).
DropReason parse(const Worker& w, const PolicySnapshot& p, rte_mbuf* m, PacketMeta& pk) {
    if (unlikely(m->nb_segs > 1) && !pull_up(m, kContiguous)) return DropReason::malformed;
    // The whole frame; its headers are in the first mbuf.
    uint32_t len = m->pkt_len;
    if (unlikely(m->data_len < sizeof(rte_ether_hdr))) return DropReason::malformed;
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    // A tag input's VLAN step left on the frame: one on a device without sub-ports, or a second
    // one. Only a priority tag (VLAN id 0) is taken off; the frame then stays on its port.
    if (unlikely(eth->ether_type == RTE_BE16(kVlanEtherType))) {
        if (m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr) ||
            (rte_be_to_cpu_16(reinterpret_cast<const rte_vlan_hdr*>(eth + 1)->vlan_tci) & kVlanIdMask) != 0)
            return DropReason::unknown_vlan;
        std::memmove(reinterpret_cast<uint8_t*>(eth) + sizeof(rte_vlan_hdr), eth, 2 * RTE_ETHER_ADDR_LEN);
        rte_pktmbuf_adj(m, sizeof(rte_vlan_hdr));
        eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
        len = m->pkt_len;
        if (unlikely(eth->ether_type == RTE_BE16(kVlanEtherType))) return DropReason::unknown_vlan;
    }
    if (unlikely(m->port >= w.n_ports || p.ports[m->port].role == PortRole::none)) return DropReason::local;
    // Promiscuous ports see other hosts' unicast; only ours, broadcast and multicast go on.
    if (unlikely(!(eth->dst_addr.addr_bytes[0] & 1) && !same_mac(eth->dst_addr.addr_bytes, p.ports[m->port].mac)))
        return DropReason::foreign_mac;
    pk.v6 = false;
    if (eth->ether_type != be16(RTE_ETHER_TYPE_IPV4)) {
        if (eth->ether_type == be16(RTE_ETHER_TYPE_IPV6)) return parse_ipv6(p, m, eth, len - sizeof(rte_ether_hdr), pk);
        if (eth->ether_type != be16(RTE_ETHER_TYPE_ARP)) return DropReason::unknown_ethertype;
        pk.kind = Kind::arp;
        return DropReason::count;
    }
    len -= sizeof(rte_ether_hdr);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    uint32_t ihl = (ip->version_ihl & 0x0f) * 4u;
    uint32_t total = rte_be_to_cpu_16(ip->total_length);
    if (unlikely(len < sizeof(rte_ipv4_hdr) || (ip->version_ihl >> 4) != 4 || ihl < sizeof(rte_ipv4_hdr) || ihl > len ||
                 total < ihl || total > len))
        return DropReason::malformed;
    // Only GOOD spares the check: NONE (GOOD|BAD bits) means the header is intact but its checksum
    // field is not right, and an incremental update of a wrong field sends a wrong checksum.
    if ((m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) != RTE_MBUF_F_RX_IP_CKSUM_GOOD &&
        unlikely(!ipv4_header_checksum_ok(ip, ihl)))
        return DropReason::malformed;
    // Ethernet padding after the IPv4 datagram must not be translated or forwarded as data.
    if (len > total) trim_frame(m, sizeof(rte_ether_hdr) + total);
    // Multicast, broadcast and martian addresses are never translated, forwarded or answered.
    DropReason filtered = filter_addresses(p, w.n_ports, rte_be_to_cpu_32(ip->src_addr), rte_be_to_cpu_32(ip->dst_addr),
                                           eth->dst_addr.addr_bytes[0] & 1);
    if (unlikely(filtered != DropReason::count)) return filtered;
    if (unlikely(ip->fragment_offset & be16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)))
        return DropReason::fragment;

    pk.dir = p.ports[m->port].role == PortRole::inside ? Dir::in2out : Dir::out2in;
    pk.ip = ip;
    pk.l4 = reinterpret_cast<uint8_t*>(ip) + ihl;
    pk.l4_len = total - ihl;
    pk.key = FlowKey{ip->src_addr, ip->dst_addr, 0, 0, ip->next_proto_id, {}};
    return parse_l4(pk);
}

// The common packet's TCP or UDP header, for parse_common() and parse_common6(): its kind, or
// false for another protocol or a header that does not fit in `l4_len` (parse() then judges the
// packet). For IPv6 (`V6`) a UDP checksum of 0 is not common either: IPv6 has no "no checksum"
// (RFC 8200 8.1).
template <bool V6>
__attribute__((always_inline)) inline bool common_l4(const uint8_t* l4, uint32_t l4_len, uint8_t proto, Kind& kind) {
    if (proto == IPPROTO_UDP) {
        auto* uh = reinterpret_cast<const rte_udp_hdr*>(l4);
        if (unlikely(l4_len < sizeof(rte_udp_hdr))) return false;
        uint32_t dl = rte_be_to_cpu_16(uh->dgram_len);
        if (unlikely(dl < sizeof(rte_udp_hdr) || dl > l4_len || (V6 && uh->dgram_cksum == 0))) return false;
        kind = Kind::udp;
        return true;
    }
    if (proto == IPPROTO_TCP) {
        auto* th = reinterpret_cast<const rte_tcp_hdr*>(l4);
        if (unlikely(l4_len < sizeof(rte_tcp_hdr))) return false;
        uint32_t off = (th->data_off >> 4) * 4u;
        if (unlikely(off < sizeof(rte_tcp_hdr) || off > l4_len)) return false;
        kind = Kind::tcp;
        return true;
    }
    return false;
}

// A frame sent to the MAC of `port`, a port with a role and a unicast MAC: one 8-byte load and
// compare (PolicySnapshot::unicast_dst). The frame has at least 14 bytes.
__attribute__((always_inline)) inline bool to_port_mac(const PolicySnapshot& p, uint16_t port,
                                                       const rte_ether_hdr* eth) {
    static_assert(RTE_BYTE_ORDER == RTE_LITTLE_ENDIAN, "the destination word is read little-endian");
    uint64_t head;
    std::memcpy(&head, eth, sizeof head);
    return head << 16 == p.unicast_dst[port];
}

// The common frame, judged with the fewest instructions: one mbuf, unicast to the receiving
// port's MAC, IPv4 with a 20-byte header, not a fragment, TCP or UDP. Anything else returns false
// untouched and parse() judges it: for a frame this accepts, parse() would go on with the same
// metadata (the same tests, in an order that fails early on whatever is uncommon), or drop it for
// its addresses. Those are not filtered here: a hit of a session of the current epoch has
// addresses the filter passed, and nat_slow filters every other packet first (checked_epoch() in
// nat_session.h).
__attribute__((always_inline)) inline bool parse_common(const Worker& w, const PolicySnapshot& p, rte_mbuf* m,
                                                        PacketMeta& pk) {
    uint16_t port = m->port;
    if (unlikely(m->nb_segs != 1 || port >= w.n_ports || m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr)))
        return false;
    const PortPolicy& pp = p.ports[port];
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    if (unlikely(eth->ether_type != be16(RTE_ETHER_TYPE_IPV4) || !to_port_mac(p, port, eth))) return false;
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    // Version 4, IHL 5, neither MF nor a fragment offset: bytes 0 and 6-7 of the header at once.
    uint64_t head;
    std::memcpy(&head, ip, sizeof head);
    constexpr uint64_t kHeadMask = 0xff3f0000000000ffull, kHeadCommon = 0x45;
    static_assert(RTE_BYTE_ORDER == RTE_LITTLE_ENDIAN, "the header word is read little-endian");
    uint32_t len = m->pkt_len - sizeof(rte_ether_hdr);
    uint32_t total = rte_be_to_cpu_16(ip->total_length);
    if (unlikely((head & kHeadMask) != kHeadCommon || total < sizeof(rte_ipv4_hdr) || total > len)) return false;
    if ((m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) != RTE_MBUF_F_RX_IP_CKSUM_GOOD &&
        unlikely(!ipv4_header_checksum_ok(ip, sizeof(rte_ipv4_hdr))))
        return false;
    uint8_t* l4 = reinterpret_cast<uint8_t*>(ip) + sizeof(rte_ipv4_hdr);
    uint32_t l4_len = total - sizeof(rte_ipv4_hdr);
    uint8_t proto = ip->next_proto_id;
    Kind kind;
    if (!common_l4<false>(l4, l4_len, proto, kind)) return false;
    // Ethernet padding after the IPv4 datagram must not be translated or forwarded as data.
    if (len > total) rte_pktmbuf_trim(m, static_cast<uint16_t>(len - total));
    // TCP and UDP both have their ports in the first four bytes.
    uint32_t port_pair;
    std::memcpy(&port_pair, l4, sizeof port_pair);
    pk.v6 = false;
    pk.kind = kind;
    pk.dir = pp.role == PortRole::inside ? Dir::in2out : Dir::out2in;
    pk.ip = ip;
    pk.l4 = l4;
    pk.l4_len = l4_len;
    // The key in two 8-byte stores, the widths its hash reads it back with (begin_lookup): a
    // load that spans several narrower stores cannot be forwarded from them and waits until they
    // reach the cache, which was the largest stall of this stage.
    uint64_t addresses, rest = proto;
    std::memcpy(&addresses, reinterpret_cast<const uint8_t*>(ip) + offsetof(rte_ipv4_hdr, src_addr),
                sizeof addresses);  // src_addr, then dst_addr
    rest = rest << 32 | port_pair;
    static_assert(offsetof(rte_ipv4_hdr, dst_addr) == offsetof(rte_ipv4_hdr, src_addr) + 4 &&
                  offsetof(FlowKey, dst) == 4 && offsetof(FlowKey, sport) == 8 && offsetof(FlowKey, dport) == 10 &&
                  offsetof(FlowKey, proto) == 12);
    auto* key = reinterpret_cast<uint8_t*>(&pk.key);
    std::memcpy(key, &addresses, sizeof addresses);
    std::memcpy(key + 8, &rest, sizeof rest);
    return true;
}

// parse_common() for IPv6: one mbuf, unicast to the receiving port's MAC, TCP or UDP right
// behind the fixed header (no extension headers). Anything else returns false untouched for
// parse(), which would go on with the same metadata for a frame this accepts, or drop it for its
// addresses: as for IPv4, those are left to nat_slow and to the session's epoch. Not inlined:
// inside the burst loop it cost every IPv4 packet 4-6 instructions (callgrind), out of line 2.
__attribute__((noinline)) bool parse_common6(const Worker& w, const PolicySnapshot& p, rte_mbuf* m, PacketMeta& pk) {
    uint16_t port = m->port;
    if (unlikely(m->nb_segs != 1 || port >= w.n_ports || m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_ipv6_hdr)))
        return false;
    const PortPolicy& pp = p.ports[port];
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    if (unlikely(eth->ether_type != be16(RTE_ETHER_TYPE_IPV6) || !to_port_mac(p, port, eth))) return false;
    auto* ip6 = reinterpret_cast<rte_ipv6_hdr*>(eth + 1);
    uint32_t len = m->pkt_len - sizeof(rte_ether_hdr);
    uint32_t total = sizeof(rte_ipv6_hdr) + rte_be_to_cpu_16(ip6->payload_len);
    if (unlikely((ip6->vtc_flow & be32(0xf0000000)) != be32(0x60000000) || total > len)) return false;
    const uint8_t* s = ip6->src_addr;
    uint8_t* l4 = reinterpret_cast<uint8_t*>(ip6 + 1);
    uint32_t l4_len = total - sizeof(rte_ipv6_hdr);
    uint8_t proto = ip6->proto;
    Kind kind;
    if (!common_l4<true>(l4, l4_len, proto, kind)) return false;
    if (len > total) rte_pktmbuf_trim(m, static_cast<uint16_t>(len - total));
    uint32_t port_pair;
    std::memcpy(&port_pair, l4, sizeof port_pair);
    pk.v6 = true;
    pk.kind = kind;
    pk.dir = pp.role == PortRole::inside ? Dir::in2out : Dir::out2in;
    pk.ip = nullptr;
    pk.ip6 = ip6;
    pk.l4_proto = proto;
    pk.l4 = l4;
    pk.l4_len = l4_len;
    // The key as its hash reads it back (see parse_common): the two addresses, adjacent in the
    // header, in one copy; the ports, the protocol and the padding in one 8-byte store.
    static_assert(offsetof(rte_ipv6_hdr, dst_addr) == offsetof(rte_ipv6_hdr, src_addr) + 16 &&
                  offsetof(FlowKey6, dst) == 16 && offsetof(FlowKey6, sport) == 32 && offsetof(FlowKey6, dport) == 34 &&
                  offsetof(FlowKey6, proto) == 36 && sizeof(FlowKey6) == 40);
    auto* key = reinterpret_cast<uint8_t*>(&pk.key6);
    std::memcpy(key, s, 32);
    uint64_t rest = uint64_t{proto} << 32 | port_pair;
    std::memcpy(key + 32, &rest, sizeof rest);
    return true;
}

// How many keys of a lookup queue behind the newest input scans a key's bucket for its candidate
// session (SessionTable::scan_begun). Measured with 1,000,000 sessions (docs/performance-log.md §1,
// 2026-11-29 12:30; 4 keys on 2026-11-27): at 4 and 8 input waits for buckets that have not arrived;
// 12 and 16 cost the same, and 12 leaves fewer keys to the lookup's own scan.
constexpr unsigned kScanBehind = 12;

// A packet bound for nat_lookup: its key's hash, its session bucket on the way to the cache
// while input goes on with the rest of the burst, and its place in the lookup's queue
// (`queued`: each direction's count so far, kept by stage_input until the end of the burst). An
// IPv6 packet on a worker with no IPv6 table is not looked up (stage_nat_lookup) and gets neither.
template <class Table, class Key>
__attribute__((always_inline)) inline void begin_lookup(const Table& t, LookupQueue<Key>* queues, unsigned (&queued)[2],
                                                        unsigned i, Dir dir, const Key& key, uint32_t& key_hash) {
    static_assert(static_cast<unsigned>(Dir::in2out) == 0 && static_cast<unsigned>(Dir::out2in) == 1);
    auto d = static_cast<unsigned>(dir);
    LookupQueue<Key>& q = queues[d];
    unsigned k = queued[d]++;
    uint32_t h = d == 0 ? t.begin_inside(key, q.home[k]) : t.begin_outside(key, q.home[k]);
    key_hash = h;
    q.pos[k] = static_cast<uint8_t>(i);
    q.hash[k] = h;
    q.key[k] = &key;
    // The key kScanBehind places earlier in this queue: its bucket has had that many packets'
    // parsing to arrive, so its candidate session can be found and sent for now.
    if (k >= kScanBehind) {
        unsigned e = k - kScanBehind;
        q.cand[e] = t.scan_begun(q.home[e], q.hash[e]);
    }
}

// A common packet (its next step not yet in any mask) that another worker owns: marked for the
// hand-off. A common packet is TCP or UDP and no fragment, so where its port hashes as egwd set
// it up, the NIC's hash is the flow's.
inline bool handed_off(const Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, const rte_mbuf* m) {
    PacketMeta& pk = b.pkt[i];
    const bool hw = (m->ol_flags & RTE_MBUF_F_RX_RSS_HASH) && (w.shared->flow_owners.hardware >> m->port & 1);
    unsigned owner = owner_of(w, p, pk, hw ? &m->hash.rss : nullptr);
    if (owner == w.index) return false;
    pk.owner = static_cast<uint8_t>(owner);
    pk.next = Next::handoff;
    b.waiting[static_cast<unsigned>(Next::handoff)] |= 1u << i;
    return true;
}

// stage_input() for one worker (`Multi` false: nothing is handed off) or several, so that the
// common packet of a single worker does not test for a hand-off; and with VLAN sub-ports
// (`Vlans`) or without, so that a gateway without them does not look for tags.
template <bool Multi, bool Vlans>
void input_burst(Worker& w, const PolicySnapshot& p, Burst& b, rte_mbuf* const* pkts, unsigned n) {
    b.n = n;
    for (uint32_t& mask : b.waiting)
        mask = 0;
    unsigned queued4[2] = {0, 0}, queued6[2] = {0, 0};
    // The common packets bound for nat_lookup (their next step is set once, after the loop).
    uint32_t to_lookup = 0;
    for (unsigned i = 0; i < n; ++i)
        rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
    for (unsigned i = 0; i < n; ++i) {
        rte_mbuf* m = pkts[i];
        PacketMeta& pk = b.pkt[i];
        b.m[i] = m;
        if constexpr (Vlans) {
            const VlanPorts& vlans = w.shared->vlans;
            if (m->port < kMaxPorts && (vlans.devices >> m->port & 1) && unlikely(!untag(w, vlans, m))) {
                pk.next = Next::drop;
                pk.session = SessionTable::kNone;
                b.drop(i, DropReason::unknown_vlan);
                continue;
            }
        }
        // The common packets of either family: handed to their owner (whose input parses them
        // again), or bound for nat_lookup, which sets their session (none for IPv6 on a worker
        // without an IPv6 table). Every other packet's session is none from its parse on.
        if (likely(parse_common(w, p, m, pk))) {
            if (Multi && handed_off(w, p, b, i, m)) continue;
            begin_lookup(w.sessions, b.lookup4, queued4, i, pk.dir, pk.key, pk.key_hash);
            pk.next = Next::nat_lookup;
            to_lookup |= 1u << i;
            continue;
        }
        if (parse_common6(w, p, m, pk)) {
            if (Multi && handed_off(w, p, b, i, m)) continue;
            if (w.sessions6.capacity())
                begin_lookup(w.sessions6, b.lookup6, queued6, i, pk.dir, pk.key6, pk.key_hash);
            else
                pk.session = SessionTable::kNone;
            pk.next = Next::nat_lookup;
            to_lookup |= 1u << i;
            continue;
        }
        pk.next = Next::drop;
        pk.session = SessionTable::kNone;
        DropReason r = parse(w, p, m, pk);
        if (unlikely(r == DropReason::fragment) && w.reassembly) {
            // Held until its datagram is complete; the whole datagram then goes on in its place
            // (a fragment inside it is dropped: it is not put together twice).
            m = pk.v6 ? reassembly_add6(w, m, pk.ip6)
                      : reassembly_add(w, m, rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, sizeof(rte_ether_hdr)));
            if (!m) {
                b.set_next(i, Next::gone);
                continue;
            }
            b.m[i] = m;
            r = parse(w, p, m, pk);
            // Neighbor Discovery whose first fragment showed no ICMPv6 type (RFC 6980).
            if (unlikely(r == DropReason::count && pk.kind == Kind::ndp)) r = DropReason::ndp_fragmented;
        }
        if (unlikely(r != DropReason::count)) {
            b.drop(i, r);
            continue;
        }
        if (pk.kind == Kind::arp || pk.kind == Kind::ndp) {
            b.set_next(i, Next::local);
            continue;
        }
        if constexpr (Multi) {
            unsigned owner = owner_of(w, p, pk);
            if (owner != w.index) {
                pk.owner = static_cast<uint8_t>(owner);
                b.set_next(i, Next::handoff);
                continue;
            }
        }
        if (pk.kind == Kind::other) {
            b.set_next(i, Next::nat_slow);
            continue;
        }
        if (!pk.v6)
            begin_lookup(w.sessions, b.lookup4, queued4, i, pk.dir, pk.key, pk.key_hash);
        else if (w.sessions6.capacity())
            begin_lookup(w.sessions6, b.lookup6, queued6, i, pk.dir, pk.key6, pk.key_hash);
        b.set_next(i, Next::nat_lookup);
    }
    b.waiting[static_cast<unsigned>(Next::nat_lookup)] |= to_lookup;
    for (unsigned d = 0; d < 2; ++d) {
        b.lookup4[d].n = queued4[d];
        b.lookup6[d].n = queued6[d];
        b.lookup4[d].scanned = queued4[d] > kScanBehind ? queued4[d] - kScanBehind : 0;
        b.lookup6[d].scanned = queued6[d] > kScanBehind ? queued6[d] - kScanBehind : 0;
    }
}

}  // namespace

void stage_input(Worker& w, const PolicySnapshot& p, Burst& b, rte_mbuf* const* pkts, unsigned n) {
    const bool vlans = w.shared->vlans.devices != 0;
    if (w.shared->n_workers > 1) {
        if (vlans)
            input_burst<true, true>(w, p, b, pkts, n);
        else
            input_burst<true, false>(w, p, b, pkts, n);
    } else if (vlans) {
        input_burst<false, true>(w, p, b, pkts, n);
    } else {
        input_burst<false, false>(w, p, b, pkts, n);
    }
}

}  // namespace egw::dp
