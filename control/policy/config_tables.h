// SPDX-License-Identifier: Apache-2.0
//
// ConfigTables: the part of a PolicySnapshot that the configuration alone decides. The ports
// (role, network, MAC, MTU, addresses of both families and the link-local address), the routes
// of both families (connected ones from the port addresses, then the static ones), the cluster's
// ranges and node IPs, and the ingress next hops; with what the Service tables need from them
// (the outside ports' addresses, the ports answering ARP per network).
//
// The PolicyBuilder makes them once per configuration (made_from() tells when the configuration
// they were made from is no longer the one in force) and copies them into every snapshot. They
// also keep the routes as they were programmed, in the configuration's words, for the CLI: what
// `show routes` prints is what the workers look up, not a second reading of the file.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "dataplane/tables/policy.h"

namespace egw::control {

using Ip6Bytes = std::array<uint8_t, 16>;

// The index in cfg.vrfs of a network name or table number ("" = the default network); -1 when
// the configuration has no such VRF.
int vrf_index(const config::Config& cfg, const std::string& network);

// One route of a snapshot, as the configuration said it.
struct ProgrammedRoute {
    uint8_t vrf = dp::kDefaultVrf;   // index in cfg.vrfs
    net::IpPrefix prefix;            // the network (host bits cleared) and length
    std::string port;                // the egress port's name
    std::optional<net::IpAddr> via;  // none: the destination is on-link
    bool connected = false;          // from a port address; otherwise a static route
};

class ConfigTables {
public:
    // `port_ids[i]` is the DPDK port id of cfg.ports[i]; `port_macs[port id]` its MAC.
    ConfigTables(const config::Config& cfg, const std::vector<uint16_t>& port_ids,
                 const std::vector<std::array<uint8_t, 6>>& port_macs);

    // Whether `cfg` holds what these tables were made from (the ports, VRFs, routes, cluster
    // ranges and ingress next hops): a comparison of a few small vectors.
    bool made_from(const config::Config& cfg) const;

    // Fills the configuration's part of `snap` (which must be fresh).
    void copy_into(dp::PolicySnapshot& snap) const;

    // The routes, connected ones first, in the order they were programmed (a later one for the
    // same VRF and prefix wins).
    const std::vector<ProgrammedRoute>& routes() const { return route_list_; }
    // The outside ports' addresses (masquerade addresses), sorted, per family.
    const std::vector<uint32_t>& outside_addresses() const { return outside_; }
    const std::vector<Ip6Bytes>& outside_addresses6() const { return outside6_; }
    // Per VRF, the outside ports that answer ARP and Neighbor Solicitations for the ingress IPs of
    // its Services (bit n: port id n): its own, or the default network's when it has none.
    const std::vector<uint32_t>& arp_ports() const { return arp_ports_; }
    // The routes as workers see them, one list of words: equal when the routes are the same, so
    // that sessions keep their cached next hops across a reload that did not touch them.
    const std::vector<uint64_t>& route_signature() const { return route_signature_; }

private:
    void add_port(const config::Config& cfg, size_t index, uint16_t id, const std::array<uint8_t, 6>& mac);
    void add_route(uint8_t vrf, const net::IpPrefix& prefix, const std::string& port, uint16_t port_id,
                   const std::optional<net::IpAddr>& via, bool connected);
    void finish_routes();
    void add_cluster(const config::ClusterConfig& cluster);
    void add_ingress(const config::Config& cfg, const std::vector<uint16_t>& port_ids);

    // What they were made from.
    std::vector<config::PortConfig> ports_cfg_;
    std::vector<config::VrfConfig> vrfs_cfg_;
    std::vector<config::RouteConfig> routes_cfg_;
    config::ClusterConfig cluster_cfg_;
    config::IngressConfig ingress_cfg_;

    std::array<dp::PortPolicy, dp::kMaxPorts> ports_{};
    std::vector<std::pair<uint64_t, uint32_t>> route_items_;
    std::vector<dp::Ip6Map::Item> route_items6_;
    dp::FlatMap routes_;
    std::vector<dp::NextHop> next_hops_;
    std::vector<std::vector<uint8_t>> lengths_ = std::vector<std::vector<uint8_t>>(dp::kMaxVrfs);
    dp::Ip6Map routes6_;
    std::vector<dp::NextHop6> next_hops6_;
    std::vector<std::vector<uint8_t>> lengths6_ = std::vector<std::vector<uint8_t>>(dp::kMaxVrfs);
    std::vector<std::pair<uint32_t, uint32_t>> cluster_cidrs_;
    std::vector<std::pair<dp::Ip6, uint8_t>> cluster_cidrs6_;
    dp::FlatMap node_ips_;
    dp::Ip6Map node_ips6_;
    std::optional<dp::NextHop> ingress_next_hop_;
    std::optional<dp::NextHop6> ingress_next_hop6_;

    std::vector<ProgrammedRoute> route_list_;
    std::vector<uint32_t> outside_;
    std::vector<Ip6Bytes> outside6_;
    std::vector<uint32_t> arp_ports_ = std::vector<uint32_t>(dp::kMaxVrfs);
    std::vector<uint64_t> route_signature_;
};

}  // namespace egw::control
