// SPDX-License-Identifier: Apache-2.0
//
// The packet pipeline. A burst goes through three stages so that table lookups are batched:
//   1. parse and validate every packet, answer ARP, pick the owning worker, build the flow key;
//   2. one bulk session lookup per direction for the whole burst;
//   3. translate hits with the session's precomputed checksum deltas; send misses down the slow
//      path, which classifies (endpoint -> Service), routes and creates the session.
#include "dataplane/worker.h"

#include <rte_arp.h>
#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>

#include "dataplane/checksum.h"

namespace egw::dp {

namespace {

enum class Kind : uint8_t {
    done,        // consumed in stage 1 (ARP, drop, hand-off)
    tcp,
    udp,
    icmp_echo,   // echo request inside->outside, echo reply outside->inside
    icmp_error,  // destination unreachable, time exceeded, parameter problem, source quench
    other,       // anything else: may only be routed untouched
};

enum class Dir : uint8_t { in2out, out2in };

struct Meta {
    Kind kind;
    Dir dir;
    rte_ipv4_hdr* ip;
    uint8_t* l4;
    uint32_t l4_len;
    // For ICMP errors: the quoted (inner) IPv4 header and its L4 header.
    rte_ipv4_hdr* inner_ip;
    uint8_t* inner_l4;
    uint32_t inner_l4_len;
    FlowKey key;
    // Set by plan_new_sessions() for a packet expected to open a session: the endpoint lookup
    // and the route, both pure functions of the snapshot and the packet, so new_in2out() uses
    // them instead of looking again.
    bool planned;
    uint32_t sid;              // p.endpoints.find(source)
    const NextHop* nh;         // the route of the destination in the VRF the packet will use
};

inline void drop(Worker& w, rte_mbuf* m, DropReason r) {
    ++w.counters.drops[static_cast<unsigned>(r)];
    rte_pktmbuf_free(m);
}

inline void tx_enqueue(Worker& w, rte_mbuf* m, uint16_t port) {
    TxBuffer& b = w.tx[port];
    if (unlikely(b.n == kTxBufferSize)) {
        uint16_t sent = rte_eth_tx_burst(port, static_cast<uint16_t>(w.index), b.pkts, b.n);
        w.counters.tx_packets += sent;
        for (uint16_t i = sent; i < b.n; ++i)
            drop(w, b.pkts[i], DropReason::tx_full);
        b.n = 0;
    }
    b.pkts[b.n++] = m;
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

// Header checksum check without a loop for the common 20-byte header.
inline bool ipv4_header_checksum_ok(const rte_ipv4_hdr* ip, uint32_t ihl) {
    if (likely(ihl == sizeof(rte_ipv4_hdr))) {
        uint32_t w[5];
        std::memcpy(w, ip, sizeof w);
        uint64_t sum = uint64_t{w[0]} + w[1] + w[2] + w[3] + w[4];
        sum = (sum & 0xffffffff) + (sum >> 32);
        sum = (sum & 0xffffffff) + (sum >> 32);
        return csum_fold(static_cast<uint32_t>(sum)) == 0xffff;
    }
    return csum_fold(csum_partial(ip, ihl)) == 0xffff;
}

inline uint32_t& next_hop_of(const Worker& w, rte_mbuf* m) {
    return *RTE_MBUF_DYNFIELD(m, w.shared->next_hop_field, uint32_t*);
}

// Writes the Ethernet header for `port` toward `next_hop` and queues the frame, or hands it to
// the control thread to wait for ARP when the neighbour is not resolved yet.
inline void output(Worker& w, const PolicySnapshot& p, rte_mbuf* m, uint16_t port, uint32_t next_hop,
                   uint32_t* neighbor_slot) {
    NeighborTable& nt = *w.shared->neighbors;
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    uint32_t slot = *neighbor_slot;
    if (unlikely(slot == NeighborTable::kNone)) {
        slot = nt.find(port, next_hop);
        *neighbor_slot = slot;
    }
    if (likely(slot != NeighborTable::kNone) && likely(nt.mac(slot, eth->dst_addr.addr_bytes))) {
        std::memcpy(eth->src_addr.addr_bytes, p.ports[port].mac, 6);
        tx_enqueue(w, m, port);
        return;
    }
    m->port = port;
    next_hop_of(w, m) = next_hop;
    if (rte_ring_mp_enqueue(w.shared->to_control, m) != 0) {
        drop(w, m, DropReason::neighbor_unresolved);
        return;
    }
    ++w.counters.held;
}

inline uint64_t session_timeout(const Timeouts& t, const Session& s) {
    switch (s.proto) {
    case IPPROTO_TCP:
        return (s.tcp_seen & (kTcpSeenInside | kTcpSeenOutside)) == (kTcpSeenInside | kTcpSeenOutside) &&
                       !(s.tcp_seen & kTcpClosing)
                   ? t.tcp_established
                   : t.tcp_transitory;
    case IPPROTO_UDP:
        return t.udp;
    default:
        return t.icmp;
    }
}

inline void track_tcp(Session& s, const uint8_t* l4, bool from_inside) {
    auto* th = reinterpret_cast<const rte_tcp_hdr*>(l4);
    uint8_t flags = th->tcp_flags;
    if (flags & (RTE_TCP_FIN_FLAG | RTE_TCP_RST_FLAG)) {
        s.tcp_seen |= kTcpClosing;
        return;
    }
    // A new SYN on a closing session starts it over (port reuse after close).
    if ((flags & RTE_TCP_SYN_FLAG) && !(flags & RTE_TCP_ACK_FLAG) && from_inside)
        s.tcp_seen = 0;
    s.tcp_seen |= from_inside ? kTcpSeenInside : kTcpSeenOutside;
}

inline uint16_t be16(uint16_t v) { return rte_cpu_to_be_16(v); }
inline uint32_t be32(uint32_t v) { return rte_cpu_to_be_32(v); }

// TTL decrement folded into the IPv4 checksum delta: the TTL shares a 16-bit word with the
// protocol.
inline uint32_t ttl_decrement(rte_ipv4_hdr* ip) {
    uint16_t old_word, new_word;
    std::memcpy(&old_word, &ip->time_to_live, 2);
    --ip->time_to_live;
    std::memcpy(&new_word, &ip->time_to_live, 2);
    return csum_delta16(old_word, new_word);
}

inline void set_port_src(Meta& m, uint16_t port_be, uint16_t delta) {
    if (m.kind == Kind::tcp) {
        auto* th = reinterpret_cast<rte_tcp_hdr*>(m.l4);
        th->src_port = port_be;
        th->cksum = csum_apply(th->cksum, delta);
    } else if (m.kind == Kind::udp) {
        auto* uh = reinterpret_cast<rte_udp_hdr*>(m.l4);
        uh->src_port = port_be;
        uh->dgram_cksum = csum_apply_udp(uh->dgram_cksum, delta);
    } else {
        auto* ih = reinterpret_cast<rte_icmp_hdr*>(m.l4);
        ih->icmp_ident = port_be;
        ih->icmp_cksum = csum_apply(ih->icmp_cksum, delta);
    }
}

inline void set_port_dst(Meta& m, uint16_t port_be, uint16_t delta) {
    if (m.kind == Kind::tcp) {
        auto* th = reinterpret_cast<rte_tcp_hdr*>(m.l4);
        th->dst_port = port_be;
        th->cksum = csum_apply(th->cksum, delta);
    } else if (m.kind == Kind::udp) {
        auto* uh = reinterpret_cast<rte_udp_hdr*>(m.l4);
        uh->dst_port = port_be;
        uh->dgram_cksum = csum_apply_udp(uh->dgram_cksum, delta);
    } else {
        auto* ih = reinterpret_cast<rte_icmp_hdr*>(m.l4);
        ih->icmp_ident = port_be;
        ih->icmp_cksum = csum_apply(ih->icmp_cksum, delta);
    }
}

// Rewrites a port of the quoted header of an ICMP error, and its checksum when the quote is long
// enough to hold it (RFC 792 only promises 8 bytes, which covers UDP's but not TCP's).
inline void set_inner_port(uint8_t proto, uint8_t* l4, uint32_t len, bool source, uint16_t port_be, uint16_t delta) {
    if (proto == IPPROTO_TCP) {
        auto* th = reinterpret_cast<rte_tcp_hdr*>(l4);
        (source ? th->src_port : th->dst_port) = port_be;
        if (len >= 18)
            th->cksum = csum_apply(th->cksum, delta);
    } else if (proto == IPPROTO_UDP) {
        auto* uh = reinterpret_cast<rte_udp_hdr*>(l4);
        (source ? uh->src_port : uh->dst_port) = port_be;
        uh->dgram_cksum = csum_apply_udp(uh->dgram_cksum, delta);
    } else {
        auto* ih = reinterpret_cast<rte_icmp_hdr*>(l4);
        ih->icmp_ident = port_be;
        ih->icmp_cksum = csum_apply(ih->icmp_cksum, delta);
    }
}

inline void recompute_icmp_checksum(Meta& m) {
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(m.l4);
    ih->icmp_cksum = 0;
    ih->icmp_cksum = csum_finish(csum_partial(m.l4, m.l4_len));
}

inline bool is_icmp_error(uint8_t type) {
    return type == 3 /* destination unreachable */ || type == 11 /* time exceeded */ || type == 12 /* parameter problem */ ||
           type == 4 /* source quench */;
}

// ARP: answer requests for the receiving port's addresses, and on outside ports for every
// ingress IP this gateway serves; give replies to the control thread, which owns the neighbour
// table.
void handle_arp(Worker& w, const PolicySnapshot& p, rte_mbuf* m) {
    if (m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr)) {
        drop(w, m, DropReason::malformed);
        return;
    }
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
    if (arp->arp_hardware != be16(RTE_ARP_HRD_ETHER) || arp->arp_protocol != be16(RTE_ETHER_TYPE_IPV4) ||
        arp->arp_hlen != 6 || arp->arp_plen != 4) {
        drop(w, m, DropReason::malformed);
        return;
    }
    uint16_t port = m->port;
    const PortPolicy& pp = p.ports[port];
    uint16_t op = rte_be_to_cpu_16(arp->arp_opcode);
    if (op == RTE_ARP_OP_REPLY) {
        if (rte_ring_mp_enqueue(w.shared->to_control, m) != 0) {
            drop(w, m, DropReason::neighbor_unresolved);
            return;
        }
        ++w.counters.to_control;
        return;
    }
    if (op != RTE_ARP_OP_REQUEST) {
        drop(w, m, DropReason::local);
        return;
    }
    uint32_t target = rte_be_to_cpu_32(arp->arp_data.arp_tip);
    bool ours = p.is_port_address(port, target);
    if (!ours && pp.role == PortRole::outside) {
        uint32_t flags = p.nat_addresses.find(target);
        ours = flags != FlatMap::kMissing && (flags & kNatIngressIp);
    }
    if (!ours) {
        drop(w, m, DropReason::local);
        return;
    }
    arp->arp_opcode = be16(RTE_ARP_OP_REPLY);
    arp->arp_data.arp_tha = arp->arp_data.arp_sha;
    arp->arp_data.arp_tip = arp->arp_data.arp_sip;
    std::memcpy(arp->arp_data.arp_sha.addr_bytes, pp.mac, 6);
    arp->arp_data.arp_sip = be32(target);
    eth->dst_addr = eth->src_addr;
    std::memcpy(eth->src_addr.addr_bytes, pp.mac, 6);
    tx_enqueue(w, m, port);
}

// Echo requests to the gateway's own addresses are answered, back to the sender's MAC.
void answer_echo(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt) {
    auto* ih = reinterpret_cast<rte_icmp_hdr*>(mt.l4);
    if (mt.l4_len < sizeof(rte_icmp_hdr) || ih->icmp_type != RTE_IP_ICMP_ECHO_REQUEST) {
        drop(w, m, DropReason::local);
        return;
    }
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    uint16_t old_word, new_word;
    std::memcpy(&old_word, ih, 2);
    ih->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
    std::memcpy(&new_word, ih, 2);
    ih->icmp_cksum = csum_apply(ih->icmp_cksum, csum_delta16(old_word, new_word));
    uint32_t peer = mt.ip->src_addr;
    mt.ip->src_addr = mt.ip->dst_addr;
    mt.ip->dst_addr = peer;
    mt.ip->time_to_live = 64;
    mt.ip->hdr_checksum = 0;
    mt.ip->hdr_checksum = rte_ipv4_cksum(mt.ip);
    eth->dst_addr = eth->src_addr;
    std::memcpy(eth->src_addr.addr_bytes, p.ports[m->port].mac, 6);
    tx_enqueue(w, m, m->port);
}

// Stage 1 for one packet. Returns false when the packet was consumed.
bool parse(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt) {
    uint32_t len = m->data_len;
    if (unlikely(len < sizeof(rte_ether_hdr))) {
        drop(w, m, DropReason::malformed);
        return false;
    }
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    if (unlikely(m->port >= w.n_ports || p.ports[m->port].role == PortRole::none)) {
        drop(w, m, DropReason::local);
        return false;
    }
    // Promiscuous ports see other hosts' unicast; only ours, broadcast and multicast go on.
    if (unlikely(!(eth->dst_addr.addr_bytes[0] & 1) && !same_mac(eth->dst_addr.addr_bytes, p.ports[m->port].mac))) {
        drop(w, m, DropReason::foreign_mac);
        return false;
    }
    if (eth->ether_type != be16(RTE_ETHER_TYPE_IPV4)) {
        if (eth->ether_type == be16(RTE_ETHER_TYPE_ARP))
            handle_arp(w, p, m);
        else
            drop(w, m, DropReason::not_ipv4);
        return false;
    }
    len -= sizeof(rte_ether_hdr);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    uint32_t ihl = (ip->version_ihl & 0x0f) * 4u;
    uint32_t total = rte_be_to_cpu_16(ip->total_length);
    if (unlikely(len < sizeof(rte_ipv4_hdr) || (ip->version_ihl >> 4) != 4 || ihl < sizeof(rte_ipv4_hdr) ||
                 ihl > len || total < ihl || total > len)) {
        drop(w, m, DropReason::malformed);
        return false;
    }
    // Only GOOD spares the check: NONE (GOOD|BAD bits) means the header is intact but its checksum
    // field is not right, and an incremental update of a wrong field sends a wrong checksum.
    if ((m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) != RTE_MBUF_F_RX_IP_CKSUM_GOOD &&
        unlikely(!ipv4_header_checksum_ok(ip, ihl))) {
        drop(w, m, DropReason::malformed);
        return false;
    }
    // Ethernet padding after the IPv4 datagram must not be translated or forwarded as data.
    if (len > total)
        rte_pktmbuf_trim(m, static_cast<uint16_t>(len - total));
    if (unlikely(ip->fragment_offset & be16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))) {
        drop(w, m, DropReason::fragment);
        return false;
    }

    mt.dir = p.ports[m->port].role == PortRole::inside ? Dir::in2out : Dir::out2in;
    mt.ip = ip;
    mt.l4 = reinterpret_cast<uint8_t*>(ip) + ihl;
    mt.l4_len = total - ihl;
    mt.key = FlowKey{ip->src_addr, ip->dst_addr, 0, 0, ip->next_proto_id, {}};

    switch (ip->next_proto_id) {
    case IPPROTO_TCP: {
        if (unlikely(mt.l4_len < sizeof(rte_tcp_hdr))) {
            drop(w, m, DropReason::malformed);
            return false;
        }
        auto* th = reinterpret_cast<rte_tcp_hdr*>(mt.l4);
        uint32_t off = (th->data_off >> 4) * 4u;
        if (unlikely(off < sizeof(rte_tcp_hdr) || off > mt.l4_len)) {
            drop(w, m, DropReason::malformed);
            return false;
        }
        mt.kind = Kind::tcp;
        mt.key.sport = th->src_port;
        mt.key.dport = th->dst_port;
        return true;
    }
    case IPPROTO_UDP: {
        if (unlikely(mt.l4_len < sizeof(rte_udp_hdr) || rte_be_to_cpu_16(reinterpret_cast<rte_udp_hdr*>(mt.l4)->dgram_len) < sizeof(rte_udp_hdr) ||
                     rte_be_to_cpu_16(reinterpret_cast<rte_udp_hdr*>(mt.l4)->dgram_len) > mt.l4_len)) {
            drop(w, m, DropReason::malformed);
            return false;
        }
        auto* uh = reinterpret_cast<rte_udp_hdr*>(mt.l4);
        mt.kind = Kind::udp;
        mt.key.sport = uh->src_port;
        mt.key.dport = uh->dst_port;
        return true;
    }
    case IPPROTO_ICMP: {
        if (unlikely(mt.l4_len < sizeof(rte_icmp_hdr))) {
            drop(w, m, DropReason::malformed);
            return false;
        }
        auto* ih = reinterpret_cast<rte_icmp_hdr*>(mt.l4);
        uint8_t want_echo = mt.dir == Dir::in2out ? RTE_IP_ICMP_ECHO_REQUEST : RTE_IP_ICMP_ECHO_REPLY;
        if (ih->icmp_type == want_echo) {
            mt.kind = Kind::icmp_echo;
            // The identifier plays the pod-side port: source on the way out, destination back.
            if (mt.dir == Dir::in2out)
                mt.key.sport = ih->icmp_ident;
            else
                mt.key.dport = ih->icmp_ident;
            return true;
        }
        if (!is_icmp_error(ih->icmp_type)) {
            mt.kind = Kind::other;
            return true;
        }
        // The quoted datagram: an IPv4 header and at least 8 bytes of its L4 header.
        uint32_t room = mt.l4_len - sizeof(rte_icmp_hdr);
        auto* in = reinterpret_cast<rte_ipv4_hdr*>(mt.l4 + sizeof(rte_icmp_hdr));
        uint32_t in_ihl = (in->version_ihl & 0x0f) * 4u;
        if (unlikely(room < sizeof(rte_ipv4_hdr) || (in->version_ihl >> 4) != 4 || in_ihl < sizeof(rte_ipv4_hdr) ||
                     room < in_ihl + 8)) {
            drop(w, m, DropReason::malformed);
            return false;
        }
        mt.kind = Kind::icmp_error;
        mt.inner_ip = in;
        mt.inner_l4 = reinterpret_cast<uint8_t*>(in) + in_ihl;
        mt.inner_l4_len = room - in_ihl;
        uint16_t isport, idport;
        if (in->next_proto_id == IPPROTO_TCP || in->next_proto_id == IPPROTO_UDP) {
            std::memcpy(&isport, mt.inner_l4, 2);
            std::memcpy(&idport, mt.inner_l4 + 2, 2);
        } else if (in->next_proto_id == IPPROTO_ICMP) {
            auto* iih = reinterpret_cast<rte_icmp_hdr*>(mt.inner_l4);
            // The quoted packet is an echo request we (out2in) or the remote (in2out) sent.
            isport = mt.dir == Dir::out2in ? iih->icmp_ident : 0;
            idport = mt.dir == Dir::out2in ? 0 : iih->icmp_ident;
        } else {
            mt.kind = Kind::other;
            return true;
        }
        // The quoted packet travelled the other way, so its tuple is reversed into our key.
        mt.key.src = in->dst_addr;
        mt.key.dst = in->src_addr;
        mt.key.sport = idport;
        mt.key.dport = isport;
        mt.key.proto = in->next_proto_id;
        return true;
    }
    default:
        mt.kind = Kind::other;
        return true;
    }
}

// The port that decides which worker owns the packet's session: the pod-side port going out,
// the NAT port coming back.
inline uint16_t owner_port_of(const Meta& mt) { return mt.dir == Dir::in2out ? mt.key.sport : mt.key.dport; }

unsigned owner_of(const Worker& w, const Meta& mt) {
    if (mt.kind == Kind::other)
        return w.index;
    uint16_t port = rte_be_to_cpu_16(owner_port_of(mt));
    const DataplaneShared& sh = *w.shared;
    if (port >= sh.nat_port_min && port <= sh.nat_port_max)
        return owner_of_port(sh, port);
    if (mt.dir == Dir::out2in)
        return w.index;  // not a NAT port: no session anywhere, handle it here
    return rte_be_to_cpu_32(mt.key.src) % sh.n_workers;
}

// Forwards untouched (routed, not translated): cluster destinations, default action `route`.
void route_untouched(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt, uint8_t vrf) {
    if (unlikely(mt.ip->time_to_live <= 1)) {
        drop(w, m, DropReason::ttl_exceeded);
        return;
    }
    uint32_t dst = rte_be_to_cpu_32(mt.ip->dst_addr);
    const NextHop* nh = p.lookup_route(vrf, dst);
    if (unlikely(!nh)) {
        drop(w, m, DropReason::no_route);
        return;
    }
    mt.ip->hdr_checksum = csum_apply(mt.ip->hdr_checksum, ttl_decrement(mt.ip));
    ++w.counters.routed;
    uint32_t slot = NeighborTable::kNone;
    output(w, p, m, nh->port, nh->gateway ? nh->gateway : dst, &slot);
}

inline uint32_t current_version(const PolicySnapshot& p, const Session& s) {
    return s.service_id == kDefaultPolicyId ? p.default_version : p.services[s.service_id].version;
}

// Whether a session may go on translating under `p`. A new version of its Service's policy does
// not end it by itself: it is re-evaluated, and kept (under the new version) when its pod is still
// an endpoint of the Service and would be given the same translation now. So a Service losing
// one endpoint ends that endpoint's sessions, not those of the pods that stay.
inline bool policy_holds(const PolicySnapshot& p, Session& s) {
    uint32_t version = current_version(p, s);
    if (likely(version == s.service_version))
        return true;
    if (s.service_id == kDefaultPolicyId) {
        // Only masquerade makes default sessions; under another default action they end.
        if (p.default_action != DefaultAction::masquerade)
            return false;
        // Some pods became endpoints of a served Service: this session stays with the default
        // action only if its pod is not one of them.
        uint32_t sid = p.endpoints.find(rte_be_to_cpu_32(s.pod_ip));
        if (sid != FlatMap::kMissing && p.services[sid].mode != ServiceMode::inactive)
            return false;
        s.service_version = version;
        return true;
    }
    const ServicePolicy& sp = p.services[s.service_id];
    bool masquerade = s.in_use & kSessionMasquerade;
    bool same = sp.vrf == s.vrf && p.endpoints.find(rte_be_to_cpu_32(s.pod_ip)) == s.service_id &&
                (sp.mode == ServiceMode::snat_ingress_ip ? !masquerade && rte_cpu_to_be_32(sp.nat_ip) == s.nat_ip
                                                         : sp.mode == ServiceMode::masquerade && masquerade);
    if (!same)
        return false;
    s.service_version = version;
    return true;
}

void close_session(Worker& w, uint32_t idx) {
    Session& s = w.sessions.at(idx);
    ++w.service_counters[s.service_id].sessions_closed;
    ++w.counters.sessions_closed;
    w.sessions.destroy(idx);
}

// Re-resolves the cached routes of a session made under an older snapshot. Returns false when the
// session can no longer be used as it is (no route, or a masquerade whose egress port changed).
bool refresh_routes(Worker& w, const PolicySnapshot& p, Session& s) {
    uint32_t gen = static_cast<uint32_t>(p.generation);
    if (likely(s.route_generation == gen))
        return true;
    const NextHop* nh = p.lookup_route(s.vrf, rte_be_to_cpu_32(s.remote_ip));
    if (!nh)
        return false;
    // A masquerading session is bound to its egress port's address.
    if (nh->port != s.out_port && (s.in_use & kSessionMasquerade))
        return false;
    s.out_port = nh->port;
    s.out_next_hop = nh->gateway ? nh->gateway : rte_be_to_cpu_32(s.remote_ip);
    s.out_neighbor = NeighborTable::kNone;
    s.in_port = kPortUnset;
    s.in_neighbor = NeighborTable::kNone;
    s.route_generation = gen;
    (void)w;
    return true;
}

void translate_in2out(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt, Session& s) {
    if (unlikely(mt.ip->time_to_live <= 1)) {
        drop(w, m, DropReason::ttl_exceeded);
        return;
    }
    rte_ipv4_hdr* ip = mt.ip;
    if (mt.kind != Kind::icmp_error) {
        ip->src_addr = s.nat_ip;
        ip->hdr_checksum = csum_apply(ip->hdr_checksum, uint32_t{s.l3_delta} + ttl_decrement(ip));
        set_port_src(mt, s.nat_port, s.l4_delta);
        if (mt.kind == Kind::tcp)
            track_tcp(s, mt.l4, true);
    } else {
        // A pod reports an error about a packet it received from the remote: the quoted packet's
        // destination is the pod and must become the NAT address and port again. The error may
        // come from a router in front of the pod (path MTU discovery), so the outer source is
        // not necessarily the pod: its checksum delta is taken from the address being replaced.
        uint32_t outer_delta = csum_delta32(ip->src_addr, s.nat_ip);
        ip->src_addr = s.nat_ip;
        ip->hdr_checksum = csum_apply(ip->hdr_checksum, outer_delta + ttl_decrement(ip));
        rte_ipv4_hdr* in = mt.inner_ip;
        in->dst_addr = s.nat_ip;
        in->hdr_checksum = csum_apply(in->hdr_checksum, s.l3_delta);
        set_inner_port(s.proto, mt.inner_l4, mt.inner_l4_len, false, s.nat_port, s.l4_delta);
        recompute_icmp_checksum(mt);
    }
    s.last_seen = w.now;
    ServiceCounters& sc = w.service_counters[s.service_id];
    ++sc.packets_out;
    sc.bytes_out += m->pkt_len;
    output(w, p, m, s.out_port, s.out_next_hop, &s.out_neighbor);
}

void translate_out2in(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt, Session& s) {
    if (unlikely(mt.ip->time_to_live <= 1)) {
        drop(w, m, DropReason::ttl_exceeded);
        return;
    }
    if (s.in_port == kPortUnset) {
        // Toward the pod in the default table, where the inside routes are: the Service's VRF
        // governs its endpoints' egress ("from <endpoint> lookup <table>"), and its own default
        // route would send the reply straight back out.
        uint32_t pod = rte_be_to_cpu_32(s.pod_ip);
        const NextHop* nh = p.lookup_route(kDefaultVrf, pod);
        if (unlikely(!nh)) {
            drop(w, m, DropReason::no_route);
            return;
        }
        s.in_port = nh->port;
        s.in_next_hop = nh->gateway ? nh->gateway : pod;
        s.in_neighbor = NeighborTable::kNone;
    }
    uint16_t l3_back = csum_delta_invert(s.l3_delta);
    uint16_t l4_back = csum_delta_invert(s.l4_delta);
    rte_ipv4_hdr* ip = mt.ip;
    // An ICMP error is matched by the packet it quotes, so its outer destination need not be the
    // session's NAT address: take that delta from the address being replaced.
    uint32_t outer_delta = mt.kind == Kind::icmp_error ? csum_delta32(ip->dst_addr, s.pod_ip) : l3_back;
    ip->dst_addr = s.pod_ip;
    ip->hdr_checksum = csum_apply(ip->hdr_checksum, outer_delta + ttl_decrement(ip));
    if (mt.kind != Kind::icmp_error) {
        set_port_dst(mt, s.pod_port, l4_back);
        if (mt.kind == Kind::tcp)
            track_tcp(s, mt.l4, false);
    } else {
        // An error about a packet we translated: its quoted source is the NAT address and port.
        rte_ipv4_hdr* in = mt.inner_ip;
        in->src_addr = s.pod_ip;
        in->hdr_checksum = csum_apply(in->hdr_checksum, l3_back);
        set_inner_port(s.proto, mt.inner_l4, mt.inner_l4_len, true, s.pod_port, l4_back);
        recompute_icmp_checksum(mt);
    }
    s.last_seen = w.now;
    ServiceCounters& sc = w.service_counters[s.service_id];
    ++sc.packets_in;
    sc.bytes_in += m->pkt_len;
    output(w, p, m, s.in_port, s.in_next_hop, &s.in_neighbor);
}

// The NAT port probe: the pod's own port first when it lies in this worker's block, then
// pseudo-random ports of the block (seeded by the tuple): unlike a linear walk, this does not
// pile up behind runs of taken ports, so the expected number of probes stays 1/(1 - fill) and
// 64 misses in a row only happen when the block is really full. Shared by allocate_port() and
// the prefetch hints of plan_new_sessions(), so that the hints load what the probe will read.
inline bool pod_port_in_block(const Worker& w, uint16_t pod_port_be) {
    uint16_t want = rte_be_to_cpu_16(pod_port_be);
    return want >= w.nat_port_lo && want <= w.nat_port_hi;
}

inline uint32_t probe_seed(uint32_t pod_ip, uint16_t pod_port, uint32_t remote_ip, uint16_t remote_port) {
    uint32_t x = (pod_ip * 0x9E3779B1u) ^ (uint32_t{pod_port} * 0x85EBCA6Bu) ^ (remote_ip * 0xC2B2AE35u) ^ remote_port ^
                 0x27d4eb2fu;
    return x == 0 ? 1 : x;  // xorshift never leaves zero
}

// The next random candidate, in network order.
inline uint16_t probe_next(const Worker& w, uint32_t& x) {
    uint32_t span = uint32_t{w.nat_port_hi} - w.nat_port_lo + 1;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return be16(static_cast<uint16_t>(w.nat_port_lo + x % span));
}

// Picks a NAT port in this worker's block, keeping the pod's port when it is free.
// Endpoint-dependent: a port is free when (remote, nat address, remote port, port) is unused,
// so one NAT address carries a full block of ports toward every destination.
bool allocate_port(Worker& w, Session& s) {
    FlowKey k{s.remote_ip, s.nat_ip, s.remote_port, 0, s.proto, {}};
    if (pod_port_in_block(w, s.pod_port)) {
        k.dport = s.pod_port;
        if (w.sessions.find_outside(k) == SessionTable::kNone) {
            s.nat_port = s.pod_port;
            return true;
        }
    }
    uint32_t x = probe_seed(s.pod_ip, s.pod_port, s.remote_ip, s.remote_port);
    constexpr unsigned kAttempts = 64;
    for (unsigned i = 0; i < kAttempts; ++i) {
        k.dport = probe_next(w, x);
        if (w.sessions.find_outside(k) == SessionTable::kNone) {
            s.nat_port = k.dport;
            return true;
        }
    }
    return false;
}

// Slow path inside->outside: classify, route, allocate and create the session, then translate.
void new_in2out(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt) {
    uint32_t dst = rte_be_to_cpu_32(mt.ip->dst_addr);
    uint32_t src = rte_be_to_cpu_32(mt.ip->src_addr);
    if (p.is_port_address(m->port, dst) || p.nat_addresses.contains(dst)) {
        if (mt.ip->next_proto_id == IPPROTO_ICMP)
            answer_echo(w, p, m, mt);
        else
            drop(w, m, DropReason::local);
        return;
    }
    // Destinations inside the cluster are never translated.
    if (p.inside_cluster(dst)) {
        route_untouched(w, p, m, mt, kDefaultVrf);
        return;
    }
    uint32_t sid = mt.planned ? mt.sid : p.endpoints.find(src);
    const ServicePolicy* svc = nullptr;
    if (sid != FlatMap::kMissing && p.services[sid].mode != ServiceMode::inactive)
        svc = &p.services[sid];
    if (!svc) {
        switch (p.default_action) {
        case DefaultAction::route:
            route_untouched(w, p, m, mt, kDefaultVrf);
            return;
        case DefaultAction::drop:
            drop(w, m, DropReason::default_action_drop);
            return;
        case DefaultAction::masquerade:
            break;
        }
    }
    if (mt.kind == Kind::other) {
        drop(w, m, mt.ip->next_proto_id == IPPROTO_ICMP ? DropReason::icmp_unsupported : DropReason::unsupported_protocol);
        return;
    }
    if (mt.kind == Kind::icmp_error) {
        // An error about a flow we hold no session for: nothing to translate it against.
        drop(w, m, DropReason::no_session);
        return;
    }
    if (unlikely(mt.ip->time_to_live <= 1)) {
        drop(w, m, DropReason::ttl_exceeded);
        return;
    }
    uint8_t vrf = svc ? svc->vrf : kDefaultVrf;
    const NextHop* nh = mt.planned ? mt.nh : p.lookup_route(vrf, dst);
    if (unlikely(!nh)) {
        drop(w, m, DropReason::no_route);
        return;
    }
    Session s{};
    s.pod_ip = mt.key.src;
    s.remote_ip = mt.key.dst;
    s.pod_port = mt.key.sport;
    s.remote_port = mt.key.dport;
    s.proto = mt.key.proto;
    s.vrf = vrf;
    if (svc && svc->mode == ServiceMode::snat_ingress_ip) {
        s.nat_ip = be32(svc->nat_ip);
    } else {
        const PortPolicy& out = p.ports[nh->port];
        if (out.n_addrs == 0) {
            drop(w, m, DropReason::no_route);
            return;
        }
        s.nat_ip = be32(out.addrs[0]);
        s.in_use = kSessionMasquerade;
    }
    s.service_id = svc ? static_cast<uint16_t>(sid) : static_cast<uint16_t>(kDefaultPolicyId);
    s.service_version = svc ? svc->version : p.default_version;
    ServiceCounters& sc = w.service_counters[s.service_id];
    if (!allocate_port(w, s)) {
        ++sc.port_alloc_failures;
        drop(w, m, DropReason::port_exhausted);
        return;
    }
    s.route_generation = static_cast<uint32_t>(p.generation);
    s.out_port = nh->port;
    s.out_next_hop = nh->gateway ? nh->gateway : dst;
    s.out_neighbor = NeighborTable::kNone;
    s.in_port = kPortUnset;
    s.in_neighbor = NeighborTable::kNone;
    uint32_t l3 = csum_delta32(s.pod_ip, s.nat_ip);
    s.l3_delta = csum_delta_fold(l3);
    uint32_t port_delta = csum_delta16(s.pod_port, s.nat_port);
    // TCP and UDP checksums cover the addresses through the pseudo-header; ICMP's does not.
    s.l4_delta = csum_delta_fold(s.proto == IPPROTO_ICMP ? port_delta : l3 + port_delta);
    s.last_seen = w.now;
    uint32_t idx = w.sessions.create(s);
    if (idx == SessionTable::kNone) {
        drop(w, m, DropReason::session_limit);
        return;
    }
    ++sc.sessions_created;
    ++w.counters.sessions_created;
    translate_in2out(w, p, m, mt, w.sessions.at(idx));
}

void miss_out2in(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt) {
    uint32_t dst = rte_be_to_cpu_32(mt.ip->dst_addr);
    if (p.is_port_address(m->port, dst) && mt.ip->next_proto_id == IPPROTO_ICMP &&
        reinterpret_cast<rte_icmp_hdr*>(mt.l4)->icmp_type == RTE_IP_ICMP_ECHO_REQUEST) {
        answer_echo(w, p, m, mt);
        return;
    }
    if (p.nat_addresses.contains(dst)) {
        drop(w, m, DropReason::no_session);
        return;
    }
    // Not addressed to a NAT address: traffic of flows that were routed untouched goes back
    // untouched, but only when untouched routing is the policy.
    if (p.default_action == DefaultAction::route) {
        route_untouched(w, p, m, mt, p.ports[m->port].vrf);
        return;
    }
    drop(w, m, DropReason::no_session);
}

// Whether a session still holds the flow of `mt` (it may have been closed, and its slot taken by
// another flow, since the lookup).
inline bool session_has_key(const Session& s, const Meta& mt) {
    const FlowKey& k = mt.key;
    if (!(s.in_use & kSessionInUse) || s.proto != k.proto)
        return false;
    if (mt.dir == Dir::in2out)
        return s.pod_ip == k.src && s.remote_ip == k.dst && s.pod_port == k.sport && s.remote_port == k.dport;
    return s.remote_ip == k.src && s.nat_ip == k.dst && s.remote_port == k.sport && s.nat_port == k.dport;
}

// The session of `mt` now, when the lookup made for the burst may be out of date.
inline uint32_t lookup_again(Worker& w, const Meta& mt, uint32_t idx) {
    if (idx != SessionTable::kNone && session_has_key(w.sessions.at(idx), mt))
        return idx;
    return mt.dir == Dir::in2out ? w.sessions.find_inside(mt.key) : w.sessions.find_outside(mt.key);
}

// Stage 3 for one packet.
void finish(Worker& w, const PolicySnapshot& p, rte_mbuf* m, Meta& mt, uint32_t idx) {
    if (mt.kind == Kind::other) {
        if (mt.dir == Dir::in2out)
            new_in2out(w, p, m, mt);
        else
            miss_out2in(w, p, m, mt);
        return;
    }
    if (idx != SessionTable::kNone) {
        Session& s = w.sessions.at(idx);
        bool valid = policy_holds(p, s);
        if (likely(valid) && unlikely(!refresh_routes(w, p, s)))
            valid = false;
        if (likely(valid)) {
            if (mt.dir == Dir::in2out)
                translate_in2out(w, p, m, mt, s);
            else
                translate_out2in(w, p, m, mt, s);
            return;
        }
        // The Service's policy changed (or its route moved): the old translation must not be
        // used again. Outgoing packets start a new session under the current policy.
        close_session(w, idx);
        if (mt.dir == Dir::out2in) {
            drop(w, m, DropReason::stale_session);
            return;
        }
    }
    if (mt.dir == Dir::in2out)
        new_in2out(w, p, m, mt);
    else
        miss_out2in(w, p, m, mt);
}

// Stage 2b: the packets going out that found no session will, most of them, open one, and the
// creates run one at a time in stage 3, each waiting on cold lines of a large table: the
// endpoint, the outside bucket of every probed port, the session a taken port belongs to, and
// the pool line to fill. Here the whole burst's misses are classified first (endpoint, route:
// kept in the Meta for new_in2out) and those lines requested together, so that their loads
// overlap. Everything here is a pure read or a prefetch: which packets open sessions, with which
// ports, is still decided in stage 3 in packet order, exactly as before.
void plan_new_sessions(Worker& w, const PolicySnapshot& p, Meta* meta, const uint32_t* idx, unsigned nk) {
    unsigned pos[kBurst];
    unsigned n = 0;
    for (unsigned i = 0; i < nk; ++i) {
        const Meta& mt = meta[i];
        if (idx[i] != SessionTable::kNone || mt.dir != Dir::in2out ||
            (mt.kind != Kind::tcp && mt.kind != Kind::udp && mt.kind != Kind::icmp_echo))
            continue;
        pos[n++] = i;
        p.endpoints.prefetch(rte_be_to_cpu_32(mt.ip->src_addr));
    }
    if (!n)
        return;
    // The two ports a probe reads first: the pod's own (taken whenever another pod of the same
    // NAT address already uses it toward this remote) and the first random one.
    uint32_t h_pod[kBurst], h_rand[kBurst];
    bool pod_in_block[kBurst], have_key[kBurst];
    SessionTable& st = w.sessions;
    for (unsigned j = 0; j < n; ++j) {
        Meta& mt = meta[pos[j]];
        mt.sid = p.endpoints.find(rte_be_to_cpu_32(mt.ip->src_addr));
        const ServicePolicy* svc = mt.sid != FlatMap::kMissing && p.services[mt.sid].mode != ServiceMode::inactive
                                       ? &p.services[mt.sid]
                                       : nullptr;
        mt.nh = p.lookup_route(svc ? svc->vrf : kDefaultVrf, rte_be_to_cpu_32(mt.ip->dst_addr));
        mt.planned = true;
        uint32_t nat_ip;
        if (svc && svc->mode == ServiceMode::snat_ingress_ip)
            nat_ip = be32(svc->nat_ip);
        else if (mt.nh && p.ports[mt.nh->port].n_addrs)
            nat_ip = be32(p.ports[mt.nh->port].addrs[0]);
        else {
            have_key[j] = false;  // no translation to prepare: stage 3 will route or drop it
            continue;
        }
        have_key[j] = true;
        FlowKey k{mt.key.dst, nat_ip, mt.key.dport, 0, mt.key.proto, {}};
        pod_in_block[j] = pod_port_in_block(w, mt.key.sport);
        if (pod_in_block[j]) {
            k.dport = mt.key.sport;
            h_pod[j] = SessionTable::key_hash(k);
            st.prefetch_outside_bucket(h_pod[j]);
        }
        uint32_t x = probe_seed(mt.key.src, mt.key.sport, mt.key.dst, mt.key.dport);
        k.dport = probe_next(w, x);
        h_rand[j] = SessionTable::key_hash(k);
        st.prefetch_outside_bucket(h_rand[j]);
        st.prefetch_free_slot(j);
    }
    // The buckets have had the rest of the burst's time to arrive: now the sessions they name.
    for (unsigned j = 0; j < n; ++j) {
        if (!have_key[j])
            continue;
        if (pod_in_block[j])
            st.prefetch_outside_match(h_pod[j]);
        st.prefetch_outside_match(h_rand[j]);
    }
}

}  // namespace

unsigned owner_of_port(const DataplaneShared& shared, uint16_t port_host) {
    uint32_t span = uint32_t{shared.nat_port_max} - shared.nat_port_min + 1;
    uint32_t block = span / shared.n_workers;
    unsigned w = (port_host - shared.nat_port_min) / block;
    return w < shared.n_workers ? w : shared.n_workers - 1;
}

void worker_assign_port_block(Worker& w) {
    const DataplaneShared& sh = *w.shared;
    uint32_t span = uint32_t{sh.nat_port_max} - sh.nat_port_min + 1;
    uint32_t block = span / sh.n_workers;
    w.port_block = block;
    w.nat_port_lo = static_cast<uint16_t>(sh.nat_port_min + w.index * block);
    // The last worker also takes the remainder of an uneven split.
    w.nat_port_hi = w.index + 1 == sh.n_workers ? sh.nat_port_max
                                                 : static_cast<uint16_t>(sh.nat_port_min + (w.index + 1) * block - 1);
}

void worker_process_burst(Worker& w, const PolicySnapshot& p, rte_mbuf** pkts, uint16_t n) {
    Meta meta[kBurst];
    rte_mbuf* kept[kBurst];
    const FlowKey* in_keys[kBurst];
    const FlowKey* out_keys[kBurst];
    unsigned in_pos[kBurst], out_pos[kBurst];
    uint32_t found[kBurst];
    rte_mbuf* handoff[kMaxWorkers][kBurst];
    unsigned n_handoff[kMaxWorkers] = {};
    bool multi = w.shared->n_workers > 1;

    while (n > 0) {
        uint16_t chunk = n > kBurst ? kBurst : n;
        unsigned nk = 0, ni = 0, no = 0;
        for (uint16_t i = 0; i < chunk; ++i) {
            if (i + 3 < chunk)
                rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 3], void*));
            rte_mbuf* m = pkts[i];
            Meta& mt = meta[nk];
            if (!parse(w, p, m, mt))
                continue;
            if (multi) {
                unsigned owner = owner_of(w, mt);
                if (owner != w.index) {
                    handoff[owner][n_handoff[owner]++] = m;
                    continue;
                }
            }
            kept[nk] = m;
            mt.planned = false;
            if (mt.kind != Kind::other) {
                if (mt.dir == Dir::in2out) {
                    in_pos[ni] = nk;
                    in_keys[ni++] = &mt.key;
                } else {
                    out_pos[no] = nk;
                    out_keys[no++] = &mt.key;
                }
            }
            ++nk;
        }
        uint32_t idx[kBurst];
        for (unsigned i = 0; i < nk; ++i)
            idx[i] = SessionTable::kNone;
        if (ni) {
            w.sessions.lookup_inside(in_keys, ni, found);
            for (unsigned i = 0; i < ni; ++i)
                idx[in_pos[i]] = found[i];
        }
        if (no) {
            w.sessions.lookup_outside(out_keys, no, found);
            for (unsigned i = 0; i < no; ++i)
                idx[out_pos[i]] = found[i];
        }
        plan_new_sessions(w, p, meta, idx, nk);
        // Stage 3 creates and closes sessions, which the lookups above did not see: once it has,
        // the rest of the chunk looks again (two packets of one new flow must share one session;
        // a reply must not be matched to a slot its session left).
        uint64_t created = w.counters.sessions_created, closed = w.counters.sessions_closed;
        for (unsigned i = 0; i < nk; ++i) {
            if (unlikely(w.counters.sessions_created != created || w.counters.sessions_closed != closed) &&
                meta[i].kind != Kind::other)
                idx[i] = lookup_again(w, meta[i], idx[i]);
            finish(w, p, kept[i], meta[i], idx[i]);
        }
        pkts += chunk;
        n = static_cast<uint16_t>(n - chunk);
        // Hand-offs go out per chunk: each worker's array holds one chunk's worth.
        if (multi) {
            for (unsigned o = 0; o < w.shared->n_workers; ++o) {
                if (!n_handoff[o])
                    continue;
                unsigned sent = rte_ring_sp_enqueue_burst(w.handoff_out[o], reinterpret_cast<void**>(handoff[o]), n_handoff[o], nullptr);
                w.counters.handed_off += sent;
                for (unsigned i = sent; i < n_handoff[o]; ++i)
                    drop(w, handoff[o][i], DropReason::handoff_full);
                n_handoff[o] = 0;
            }
        }
    }
}

void worker_flush(Worker& w) {
    for (uint16_t port = 0; port < w.n_ports; ++port) {
        TxBuffer& b = w.tx[port];
        if (!b.n)
            continue;
        uint16_t sent = rte_eth_tx_burst(port, static_cast<uint16_t>(w.index), b.pkts, b.n);
        w.counters.tx_packets += sent;
        for (uint16_t i = sent; i < b.n; ++i)
            drop(w, b.pkts[i], DropReason::tx_full);
        b.n = 0;
    }
}

void worker_expire_step(Worker& w, const PolicySnapshot& p) {
    SessionTable& st = w.sessions;
    uint32_t cap = st.capacity();
    if (cap == 0 || st.active() == 0)
        return;
    const Timeouts& t = w.shared->timeouts;
    for (unsigned i = 0; i < kSweepPerIteration; ++i) {
        uint32_t idx = w.sweep_cursor;
        w.sweep_cursor = idx + 1 == cap ? 0 : idx + 1;
        Session& s = st.at(idx);
        if (!(s.in_use & kSessionInUse))
            continue;
        // Sessions of a withdrawn or changed policy are reclaimed here too, so their ports
        // return to the pool even when no packet comes to notice.
        if (w.now - s.last_seen > session_timeout(t, s) || !policy_holds(p, s)) {
            ++w.counters.sessions_expired;
            close_session(w, idx);
        }
    }
}

void worker_serve_dump(Worker& w) {
    uint32_t req = w.dump_request.load(std::memory_order_acquire);
    if (req == w.dump_done.load(std::memory_order_relaxed))
        return;
    uint32_t n = 0;
    SessionTable& st = w.sessions;
    uint32_t i = std::min(w.dump_start, st.capacity());
    uint32_t end = w.dump_scan && w.dump_scan < st.capacity() - i ? i + w.dump_scan : st.capacity();
    for (; i < end && n < w.dump_capacity; ++i) {
        const Session& s = st.at(i);
        if (!s.in_use)
            continue;
        w.dump_buffer[n].session = s;
        w.dump_buffer[n].idle_ticks = w.now - s.last_seen;
        ++n;
    }
    w.dump_count = n;
    w.dump_next = i;
    w.dump_done.store(req, std::memory_order_release);
}

void worker_serve_flush(Worker& w) {
    uint32_t req = w.flush_request.load(std::memory_order_acquire);
    if (req == w.flush_done.load(std::memory_order_relaxed))
        return;
    SessionTable& st = w.sessions;
    uint32_t end = std::min(st.capacity(), w.flush_cursor + kFlushPerIteration);
    for (uint32_t i = w.flush_cursor; i < end; ++i) {
        const Session& s = st.at(i);
        if ((s.in_use & kSessionInUse) && (w.flush_service == kFlushAll || s.service_id == w.flush_service)) {
            close_session(w, i);
            ++w.flush_closed;
        }
    }
    w.flush_cursor = end;
    if (end == st.capacity()) {
        w.flush_cursor = 0;
        w.flush_done.store(req, std::memory_order_release);
    }
}

unsigned worker_poll_once(Worker& w) {
    const PolicySnapshot* p = w.shared->policy.current.load(std::memory_order_acquire);
    uint64_t start = rte_rdtsc();
    w.now = start;
    unsigned total = 0;
    rte_mbuf* pkts[kBurst];
    if (p) {
        for (unsigned q = 0; q < w.n_rxq; ++q) {
            uint16_t n = rte_eth_rx_burst(w.rxq[q].port, w.rxq[q].queue, pkts, kBurst);
            if (!n)
                continue;
            w.counters.rx_packets += n;
            total += n;
            worker_process_burst(w, *p, pkts, n);
        }
        for (unsigned o = 0; o < w.shared->n_workers; ++o) {
            if (!w.handoff_in[o])
                continue;
            unsigned n = rte_ring_sc_dequeue_burst(w.handoff_in[o], reinterpret_cast<void**>(pkts), kBurst, nullptr);
            if (n) {
                total += n;
                worker_process_burst(w, *p, pkts, static_cast<uint16_t>(n));
            }
        }
        if (w.inject) {
            unsigned n = rte_ring_sc_dequeue_burst(w.inject, reinterpret_cast<void**>(pkts), kBurst, nullptr);
            for (unsigned i = 0; i < n; ++i) {
                if (pkts[i]->port < w.n_ports)
                    tx_enqueue(w, pkts[i], pkts[i]->port);
                else
                    drop(w, pkts[i], DropReason::local);
            }
            total += n;
        }
        worker_flush(w);
        worker_expire_step(w, *p);
    }
    worker_serve_dump(w);
    worker_serve_flush(w);
    if (w.shared->qsbr)
        rte_rcu_qsbr_quiescent(w.shared->qsbr, w.index);
    uint64_t spent = rte_rdtsc() - start;
    w.counters.total_cycles += spent;
    if (total)
        w.counters.busy_cycles += spent;
    ++w.counters.iterations;
    return total;
}

int worker_main(void* arg) {
    auto& w = *static_cast<Worker*>(arg);
    if (w.shared->qsbr) {
        rte_rcu_qsbr_thread_register(w.shared->qsbr, w.index);
        rte_rcu_qsbr_thread_online(w.shared->qsbr, w.index);
    }
    while (!w.shared->stop.load(std::memory_order_relaxed))
        worker_poll_once(w);
    worker_flush(w);
    if (w.shared->qsbr) {
        rte_rcu_qsbr_thread_offline(w.shared->qsbr, w.index);
        rte_rcu_qsbr_thread_unregister(w.shared->qsbr, w.index);
    }
    return 0;
}

}  // namespace egw::dp
