// SPDX-License-Identifier: Apache-2.0
//
// PolicySnapshot: everything a worker needs to classify, translate and route a packet, frozen.
//
// Writer: the control thread builds a complete new snapshot beside the live one (allocation is
// fine there), then publishes it with one release store into PolicyHandle::current. The builder
// (control/policy/policy_builder.h) fills the Service-dependent tables by copying its own
// private tables, patched for what changed; no published snapshot is ever patched.
// Readers: every worker loads the pointer (acquire) once per poll-loop iteration and uses only
// that snapshot until the iteration ends; then it reports a quiescent state to DPDK RCU (QSBR).
// Reclamation: after the store, the control thread waits for an RCU grace period
// (rte_rcu_qsbr_start/check) and only then deletes the previous snapshot. Nothing in a
// published snapshot is ever written.
//
// Services are identified by a dense id, stable for the life of a Service in this process (it
// indexes the per-worker counters). The `version` of a service changes whenever anything about
// its translation changes; sessions remember the version they were made under and are dropped
// the moment it no longer matches, which is how a policy change "stops translating at once".
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/ipv6.h"
#include "dataplane/tables/egress_firewall.h"
#include "dataplane/tables/egress_qos.h"
#include "dataplane/tables/flat_map.h"
#include "dataplane/tables/ip6_map.h"
#include "dataplane/tables/roles.h"

namespace egw::dp {

inline constexpr unsigned kMaxPorts = 16;
inline constexpr unsigned kMaxVrfs = 256;
inline constexpr unsigned kMaxWorkers = 16;
inline constexpr unsigned kMaxPortAddresses = 8;
// Service id 0 stands for "no EgressService" (the default action), so real ids start at 1.
inline constexpr uint32_t kMaxServices = 16384;
inline constexpr uint32_t kDefaultPolicyId = 0;
inline constexpr uint8_t kDefaultVrf = 0;

// PortRole and DefaultAction: roles.h.
enum class ServiceMode : uint8_t {
    inactive,         // not served by this gateway: its endpoints take the default action
    snat_ingress_ip,  // sourceIPBy LoadBalancerIP: NAPT to the ingress IP
    masquerade,       // sourceIPBy Network: NAPT to the egress port's address
};

struct PortPolicy {
    PortRole role = PortRole::none;
    uint8_t vrf = kDefaultVrf;
    uint8_t n_addrs = 0;
    uint8_t mac[6] = {};
    uint16_t mtu = 1500;                     // the largest IPv4 datagram the port may send
    uint32_t addrs[kMaxPortAddresses] = {};  // host order; addrs[0] is the masquerade address
    uint8_t prefix_len[kMaxPortAddresses] = {};
    // IPv6, after what the IPv4 path reads: the configured addresses (network order; addrs6[0] is
    // the IPv6 masquerade address) and the link-local address every port has (fe80::/64 with the
    // modified EUI-64 of the port's MAC, RFC 4291 2.5.1).
    uint8_t n_addrs6 = 0;
    uint8_t prefix_len6[kMaxPortAddresses] = {};
    Ip6 addrs6[kMaxPortAddresses] = {};
    Ip6 link_local = {};
};

struct ServicePolicy {
    uint32_t version = 0;  // 0: no such service
    ServiceMode mode = ServiceMode::inactive;
    uint8_t vrf = kDefaultVrf;
    uint32_t nat_ip = 0;  // host order, snat_ingress_ip only
    // IPv6: what the Service's IPv6 endpoints get. A LoadBalancerIP Service with no IPv6 ingress
    // IP has inactive here (its IPv6 endpoints take the default action, as IPv4 endpoints do
    // without an IPv4 ingress IP); `version` covers both families.
    ServiceMode mode6 = ServiceMode::inactive;
    Ip6 nat_ip6 = {};  // snat_ingress_ip only
};

struct NextHop {
    uint16_t port = 0;
    uint32_t gateway = 0;  // host order; 0: the destination itself is on-link
};

struct NextHop6 {
    uint16_t port = 0;
    bool on_link = true;  // the destination itself is the next hop
    Ip6 gateway = {};
};

// NAT addresses this gateway owns on the outside: replies to them are looked up in sessions.
// The upper 16 bits of an ingress IP's value are the ports that answer ARP for it (bit n: DPDK
// port n): the outside ports of its Services' networks, so that a network that is not the
// Service's never learns the address through this gateway.
enum NatAddressFlags : uint32_t {
    kNatIngressIp = 1u << 0,    // a served Service's ingress IP
    kNatPortAddress = 1u << 1,  // an outside port's own address (masquerade)
};
inline constexpr unsigned kNatArpPortsShift = 16;
static_assert(kMaxPorts <= 32 - kNatArpPortsShift, "the ARP port mask shares the flags word");

struct PolicySnapshot {
    uint64_t generation = 0;
    // The generation since which the routes (and the ports they lead to) are the same as in this
    // snapshot: a session checked at or after it keeps its cached routes.
    uint64_t route_generation = 0;
    DefaultAction default_action = DefaultAction::masquerade;
    uint32_t default_version = 1;  // changes when what the default action translates to changes

    std::array<PortPolicy, kMaxPorts> ports{};
    // The directed broadcast address of every port address's subnet (prefixes of /30 or shorter;
    // /31 and /32 have none), with its port: derived from `ports` by index_ports(), which whoever
    // fills `ports` calls afterwards (the policy builder). Input compares a packet's addresses
    // with these instead of walking every port's prefixes (address_filter.h).
    struct PortBroadcast {
        uint32_t addr;  // host order
        uint16_t port;
    };
    std::array<PortBroadcast, kMaxPorts * kMaxPortAddresses> port_broadcasts{};
    unsigned n_port_broadcasts = 0;
    // Whether some address of port_broadcasts ends in the octet: the address filter clears an
    // address of every directed broadcast with one read of this, and leaves the few addresses it
    // flags to the exact comparison (address_filter.h). Derived by index_ports().
    std::array<bool, 256> broadcast_last_octet{};
    // Bytes 6-13 of an IPv4 frame leaving each port (its MAC as the source, EtherType 0x0800), as
    // they lie in memory: output writes them with one 8-byte store. eth_src6 the same for IPv6
    // (EtherType 0x86DD). Derived by index_ports().
    std::array<uint64_t, kMaxPorts> eth_src4{};
    std::array<uint64_t, kMaxPorts> eth_src6{};
    // What input's common path takes for a frame's destination MAC on each port: the first eight
    // bytes of a frame, loaded little-endian and shifted left by 16 (bytes 0-5, the destination),
    // equal this word when they are the port's MAC. A port without a role, or whose MAC is a group
    // address, has kNoUnicastDst, which no shifted word equals (its low 16 bits are not zero), so
    // its frames go to the exact parse. Derived by index_ports().
    static constexpr uint64_t kNoUnicastDst = 1;
    std::array<uint64_t, kMaxPorts> unicast_dst{};
    // The smallest MTU of any port slot: a datagram no larger fits every port, and the MTU rule
    // (mtu.h) passes it without finding its egress port's. Unused slots keep the default 1,500,
    // which can only make the shortcut rarer, never wrong. 0 (every datagram takes the full
    // check) until index_ports() derives it.
    uint16_t smallest_mtu = 0;

    void index_ports() {
        smallest_mtu = ports[0].mtu;
        for (unsigned port = 0; port < kMaxPorts; ++port) {
            if (ports[port].mtu < smallest_mtu) smallest_mtu = ports[port].mtu;
            uint8_t b[8] = {};
            __builtin_memcpy(b, ports[port].mac, 6);
            uint64_t dst;
            __builtin_memcpy(&dst, b, 8);
            unicast_dst[port] = ports[port].role == PortRole::none || (b[0] & 1) ? kNoUnicastDst : dst << 16;
            b[6] = 0x08;
            b[7] = 0x00;
            __builtin_memcpy(&eth_src4[port], b, 8);
            b[6] = 0x86;
            b[7] = 0xdd;
            __builtin_memcpy(&eth_src6[port], b, 8);
        }
        n_port_broadcasts = 0;
        broadcast_last_octet = {};
        for (unsigned port = 0; port < kMaxPorts; ++port)
            for (unsigned k = 0; k < ports[port].n_addrs; ++k) {
                uint8_t len = ports[port].prefix_len[k];
                if (len == 0 || len > 30) continue;
                uint32_t host = ~uint32_t{0} >> len;
                uint32_t broadcast = ports[port].addrs[k] | host;
                port_broadcasts[n_port_broadcasts++] = {broadcast, static_cast<uint16_t>(port)};
                broadcast_last_octet[broadcast & 0xff] = true;
            }
    }
    std::vector<ServicePolicy> services = std::vector<ServicePolicy>(kMaxServices);

    FlatMap endpoints;      // pod IPv4 -> service id (served or not)
    FlatMap nat_addresses;  // IPv4 -> NatAddressFlags
    FlatMap node_ips;       // IPv4 -> 1
    // Ingress to served ingress IPs (docs/architecture.md): ingress_key(ingress IP, protocol, port)
    // of every spec.ports entry of a Service translated to that ingress IP -> the Service's id.
    // Connections from outside to such a port are routed into the cluster toward
    // `ingress_next_hop`; what comes back with that address and port as its source leaves
    // untranslated through the Service's network.
    FlatMap ingress_ports;
    NextHop ingress_next_hop{};  // an inside port and the next hop there
    bool has_ingress_next_hop = false;
    std::vector<std::pair<uint32_t, uint32_t>> cluster_cidrs;  // (network, mask), pod + service CIDRs

    // Routes: one FlatMap keyed by route_key(vrf, len, network) -> index into next_hops, and per
    // VRF the prefix lengths present, longest first, so a lookup probes only lengths in use.
    FlatMap routes;
    std::vector<NextHop> next_hops;
    std::vector<std::vector<uint8_t>> vrf_prefix_lengths = std::vector<std::vector<uint8_t>>(kMaxVrfs);

    static uint64_t route_key(uint8_t vrf, uint8_t len, uint32_t network) {
        return uint64_t{vrf} << 40 | uint64_t{len} << 32 | network;
    }

    // Longest-prefix match in one VRF; nullptr when it has no route.
    const NextHop* lookup_route_in(uint8_t vrf, uint32_t dst) const {
        for (uint8_t len : vrf_prefix_lengths[vrf]) {
            uint32_t mask = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
            uint32_t nh = routes.find(route_key(vrf, len, dst & mask));
            if (nh != FlatMap::kMissing) return &next_hops[nh];
        }
        return nullptr;
    }

    // The semantics of `ip rule ... lookup <table>`: the VRF first, the default table when the VRF
    // has no route.
    const NextHop* lookup_route(uint8_t vrf, uint32_t dst) const {
        const NextHop* nh = lookup_route_in(vrf, dst);
        if (!nh && vrf != kDefaultVrf) nh = lookup_route_in(kDefaultVrf, dst);
        return nh;
    }

    static uint64_t ingress_key(uint32_t ip, uint8_t proto, uint16_t port) {
        return uint64_t{ip} << 32 | uint32_t{proto} << 16 | port;
    }

    // The Service whose ingress IP and port these are (host order), FlatMap::kMissing if none.
    uint32_t ingress_service(uint32_t ip, uint8_t proto, uint16_t port) const {
        return ingress_ports.size() == 0 ? FlatMap::kMissing : ingress_ports.find(ingress_key(ip, proto, port));
    }

    // IPv6 (network order). Routes: Ip6Map keyed by (masked network, route_scope6(vrf, len)) ->
    // index into next_hops6, and per VRF the prefix lengths present, longest first.
    Ip6Map routes6;
    std::vector<NextHop6> next_hops6;
    std::vector<std::vector<uint8_t>> vrf_prefix_lengths6 = std::vector<std::vector<uint8_t>>(kMaxVrfs);
    // The served IPv6 ingress IPs and the outside ports' IPv6 addresses -> NatAddressFlags, as
    // nat_addresses for IPv4 (the upper bits: the ports answering Neighbor Solicitations for it).
    Ip6Map nat_addresses6;
    // Ingress to served IPv6 ingress IPs, as `ingress_ports` for IPv4: one map per protocol
    // (TCP, UDP), keyed by the ingress IP with the Service port (host order) as scope -> the
    // Service's id; toward `ingress_next_hop6` (the configuration's ingress.via6).
    std::array<Ip6Map, 2> ingress_ports6;
    NextHop6 ingress_next_hop6{};
    bool has_ingress_next_hop6 = false;

    // The EgressFirewalls in force (null: none, nothing classified). Read in the NAT slow path
    // and the maintenance sweep only (egress_firewall.h).
    std::shared_ptr<const EgressFirewallPolicy> egress_firewall;

    // The Service whose IPv6 ingress IP and port these are (`port` host order), Ip6Map::kMissing
    // if none.
    uint32_t ingress_service6(const uint8_t* ip, uint8_t proto, uint16_t port) const {
        if (proto != kProtoTcp && proto != kProtoUdp) return Ip6Map::kMissing;
        const Ip6Map& m = ingress_ports6[proto == kProtoUdp];
        return m.size() == 0 ? Ip6Map::kMissing : m.find(ip, port);
    }
    static constexpr uint8_t kProtoTcp = 6;
    static constexpr uint8_t kProtoUdp = 17;

    static uint16_t route_scope6(uint8_t vrf, uint8_t len) { return static_cast<uint16_t>(vrf << 8 | len); }

    // `a` with all but its first `len` bits cleared, into `out`.
    static void mask6(const uint8_t* a, unsigned len, uint8_t* out) {
        for (unsigned i = 0; i < 16; ++i) {
            unsigned bits = len >= 8 * (i + 1) ? 8 : len > 8 * i ? len - 8 * i : 0;
            out[i] = static_cast<uint8_t>(a[i] & (0xff00u >> bits));
        }
    }

    const NextHop6* lookup_route6_in(uint8_t vrf, const uint8_t* dst) const {
        uint8_t net[16];
        for (uint8_t len : vrf_prefix_lengths6[vrf]) {
            mask6(dst, len, net);
            uint32_t nh = routes6.find(net, route_scope6(vrf, len));
            if (nh != Ip6Map::kMissing) return &next_hops6[nh];
        }
        return nullptr;
    }

    const NextHop6* lookup_route6(uint8_t vrf, const uint8_t* dst) const {
        const NextHop6* nh = lookup_route6_in(vrf, dst);
        if (!nh && vrf != kDefaultVrf) nh = lookup_route6_in(kDefaultVrf, dst);
        return nh;
    }

    // NAPT66: pod IPv6 -> Service id (served or not), as `endpoints`; the cluster's IPv6 pod and
    // service CIDRs (masked network, length) and node IPs, never translated.
    Ip6Map endpoints6;
    std::vector<std::pair<Ip6, uint8_t>> cluster_cidrs6;
    Ip6Map node_ips6;

    bool inside_cluster6(const uint8_t* dst) const {
        uint8_t net[16];
        for (const auto& [prefix, len] : cluster_cidrs6) {
            mask6(dst, len, net);
            if (ip6_equal(net, prefix.b)) return true;
        }
        return node_ips6.contains(dst);
    }

    // Whether `ip` is one of the port's IPv6 addresses, its link-local one included.
    bool is_port_address6(uint16_t port, const uint8_t* ip) const {
        const PortPolicy& p = ports[port];
        if (ip6_equal(p.link_local.b, ip)) return true;
        for (unsigned i = 0; i < p.n_addrs6; ++i)
            if (ip6_equal(p.addrs6[i].b, ip)) return true;
        return false;
    }

    // Whether Neighbor Solicitations for `ip` are answered on `port` as a served ingress IP.
    bool answers_ndp_for_ingress(uint16_t port, const uint8_t* ip) const {
        uint32_t flags = nat_addresses6.find(ip);
        return flags != Ip6Map::kMissing && (flags & kNatIngressIp) && (flags >> kNatArpPortsShift) & (1u << port);
    }

    // Pod CIDRs, service CIDRs and node IPs: destinations that are never translated.
    bool inside_cluster(uint32_t dst) const {
        for (auto& [net, mask] : cluster_cidrs)
            if ((dst & mask) == net) return true;
        return node_ips.contains(dst);
    }

    // Whether ARP for `ip` is answered on `port` as a served ingress IP.
    bool answers_arp_for_ingress(uint16_t port, uint32_t ip) const {
        uint32_t flags = nat_addresses.find(ip);
        return flags != FlatMap::kMissing && (flags & kNatIngressIp) && (flags >> kNatArpPortsShift) & (1u << port);
    }

    bool is_port_address(uint16_t port, uint32_t ip) const {
        const PortPolicy& p = ports[port];
        for (unsigned i = 0; i < p.n_addrs; ++i)
            if (p.addrs[i] == ip) return true;
        return false;
    }

    // EgressQoS: each marked pod's rules, read when a session is made or revalidated.
    EgressQosTable egress_qos;
};

// The published pointer. Lives in the shared data-plane state.
struct PolicyHandle {
    std::atomic<const PolicySnapshot*> current{nullptr};
    static_assert(std::atomic<const PolicySnapshot*>::is_always_lock_free);
};

}  // namespace egw::dp
