// SPDX-License-Identifier: Apache-2.0
//
// The classification of a new flow from inside (a packet from an inside port that has no usable
// session), one template over the address family: the same questions, in the same order, for
// IPv4 and IPv6, each asked of the family's own tables (Family4, Family6 below). The order fixes
// which drop reason a packet gets.
//
// It comes in two halves:
//   - classify_untranslated<F>: what is not the NAT's. The gateway's own addresses (a served
//     ingress IP on a port of its Service first: hairpin, ingress.h), cluster destinations,
//     the cluster's answers from a served ingress IP (ingress.h), the pod's Service, the default
//     action. Its answer is local, route (with the VRF, and the Service of an ingress answer),
//     reject, drop, or translate with the Service the packet belongs to (kDefaultPolicyId for
//     the default action's masquerade).
//   - classify_translation<F>: for what the first half left to the NAT, what can be translated,
//     the hop rule, the route and the NAT address; its answer is translate (with everything a
//     session is made of), reject or drop.
// Each runs once per packet, in nat_slow, after the session lookup missed, for IPv4 and IPv6
// alike (a packet with a session is never classified).
//
// Pure functions of the snapshot and the packet: no allocation, no writes.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "dataplane/burst.h"
#include "dataplane/ingress.h"
#include "dataplane/ip_forward.h"
#include "dataplane/ipv6.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace classify_detail {

// Each answer sets what its reader takes (nat_slow's new_outgoing) and nothing
// else: no flow is built whole only to be copied.
inline void drop_flow(NewFlow& f, DropReason r) {
    f.action = NewFlow::Action::drop;
    f.reason = r;
}

// Not forwarded, and answered with an ICMP error (unless icmp_reply holds it back).
inline void reject_flow(NewFlow& f, IcmpError e, DropReason r) {
    f.action = NewFlow::Action::reject;
    f.icmp = e;
    f.reason = r;
}

inline void route_flow(NewFlow& f, uint8_t vrf, uint32_t service_id = kDefaultPolicyId, bool leaves = false) {
    f.action = NewFlow::Action::route;
    f.vrf = vrf;
    f.service_id = static_cast<uint16_t>(service_id);
    f.leaves_cluster = leaves;
}

}  // namespace classify_detail

// What the classification reads of IPv4: the header, the tables, the TTL rule, the route and the
// NAT address (IPv4's in NewFlow: nh, nat_ip).
struct Family4 : Ingress4 {
    static constexpr uint8_t kIcmpProto = IPPROTO_ICMP;
    static constexpr IcmpError kAdminProhibited = IcmpError::admin_prohibited;

    static uint8_t l4_proto(const PacketMeta& pk) { return pk.ip->next_proto_id; }
    static bool to_gateway(const PolicySnapshot& p, uint16_t rx_port, const PacketMeta& pk) {
        return addressed_to_gateway(p, rx_port, rte_be_to_cpu_32(pk.ip->dst_addr), Dir::in2out);
    }
    // To one of the gateway's addresses, not a hairpin: it serves nothing on UDP and only ICMP
    // otherwise (RFC 1812 4.3.3.1 via RFC 1122 3.2.2.1); TCP would be answered with a reset,
    // which it does not send: dropped.
    static void to_gateway_flow(const PacketMeta& pk, NewFlow& f) {
        using namespace classify_detail;
        switch (pk.ip->next_proto_id) {
        case IPPROTO_ICMP:
            f.action = NewFlow::Action::local;
            return;
        case IPPROTO_UDP:
            return reject_flow(f, IcmpError::port_unreachable, DropReason::local);
        case IPPROTO_TCP:
            return drop_flow(f, DropReason::local);
        default:
            return reject_flow(f, IcmpError::protocol_unreachable, DropReason::local);
        }
    }
    static bool inside_cluster(const PolicySnapshot& p, const PacketMeta& pk) {
        return p.inside_cluster(rte_be_to_cpu_32(pk.ip->dst_addr));
    }
    static uint32_t endpoint_service(const PolicySnapshot& p, const PacketMeta& pk) {
        return p.endpoints.find(rte_be_to_cpu_32(pk.ip->src_addr));
    }
    static ServiceMode mode(const ServicePolicy& s) { return s.mode; }
    // The route in the flow's VRF (falling through to the default table); false when none.
    static bool find_route(const PolicySnapshot& p, const PacketMeta& pk, NewFlow& f) {
        f.nh = p.lookup_route(f.vrf, rte_be_to_cpu_32(pk.ip->dst_addr));
        return f.nh != nullptr;
    }
    // The Service's ingress IP, or the egress port's first address; false when the port has none.
    static bool nat_address(const PolicySnapshot& p, const ServicePolicy* svc, NewFlow& f) {
        if (svc && svc->mode == ServiceMode::snat_ingress_ip) {
            f.nat_ip = rte_cpu_to_be_32(svc->nat_ip);
            f.masquerade = false;
            return true;
        }
        const PortPolicy& out = p.ports[f.nh->port];
        if (out.n_addrs == 0) return false;
        f.nat_ip = rte_cpu_to_be_32(out.addrs[0]);
        f.masquerade = true;
        return true;
    }
    // Back from outside with no session (nat_slow's miss_incoming): an echo request, an address
    // of the receiving port, and the NAT address entry of the destination (F::kMissing if none).
    static bool echo_request(const PacketMeta& pk) {
        return pk.ip->next_proto_id == IPPROTO_ICMP &&
               reinterpret_cast<const rte_icmp_hdr*>(pk.l4)->icmp_type == RTE_IP_ICMP_ECHO_REQUEST;
    }
    static bool to_port_address(const PolicySnapshot& p, uint16_t rx_port, const PacketMeta& pk) {
        return p.is_port_address(rx_port, rte_be_to_cpu_32(pk.ip->dst_addr));
    }
    static uint32_t nat_address_flags(const PolicySnapshot& p, const PacketMeta& pk) {
        return p.nat_addresses.find(rte_be_to_cpu_32(pk.ip->dst_addr));
    }
};

// The same of IPv6: its own ICMPv6 errors (gateway_icmp_error_kinds.h), the hop limit, the IPv6 routes, the
// Service's IPv6 side (mode6: a LoadBalancerIP Service without an IPv6 ingress IP leaves its IPv6
// endpoints to the default action) and the IPv6 NAT address (NewFlow: nh6, nat_ip6).
struct Family6 : Ingress6 {
    static constexpr uint8_t kIcmpProto = kIp6Icmp;
    static constexpr IcmpError kAdminProhibited = IcmpError::admin_prohibited6;

    static uint8_t l4_proto(const PacketMeta& pk) { return pk.l4_proto; }
    // The receiving port's addresses (its link-local one included) and the NAT addresses.
    static bool to_gateway(const PolicySnapshot& p, uint16_t rx_port, const PacketMeta& pk) {
        return p.is_port_address6(rx_port, pk.ip6->dst_addr) || p.nat_addresses6.contains(pk.ip6->dst_addr);
    }
    // To one of the gateway's addresses, not a hairpin: echo requests answered, UDP port
    // unreachable (it serves none), anything else dropped (TCP would be answered with a reset,
    // which it does not send; ICMPv6 has no protocol unreachable of its own).
    static void to_gateway_flow(const PacketMeta& pk, NewFlow& f) {
        using namespace classify_detail;
        if (pk.l4_proto == kIp6Icmp && pk.l4_len >= sizeof(rte_icmp_hdr) && pk.l4[0] == kIcmp6EchoRequest) {
            f.action = NewFlow::Action::local;
            return;
        }
        if (pk.l4_proto == IPPROTO_UDP) return reject_flow(f, IcmpError::port_unreachable6, DropReason::local);
        drop_flow(f, DropReason::local);
    }
    static bool inside_cluster(const PolicySnapshot& p, const PacketMeta& pk) {
        return p.inside_cluster6(pk.ip6->dst_addr);
    }
    static uint32_t endpoint_service(const PolicySnapshot& p, const PacketMeta& pk) {
        return p.endpoints6.find(pk.ip6->src_addr);
    }
    static ServiceMode mode(const ServicePolicy& s) { return s.mode6; }
    static bool find_route(const PolicySnapshot& p, const PacketMeta& pk, NewFlow& f) {
        f.nh6 = p.lookup_route6(f.vrf, pk.ip6->dst_addr);
        return f.nh6 != nullptr;
    }
    static bool nat_address(const PolicySnapshot& p, const ServicePolicy* svc, NewFlow& f) {
        if (svc && svc->mode6 == ServiceMode::snat_ingress_ip) {
            f.nat_ip6 = svc->nat_ip6;
            f.masquerade = false;
            return true;
        }
        const PortPolicy& out = p.ports[f.nh6->port];
        if (out.n_addrs6 == 0) return false;
        f.nat_ip6 = out.addrs6[0];
        f.masquerade = true;
        return true;
    }
    static bool echo_request(const PacketMeta& pk) {
        return pk.l4_proto == kIp6Icmp && pk.l4_len >= sizeof(rte_icmp_hdr) && pk.l4[0] == kIcmp6EchoRequest;
    }
    static bool to_port_address(const PolicySnapshot& p, uint16_t rx_port, const PacketMeta& pk) {
        return p.is_port_address6(rx_port, pk.ip6->dst_addr);
    }
    static uint32_t nat_address_flags(const PolicySnapshot& p, const PacketMeta& pk) {
        return p.nat_addresses6.find(pk.ip6->dst_addr);
    }
};
static_assert(FlatMap::kMissing == Ip6Map::kMissing, "the families' tables say \"none\" alike");

// The first half (above), into `f`: what is not the NAT's, else translate with the packet's
// Service in f.service_id. `f` may be the packet's own PacketMeta::flow.
template <class F>
inline void classify_untranslated(const PolicySnapshot& p, uint16_t rx_port, const PacketMeta& pk, NewFlow& f) {
    using namespace classify_detail;
    const auto& key = F::key(pk);
    if (F::to_gateway(p, rx_port, pk)) {
        // A served ingress IP on a port of its Service: hairpin, refused (ingress.h).
        if ((pk.kind == Kind::tcp || pk.kind == Kind::udp) &&
            unlikely(ingress_service_of<F>(p, pk, key.dst, key.dport) != F::kMissing))
            return reject_flow(f, F::kAdminProhibited, DropReason::hairpin);
        return F::to_gateway_flow(pk, f);
    }
    // Destinations inside the cluster are never translated.
    if (F::inside_cluster(p, pk)) return route_flow(f, kDefaultVrf);
    // From a served ingress IP and a port of its Service: the cluster's answer to a connection
    // that came in through the Service, routed untranslated in the Service's network (ingress.h).
    if (uint32_t isid = ingress_service_of<F>(p, pk, key.src, key.sport); isid != F::kMissing)
        return route_flow(f, p.services[isid].vrf, isid);
    // The pod's Service, when it translates this family; else the default action.
    uint32_t sid = F::endpoint_service(p, pk);
    if (sid == F::kMissing || F::mode(p.services[sid]) == ServiceMode::inactive) {
        switch (p.default_action) {
        case DefaultAction::route:
            return route_flow(f, kDefaultVrf, kDefaultPolicyId, true);
        case DefaultAction::drop:
            return drop_flow(f, DropReason::default_action_drop);
        case DefaultAction::masquerade:
            break;
        }
        sid = kDefaultPolicyId;
    }
    f.action = NewFlow::Action::translate;
    f.service_id = static_cast<uint16_t>(sid);
}

// The second half (above), into `f`, for a packet the first left to the NAT as Service
// f.service_id (kDefaultPolicyId: the default action's masquerade).
template <class F>
inline void classify_translation(const PolicySnapshot& p, const PacketMeta& pk, NewFlow& f) {
    using namespace classify_detail;
    const uint16_t service_id = f.service_id;
    const ServicePolicy* svc = service_id != kDefaultPolicyId ? &p.services[service_id] : nullptr;
    if (pk.kind == Kind::other)
        return drop_flow(
            f, F::l4_proto(pk) == F::kIcmpProto ? DropReason::icmp_unsupported : DropReason::unsupported_protocol);
    // An error about a flow we hold no session for: nothing to translate it against.
    if (pk.kind == Kind::icmp_error) return drop_flow(f, DropReason::no_session);
    // Before anything is rewritten, so that the Time Exceeded quotes the pod's own header.
    if (unlikely(F::hop_expires(F::header(pk)))) return reject_flow(f, F::kTimeExceeded, DropReason::ttl_exceeded);
    f.vrf = svc ? svc->vrf : kDefaultVrf;
    if (unlikely(!F::find_route(p, pk, f))) return reject_flow(f, F::kNoRoute, DropReason::no_route);
    if (!F::nat_address(p, svc, f)) return drop_flow(f, DropReason::no_route);
    f.action = NewFlow::Action::translate;
    f.version = svc ? svc->version : p.default_version;
}

}  // namespace egw::dp
