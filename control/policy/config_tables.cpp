// SPDX-License-Identifier: Apache-2.0
#include "control/policy/config_tables.h"

#include <algorithm>
#include <cstring>

namespace egw::control {

int vrf_index(const config::Config& cfg, const std::string& network) {
    if (network.empty()) return dp::kDefaultVrf;
    const config::VrfConfig* v = cfg.find_vrf(network);
    return v ? static_cast<int>(v - cfg.vrfs.data()) : -1;
}

ConfigTables::ConfigTables(const config::Config& cfg, const std::vector<uint16_t>& port_ids,
                           const std::vector<std::array<uint8_t, 6>>& port_macs)
    : ports_cfg_(cfg.ports),
      vrfs_cfg_(cfg.vrfs),
      routes_cfg_(cfg.routes),
      cluster_cfg_(cfg.cluster),
      ingress_cfg_(cfg.ingress) {
    for (size_t i = 0; i < cfg.ports.size(); ++i)
        add_port(cfg, i, port_ids[i], port_macs[port_ids[i]]);
    // Static routes come after connected ones so that an explicit route for the same prefix wins.
    for (const auto& r : cfg.routes) {
        const size_t pi = static_cast<size_t>(cfg.find_port(r.port) - cfg.ports.data());
        add_route(static_cast<uint8_t>(vrf_index(cfg, r.vrf)), r.prefix, r.port, port_ids[pi], r.via, false);
    }
    finish_routes();
    add_cluster(cfg.cluster);
    add_ingress(cfg, port_ids);

    // The outside ports of each network; a network with none of its own reaches the outside
    // through the default table, so its ingress IPs are answered on the default network's ports.
    for (unsigned id = 0; id < dp::kMaxPorts; ++id)
        if (ports_[id].role == dp::PortRole::outside) arp_ports_[ports_[id].vrf] |= 1u << id;
    for (uint32_t& mask : arp_ports_)
        if (mask == 0) mask = arp_ports_[dp::kDefaultVrf];
    std::sort(outside_.begin(), outside_.end());
    outside_.erase(std::unique(outside_.begin(), outside_.end()), outside_.end());
    std::sort(outside6_.begin(), outside6_.end());
    outside6_.erase(std::unique(outside6_.begin(), outside6_.end()), outside6_.end());
}

bool ConfigTables::made_from(const config::Config& cfg) const {
    return cfg.ports == ports_cfg_ && cfg.vrfs == vrfs_cfg_ && cfg.routes == routes_cfg_ &&
           cfg.cluster == cluster_cfg_ && cfg.ingress == ingress_cfg_;
}

// The one place a port's entry is made: its policy, its addresses and their connected routes.
void ConfigTables::add_port(const config::Config& cfg, size_t index, uint16_t id, const std::array<uint8_t, 6>& mac) {
    const config::PortConfig& pc = cfg.ports[index];
    dp::PortPolicy& pp = ports_[id];
    pp.role = pc.role;
    pp.vrf = static_cast<uint8_t>(vrf_index(cfg, pc.vrf));
    std::copy(mac.begin(), mac.end(), pp.mac);
    pp.mtu = static_cast<uint16_t>(pc.mtu);
    // The link-local address of the port: fe80::/64 with the modified EUI-64 of its MAC.
    uint8_t* ll = pp.link_local.b;
    ll[0] = 0xfe;
    ll[1] = 0x80;
    ll[8] = static_cast<uint8_t>(mac[0] ^ 0x02);
    ll[9] = mac[1];
    ll[10] = mac[2];
    ll[11] = 0xff;
    ll[12] = 0xfe;
    ll[13] = mac[3];
    ll[14] = mac[4];
    ll[15] = mac[5];
    const bool outside = pc.role == config::PortRole::outside;
    for (const auto& a : pc.addresses) {
        if (a.is_v6()) {
            if (pp.n_addrs6 == dp::kMaxPortAddresses) continue;
            std::copy(a.addr.bytes().begin(), a.addr.bytes().end(), pp.addrs6[pp.n_addrs6].b);
            pp.prefix_len6[pp.n_addrs6] = a.len;
            ++pp.n_addrs6;
            add_route(pp.vrf, a, pc.name, id, std::nullopt, true);
            if (outside) {
                Ip6Bytes b;
                std::copy(a.addr.bytes().begin(), a.addr.bytes().end(), b.begin());
                outside6_.push_back(b);
            }
            continue;
        }
        if (pp.n_addrs == dp::kMaxPortAddresses) break;
        pp.addrs[pp.n_addrs] = a.addr.v4();
        pp.prefix_len[pp.n_addrs] = a.len;
        ++pp.n_addrs;
        add_route(pp.vrf, a, pc.name, id, std::nullopt, true);
        if (outside) outside_.push_back(a.addr.v4());
    }
}

void ConfigTables::add_route(uint8_t vrf, const net::IpPrefix& prefix, const std::string& port, uint16_t port_id,
                             const std::optional<net::IpAddr>& via, bool connected) {
    route_list_.push_back(ProgrammedRoute{vrf, net::IpPrefix{prefix.network(), prefix.len}, port, via, connected});
    if (prefix.is_v4()) {
        next_hops_.push_back(dp::NextHop{port_id, via ? via->v4() : 0});
        route_items_.emplace_back(dp::PolicySnapshot::route_key(vrf, prefix.len, prefix.network4()),
                                  static_cast<uint32_t>(next_hops_.size() - 1));
        lengths_[vrf].push_back(prefix.len);
        return;
    }
    dp::NextHop6 nh;
    nh.port = port_id;
    nh.on_link = !via;
    if (via) std::copy(via->bytes().begin(), via->bytes().end(), nh.gateway.b);
    next_hops6_.push_back(nh);
    dp::Ip6Map::Item it{};
    dp::PolicySnapshot::mask6(prefix.addr.bytes().data(), prefix.len, it.addr);
    it.scope = dp::PolicySnapshot::route_scope6(vrf, prefix.len);
    it.value = static_cast<uint32_t>(next_hops6_.size() - 1);
    route_items6_.push_back(it);
    lengths6_[vrf].push_back(prefix.len);
}

void ConfigTables::finish_routes() {
    routes_.build(route_items_);
    routes6_.build(route_items6_);
    for (auto* lengths : {&lengths_, &lengths6_})
        for (auto& lens : *lengths) {
            std::sort(lens.begin(), lens.end(), std::greater<>());
            lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
        }
    route_signature_.reserve(route_items_.size() * 2 + route_items6_.size() * 5);
    for (const auto& [key, nh] : route_items_) {
        route_signature_.push_back(key);
        route_signature_.push_back(uint64_t{next_hops_[nh].port} << 32 | next_hops_[nh].gateway);
    }
    for (const dp::Ip6Map::Item& it : route_items6_) {
        uint64_t w[2];
        std::memcpy(w, it.addr, 16);
        const dp::NextHop6& nh = next_hops6_[it.value];
        uint64_t g[2];
        std::memcpy(g, nh.gateway.b, 16);
        route_signature_.insert(route_signature_.end(), {w[0], w[1], uint64_t{it.scope} << 32 | nh.port, g[0], g[1]});
    }
    route_items_.clear();
    route_items6_.clear();
}

void ConfigTables::add_cluster(const config::ClusterConfig& cluster) {
    for (const auto* cidrs : {&cluster.pod_cidrs, &cluster.service_cidrs})
        for (const auto& c : *cidrs) {
            if (c.is_v4()) {
                cluster_cidrs_.emplace_back(c.network4(), c.mask4());
                continue;
            }
            dp::Ip6 net;
            dp::PolicySnapshot::mask6(c.addr.bytes().data(), c.len, net.b);
            cluster_cidrs6_.emplace_back(net, c.len);
        }
    std::vector<std::pair<uint64_t, uint32_t>> nodes;
    std::vector<dp::Ip6Map::Item> nodes6;
    for (const net::IpAddr& ip : cluster.node_ips) {
        if (ip.is_v4()) {
            nodes.emplace_back(ip.v4(), 1);
            continue;
        }
        dp::Ip6Map::Item it{};
        std::copy(ip.bytes().begin(), ip.bytes().end(), it.addr);
        it.value = 1;
        nodes6.push_back(it);
    }
    node_ips_.build(nodes);
    node_ips6_.build(nodes6);
}

void ConfigTables::add_ingress(const config::Config& cfg, const std::vector<uint16_t>& port_ids) {
    if (!cfg.ingress.via && !cfg.ingress.via6) return;
    const uint16_t port = port_ids[static_cast<size_t>(cfg.find_port(cfg.ingress.port) - cfg.ports.data())];
    if (cfg.ingress.via) ingress_next_hop_ = dp::NextHop{port, cfg.ingress.via->v4()};
    if (cfg.ingress.via6) {
        dp::NextHop6 nh;
        nh.port = port;
        nh.on_link = false;
        std::copy(cfg.ingress.via6->bytes().begin(), cfg.ingress.via6->bytes().end(), nh.gateway.b);
        ingress_next_hop6_ = nh;
    }
}

void ConfigTables::copy_into(dp::PolicySnapshot& snap) const {
    snap.ports = ports_;
    snap.index_ports();
    snap.routes = routes_;
    snap.next_hops = next_hops_;
    snap.vrf_prefix_lengths = lengths_;
    snap.routes6 = routes6_;
    snap.next_hops6 = next_hops6_;
    snap.vrf_prefix_lengths6 = lengths6_;
    snap.cluster_cidrs = cluster_cidrs_;
    snap.cluster_cidrs6 = cluster_cidrs6_;
    snap.node_ips = node_ips_;
    snap.node_ips6 = node_ips6_;
    if (ingress_next_hop_) {
        snap.ingress_next_hop = *ingress_next_hop_;
        snap.has_ingress_next_hop = true;
    }
    if (ingress_next_hop6_) {
        snap.ingress_next_hop6 = *ingress_next_hop6_;
        snap.has_ingress_next_hop6 = true;
    }
}

}  // namespace egw::control
