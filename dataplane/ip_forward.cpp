// SPDX-License-Identifier: Apache-2.0
//
// Stage ip_forward: packets forwarded untranslated (cluster destinations, the default action
// `route`, and the way back of such flows): the TTL rule (ip_forward.h; an expired packet is
// answered with Time Exceeded), a route in the packet's table, and on to output. IPv6 the same
// way (forward6): the hop limit, the routes of the VRF (Ip6Map, longest prefix), Packet Too Big
// instead of fragments, a 128-bit next hop; link-local and multicast destinations never leave.
//
// Also here, the first step input gives an IPv6 packet (ipv6_first_step): from inside the first
// half of the classification of a new flow (classify.h), which nat_slow asks for IPv4; from
// outside what is the gateway's own or routed back untranslated (classify_incoming6).
#include <rte_branch_prediction.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "dataplane/classify.h"
#include "dataplane/icmp_reply.h"
#include "dataplane/ip_forward.h"
#include "dataplane/ipv6.h"
#include "dataplane/mtu.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

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

namespace {

// From outside, the routing half of what nat_slow decides for IPv4 after the session lookup
// (miss_incoming): echo requests to the receiving port's addresses answered; replies to
// translated flows (a NAT address: ingress IPs, outside ports' addresses) the NAT's; the port's
// own address otherwise has no session; the rest routed untranslated in the receiving port's VRF
// when that is the default action, and the NAT's otherwise.
void classify_incoming6(const PolicySnapshot& p, uint16_t rx_port, const PacketMeta& pk, NewFlow& f) {
    using namespace classify_detail;
    const uint8_t* dst = pk.ip6->dst_addr;
    if (pk.l4_proto == kIp6Icmp && pk.l4_len >= sizeof(rte_icmp_hdr) && pk.l4[0] == kIcmp6EchoRequest &&
        p.is_port_address6(rx_port, dst)) {
        f.action = NewFlow::Action::local;
        return;
    }
    if (p.nat_addresses6.contains(dst)) {
        f.action = NewFlow::Action::translate;
        return;
    }
    if (p.is_port_address6(rx_port, dst)) return drop_flow(f, DropReason::no_session);
    // Traffic of flows that were routed untouched goes back untouched, but only when untouched
    // routing is the policy.
    if (p.default_action == DefaultAction::route) return route_flow(f, p.ports[rx_port].vrf);
    f.action = NewFlow::Action::translate;
}

}  // namespace

bool ipv6_first_step(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    const uint16_t rx_port = b.m[i]->port;
    // From inside, the first half of the classification of a new flow (classify.h): what is
    // routed untranslated needs no session, so it is asked before the lookup.
    NewFlow& f = pk.flow;
    if (pk.dir == Dir::in2out)
        classify_untranslated<Family6>(p, rx_port, pk, f);
    else
        classify_incoming6(p, rx_port, pk, f);
    switch (f.action) {
    case NewFlow::Action::local:
        b.set_next(i, Next::local);
        return true;
    case NewFlow::Action::route:
        // The cluster's answer from a served ingress IP (ingress.h).
        if (f.service_id != kDefaultPolicyId) count(w.counters.ingress_out);
        pk.vrf = f.vrf;
        b.set_next(i, Next::ip_forward);
        return true;
    case NewFlow::Action::reject:
        reply_icmp_error(b, i, f.icmp, f.reason);
        return true;
    case NewFlow::Action::drop:
        b.drop(i, f.reason);
        return true;
    case NewFlow::Action::translate:
        break;
    }
    // The NAT stages' (NAPT66): nat_slow asks the second half for the Service found here (a
    // packet from outside leaves it unread).
    return false;
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
