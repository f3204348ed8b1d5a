// SPDX-License-Identifier: Apache-2.0
//
// Stage ip_forward: packets forwarded untranslated (cluster destinations, the default action
// `route`, and the way back of such flows): the TTL rule (ip_forward.h; an expired packet is
// answered with Time Exceeded), a route in the packet's table, and on to output. IPv6 the same
// way (forward6): the hop limit, the routes of the VRF (Ip6Map, longest prefix), Packet Too Big
// instead of fragments, a 128-bit next hop; link-local and multicast destinations never leave.
//
// Also here, for IPv6, the routing half of the classification nat_slow makes for IPv4
// (classify_untranslated6) and the first step input gives an IPv6 packet (ipv6_first_step).
#include <rte_branch_prediction.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "dataplane/icmp_reply.h"
#include "dataplane/ingress.h"
#include "dataplane/ip_forward.h"
#include "dataplane/ipv6.h"
#include "dataplane/mtu.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

Route6 route6(uint8_t vrf) {
    return Route6{Route6::Action::route, DropReason::count, IcmpError::count, vrf};
}
Route6 drop6(DropReason r) {
    return Route6{Route6::Action::drop, r, IcmpError::count, 0};
}
Route6 action6(Route6::Action a) {
    return Route6{a, DropReason::count, IcmpError::count, 0};
}

void forward6(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    rte_ipv6_hdr* ip6 = pk.ip6;
    const uint8_t* dst = ip6->dst_addr;
    // Input filters these already; whatever sends a packet here, they never leave (RFC 4291 2.5.6).
    if (unlikely(ip6_is_multicast(dst))) {
        b.drop(i, DropReason::multicast);
        return;
    }
    if (unlikely(ip6_is_link_local(dst) || ip6_is_link_local(ip6->src_addr))) {
        b.drop(i, DropReason::link_local);
        return;
    }
    if (unlikely(hop_limit_expires(ip6))) {
        reply_icmp_error(b, i, IcmpError::time_exceeded6, DropReason::ttl_exceeded);
        return;
    }
    const NextHop6* nh = p.lookup_route6(pk.vrf, dst);
    if (unlikely(!nh)) {
        reply_icmp_error(b, i, IcmpError::no_route6, DropReason::no_route);
        return;
    }
    if (too_big_for6(p, nh->port, b.m[i], ip6)) {
        refuse_too_big6(p, b, i, nh->port);
        return;
    }
    --ip6->hop_limits;
    count(w.counters.routed);
    pk.neighbor_slot = NeighborTable6::kNone;
    b.to_output6(i, nh->port, nh->on_link ? dst : nh->gateway.b, &pk.neighbor_slot);
}

}  // namespace

Route6 classify_untranslated6(const PolicySnapshot& p, uint16_t rx_port, const PacketMeta& pk) {
    const uint8_t* dst = pk.ip6->dst_addr;
    const bool echo_request =
        pk.l4_proto == kIp6Icmp && pk.l4_len >= sizeof(rte_icmp_hdr) && pk.l4[0] == kIcmp6EchoRequest;
    if (pk.dir == Dir::out2in) {
        if (echo_request && p.is_port_address6(rx_port, dst)) return action6(Route6::Action::local);
        // Replies to translated flows (ingress IPs, outside ports' addresses): the NAT's.
        if (p.nat_addresses6.contains(dst)) return action6(Route6::Action::translate);
        if (p.is_port_address6(rx_port, dst)) return drop6(DropReason::no_session);
        // Traffic of flows that were routed untouched goes back untouched, but only when
        // untouched routing is the policy.
        if (p.default_action == DefaultAction::route) return route6(p.ports[rx_port].vrf);
        return action6(Route6::Action::translate);
    }
    // From inside to the gateway's own addresses: a served ingress IP on a port of its Service
    // refused (hairpin, ingress.h), echo answered, UDP port unreachable (it serves none),
    // anything else dropped (TCP would be answered with a reset, which it does not send).
    if (p.is_port_address6(rx_port, dst) || p.nat_addresses6.contains(dst)) {
        if ((pk.kind == Kind::tcp || pk.kind == Kind::udp) &&
            unlikely(ingress_service_of<Ingress6>(p, pk, pk.key6.dst, pk.key6.dport) != Ip6Map::kMissing))
            return Route6{Route6::Action::reject, DropReason::hairpin, IcmpError::admin_prohibited6, 0};
        if (echo_request) return action6(Route6::Action::local);
        if (pk.l4_proto == IPPROTO_UDP)
            return Route6{Route6::Action::reject, DropReason::local, IcmpError::port_unreachable6, 0};
        return drop6(DropReason::local);
    }
    // Destinations inside the cluster are never translated.
    if (p.inside_cluster6(dst)) return route6(kDefaultVrf);
    // From a served ingress IP and a port of its Service: the cluster's answer to a connection
    // that came in through the Service, routed untranslated in the Service's network (ingress.h).
    if (uint32_t isid = ingress_service_of<Ingress6>(p, pk, pk.key6.src, pk.key6.sport); isid != Ip6Map::kMissing) {
        Route6 r = route6(p.services[isid].vrf);
        r.ingress = true;
        return r;
    }
    // A pod of a Service that translates its IPv6: the NAT's, whatever the default action.
    if (uint32_t sid = p.endpoints6.find(pk.ip6->src_addr);
        sid != Ip6Map::kMissing && p.services[sid].mode6 != ServiceMode::inactive)
        return action6(Route6::Action::translate);
    switch (p.default_action) {
    case DefaultAction::route:
        return route6(kDefaultVrf);
    case DefaultAction::drop:
        return drop6(DropReason::default_action_drop);
    case DefaultAction::masquerade:
        break;
    }
    return action6(Route6::Action::translate);
}

bool ipv6_first_step(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    Route6 r = classify_untranslated6(p, b.m[i]->port, pk);
    switch (r.action) {
    case Route6::Action::local:
        b.set_next(i, Next::local);
        return true;
    case Route6::Action::route:
        if (r.ingress) count(w.counters.ingress_out);
        pk.vrf = r.vrf;
        b.set_next(i, Next::ip_forward);
        return true;
    case Route6::Action::reject:
        reply_icmp_error(b, i, r.icmp, r.reason);
        return true;
    case Route6::Action::drop:
        b.drop(i, r.reason);
        return true;
    case Route6::Action::translate:
        break;
    }
    return false;  // the NAT stages' (NAPT66)
}

void stage_ip_forward(Worker& w, const PolicySnapshot& p, Burst& b) {
    for_each_packet(b.pending(Next::ip_forward), [&](unsigned i) {
        PacketMeta& pk = b.pkt[i];
        if (pk.v6) {
            forward6(w, p, b, i);
            return;
        }
        if (unlikely(ttl_expires(pk.ip))) {
            reply_icmp_error(b, i, IcmpError::time_exceeded, DropReason::ttl_exceeded);
            return;
        }
        uint32_t dst = rte_be_to_cpu_32(pk.ip->dst_addr);
        const NextHop* nh = p.lookup_route(pk.vrf, dst);
        if (unlikely(!nh)) {
            reply_icmp_error(b, i, IcmpError::net_unreachable, DropReason::no_route);
            return;
        }
        if (too_big_for(p, nh->port, pk.ip)) {
            refuse_too_big(p, b, i, nh->port);
            return;
        }
        pk.ip->hdr_checksum = csum_apply(pk.ip->hdr_checksum, ttl_decrement(pk.ip));
        count(w.counters.routed);
        pk.neighbor_slot = NeighborTable::kNone;
        b.to_output(i, nh->port, nh->gateway ? nh->gateway : dst, &pk.neighbor_slot);
    });
}

}  // namespace egw::dp
