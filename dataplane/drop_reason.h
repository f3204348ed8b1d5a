// SPDX-License-Identifier: Apache-2.0
//
// Why a packet was dropped. One list feeds the per-worker counters, the status file, the CLI and
// the metrics, so a reason is named once, here.
#pragma once

#include <cstdint>

namespace egw::dp {

#define EGW_DROP_REASONS(X)                                                                                            \
    X(malformed, "truncated or inconsistent Ethernet/IP/L4 header, or bad IPv4 checksum")                              \
    X(unknown_ethertype, "EtherType other than IPv4, IPv6 and ARP")                                                    \
    X(foreign_mac, "unicast frame for another MAC (seen on a promiscuous port)")                                       \
    X(fragment,                                                                                                        \
      "fragment not reassembled (empty, more fragments than reassembly.max_fragments, inconsistent or overlapping, "   \
      "past 65535 bytes; IPv6: another extension header before the Fragment header)")                                  \
    X(unsupported_protocol, "protocol other than TCP, UDP and ICMP where translation is needed")                       \
    X(ttl_exceeded, "TTL (IPv6: hop limit) would reach zero")                                                          \
    X(no_route, "no route in the VRF nor in the default table")                                                        \
    X(no_session, "packet from outside with no session and not routable")                                              \
    X(neighbor_unresolved, "next hop not resolved and the hold queue is full")                                         \
    X(session_limit, "maximum session count reached")                                                                  \
    X(port_exhausted, "no free NAT port for this destination")                                                         \
    X(default_action_drop, "traffic of no EgressService while the default action is drop")                             \
    X(local, "addressed to the gateway itself and not ARP or ICMP echo")                                               \
    X(icmp_unsupported, "ICMP type that is neither echo nor a translatable error")                                     \
    X(tx_full, "the port's transmit queue was full")                                                                   \
    X(handoff_full, "the owning worker's hand-off ring was full")                                                      \
    X(stale_session, "reply for a session whose Service policy changed")                                               \
    X(multicast, "multicast destination (224.0.0.0/4, ff00::/8 but Neighbor Discovery)")                               \
    X(broadcast, "limited broadcast destination (255.255.255.255)")                                                    \
    X(directed_broadcast, "destination is the broadcast address of a port's subnet")                                   \
    X(martian_source,                                                                                                  \
      "source in 0.0.0.0/8, 127.0.0.0/8, 224.0.0.0/4 or 240.0.0.0/4, or a subnet's broadcast; IPv6: multicast, ::1, "  \
      "::ffff:0:0/96, or :: but in Neighbor Discovery")                                                                \
    X(martian_destination,                                                                                             \
      "destination in 0.0.0.0/8, 127.0.0.0/8 or 240.0.0.0/4 (but 255.255.255.255); IPv6: ::, ::1, ::ffff:0:0/96")      \
    X(link_local, "source or destination in 169.254.0.0/16 or fe80::/10 (link-local, never forwarded)")                \
    X(link_broadcast, "unicast IPv4 or IPv6 received in an Ethernet broadcast or multicast frame")                     \
    X(tcp_not_opening,                                                                                                 \
      "TCP segment with no session that may not open one: RST, FIN or SYN+ACK, or anything but a SYN in strict mode")  \
    X(frag_needed, "larger than the egress port's MTU with DF set (or not IPv4)")                                      \
    X(fragment_failed, "larger than the egress MTU and could not be fragmented (no mbuf, more than 56 fragments)")     \
    X(fragment_timeout, "fragment of a datagram not complete within reassembly.timeout_ms")                            \
    X(tcp_rst_out_of_window, "TCP RST whose sequence number is outside the window its session has seen")               \
    X(pod_session_limit, "the pod has as many sessions as sessions.max_per_pod allows")                                \
    X(hairpin,                                                                                                         \
      "from inside to a served ingress IP on a port of its Service, refused and not answered (the rate limit held "    \
      "the ICMP administratively prohibited back)")                                                                    \
    X(ingress_no_next_hop,                                                                                             \
      "from outside to a served ingress IP on a port of its Service, with no ingress next hop configured")             \
    X(ipv6_extension_header,                                                                                           \
      "IPv6 extension headers beyond the walk's bound (4 headers, 256 bytes), or a routing header with segments left " \
      "on a packet addressed to the gateway")                                                                          \
    X(ipv6_unsupported,                                                                                                \
      "no longer counted: every valid IPv6 packet is now translated, routed, answered or dropped under another "       \
      "reason (kept so that its series stays)")                                                                        \
    X(icmp_checksum,                                                                                                   \
      "ICMP or ICMPv6 error quoting a packet of a session whose own checksum is wrong (not "                           \
      "translated)")                                                                                                   \
    X(ndp_fragmented, "IPv6 Neighbor Discovery message in a Fragment header (RFC 6980), not answered nor learned")     \
    X(reassembly_source_limit,                                                                                         \
      "fragment of a new datagram from a source that holds reassembly.max_per_source datagrams in reassembly")         \
    X(reassembly_table_full, "fragment of a new datagram while the reassembly table holds reassembly.max_datagrams")   \
    X(tx_chain_not_copied,                                                                                             \
      "chained frame (a fragment, a reassembled datagram) for a port whose device cannot transmit chains, and no "     \
      "free mbuf to copy it into")                                                                                     \
    X(unknown_vlan, "802.1Q-tagged frame whose VLAN id is no sub-port of the receiving port")                          \
    X(vlan_no_headroom, "frame for a VLAN sub-port with no headroom left for its 802.1Q tag")                          \
    X(egress_firewall_denied, "a pod's new flow denied by its namespace's EgressFirewall")

enum class DropReason : uint8_t {
#define EGW_X(name, help) name,
    EGW_DROP_REASONS(EGW_X)
#undef EGW_X
        count
};

inline constexpr unsigned kDropReasonCount = static_cast<unsigned>(DropReason::count);

inline constexpr const char* kDropReasonNames[] = {
#define EGW_X(name, help) #name,
    EGW_DROP_REASONS(EGW_X)
#undef EGW_X
};

inline constexpr const char* kDropReasonHelp[] = {
#define EGW_X(name, help) help,
    EGW_DROP_REASONS(EGW_X)
#undef EGW_X
};

}  // namespace egw::dp
