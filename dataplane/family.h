// SPDX-License-Identifier: Apache-2.0
//
// The address family as a compile-time parameter of the packet path's stages. A stage written
// once, `template <class F>`, is instantiated for Ipv4 and Ipv6 below, and asks the traits only
// for what differs between them: the IP header and where the packet's is, the session and its
// table, the hop rule (TTL, hop limit), the egress MTU rule (Fragmentation Needed for a DF
// datagram, Packet Too Big), the gateway's own ICMP or ICMPv6 errors, routes and next hops, the
// route back to a pod, the NAT's rewrite of an address with its checksum (IPv4 folds its header
// checksum and the TTL decrement into one update; IPv6 has no header checksum), a new session's
// tuple, NAT address and deltas, and an ICMP error's outer and quoted rewrite. Everything is inline and
// resolved at compile time: an instantiation costs what the hand-written body for its family
// cost, and no stage switches on the family per packet beyond choosing the instantiation.
//
// classify.h and ingress.h extend these traits with what the classification of a new flow and
// ingress to a served ingress IP read of each family (Family4 : Ingress4 : Ipv4, and IPv6 alike);
// input.cpp and gateway_icmp_error.cpp with what the common packet's parse and the gateway's own
// errors read (CommonIpv4, ErrorIpv4, ...).
#pragma once

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/burst.h"
#include "dataplane/checksum.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/ip_forward.h"
#include "dataplane/ipv6.h"
#include "dataplane/mtu.h"
#include "dataplane/nat_rewrite.h"

namespace egw::dp {

struct Ipv4 {
    using Header = rte_ipv4_hdr;
    using SessionEntry = Session;
    using Sessions = SessionTable;
    static constexpr IcmpError kTimeExceeded = IcmpError::time_exceeded;
    static constexpr IcmpError kNoRoute = IcmpError::net_unreachable;

    static Header* header(const PacketMeta& pk) { return pk.ip; }
    static Sessions& sessions(Worker& w) { return w.sessions; }
    static const Sessions& sessions(const Worker& w) { return w.sessions; }

    static bool hop_expires(const Header* ip) { return ttl_expires(ip); }
    // A destination or source that must never be forwarded: IPv4 has none input lets through.
    static bool unforwardable(Burst&, unsigned, const Header*) { return false; }
    // The datagram may not leave `port` as it is, nor in fragments (mtu.h).
    static bool too_big(const PolicySnapshot& p, uint16_t port, const rte_mbuf*, const Header* ip) {
        return too_big_for(p, port, ip);
    }
    static void refuse_too_big(const PolicySnapshot& p, Burst& b, unsigned i, uint16_t port) {
        dp::refuse_too_big(p, b, i, port);
    }

    // Fills a session's way back to its pod, on its first reply: in the default table, where the
    // inside routes are (the Service's VRF governs its endpoints' egress, "from <endpoint> lookup
    // <table>", and its own default route would send the reply straight back out). False when
    // there is no route.
    static bool route_to_pod(const PolicySnapshot& p, Session& s) {
        uint32_t pod = rte_be_to_cpu_32(s.pod_ip);
        const NextHop* nh = p.lookup_route(kDefaultVrf, pod);
        if (unlikely(!nh)) return false;
        s.in_port = nh->port;
        s.in_next_hop = nh->gateway ? nh->gateway : pod;
        s.in_neighbor = NeighborTable::kNone;
        return true;
    }

    // Forwarding: the route in table `vrf` toward the packet's destination, the next hop of a
    // route (the gateway, or the destination itself when on-link) or of the ingress next hop,
    // and the hop count's decrement of an untranslated packet.
    using NextHopEntry = NextHop;
    using HopAddress = uint32_t;  // host order
    static constexpr uint32_t kNoNeighbor = NeighborTable::kNone;
    static const NextHop* route(const PolicySnapshot& p, uint8_t vrf, const Header* ip) {
        return p.lookup_route(vrf, rte_be_to_cpu_32(ip->dst_addr));
    }
    static HopAddress next_hop(const NextHop& nh, const Header* ip) {
        return nh.gateway ? nh.gateway : rte_be_to_cpu_32(ip->dst_addr);
    }
    static const NextHop& ingress_next_hop(const PolicySnapshot& p) { return p.ingress_next_hop; }
    static HopAddress ingress_gateway(const NextHop& nh) { return nh.gateway; }
    static void decrement_hops(Header* ip) { ip->hdr_checksum = csum_apply(ip->hdr_checksum, ttl_decrement(ip)); }

    // A new session (nat_slow.cpp): its tuple from the packet's key, the NAT address and route
    // the classification chose, its checksum deltas (RFC 1624: TCP's and UDP's cover the addresses
    // through the pseudo-header, ICMP's does not), and a table full of live sessions made room in.
    static constexpr bool kIpv6 = false;
    static void take_tuple(Session& s, const PacketMeta& pk) {
        s.pod_ip = pk.key.src;
        s.remote_ip = pk.key.dst;
        s.pod_port = pk.key.sport;
        s.remote_port = pk.key.dport;
        s.proto = pk.key.proto;
    }
    static uint32_t nat_ip(const NewFlow& f) { return f.nat_ip; }
    static void aim_out(Session& s, const NewFlow& f) {
        s.out_port = f.nh->port;
        s.out_next_hop = f.nh->gateway ? f.nh->gateway : rte_be_to_cpu_32(s.remote_ip);
    }
    static void set_deltas(Session& s) {
        uint32_t l3 = csum_delta32(s.pod_ip, s.nat_ip);
        s.l3_delta = csum_delta_fold(l3);
        uint32_t port_delta = csum_delta16(s.pod_port, s.nat_port);
        s.l4_delta = csum_delta_fold(s.proto == IPPROTO_ICMP ? port_delta : l3 + port_delta);
    }
    // The outside key of the session an outgoing packet will open, but for the NAT port the
    // probe fills in, and the pod the session counts against.
    static FlowKey planned_outside_key(const PacketMeta& pk) {
        return FlowKey{pk.key.dst, pk.flow.nat_ip, pk.key.dport, 0, pk.key.proto, {}};
    }
    static uint32_t pod_of(const PacketMeta& pk) { return pk.key.src; }
    static bool reclaim_expired(Worker& w, const PolicySnapshot& p) { return worker_reclaim_expired(w, p); }

    // An ICMP error about a session's packet (nat_icmp_error.cpp): the outer header's source
    // (toward the remote) or destination (toward the pod) rewritten from whatever address it held,
    // with the hop decrement; returns what the ICMP checksum must add for it (ICMP has no
    // pseudo-header: nothing). The quoted header's destination or source, with its checksum.
    static Header* quote_header(const PacketMeta& pk) { return pk.inner_ip; }
    static uint32_t error_outer_source(Header* ip, const Session& s) {
        uint32_t delta = csum_delta32(ip->src_addr, s.nat_ip);
        ip->src_addr = s.nat_ip;
        ip->hdr_checksum = csum_apply(ip->hdr_checksum, delta + ttl_decrement(ip));
        return 0;
    }
    static uint32_t error_outer_destination(Header* ip, const Session& s) {
        uint32_t delta = csum_delta32(ip->dst_addr, s.pod_ip);
        ip->dst_addr = s.pod_ip;
        ip->hdr_checksum = csum_apply(ip->hdr_checksum, delta + ttl_decrement(ip));
        return 0;
    }
    static void quote_destination(Header* in, const Session& s) {
        in->dst_addr = s.nat_ip;
        in->hdr_checksum = csum_apply(in->hdr_checksum, s.l3_delta);
    }
    static void quote_source(Header* in, const Session& s) {
        in->src_addr = s.pod_ip;
        in->hdr_checksum = csum_apply(in->hdr_checksum, csum_delta_invert(s.l3_delta));
    }

    // The NAT's rewrite of the source (toward the remote side) or destination (toward the pod)
    // address, with the hop count's decrement: one checksum update for both.
    static void translate_source(Header* ip, const Session& s) {
        ip->src_addr = s.nat_ip;
        if (likely(!s.dscp_mark)) {
            ip->hdr_checksum = csum_apply(ip->hdr_checksum, s.l3_delta, ttl_decrement(ip));
            return;
        }
        // An EgressQoS mark: its change joins the TTL's in the one checksum update.
        const uint16_t more = csum_add(ttl_decrement(ip), set_dscp(ip, static_cast<uint8_t>(s.dscp_mark)));
        ip->hdr_checksum = csum_apply(ip->hdr_checksum, s.l3_delta, more);
    }
    // The DSCP of a mark (tables/egress_qos.h) into the TOS octet, its ECN bits kept. Returns the
    // header checksum's delta: the first 16-bit word of the header (version and IHL, TOS) changed.
    static uint16_t set_dscp(Header* ip, uint8_t mark) {
        uint16_t old_word, new_word;
        __builtin_memcpy(&old_word, ip, 2);
        ip->type_of_service = static_cast<uint8_t>((ip->type_of_service & ~kDscpBits) | (mark & kDscpBits));
        __builtin_memcpy(&new_word, ip, 2);
        const uint32_t delta = csum_delta16(old_word, new_word);
        return csum_add(static_cast<uint16_t>(delta), static_cast<uint16_t>(delta >> 16));
    }
    static void translate_destination(Header* ip, const Session& s) {
        ip->dst_addr = s.pod_ip;
        ip->hdr_checksum = csum_apply(ip->hdr_checksum, csum_delta_invert(s.l3_delta), ttl_decrement(ip));
    }
};

struct Ipv6 {
    using Header = rte_ipv6_hdr;
    using SessionEntry = Session6;
    using Sessions = SessionTable6;
    static constexpr IcmpError kTimeExceeded = IcmpError::time_exceeded6;
    static constexpr IcmpError kNoRoute = IcmpError::no_route6;

    static Header* header(const PacketMeta& pk) { return pk.ip6; }
    static Sessions& sessions(Worker& w) { return w.sessions6; }
    static const Sessions& sessions(const Worker& w) { return w.sessions6; }

    static bool hop_expires(const Header* ip6) { return hop_limit_expires(ip6); }
    // Input filters these already; whatever sends a packet to forwarding, multicast and
    // link-local addresses never leave (RFC 4291 2.5.6): dropped, true.
    static bool unforwardable(Burst& b, unsigned i, const Header* ip6) {
        if (unlikely(ip6_is_multicast(ip6->dst_addr))) {
            b.drop(i, DropReason::multicast);
            return true;
        }
        if (unlikely(ip6_is_link_local(ip6->dst_addr) || ip6_is_link_local(ip6->src_addr))) {
            b.drop(i, DropReason::link_local);
            return true;
        }
        return false;
    }
    // Never fragmented by a router: too big is answered with Packet Too Big (mtu.h).
    static bool too_big(const PolicySnapshot& p, uint16_t port, const rte_mbuf* m, const Header* ip6) {
        return too_big_for6(p, port, m, ip6);
    }
    static void refuse_too_big(const PolicySnapshot& p, Burst& b, unsigned i, uint16_t port) {
        refuse_too_big6(p, b, i, port);
    }

    static bool route_to_pod(const PolicySnapshot& p, Session6& s) {
        const NextHop6* nh = p.lookup_route6(kDefaultVrf, s.pod_ip.b);
        if (unlikely(!nh)) return false;
        s.in_port = nh->port;
        s.in_next_hop = nh->on_link ? s.pod_ip : nh->gateway;
        s.in_neighbor = NeighborTable6::kNone;
        return true;
    }

    using NextHopEntry = NextHop6;
    using HopAddress = const uint8_t*;  // network order
    static constexpr uint32_t kNoNeighbor = NeighborTable6::kNone;
    static const NextHop6* route(const PolicySnapshot& p, uint8_t vrf, const Header* ip6) {
        return p.lookup_route6(vrf, ip6->dst_addr);
    }
    static HopAddress next_hop(const NextHop6& nh, const Header* ip6) {
        return nh.on_link ? ip6->dst_addr : nh.gateway.b;
    }
    static const NextHop6& ingress_next_hop(const PolicySnapshot& p) { return p.ingress_next_hop6; }
    static HopAddress ingress_gateway(const NextHop6& nh) { return nh.gateway.b; }
    static void decrement_hops(Header* ip6) { --ip6->hop_limits; }

    // Its one checksum delta covers the source address (the pseudo-header) and the port of TCP,
    // UDP and ICMPv6 alike.
    static constexpr bool kIpv6 = true;
    static void take_tuple(Session6& s, const PacketMeta& pk) {
        std::memcpy(s.pod_ip.b, pk.key6.src, 16);
        std::memcpy(s.remote_ip.b, pk.key6.dst, 16);
        s.pod_port = pk.key6.sport;
        s.remote_port = pk.key6.dport;
        s.proto = pk.key6.proto;
    }
    static const Ip6& nat_ip(const NewFlow& f) { return f.nat_ip6; }
    static void aim_out(Session6& s, const NewFlow& f) {
        s.out_port = f.nh6->port;
        s.out_next_hop = f.nh6->on_link ? s.remote_ip : f.nh6->gateway;
    }
    static void set_deltas(Session6& s) {
        s.l4_delta = csum_delta_fold(csum_delta_ip6(s.pod_ip.b, s.nat_ip.b) + csum_delta16(s.pod_port, s.nat_port));
    }
    static FlowKey6 planned_outside_key(const PacketMeta& pk) {
        FlowKey6 k{};
        std::memcpy(k.src, pk.key6.dst, 16);
        std::memcpy(k.dst, pk.flow.nat_ip6.b, 16);
        k.sport = pk.key6.dport;
        k.proto = pk.key6.proto;
        return k;
    }
    static Ip6 pod_of(const PacketMeta& pk) {
        Ip6 pod;
        std::memcpy(pod.b, pk.key6.src, 16);
        return pod;
    }
    static bool reclaim_expired(Worker& w, const PolicySnapshot& p) { return worker_reclaim_expired6(w, p); }

    // ICMPv6's checksum covers the outer pseudo-header: it changes by the outer address replaced.
    static Header* quote_header(const PacketMeta& pk) { return pk.inner_ip6; }
    static uint32_t error_outer_source(Header* ip6, const Session6& s) {
        uint32_t delta = csum_delta_ip6(ip6->src_addr, s.nat_ip.b);
        std::memcpy(ip6->src_addr, s.nat_ip.b, 16);
        --ip6->hop_limits;
        return delta;
    }
    static uint32_t error_outer_destination(Header* ip6, const Session6& s) {
        uint32_t delta = csum_delta_ip6(ip6->dst_addr, s.pod_ip.b);
        std::memcpy(ip6->dst_addr, s.pod_ip.b, 16);
        --ip6->hop_limits;
        return delta;
    }
    static void quote_destination(Header* in, const Session6& s) { std::memcpy(in->dst_addr, s.nat_ip.b, 16); }
    static void quote_source(Header* in, const Session6& s) { std::memcpy(in->src_addr, s.pod_ip.b, 16); }

    // No header checksum: the address's change is in the session's one transport delta, which
    // covers the pseudo-header for TCP, UDP and ICMPv6 alike.
    static void translate_source(Header* ip6, const Session6& s) {
        std::memcpy(ip6->src_addr, s.nat_ip.b, 16);
        --ip6->hop_limits;
        if (unlikely(s.dscp_mark)) set_dscp(ip6, static_cast<uint8_t>(s.dscp_mark));
    }
    // The DSCP of a mark into the traffic class (bits 20-27 of the first word, DSCP its upper
    // six), its ECN bits and the flow label kept. No IPv6 checksum covers it.
    static void set_dscp(Header* ip6, uint8_t mark) {
        constexpr uint32_t kDscpField = uint32_t{kDscpBits} << 20;
        const uint32_t vtc = rte_be_to_cpu_32(ip6->vtc_flow);
        ip6->vtc_flow = rte_cpu_to_be_32((vtc & ~kDscpField) | (uint32_t{mark} << 20 & kDscpField));
    }
    static void translate_destination(Header* ip6, const Session6& s) {
        std::memcpy(ip6->dst_addr, s.pod_ip.b, 16);
        --ip6->hop_limits;
    }
};

}  // namespace egw::dp
