// SPDX-License-Identifier: Apache-2.0
//
// Stage icmp_reply: the ICMP errors the gateway originates (RFC 1812 4.3). Earlier stages ask for
// one with reply_icmp_error() (gateway_icmp_error.h) instead of dropping the packet; here, in packet
// order, each such packet is
//   - dropped under its reason when RFC 1812 4.3.2.7 forbids an answer: an ICMP error, a fragment
//     other than the first, a link-layer broadcast or multicast, an IP broadcast or multicast
//     destination, a source that does not name one host;
//   - dropped under its reason, and counted as rate-limited, when the worker's token bucket is
//     empty;
//   - otherwise rewritten into the error in its own mbuf and sent back out the port it came in on,
//     to the MAC it came from, from that port's address (the one on the sender's subnet).
//
// The rewrite: the offending datagram stays where it is and becomes the quote; the Ethernet, IPv4
// and ICMP headers are written in the 42 bytes in front of it (28 of them taken from the
// headroom, or the quote moved back when there is none), and the frame is cut after as much of
// the datagram as keeps the error's IPv4 datagram within 576 bytes (RFC 1812 4.3.2.3).
//
// IPv6 (RFC 4443) the same way: never for an ICMPv6 error or redirect, a packet to a multicast
// address or in a link-layer multicast or broadcast frame, or from a source that names no single
// node (2.4(e)); the same token bucket; from the receiving port's global address (the one on the
// sender's prefix, else its first; its link-local one when it has none), or the address it was
// sent to when that is the gateway's own (port unreachable, 2.2(a)), hop limit 64, quoting as
// much of the packet as keeps the error within the IPv6 minimum MTU of 1280 bytes (2.4(c)), the
// ICMPv6 checksum over the pseudo-header. 62 bytes of headers go in front of the quote.
#include <rte_branch_prediction.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/address_filter.h"
#include "dataplane/checksum.h"
#include "dataplane/family.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/ipv6.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

constexpr uint32_t kHeaders = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_icmp_hdr);  // 42
constexpr uint8_t kTos = 0xc0;  // precedence 6, internetwork control (RFC 1812 4.3.2.5); DSCP CS6
constexpr uint8_t kTtl = 64;

// ICMP messages that are not errors: echo, timestamp, information and address mask requests and
// replies. Anything else (the errors, and types egw does not know) is never answered.
inline bool is_icmp_query(uint8_t type) {
    switch (type) {
    case 0:
    case 8:
    case 13:
    case 14:
    case 15:
    case 16:
    case 17:
    case 18:
        return true;
    default:
        return false;
    }
}

// A token bucket in its GCRA form: one timestamp, the time at which the bucket would be full again
// (`icmp_tat`), instead of a token count and a refill time.
bool take_token(Worker& w) {
    const IcmpLimit& l = w.shared->icmp_limit;
    if (l.interval == 0) return false;
    uint64_t tat = w.icmp_tat > w.now ? w.icmp_tat : w.now;
    if (tat - w.now > l.tolerance) return false;
    w.icmp_tat = tat + l.interval;
    return true;
}

// The receiving port's address on the sender's subnet, else its first.
uint32_t source_address(const PortPolicy& pp, uint32_t peer) {
    for (unsigned k = 0; k < pp.n_addrs; ++k) {
        uint32_t mask = pp.prefix_len[k] == 0 ? 0 : ~uint32_t{0} << (32 - pp.prefix_len[k]);
        if (((peer ^ pp.addrs[k]) & mask) == 0) return pp.addrs[k];
    }
    return pp.addrs[0];
}

// Whether an error's `headers` fit in front of the `len` bytes of its quote at `quote`: in the
// headroom, or in the buffer with the quote moved back. For both families.
inline bool fits(const rte_mbuf* m, const void* quote, uint32_t headers, uint32_t len) {
    auto* buf = static_cast<const uint8_t*>(m->buf_addr);
    return static_cast<uint32_t>(static_cast<const uint8_t*>(quote) - buf) >= headers ||
           uint32_t{m->data_off} + headers + len <= m->buf_len;
}

// Makes the mbuf the error's frame, the quote where fits() found room: `headers` bytes in front of
// the `len` bytes at `quote` and nothing after. Returns where the headers go; the caller has read
// what it needs of the old Ethernet header, which the quote may have been moved over.
uint8_t* make_room(rte_mbuf* m, uint8_t* quote, uint32_t headers, uint32_t len) {
    // A chained datagram is quoted from its first segment; the rest of the chain is released.
    if (unlikely(m->nb_segs > 1)) {
        rte_pktmbuf_free(m->next);
        m->next = nullptr;
        m->nb_segs = 1;
    }
    auto* buf = static_cast<uint8_t*>(m->buf_addr);
    uint8_t* start;
    if (likely(static_cast<uint32_t>(quote - buf) >= headers)) {
        start = quote - headers;
    } else {
        start = rte_pktmbuf_mtod(m, uint8_t*);
        std::memmove(start + headers, quote, len);
    }
    m->data_off = static_cast<uint16_t>(start - buf);
    m->data_len = static_cast<uint16_t>(headers + len);
    m->pkt_len = m->data_len;
    m->ol_flags = 0;
    return start;
}

// The error's Ethernet header at `start`: from the receiving port back to the sender.
rte_ether_hdr* write_ethernet(uint8_t* start, const rte_ether_addr& peer_mac, const PortPolicy& pp, uint16_t type) {
    auto* e = reinterpret_cast<rte_ether_hdr*>(start);
    e->dst_addr = peer_mac;
    std::memcpy(e->src_addr.addr_bytes, pp.mac, 6);
    e->ether_type = be16(type);
    return e;
}

// The ICMP or ICMPv6 header of the error the packet asks for, its checksum left 0 to be summed.
void write_icmp(rte_icmp_hdr* icmp, const PacketMeta& pk) {
    unsigned e_index = static_cast<unsigned>(pk.icmp);
    icmp->icmp_type = kIcmpErrorType[e_index];
    icmp->icmp_code = kIcmpErrorCode[e_index];
    icmp->icmp_cksum = 0;
    uint32_t aux = be32(pk.icmp_aux);
    std::memcpy(&icmp->icmp_ident, &aux, 4);
}

// IPv6 ------------------------------------------------------------------------------------------

constexpr uint32_t kHeaders6 = sizeof(rte_ether_hdr) + sizeof(rte_ipv6_hdr) + sizeof(rte_icmp_hdr);  // 62
// RFC 4443 2.4(c): the error's packet within the minimum IPv6 MTU.
constexpr uint32_t kIcmp6ErrorMaxLength = 1280;
constexpr uint32_t kIcmp6ErrorMaxQuote = kIcmp6ErrorMaxLength - sizeof(rte_ipv6_hdr) - sizeof(rte_icmp_hdr);

// The receiving port's global address on the sender's prefix, else its first, else its
// link-local address.
const uint8_t* source_address6(const PortPolicy& pp, const uint8_t* peer) {
    for (unsigned k = 0; k < pp.n_addrs6; ++k) {
        uint8_t a[16], b[16];
        PolicySnapshot::mask6(pp.addrs6[k].b, pp.prefix_len6[k], a);
        PolicySnapshot::mask6(peer, pp.prefix_len6[k], b);
        if (ip6_equal(a, b)) return pp.addrs6[k].b;
    }
    return pp.n_addrs6 ? pp.addrs6[0].b : pp.link_local.b;
}

// Both families --------------------------------------------------------------------------------

// What the error's builder reads and writes of each family: the datagram's length, how much of
// it an error may quote, the error's own IP header, and (ICMPv6) the pseudo-header's sum.
struct ErrorIpv4 : Ipv4 {
    using Address = uint32_t;  // network order
    static constexpr uint32_t kHeaders = dp::kHeaders;
    static constexpr uint32_t kMaxQuote = kIcmpErrorMaxQuote;
    static constexpr uint16_t kEtherType = RTE_ETHER_TYPE_IPV4;
    static uint32_t datagram_length(const Header* ip) { return rte_be_to_cpu_16(ip->total_length); }
    static Address source(const Header* ip) { return ip->src_addr; }
    static Address destination(const Header* ip) { return ip->dst_addr; }
    static Address port_address(const PortPolicy& pp, Address peer) {
        return be32(source_address(pp, rte_be_to_cpu_32(peer)));
    }
    static void write_header(Header* ip, Address own, Address peer, uint32_t icmp_len) {
        ip->version_ihl = RTE_IPV4_VHL_DEF;
        ip->type_of_service = kTos;
        ip->total_length = be16(static_cast<uint16_t>(sizeof(rte_ipv4_hdr) + icmp_len));
        ip->packet_id = 0;
        ip->fragment_offset = 0;
        ip->time_to_live = kTtl;
        ip->next_proto_id = IPPROTO_ICMP;
        ip->src_addr = own;
        ip->dst_addr = peer;
        ip->hdr_checksum = 0;
        ip->hdr_checksum = rte_ipv4_cksum(ip);
    }
    static uint32_t pseudo_sum(const Header*, uint32_t) { return 0; }

    // RFC 1812 4.3.2.7's never-cases beyond the link-layer multicast or broadcast frame: a
    // fragment other than the first, an IP broadcast or multicast destination, a source that
    // does not name one host, an ICMP error (any ICMP message but a query, or one too short to
    // tell); and a receiving port without an address to answer from.
    static IcmpError error_kind(IcmpError asked) { return asked; }
    static bool never_answered(const Worker& w, const PolicySnapshot& p, const PacketMeta& pk) {
        const Header* ip = pk.ip;
        if (ip->fragment_offset & be16(RTE_IPV4_HDR_OFFSET_MASK)) return true;
        uint32_t src = rte_be_to_cpu_32(ip->src_addr);
        uint32_t dst = rte_be_to_cpu_32(ip->dst_addr);
        if (is_multicast(dst) || is_limited_broadcast(dst) || is_directed_broadcast(p, w.n_ports, dst)) return true;
        if (!is_single_host(p, w.n_ports, src)) return true;
        return ip->next_proto_id == IPPROTO_ICMP && (pk.l4_len == 0 || !is_icmp_query(pk.l4[0]));
    }
    static bool has_address(const PortPolicy& pp) { return pp.n_addrs > 0; }
};

struct ErrorIpv6 : Ipv6 {
    // Copied out of the packet: the error's headers may be written over the old ones.
    using Address = dp::Ip6;
    static constexpr uint32_t kHeaders = kHeaders6;
    static constexpr uint32_t kMaxQuote = kIcmp6ErrorMaxQuote;
    static constexpr uint16_t kEtherType = RTE_ETHER_TYPE_IPV6;
    static uint32_t datagram_length(const Header* ip6) {
        return sizeof(rte_ipv6_hdr) + rte_be_to_cpu_16(ip6->payload_len);
    }
    static Address source(const Header* ip6) { return copy(ip6->src_addr); }
    static Address destination(const Header* ip6) { return copy(ip6->dst_addr); }
    static Address port_address(const PortPolicy& pp, const Address& peer) { return copy(source_address6(pp, peer.b)); }
    static void write_header(Header* ip6, const Address& own, const Address& peer, uint32_t icmp_len) {
        ip6->vtc_flow = be32(0x60000000u | uint32_t{kTos} << 20);
        ip6->payload_len = be16(static_cast<uint16_t>(icmp_len));
        ip6->proto = kIp6Icmp;
        ip6->hop_limits = kTtl;
        std::memcpy(ip6->src_addr, own.b, 16);
        std::memcpy(ip6->dst_addr, peer.b, 16);
    }
    static uint32_t pseudo_sum(const Header* ip6, uint32_t icmp_len) {
        const uint32_t pseudo[2] = {be32(icmp_len), be32(kIp6Icmp)};
        return csum_partial(pseudo, sizeof pseudo, csum_partial(ip6->src_addr, 32));
    }

    // RFC 4443 2.4(e)'s never-cases beyond the link-layer multicast or broadcast frame: a
    // multicast destination, a source that names no single node, an ICMPv6 error (types below
    // 128) or redirect, or a message too short to tell. A port always has its link-local address
    // to answer from.
    static IcmpError error_kind(IcmpError asked) { return as_icmp6(asked); }
    static bool never_answered(const Worker&, const PolicySnapshot&, const PacketMeta& pk) {
        const uint8_t* src = pk.ip6->src_addr;
        if (ip6_is_multicast(pk.ip6->dst_addr) || ip6_is_multicast(src) || ip6_is_unspecified(src) ||
            ip6_is_loopback(src) || ip6_is_v4_mapped(src))
            return true;
        return pk.l4_proto == kIp6Icmp && (pk.l4_len == 0 || pk.l4[0] < kIcmp6EchoRequest || pk.l4[0] == kNdpRedirect);
    }
    static bool has_address(const PortPolicy&) { return true; }

private:
    static Address copy(const uint8_t* a) {
        Address r;
        std::memcpy(r.b, a, 16);
        return r;
    }
};

// How many bytes of the datagram the error quotes: as many as the family's rule (576 bytes for
// IPv4, 1280 for IPv6) allows of what the first segment holds.
template <class F>
uint32_t quote_length(const rte_mbuf* m, const PacketMeta& pk) {
    const typename F::Header* ip = F::header(pk);
    uint32_t offset = static_cast<uint32_t>(reinterpret_cast<const uint8_t*>(ip) - rte_pktmbuf_mtod(m, const uint8_t*));
    uint32_t len = F::datagram_length(ip);
    uint32_t held = m->data_len - offset;
    if (len > held) len = held;
    return len < F::kMaxQuote ? len : F::kMaxQuote;
}

// Rewrites packet i into the error: Ethernet to the sender; IP from the address the packet was
// sent to when it was the gateway's own (answers_own_address()), else from the receiving port's
// address on the sender's subnet or prefix; ICMP or ICMPv6 with the quote.
template <class F>
void build(const PolicySnapshot& p, rte_mbuf* m, const PacketMeta& pk, uint32_t len) {
    const PortPolicy& pp = p.ports[m->port];
    rte_ether_addr peer_mac = rte_pktmbuf_mtod(m, rte_ether_hdr*)->src_addr;
    typename F::Header* received = F::header(pk);
    const typename F::Address peer = F::source(received);
    const typename F::Address own = answers_own_address(pk.icmp) ? F::destination(received) : F::port_address(pp, peer);

    uint8_t* start = make_room(m, reinterpret_cast<uint8_t*>(received), F::kHeaders, len);
    auto* ip = reinterpret_cast<typename F::Header*>(write_ethernet(start, peer_mac, pp, F::kEtherType) + 1);
    const uint32_t icmp_len = sizeof(rte_icmp_hdr) + len;
    F::write_header(ip, own, peer, icmp_len);

    auto* icmp = reinterpret_cast<rte_icmp_hdr*>(ip + 1);
    write_icmp(icmp, pk);
    icmp->icmp_cksum = csum_finish(csum_partial(icmp, icmp_len, F::pseudo_sum(ip, icmp_len)));
}

// Whether the packet may be answered with an error at all: never in a link-layer multicast or
// broadcast frame (both RFCs), nor in the family's own never-cases, nor when the family has no
// error for what the stage asked.
template <class F>
bool may_answer(const Worker& w, const PolicySnapshot& p, const rte_mbuf* m, const PacketMeta& pk) {
    if (pk.icmp == IcmpError::count) return false;
    if (rte_pktmbuf_mtod(m, const rte_ether_hdr*)->dst_addr.addr_bytes[0] & 1) return false;
    return !F::never_answered(w, p, pk) && F::has_address(p.ports[m->port]);
}

template <class F>
void reply(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    rte_mbuf* m = b.m[i];
    pk.icmp = F::error_kind(pk.icmp);
    const uint32_t len = quote_length<F>(m, pk);
    if (!may_answer<F>(w, p, m, pk) || unlikely(!fits(m, F::header(pk), F::kHeaders, len))) {
        b.drop(i, pk.reason);
        return;
    }
    if (!take_token(w)) {
        count(w.counters.icmp_rate_limited);
        b.drop(i, pk.reason);
        return;
    }
    build<F>(p, m, pk, len);
    count(w.counters.icmp_sent[static_cast<unsigned>(pk.icmp)]);
    pk.out_port = m->port;
    b.set_next(i, Next::transmit);
}

}  // namespace

void stage_icmp_reply(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::icmp_reply), [&](unsigned i) {
        if (b.pkt[i].v6)
            reply<ErrorIpv6>(w, p, b, i);
        else
            reply<ErrorIpv4>(w, p, b, i);
    });
}

}  // namespace egw::dp
