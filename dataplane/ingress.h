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
#pragma once

#include <rte_branch_prediction.h>
#include <rte_ip.h>

#include "dataplane/burst.h"
#include "dataplane/checksum.h"
#include "dataplane/icmp_reply.h"
#include "dataplane/ip_forward.h"

namespace egw::dp {

// The Service a packet's pod-side address and port belong to as an ingress IP and Service port:
// `ip` and `port` are the packet key's (network order), the destination of one from outside,
// the source of one from inside. kMissing when it is none.
inline uint32_t ingress_service_of(const PolicySnapshot& p, const PacketMeta& pk, uint32_t ip, uint16_t port) {
    if (pk.kind != Kind::tcp && pk.kind != Kind::udp && pk.kind != Kind::icmp_error) return FlatMap::kMissing;
    return p.ingress_service(rte_be_to_cpu_32(ip), pk.key.proto, rte_be_to_cpu_16(port));
}

// From outside, with no session: whether the packet is ingress to a served ingress IP (then it
// is routed into the cluster, or dropped when no next hop is configured). The caller has found
// `dst_flags` (the NAT address entry of the destination).
inline bool forward_ingress(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, uint32_t dst_flags) {
    PacketMeta& pk = b.pkt[i];
    if (!(dst_flags & kNatIngressIp) || !((dst_flags >> kNatArpPortsShift) & (1u << b.m[i]->port))) return false;
    if (ingress_service_of(p, pk, pk.key.dst, pk.key.dport) == FlatMap::kMissing) return false;
    if (unlikely(!p.has_ingress_next_hop)) {
        b.drop(i, DropReason::ingress_no_next_hop);
        return true;
    }
    if (unlikely(ttl_expires(pk.ip))) {
        reply_icmp_error(b, i, IcmpError::time_exceeded, DropReason::ttl_exceeded);
        return true;
    }
    pk.ip->hdr_checksum = csum_apply(pk.ip->hdr_checksum, ttl_decrement(pk.ip));
    count(w.counters.ingress_in);
    pk.neighbor_slot = NeighborTable::kNone;
    b.to_output(i, p.ingress_next_hop.port, p.ingress_next_hop.gateway, &pk.neighbor_slot);
    return true;
}

}  // namespace egw::dp
