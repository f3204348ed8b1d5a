// SPDX-License-Identifier: Apache-2.0
//
// Ingress to the ingress IPs this gateway serves (docs/architecture.md, "Ingress to served
// ingress IPs"). The gateway that answers ARP for a Service's load-balancer IP also receives the
// connections clients open to it. They are not the gateway's to answer: they are routed,
// untranslated, into the cluster toward the configured ingress next hop (a node whose service
// proxy accepts the load-balancer IP), and what comes back from the cluster with the ingress IP
// and the Service's port as its source is routed, untranslated, in the Service's network, as
// OVN-Kubernetes' E7 has it (replies to connections that entered through the Service use its
// network). Both ways are stateless: a packet qualifies by its addresses and ports alone, and
// holds no session and no NAT port.
//
// Which packets: TCP and UDP to (or from) a served ingress IP on one of its Service's spec.ports,
// and the ICMP errors quoting such a packet (the key of an ICMP error is the quoted packet's, so
// the same lookup decides). From outside, only on a port where the gateway answers ARP for that
// ingress IP (an outside port of the Service's network): another network never learned the
// address here. A packet to the ingress IP on any other port is what it was before, a reply with
// no session.
//
// Hairpin: a pod (any inside host) connecting to a served ingress IP on one of its Service's
// ports is refused (drop reason `hairpin`, answered with ICMP communication administratively
// prohibited so that the connect fails at once). Sent toward the ingress next hop untranslated,
// its answer would come back from the endpoint's own address, inside the cluster, and never
// through the gateway; making it work needs both addresses translated. Cluster proxies
// (kube-proxy, OVN's load balancers) answer a pod's traffic to a load-balancer IP on the node
// before it leaves, so it reaches the gateway only where the proxy does not.
//
// Both families: IPv6 the same way, with Neighbor Solicitations in place of ARP, the hop limit
// in place of the TTL (and Packet Too Big where IPv4 would fragment), `ingress.via6`, and
// ICMPv6's administratively prohibited (1/1) for the hairpin. The lookup and the decision are
// one template over the family (Ingress4, Ingress6 below). The forwarding itself is ip_forward's,
// the one body every untranslated packet goes through (ip_forward.cpp): the TTL or hop limit, the
// egress MTU (fragments, or the gateway's own Fragmentation Needed or Packet Too Big, so that a
// client's path MTU discovery works toward the Service), the decrement, output.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_ip.h>

#include "dataplane/burst.h"
#include "dataplane/family.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/ip_forward.h"

namespace egw::dp {

// What ingress reads of IPv4: the flow key, the ingress and NAT address tables, the next hop.
struct Ingress4 : Ipv4 {
    static constexpr uint32_t kMissing = FlatMap::kMissing;
    static const FlowKey& key(const PacketMeta& pk) { return pk.key; }
    // `ip` and `port` in network order, as in the key.
    static uint32_t service(const PolicySnapshot& p, uint32_t ip, uint8_t proto, uint16_t port) {
        return p.ingress_service(rte_be_to_cpu_32(ip), proto, rte_be_to_cpu_16(port));
    }
    static bool has_next_hop(const PolicySnapshot& p) { return p.has_ingress_next_hop; }
};

// The same of IPv6.
struct Ingress6 : Ipv6 {
    static constexpr uint32_t kMissing = Ip6Map::kMissing;
    static const FlowKey6& key(const PacketMeta& pk) { return pk.key6; }
    static uint32_t service(const PolicySnapshot& p, const uint8_t* ip, uint8_t proto, uint16_t port) {
        return p.ingress_service6(ip, proto, rte_be_to_cpu_16(port));
    }
    static bool has_next_hop(const PolicySnapshot& p) { return p.has_ingress_next_hop6; }
};

// The Service a packet's pod-side address and port belong to as an ingress IP and Service port:
// `ip` and `port` are the packet key's (network order), the destination of one from outside,
// the source of one from inside. F::kMissing when it is none. TCP, UDP and the ICMP errors
// quoting them (an error's key is the quoted packet's, turned around).
template <class F, class Addr>
inline uint32_t ingress_service_of(const PolicySnapshot& p, const PacketMeta& pk, Addr ip, uint16_t port) {
    if (pk.kind != Kind::tcp && pk.kind != Kind::udp && pk.kind != Kind::icmp_error) return F::kMissing;
    return F::service(p, ip, F::key(pk).proto, port);
}

// From outside, with no session: whether the packet is ingress to a served ingress IP (then it
// is routed into the cluster, or dropped when no next hop is configured). The caller has found
// `dst_flags` (the NAT address entry of the destination, with the ports answering ARP or
// Neighbor Solicitations for it).
template <class F>
inline bool forward_ingress(const PolicySnapshot& p, Burst& b, unsigned i, uint32_t dst_flags) {
    const PacketMeta& pk = b.pkt[i];
    if (!(dst_flags & kNatIngressIp) || !((dst_flags >> kNatArpPortsShift) & (1u << b.m[i]->port))) return false;
    if (ingress_service_of<F>(p, pk, F::key(pk).dst, F::key(pk).dport) == F::kMissing) return false;
    if (unlikely(!F::has_next_hop(p))) {
        b.drop(i, DropReason::ingress_no_next_hop);
        return true;
    }
    b.to_forward_ingress(i);
    return true;
}

}  // namespace egw::dp
