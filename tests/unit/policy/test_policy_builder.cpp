// SPDX-License-Identifier: Apache-2.0
//
// PolicyBuilder patches its previous tables instead of rebuilding them. These tests hold it to
// what a build from scratch makes of the same history: `Scratch` below is the straightforward
// algorithm (every Service resolved, every table built from lists, on every call). Over random
// sequences of changes, both PolicyBuilder::build() (every state) and PolicyBuilder::apply()
// (only what changed) must give the same snapshot and views as Scratch after every step: ids
// (reused after a Service is gone), versions, the first-by-name owner of a pod claimed twice,
// the default policy's version, NAT addresses, ports and routes, and the route generation. Both
// families: the Services have IPv6 ingress IPs and endpoints as well, and the configuration of
// the random tests has IPv6 port addresses (one of them also an ingress IP), routes, cluster
// ranges, a node IP and an IPv6 ingress next hop.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_set>

#include "config/config.h"
#include "control/policy/policy_builder.h"

namespace egw::control {
namespace {

using model::ServiceDelta;
using model::ServiceState;

// What a Service was programmed with at the last build: its policy and its endpoints.
struct Programmed {
    dp::ServicePolicy pol;
    std::vector<uint32_t> eps;
    std::vector<net::IpAddr> eps6;
};

// The reference: each call resolves every Service and builds every table from a list.
class Scratch {
public:
    Scratch(const config::Config& cfg, std::vector<uint16_t> port_ids, std::vector<std::array<uint8_t, 6>> macs)
        : cfg_(cfg), port_ids_(std::move(port_ids)), macs_(std::move(macs)) {}

    std::vector<ServiceView> views;

    std::unique_ptr<dp::PolicySnapshot> build(const std::vector<ServiceState>& services) {
        auto snap = std::make_unique<dp::PolicySnapshot>();
        snap->generation = ++generation_;
        snap->default_action = cfg_.default_action == config::DefaultAction::route ? dp::DefaultAction::route
                               : cfg_.default_action == config::DefaultAction::masquerade
                                   ? dp::DefaultAction::masquerade
                                   : dp::DefaultAction::drop;
        if (last_action_ && *last_action_ != cfg_.default_action) ++default_version_;
        last_action_ = cfg_.default_action;
        std::vector<std::pair<uint64_t, uint32_t>> routes, nat;
        std::map<uint8_t, std::set<uint8_t, std::greater<>>> lengths, lengths6;
        std::map<net::IpAddr, uint32_t> nat6;  // IPv6 NAT address -> flags
        // Per family, (VRF, prefix) -> (port, next hop): a later route for the same prefix wins.
        std::map<std::tuple<uint8_t, uint8_t, uint32_t>, std::pair<uint16_t, uint32_t>> route4;
        std::map<std::tuple<uint8_t, uint8_t, net::IpAddr>, std::pair<uint16_t, std::optional<net::IpAddr>>> route6;
        // Every route given, in order, shadowed ones too: their list is what the route generation follows.
        std::vector<std::tuple<uint8_t, net::IpPrefix, uint16_t, std::optional<net::IpAddr>>> given;
        auto route = [&](uint8_t vrf, const net::IpPrefix& p, uint16_t port, const std::optional<net::IpAddr>& via) {
            given.emplace_back(vrf, net::IpPrefix{p.network(), p.len}, port, via);
            if (p.is_v4()) {
                route4[{vrf, p.len, p.network4()}] = {port, via ? via->v4() : 0};
                lengths[vrf].insert(p.len);
            } else {
                route6[{vrf, p.len, p.network()}] = {port, via};
                lengths6[vrf].insert(p.len);
            }
        };
        for (size_t i = 0; i < cfg_.ports.size(); ++i) {
            const auto& pc = cfg_.ports[i];
            const uint16_t id = port_ids_[i];
            dp::PortPolicy& pp = snap->ports[id];
            pp.role = pc.role == config::PortRole::inside ? dp::PortRole::inside : dp::PortRole::outside;
            pp.vrf = static_cast<uint8_t>(vrf_of(pc.vrf));
            pp.mtu = static_cast<uint16_t>(pc.mtu);
            const auto& mac = macs_[id];
            std::copy(mac.begin(), mac.end(), pp.mac);
            // fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 2.5.1).
            const uint8_t ll[16] = {
                0xfe,   0x80,   0,    0,    0,      0,      0,     0, static_cast<uint8_t>(mac[0] ^ 2),
                mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
            std::copy(std::begin(ll), std::end(ll), pp.link_local.b);
            for (const auto& a : pc.addresses) {
                if (a.is_v6()) {
                    const auto& b = a.addr.bytes();
                    std::copy(b.begin(), b.end(), pp.addrs6[pp.n_addrs6].b);
                    pp.prefix_len6[pp.n_addrs6++] = a.len;
                    route(pp.vrf, a, id, std::nullopt);
                    if (pc.role == config::PortRole::outside) nat6[a.addr] |= dp::kNatPortAddress;
                    continue;
                }
                pp.addrs[pp.n_addrs] = a.addr.v4();
                pp.prefix_len[pp.n_addrs++] = a.len;
                route(pp.vrf, a, id, std::nullopt);
                if (pc.role == config::PortRole::outside) nat.emplace_back(a.addr.v4(), dp::kNatPortAddress);
            }
        }
        snap->index_ports();
        for (const auto& r : cfg_.routes)
            route(static_cast<uint8_t>(vrf_of(r.vrf)), r.prefix,
                  port_ids_[static_cast<size_t>(cfg_.find_port(r.port) - cfg_.ports.data())], r.via);
        for (const auto& [where, to] : route4) {
            snap->next_hops.push_back(dp::NextHop{to.first, to.second});
            routes.emplace_back(
                dp::PolicySnapshot::route_key(std::get<0>(where), std::get<1>(where), std::get<2>(where)),
                static_cast<uint32_t>(snap->next_hops.size() - 1));
        }
        snap->routes.build(routes);
        std::vector<dp::Ip6Map::Item> routes6;
        for (const auto& [where, to] : route6) {
            dp::NextHop6 nh;
            nh.port = to.first;
            nh.on_link = !to.second;
            if (to.second) std::copy(to.second->bytes().begin(), to.second->bytes().end(), nh.gateway.b);
            snap->next_hops6.push_back(nh);
            dp::Ip6Map::Item it{};
            std::copy(std::get<2>(where).bytes().begin(), std::get<2>(where).bytes().end(), it.addr);
            it.scope = dp::PolicySnapshot::route_scope6(std::get<0>(where), std::get<1>(where));
            it.value = static_cast<uint32_t>(snap->next_hops6.size() - 1);
            routes6.push_back(it);
        }
        snap->routes6.build(routes6);
        // The generation of the last snapshot whose routes differ from the one before.
        if (given != last_routes_) {
            last_routes_ = given;
            route_generation_ = snap->generation;
        }
        snap->route_generation = route_generation_;
        for (auto& [vrf, lens] : lengths)
            snap->vrf_prefix_lengths[vrf].assign(lens.begin(), lens.end());
        for (auto& [vrf, lens] : lengths6)
            snap->vrf_prefix_lengths6[vrf].assign(lens.begin(), lens.end());
        for (const auto* cidrs : {&cfg_.cluster.pod_cidrs, &cfg_.cluster.service_cidrs})
            for (const auto& c : *cidrs) {
                if (c.is_v4()) {
                    snap->cluster_cidrs.emplace_back(c.network4(), c.mask4());
                    continue;
                }
                const net::IpAddr network = c.network();  // one object: begin() and end() of the same bytes
                dp::Ip6 net;
                std::copy(network.bytes().begin(), network.bytes().end(), net.b);
                snap->cluster_cidrs6.emplace_back(net, c.len);
            }
        std::vector<std::pair<uint64_t, uint32_t>> nodes;
        std::vector<dp::Ip6Map::Item> nodes6;
        for (const auto& ip : cfg_.cluster.node_ips) {
            if (ip.is_v4()) {
                nodes.emplace_back(ip.v4(), 1);
                continue;
            }
            dp::Ip6Map::Item it{};
            std::copy(ip.bytes().begin(), ip.bytes().end(), it.addr);
            it.value = 1;
            nodes6.push_back(it);
        }
        snap->node_ips.build(nodes);
        snap->node_ips6.build(nodes6);

        std::set<std::string> present;
        for (const auto& s : services)
            present.insert(s.key);
        for (auto it = ids_.begin(); it != ids_.end();) {
            if (present.count(it->first)) {
                ++it;
                continue;
            }
            last_.erase(it->second);
            free_.push_back(it->second);
            it = ids_.erase(it);
        }
        std::map<uint32_t, uint32_t> owner;      // pod -> id of the first claim
        std::map<uint64_t, uint32_t> ingress;    // (ingress IP, protocol, port) -> id of the first claim
        std::map<net::IpAddr, uint32_t> owner6;  // IPv6 pod -> id of the first claim
        std::array<std::map<std::pair<net::IpAddr, uint16_t>, uint32_t>, 2> ingress6;  // [UDP?] (IP, port) -> id
        std::map<uint32_t, Programmed> programmed;
        views.clear();
        for (const auto& s : services) {
            ServiceView v;
            v.state = s;
            v.id = id_for(s.key);
            if (v.id == 0) {
                v.problem = "too many Services (limit " + std::to_string(dp::kMaxServices - 1) + ")";
                v.ipv4 = ipv4_translation(s, dp::ServicePolicy{}, v.problem);
                v.ipv6 = ipv6_translation(s, dp::ServicePolicy{}, v.problem);
                views.push_back(v);
                continue;
            }
            dp::ServicePolicy pol;
            int vrf = vrf_of(s.network);
            if (vrf >= 0) v.vrf = cfg_.vrfs[static_cast<size_t>(vrf)].name;
            // The outside ports of the Service's network, or of the default network when its own
            // has none: where its ingress IPs are answered (ARP, Neighbor Solicitation).
            uint32_t arp_ports = 0;
            for (int pass = 0; pass < 2 && arp_ports == 0 && vrf >= 0; ++pass)
                for (unsigned id = 0; id < dp::kMaxPorts; ++id)
                    if (snap->ports[id].role == dp::PortRole::outside &&
                        snap->ports[id].vrf == (pass == 0 ? static_cast<uint8_t>(vrf) : dp::kDefaultVrf))
                        arp_ports |= 1u << id;
            if (s.serve_here) {
                if (vrf < 0) {
                    v.problem = "unknown network \"" + s.network + "\": no VRF of that name or table";
                } else if (s.mode == model::Mode::network) {
                    pol.mode = dp::ServiceMode::masquerade;
                    pol.mode6 = dp::ServiceMode::masquerade;
                    pol.vrf = static_cast<uint8_t>(vrf);
                } else {
                    // LoadBalancerIP: each family translated to its own ingress IP, if it has one.
                    if (s.ingress_ipv4 || s.ingress_ipv6) pol.vrf = static_cast<uint8_t>(vrf);
                    if (!s.ingress_ipv4) {
                        v.problem = "no IPv4 ingress IP (the IPv4 data plane needs one)";
                    } else {
                        pol.mode = dp::ServiceMode::snat_ingress_ip;
                        pol.nat_ip = *s.ingress_ipv4;
                        nat.emplace_back(pol.nat_ip, dp::kNatIngressIp | arp_ports << dp::kNatArpPortsShift);
                        for (uint32_t pp : s.ports)
                            ingress.emplace(dp::PolicySnapshot::ingress_key(pol.nat_ip, static_cast<uint8_t>(pp >> 16),
                                                                            static_cast<uint16_t>(pp)),
                                            v.id);
                    }
                    if (s.ingress_ipv6) {
                        pol.mode6 = dp::ServiceMode::snat_ingress_ip;
                        std::copy(s.ingress_ipv6->bytes().begin(), s.ingress_ipv6->bytes().end(), pol.nat_ip6.b);
                        nat6[*s.ingress_ipv6] |= dp::kNatIngressIp | arp_ports << dp::kNatArpPortsShift;
                        for (uint32_t pp : s.ports)
                            ingress6[(pp >> 16) == dp::PolicySnapshot::kProtoUdp].emplace(
                                std::make_pair(*s.ingress_ipv6, static_cast<uint16_t>(pp)), v.id);
                    }
                }
            }
            v.programmed = pol.mode != dp::ServiceMode::inactive;
            v.programmed6 = pol.mode6 != dp::ServiceMode::inactive;
            v.ipv4 = ipv4_translation(s, pol, v.problem);
            v.ipv6 = ipv6_translation(s, pol, v.problem);
            // The version survives while nothing a session depends on changed, in either family;
            // losing an endpoint counts, gaining one does not.
            auto prev = last_.find(v.id);
            bool same = prev != last_.end() && prev->second.pol.mode == pol.mode && prev->second.pol.vrf == pol.vrf &&
                        prev->second.pol.nat_ip == pol.nat_ip && prev->second.pol.mode6 == pol.mode6 &&
                        std::equal(std::begin(pol.nat_ip6.b), std::end(pol.nat_ip6.b), prev->second.pol.nat_ip6.b) &&
                        std::includes(s.endpoint_ipv4s.begin(), s.endpoint_ipv4s.end(), prev->second.eps.begin(),
                                      prev->second.eps.end()) &&
                        std::includes(s.endpoint_ipv6s.begin(), s.endpoint_ipv6s.end(), prev->second.eps6.begin(),
                                      prev->second.eps6.end());
            pol.version = same ? prev->second.pol.version : next_version_++;
            snap->services[v.id] = pol;
            programmed[v.id] = Programmed{pol, s.endpoint_ipv4s, s.endpoint_ipv6s};
            for (uint32_t ip : s.endpoint_ipv4s)
                owner.emplace(ip, v.id);
            for (const net::IpAddr& ip : s.endpoint_ipv6s)
                owner6.emplace(ip, v.id);
            views.push_back(v);
        }
        last_ = std::move(programmed);
        std::vector<std::pair<uint64_t, uint32_t>> eps(owner.begin(), owner.end());
        snap->endpoints.build(eps);
        // The default policy's version moves when a pod of either family becomes translated
        // (sessions the default action made for it must stop).
        std::set<uint32_t> served;
        for (auto [ip, id] : owner)
            if (snap->services[id].mode != dp::ServiceMode::inactive) served.insert(ip);
        if (!std::includes(served_.begin(), served_.end(), served.begin(), served.end())) ++default_version_;
        served_ = served;
        std::set<net::IpAddr> served6;
        for (const auto& [ip, id] : owner6)
            if (snap->services[id].mode6 != dp::ServiceMode::inactive) served6.insert(ip);
        if (!std::includes(served6_.begin(), served6_.end(), served6.begin(), served6.end())) ++default_version_;
        served6_ = served6;
        snap->default_version = default_version_;
        std::map<uint32_t, uint32_t> merged;
        for (auto [ip, f] : nat)
            merged[static_cast<uint32_t>(ip)] |= f;
        snap->nat_addresses.build({merged.begin(), merged.end()});
        snap->ingress_ports.build({ingress.begin(), ingress.end()});
        auto item6 = [](const net::IpAddr& ip, uint16_t scope, uint32_t value) {
            dp::Ip6Map::Item it{};
            std::copy(ip.bytes().begin(), ip.bytes().end(), it.addr);
            it.scope = scope;
            it.value = value;
            return it;
        };
        std::vector<dp::Ip6Map::Item> items;
        for (const auto& [ip, id] : owner6)
            items.push_back(item6(ip, 0, id));
        snap->endpoints6.build(items);
        items.clear();
        for (const auto& [ip, flags] : nat6)
            items.push_back(item6(ip, 0, flags));
        snap->nat_addresses6.build(items);
        for (size_t k = 0; k < ingress6.size(); ++k) {
            items.clear();
            for (const auto& [where, id] : ingress6[k])
                items.push_back(item6(where.first, where.second, id));
            snap->ingress_ports6[k].build(items);
        }
        if (cfg_.ingress.via) {
            snap->ingress_next_hop =
                dp::NextHop{port_ids_[static_cast<size_t>(cfg_.find_port(cfg_.ingress.port) - cfg_.ports.data())],
                            cfg_.ingress.via->v4()};
            snap->has_ingress_next_hop = true;
        }
        if (cfg_.ingress.via6) {
            snap->ingress_next_hop6.port =
                port_ids_[static_cast<size_t>(cfg_.find_port(cfg_.ingress.port) - cfg_.ports.data())];
            snap->ingress_next_hop6.on_link = false;
            std::copy(cfg_.ingress.via6->bytes().begin(), cfg_.ingress.via6->bytes().end(),
                      snap->ingress_next_hop6.gateway.b);
            snap->has_ingress_next_hop6 = true;
        }
        return snap;
    }

private:
    int vrf_of(const std::string& network) const {
        if (network.empty()) return dp::kDefaultVrf;
        const config::VrfConfig* v = cfg_.find_vrf(network);
        return v ? static_cast<int>(v - cfg_.vrfs.data()) : -1;
    }
    uint32_t id_for(const std::string& key) {
        if (auto it = ids_.find(key); it != ids_.end()) return it->second;
        uint32_t id = 0;
        if (!free_.empty()) {
            id = free_.back();
            free_.pop_back();
        } else if (next_id_ < dp::kMaxServices) {
            id = next_id_++;
        } else {
            return 0;
        }
        ids_[key] = id;
        return id;
    }

    const config::Config& cfg_;
    std::vector<uint16_t> port_ids_;
    std::vector<std::array<uint8_t, 6>> macs_;
    std::map<std::string, uint32_t> ids_;
    std::vector<uint32_t> free_;
    uint32_t next_id_ = 1, next_version_ = 1, default_version_ = 1;
    std::optional<config::DefaultAction> last_action_;
    uint64_t generation_ = 0;
    std::map<uint32_t, Programmed> last_;
    std::set<uint32_t> served_;
    std::set<net::IpAddr> served6_;
    std::vector<std::tuple<uint8_t, net::IpPrefix, uint16_t, std::optional<net::IpAddr>>> last_routes_;
    uint64_t route_generation_ = 0;
};

std::string ip(uint64_t v) {
    return config::format_ipv4(static_cast<uint32_t>(v));
}

std::string ip6(const uint8_t* b) {
    return net::to_string(net::IpAddr::from_v6(b));
}

// An Ip6Map's entries as lines "address scope -> value", sorted.
std::vector<std::string> entries6(const dp::Ip6Map& m) {
    std::vector<std::string> out;
    m.for_each([&](const uint8_t* a, uint16_t scope, uint32_t v) {
        out.push_back(ip6(a) + " " + std::to_string(scope) + " -> " + std::to_string(v));
    });
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::pair<uint64_t, uint32_t>> entries(const dp::FlatMap& m) {
    std::vector<std::pair<uint64_t, uint32_t>> out;
    m.for_each([&](uint64_t k, uint32_t v) { out.emplace_back(k, v); });
    std::sort(out.begin(), out.end());
    return out;
}

// Everything a worker can read from a snapshot, one line per entry, in a fixed order. Tables
// are compared by content: the slot layout of a map depends on the order keys went in.
std::string dump(const dp::PolicySnapshot& s) {
    std::ostringstream o;
    o << "generation " << s.generation << " default " << int(s.default_action) << " v" << s.default_version
      << " routes of " << s.route_generation << "\n";
    for (size_t p = 0; p < s.ports.size(); ++p) {
        const auto& pp = s.ports[p];
        o << "port " << p << " role " << int(pp.role) << " vrf " << int(pp.vrf) << " mac";
        for (uint8_t b : pp.mac)
            o << " " << int(b);
        for (unsigned i = 0; i < pp.n_addrs; ++i)
            o << " " << ip(pp.addrs[i]) << "/" << int(pp.prefix_len[i]);
        for (unsigned i = 0; i < pp.n_addrs6; ++i)
            o << " " << ip6(pp.addrs6[i].b) << "/" << int(pp.prefix_len6[i]);
        o << " link-local " << ip6(pp.link_local.b) << " mtu " << pp.mtu << "\n";
    }
    o << "smallest mtu " << s.smallest_mtu << " broadcasts " << s.n_port_broadcasts << "\n";
    EXPECT_EQ(s.services.size(), dp::kMaxServices);
    for (size_t id = 0; id < s.services.size(); ++id) {
        const auto& sp = s.services[id];
        if (sp.version || sp.mode != dp::ServiceMode::inactive || sp.mode6 != dp::ServiceMode::inactive || sp.vrf ||
            sp.nat_ip)
            o << "service " << id << " v" << sp.version << " mode " << int(sp.mode) << " vrf " << int(sp.vrf) << " nat "
              << ip(sp.nat_ip) << " mode6 " << int(sp.mode6) << " nat6 " << ip6(sp.nat_ip6.b) << "\n";
    }
    for (auto [k, v] : entries(s.endpoints))
        o << "endpoint " << ip(k) << " -> " << v << "\n";
    for (auto [k, v] : entries(s.nat_addresses))
        o << "nat " << ip(k) << " flags " << v << "\n";
    for (const auto& e : entries6(s.endpoints6))
        o << "endpoint6 " << e << "\n";
    for (const auto& e : entries6(s.nat_addresses6))
        o << "nat6 " << e << "\n";
    for (size_t k = 0; k < s.ingress_ports6.size(); ++k)
        for (const auto& e : entries6(s.ingress_ports6[k]))
            o << "ingress6 " << (k ? "udp " : "tcp ") << e << "\n";
    for (auto [k, v] : entries(s.node_ips))
        o << "node " << ip(k) << " " << v << "\n";
    for (auto [k, v] : entries(s.ingress_ports))
        o << "ingress " << ip(k >> 32) << " proto " << ((k >> 16) & 0xff) << " port " << (k & 0xffff) << " -> " << v
          << "\n";
    o << "ingress next hop " << s.has_ingress_next_hop << " port " << s.ingress_next_hop.port << " via "
      << ip(s.ingress_next_hop.gateway) << "\n";
    for (auto [n, m] : s.cluster_cidrs)
        o << "cluster " << ip(n) << " " << ip(m) << "\n";
    for (auto [k, v] : entries(s.routes))
        o << "route " << (k >> 40) << " " << ip(k & 0xffffffff) << "/" << ((k >> 32) & 0xff) << " -> port "
          << s.next_hops.at(v).port << " via " << ip(s.next_hops.at(v).gateway) << "\n";
    for (size_t vrf = 0; vrf < s.vrf_prefix_lengths.size(); ++vrf)
        if (!s.vrf_prefix_lengths[vrf].empty()) {
            o << "lengths " << vrf;
            for (uint8_t l : s.vrf_prefix_lengths[vrf])
                o << " " << int(l);
            o << "\n";
        }
    for (const auto& e : entries6(s.routes6)) {
        // "address scope -> next hop index": the index depends on the order routes went in.
        const size_t arrow = e.rfind(" -> ");
        const dp::NextHop6& nh = s.next_hops6.at(std::stoul(e.substr(arrow + 4)));
        o << "route6 " << e.substr(0, arrow) << " -> port " << nh.port << " on-link " << nh.on_link << " via "
          << ip6(nh.gateway.b) << "\n";
    }
    for (size_t vrf = 0; vrf < s.vrf_prefix_lengths6.size(); ++vrf)
        if (!s.vrf_prefix_lengths6[vrf].empty()) {
            o << "lengths6 " << vrf;
            for (uint8_t l : s.vrf_prefix_lengths6[vrf])
                o << " " << int(l);
            o << "\n";
        }
    for (const auto& [n, len] : s.cluster_cidrs6)
        o << "cluster6 " << ip6(n.b) << "/" << int(len) << "\n";
    for (const auto& e : entries6(s.node_ips6))
        o << "node6 " << e << "\n";
    o << "ingress next hop6 " << s.has_ingress_next_hop6 << " port " << s.ingress_next_hop6.port << " via "
      << ip6(s.ingress_next_hop6.gateway.b) << "\n";
    // Every key the workers may look up lands where find() reaches it.
    for (auto [k, v] : entries(s.endpoints))
        EXPECT_EQ(s.endpoints.find(k), v);
    EXPECT_LE(s.endpoints.size() * 2, s.endpoints.capacity());
    EXPECT_LE(s.nat_addresses.size() * 2, s.nat_addresses.capacity());
    return o.str();
}

std::string dump(const std::vector<ServiceView>& views) {
    std::ostringstream o;
    for (const auto& v : views) {
        const auto& s = v.state;
        o << s.key << " id " << v.id << " programmed " << v.programmed << " programmed6 " << v.programmed6 << " vrf "
          << v.vrf << " problem " << v.problem << " ipv4 " << v.ipv4 << " ipv6 " << v.ipv6 << " | mode " << int(s.mode)
          << " host " << s.status_host << " reason " << s.reason << " serve " << s.serve_here << " net " << s.network
          << " ingress " << (s.ingress_ipv4 ? ip(*s.ingress_ipv4) : "-") << " eps";
        for (uint32_t e : s.endpoint_ipv4s)
            o << " " << ip(e);
        o << " ingress6 " << (s.ingress_ipv6 ? net::to_string(*s.ingress_ipv6) : "-") << " eps6";
        for (const net::IpAddr& e : s.endpoint_ipv6s)
            o << " " << net::to_string(e);
        o << " ports";
        for (uint32_t p : s.ports)
            o << " " << p;
        o << "\n";
    }
    return o.str();
}

// test_config() with IPv6 in every part the configuration decides: port addresses (the outside
// one's second address is also an ingress IP the random Services use), routes of both kinds,
// cluster ranges, a node IP and the ingress next hop.
config::Config test_config_dual() {
    return config::load_text(R"({
      "eal": {"vdevs": ["net_null0", "net_null1", "net_null2"]}, "workers": [1],
      "vrfs": [{"name": "blue", "table": 100}, {"name": "red", "table": 200}],
      "ports": [{"name": "pods", "device": "net_null0", "role": "inside",
                 "addresses": ["10.255.255.1/24", "fd00:ff::1/64"]},
                {"name": "ext", "device": "net_null1", "role": "outside", "mtu": 9000,
                 "addresses": ["192.0.2.1/24", "2001:db8:2::1/64", "192.0.2.2/24", "2001:db8:113::1/64"]},
                {"name": "blue", "device": "net_null2", "role": "outside", "vrf": "blue",
                 "addresses": ["198.51.100.1/24", "2001:db8:3::1/64"]}],
      "routes": [{"prefix": "0.0.0.0/0", "port": "ext", "via": "192.0.2.254"},
                 {"prefix": "::/0", "port": "ext", "via": "2001:db8:2::fe"},
                 {"prefix": "2001:db8:2::/64", "port": "ext"},
                 {"vrf": "blue", "prefix": "0.0.0.0/0", "port": "blue", "via": "198.51.100.254"},
                 {"vrf": "blue", "prefix": "2001:db8:77::/48", "port": "blue", "via": "fe80::fe"}],
      "cluster": {"pod_cidrs": ["10.0.0.0/16", "fd00:10::/64"], "service_cidrs": ["10.96.0.0/12", "fd00:96::/108"],
                  "node_ips": ["172.16.0.1", "fd00:ff::10"]},
      "ingress": {"via": "10.255.255.2", "via6": "fd00:ff::2", "port": "pods"},
      "node": {"name": "gw-1"}, "state": {"source": "kubernetes"}})",
                             "test.json");
}

config::Config test_config() {
    return config::load_text(R"({
      "eal": {"vdevs": ["net_null0", "net_null1", "net_null2"]}, "workers": [1],
      "vrfs": [{"name": "blue", "table": 100}, {"name": "red", "table": 200}],
      "ports": [{"name": "pods", "device": "net_null0", "role": "inside", "addresses": ["10.255.255.1/24"]},
                {"name": "ext", "device": "net_null1", "role": "outside", "addresses": ["192.0.2.1/24", "192.0.2.2/24"]},
                {"name": "blue", "device": "net_null2", "role": "outside", "vrf": "blue", "addresses": ["198.51.100.1/24"]}],
      "routes": [{"prefix": "0.0.0.0/0", "port": "ext", "via": "192.0.2.254"},
                 {"vrf": "blue", "prefix": "0.0.0.0/0", "port": "blue", "via": "198.51.100.254"}],
      "cluster": {"pod_cidrs": ["10.0.0.0/16"], "service_cidrs": ["10.96.0.0/12"], "node_ips": ["172.16.0.1"]},
      "ingress": {"via": "10.255.255.2", "port": "pods"},
      "node": {"name": "gw-1"}, "state": {"source": "kubernetes"}})",
                             "test.json");
}

// The first line where two dumps differ (gtest's own diff of two long strings is quadratic).
std::string first_difference(const std::string& got, const std::string& want) {
    std::istringstream g(got), w(want);
    std::string gl, wl;
    for (size_t line = 1;; ++line) {
        bool gm = static_cast<bool>(std::getline(g, gl)), wm = static_cast<bool>(std::getline(w, wl));
        if (!gm && !wm) return "";
        if (!gm || !wm || gl != wl)
            return "line " + std::to_string(line) + ": got \"" + (gm ? gl : "<end>") + "\", want \"" +
                   (wm ? wl : "<end>") + "\"";
    }
}

#define EXPECT_SAME(got, want, what) ASSERT_EQ(first_difference(got, want), "") << what

const std::vector<std::array<uint8_t, 6>> kMacs = {{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}};

// Three builders fed the same history: the reference, build() with every state, apply() with
// the changes only.
struct Trio {
    explicit Trio(const config::Config& cfg)
        : ref(cfg, {0, 1, 2}, kMacs), full(cfg, {0, 1, 2}, kMacs), incr(cfg, {0, 1, 2}, kMacs) {}

    // `states` after the change; `delta` the change.
    void step(const std::map<std::string, ServiceState>& states, const ServiceDelta& delta, const std::string& what) {
        std::vector<ServiceState> all;
        for (const auto& [k, s] : states)
            all.push_back(s);
        const std::string want = dump(*ref.build(all));
        const std::string want_views = dump(ref.views);
        EXPECT_SAME(dump(*full.build(all)), want, what);
        EXPECT_SAME(dump(full.views()), want_views, what);
        EXPECT_SAME(dump(*incr.apply(delta)), want, what);
        EXPECT_SAME(dump(incr.views()), want_views, what);
        for (const auto& v : incr.views()) {
            ASSERT_EQ(incr.view(v.state.key), &v);
            if (v.id) {
                ASSERT_EQ(incr.ids().at(v.state.key), v.id);
            }
        }
        ASSERT_EQ(incr.ids(), full.ids());
        ASSERT_EQ(incr.view("no/such"), nullptr);
    }

    Scratch ref;
    PolicyBuilder full, incr;
};

// A cluster that changes at random: few keys, pods and ingress IPs, so that pods are claimed
// twice, ids are released and reused, and ingress IPs are shared.
class World {
public:
    explicit World(uint32_t seed) : rng_(seed) {}

    std::map<std::string, ServiceState> states;

    // One step: a few random changes; returns them as a delta (and describes them).
    ServiceDelta step(std::string& what) {
        ServiceDelta d;
        std::map<std::string, ServiceState> before = states;
        unsigned n = pick(8) == 0 ? 6 : 1 + pick(3);
        for (unsigned i = 0; i < n; ++i)
            change(what);
        for (const auto& [k, s] : states)
            if (auto it = before.find(k); it == before.end() || !(it->second == s)) d.changed.push_back(s);
        for (const auto& [k, s] : before)
            if (!states.count(k)) d.removed.push_back(k);
        // Now and then the delta repeats what did not change: apply() must take it as a no-op.
        if (pick(4) == 0 && !states.empty()) d.changed.push_back(random_state());
        std::shuffle(d.changed.begin(), d.changed.end(), rng_);
        return d;
    }

private:
    unsigned pick(unsigned n) { return static_cast<unsigned>(rng_() % n); }
    std::string key(unsigned i) const { return (i % 3 == 0 ? "b/" : "a/") + std::string("svc-") + std::to_string(i); }
    uint32_t pod() { return 0x0a000000u + 1 + pick(40); }
    ServiceState& random_state() {
        auto it = states.begin();
        std::advance(it, pick(static_cast<unsigned>(states.size())));
        return it->second;
    }
    void set_endpoints(ServiceState& s, std::vector<uint32_t> eps) {
        std::sort(eps.begin(), eps.end());
        eps.erase(std::unique(eps.begin(), eps.end()), eps.end());
        s.endpoint_ipv4s = std::move(eps);
    }
    // IPv6 addresses from a few: fd00:10::1-24 for pods, 2001:db8:113::1-6 for ingress IPs.
    static net::IpAddr v6(uint8_t net, uint8_t host) {
        uint8_t b[16] = {0x20, 0x01, 0x0d, 0xb8, 0x01, 0x13};
        if (net == 0) b[0] = 0xfd, b[1] = 0x00, b[2] = 0x00, b[3] = 0x10, b[4] = b[5] = 0;
        b[15] = host;
        return net::IpAddr::from_v6(b);
    }
    net::IpAddr pod6() { return v6(0, static_cast<uint8_t>(1 + pick(24))); }
    void set_endpoints6(ServiceState& s, std::vector<net::IpAddr> eps) {
        std::sort(eps.begin(), eps.end());
        eps.erase(std::unique(eps.begin(), eps.end()), eps.end());
        s.endpoint_ipv6s = std::move(eps);
    }
    std::optional<net::IpAddr> ingress6() {
        if (pick(3) == 0) return std::nullopt;
        return v6(1, static_cast<uint8_t>(1 + pick(6)));
    }
    std::optional<uint32_t> ingress() {
        if (pick(8) == 0) return std::nullopt;
        // A few are also an outside port's address.
        if (pick(10) == 0) return 0xc0000201u;
        return 0xcb007100u + pick(8);
    }
    // A subset of three ports, so that Services sharing an ingress IP share ports too.
    std::vector<uint32_t> ports() {
        static const uint32_t all[] = {6u << 16 | 80, 6u << 16 | 443, 17u << 16 | 53};
        std::vector<uint32_t> out;
        for (uint32_t p : all)
            if (pick(2) == 0) out.push_back(p);
        return out;
    }
    std::string network() {
        static const char* nets[] = {"", "", "", "blue", "100", "red", "200", "green"};
        return nets[pick(8)];
    }
    ServiceState fresh(const std::string& k) {
        ServiceState s;
        s.key = k;
        s.mode = pick(4) == 0 ? model::Mode::network : model::Mode::load_balancer_ip;
        s.serve_here = pick(5) != 0;
        s.status_host = s.serve_here ? "gw-1" : "";
        s.reason = s.serve_here ? "" : "another gateway serves it";
        s.network = network();
        s.ingress_ipv4 = ingress();
        s.ports = ports();
        std::vector<uint32_t> eps;
        for (unsigned i = pick(6); i > 0; --i)
            eps.push_back(pod());
        set_endpoints(s, eps);
        s.ingress_ipv6 = ingress6();
        std::vector<net::IpAddr> eps6;
        for (unsigned i = pick(5); i > 0; --i)
            eps6.push_back(pod6());
        set_endpoints6(s, eps6);
        return s;
    }

    void change(std::string& what) {
        const unsigned op = states.empty() ? 0 : pick(15);
        switch (op) {
        case 0:
        case 1: {  // a Service appears (or comes back under a key used before)
            std::string k = key(pick(30));
            what += " add " + k;
            states[k] = fresh(k);
            break;
        }
        case 2: {
            auto& s = random_state();
            what += " remove " + s.key;
            states.erase(s.key);
            break;
        }
        case 3: {  // an endpoint replaced
            auto& s = random_state();
            what += " replace-endpoint " + s.key;
            auto eps = s.endpoint_ipv4s;
            if (!eps.empty()) eps.erase(eps.begin() + pick(static_cast<unsigned>(eps.size())));
            eps.push_back(pod());
            set_endpoints(s, eps);
            break;
        }
        case 4: {  // an endpoint moves from one Service to another
            auto& a = random_state();
            auto& b = random_state();
            what += " move-endpoint " + a.key + " -> " + b.key;
            if (a.endpoint_ipv4s.empty()) break;
            uint32_t e = a.endpoint_ipv4s[pick(static_cast<unsigned>(a.endpoint_ipv4s.size()))];
            auto ea = a.endpoint_ipv4s;
            ea.erase(std::find(ea.begin(), ea.end(), e));
            set_endpoints(a, ea);
            auto eb = b.endpoint_ipv4s;
            eb.push_back(e);
            set_endpoints(b, eb);
            break;
        }
        case 5: {  // a pod claimed by a second Service too
            auto& a = random_state();
            auto& b = random_state();
            what += " share-endpoint " + a.key + " + " + b.key;
            if (a.endpoint_ipv4s.empty()) break;
            auto eb = b.endpoint_ipv4s;
            eb.push_back(a.endpoint_ipv4s.front());
            set_endpoints(b, eb);
            break;
        }
        case 6: {
            auto& s = random_state();
            what += " mode " + s.key;
            s.mode = s.mode == model::Mode::network ? model::Mode::load_balancer_ip : model::Mode::network;
            break;
        }
        case 7: {
            auto& s = random_state();
            what += " network " + s.key;
            s.network = network();
            break;
        }
        case 8: {
            auto& s = random_state();
            what += " ingress " + s.key;
            if (pick(2) == 0)
                s.ingress_ipv4 = ingress();
            else
                s.ports = ports();
            break;
        }
        case 9: {  // another gateway takes it, or it comes back
            auto& s = random_state();
            what += " serve " + s.key;
            s.serve_here = !s.serve_here;
            s.status_host = s.serve_here ? "gw-1" : "gw-2";
            s.reason = s.serve_here ? "" : "served by gw-2";
            break;
        }
        case 12: {  // the IPv6 ingress IP changes, comes or goes
            auto& s = random_state();
            what += " ingress6 " + s.key;
            s.ingress_ipv6 = ingress6();
            break;
        }
        case 13: {  // IPv6 endpoints gained, lost, or one moved to another Service
            auto& s = random_state();
            what += " endpoints6 " + s.key;
            auto eps = s.endpoint_ipv6s;
            if (pick(3) == 0 && !eps.empty()) {
                auto& t = random_state();
                auto moved = eps[pick(static_cast<unsigned>(eps.size()))];
                eps.erase(std::find(eps.begin(), eps.end(), moved));
                auto et = t.endpoint_ipv6s;
                et.push_back(moved);
                set_endpoints6(t, et);
            } else if (pick(2) == 0) {
                eps.push_back(pod6());
            } else if (!eps.empty()) {
                eps.erase(eps.begin() + pick(static_cast<unsigned>(eps.size())));
            }
            set_endpoints6(s, eps);
            break;
        }
        case 10: {  // only what the views show
            auto& s = random_state();
            what += " nodes " + s.key;
            s.endpoint_nodes = {"worker-" + std::to_string(pick(5))};
            break;
        }
        default: {  // endpoints gained only (the version survives) or all lost
            auto& s = random_state();
            what += " endpoints " + s.key;
            auto eps = s.endpoint_ipv4s;
            if (pick(3) == 0)
                eps.clear();
            else
                eps.push_back(pod());
            set_endpoints(s, eps);
            break;
        }
        }
    }

    std::mt19937 rng_;
};

TEST(PolicyBuilder, ChangesGiveWhatABuildFromScratchGives) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        config::Config cfg = test_config_dual();
        Trio t(cfg);
        World w(seed);
        for (unsigned i = 0; i < 150; ++i) {
            std::string what = "seed " + std::to_string(seed) + " step " + std::to_string(i) + ":";
            ServiceDelta d = w.step(what);
            t.step(w.states, d, what);
            if (HasFatalFailure()) return;
        }
    }
}

// An address toggled on a port: removed when there, appended when not.
void toggle_address(config::PortConfig& port, const char* prefix) {
    const net::IpPrefix p = *net::parse_prefix(prefix);
    auto it = std::find(port.addresses.begin(), port.addresses.end(), p);
    if (it != port.addresses.end())
        port.addresses.erase(it);
    else
        port.addresses.push_back(p);
}

// The configuration is compared on every build: routes, port addresses and VRF names of both
// families may change between two, and a VRF change re-resolves every Service although none
// changed.
TEST(PolicyBuilder, ConfigurationChangesGiveWhatABuildFromScratchGives) {
    config::Config cfg = test_config_dual();
    Trio t(cfg);
    World w(7);
    for (unsigned i = 0; i < 200; ++i) {
        std::string what = "step " + std::to_string(i) + ":";
        ServiceDelta d;
        if (i % 10 == 5) {
            switch ((i / 10) % 8) {
            case 0:
                cfg.vrfs[0].table = cfg.vrfs[0].table == 100 ? 101 : 100;
                what += " blue renumbered";
                break;
            case 1:
                cfg.vrfs[1].name = cfg.vrfs[1].name == "red" ? "green" : "red";
                what += " red renamed";
                break;
            case 2:
                cfg.routes[0].via =
                    net::IpAddr::from_v4(cfg.routes[0].via->v4() == 0xc00002feu ? 0xc00002fdu : 0xc00002feu);
                what += " default route moved";
                break;
            case 3: {
                static const config::DefaultAction next[] = {config::DefaultAction::drop, config::DefaultAction::route,
                                                             config::DefaultAction::masquerade};
                cfg.default_action = next[static_cast<int>(cfg.default_action) % 3];
                what += " default action changed";
                break;
            }
            case 4:
                // An outside address that is also some Services' ingress IP comes and goes.
                toggle_address(cfg.ports[1], "192.0.2.2/24");
                what += " outside address";
                break;
            case 5:
                // The same for IPv6 (2001:db8:113::1 is an ingress IP of the random Services).
                toggle_address(cfg.ports[1], "2001:db8:113::1/64");
                what += " outside IPv6 address";
                break;
            case 6:
                cfg.routes[1].via = net::parse_ip(
                    net::to_string(*cfg.routes[1].via) == "2001:db8:2::fe" ? "2001:db8:2::fd" : "2001:db8:2::fe");
                what += " IPv6 default route moved";
                break;
            default:
                // The blue network's only outside port becomes inside and back: its ingress IPs
                // are then answered on the default network's ports.
                cfg.ports[2].role = cfg.ports[2].role == config::PortRole::outside ? config::PortRole::inside
                                                                                   : config::PortRole::outside;
                cfg.cluster.node_ips.back() = *net::parse_ip(
                    net::to_string(cfg.cluster.node_ips.back()) == "fd00:ff::10" ? "fd00:ff::11" : "fd00:ff::10");
                what += " blue port role, IPv6 node IP";
                break;
            }
        } else {
            d = w.step(what);
        }
        t.step(w.states, d, what);
        if (HasFatalFailure()) return;
    }
}

// The configuration's tables are made once per configuration, not per publication, and keep the
// routes as programmed for the CLI: connected ones (masked, on the port) then static ones, each
// in its VRF; an address the port has no room for has no route.
TEST(PolicyBuilder, ConfigurationTablesAreMadeOnlyWhenTheConfigurationChanges) {
    config::Config cfg = test_config_dual();
    for (unsigned i = 0; i < dp::kMaxPortAddresses; ++i)  // the ninth IPv4 address has no room
        cfg.ports[0].addresses.push_back(*net::parse_prefix("10.254." + std::to_string(i) + ".1/24"));
    PolicyBuilder b(cfg, {0, 1, 2}, kMacs);
    EXPECT_EQ(b.config_tables(), nullptr);
    auto s1 = b.apply({});
    const ConfigTables* tables = b.config_tables();
    ASSERT_NE(tables, nullptr);
    auto s2 = b.apply({});
    EXPECT_EQ(b.config_tables(), tables) << "nothing changed: the same tables";
    EXPECT_EQ(s2->route_generation, s1->route_generation);

    auto line = [&](const ProgrammedRoute& r) {
        return std::to_string(r.vrf) + " " + net::to_string(r.prefix) + " " + r.port + " " +
               (r.via ? net::to_string(*r.via) : "-") + (r.connected ? " connected" : " static");
    };
    std::vector<std::string> got;
    for (const auto& r : b.config_tables()->routes())
        got.push_back(line(r));
    const std::vector<std::string> want = {
        "0 10.255.255.0/24 pods - connected",     "0 fd00:ff::/64 pods - connected",
        "0 10.254.0.0/24 pods - connected",       "0 10.254.1.0/24 pods - connected",
        "0 10.254.2.0/24 pods - connected",       "0 10.254.3.0/24 pods - connected",
        "0 10.254.4.0/24 pods - connected",       "0 10.254.5.0/24 pods - connected",
        "0 10.254.6.0/24 pods - connected",       "0 192.0.2.0/24 ext - connected",
        "0 2001:db8:2::/64 ext - connected",      "0 192.0.2.0/24 ext - connected",
        "0 2001:db8:113::/64 ext - connected",    "1 198.51.100.0/24 blue - connected",
        "1 2001:db8:3::/64 blue - connected",     "0 0.0.0.0/0 ext 192.0.2.254 static",
        "0 ::/0 ext 2001:db8:2::fe static",       "0 2001:db8:2::/64 ext - static",
        "1 0.0.0.0/0 blue 198.51.100.254 static", "1 2001:db8:77::/48 blue fe80::fe static"};
    EXPECT_EQ(got, want);

    cfg.routes[1].via = net::parse_ip("2001:db8:2::fd");
    auto s3 = b.apply({});
    EXPECT_NE(b.config_tables(), tables) << "a route changed: new tables";
    EXPECT_EQ(s3->route_generation, s3->generation);
    EXPECT_EQ(line(b.config_tables()->routes()[16]), "0 ::/0 ext 2001:db8:2::fd static");
    const uint8_t dst[16] = {0x20, 0x01, 0x0d, 0xb8, 0x99};
    ASSERT_NE(s3->lookup_route6(0, dst), nullptr);
    EXPECT_EQ(net::IpAddr::from_v6(s3->lookup_route6(0, dst)->gateway.b), *net::parse_ip("2001:db8:2::fd"));
}

// Past the id limit, Services get no id and are left out; they get one, in key order, once
// others are gone.
TEST(PolicyBuilder, ServicesOverTheIdLimitGetIdsAsOthersGo) {
    config::Config cfg = test_config();
    Trio t(cfg);
    std::map<std::string, ServiceState> states;
    auto make = [](unsigned i) {
        ServiceState s;
        char k[32];
        std::snprintf(k, sizeof k, "ns/svc-%05u", i);
        s.key = k;
        s.serve_here = true;
        s.ingress_ipv4 = 0xcb000000u + i;
        s.endpoint_ipv4s = {0x0a000000u + 2 * i, 0x0a000000u + 2 * i + 1};
        return s;
    };
    ServiceDelta d;
    for (unsigned i = 0; i < dp::kMaxServices + 4; ++i) {
        auto s = make(i * 2);
        states[s.key] = s;
        d.changed.push_back(s);
    }
    t.step(states, d, "over the limit");
    ASSERT_FALSE(HasFatalFailure());
    unsigned idless = 0;
    for (const auto& v : t.incr.views())
        idless += v.id == 0;
    EXPECT_EQ(idless, 5u);

    std::mt19937 rng(3);
    for (unsigned step = 0; step < 12; ++step) {
        d = {};
        // More go than come, so that the Services without an id get the ids that are left.
        for (unsigned n = 1 + rng() % 4; n > 0; --n) {
            auto it = states.begin();
            std::advance(it, rng() % states.size());
            d.removed.push_back(it->first);
            states.erase(it);
        }
        for (unsigned n = rng() % 3; n > 0; --n) {
            // Between the existing keys, before or after the Services without an id.
            auto s = make(static_cast<unsigned>(rng() % (2 * dp::kMaxServices + 20)) | 1);
            if (!states.count(s.key)) {
                states[s.key] = s;
                d.changed.push_back(s);
            }
        }
        // A removal of something unknown is ignored.
        d.removed.push_back("ns/never");
        t.step(states, d, "step " + std::to_string(step));
        ASSERT_FALSE(HasFatalFailure());
    }
    idless = 0;
    for (const auto& v : t.incr.views())
        idless += v.id == 0;
    EXPECT_EQ(idless, 0u);
}

// What did not change keeps its version, its id and every session; the generation moves on.
TEST(PolicyBuilder, NothingChangedKeepsEveryVersion) {
    config::Config cfg = test_config();
    PolicyBuilder b(cfg, {0, 1, 2}, kMacs);
    ServiceState s;
    s.key = "ns/a";
    s.serve_here = true;
    s.ingress_ipv4 = 0xcb007101u;
    s.endpoint_ipv4s = {0x0a000001u};
    ServiceDelta d;
    d.changed = {s};
    auto s1 = b.apply(d);
    auto s2 = b.apply(d);
    auto s3 = b.apply({});
    EXPECT_EQ(s2->generation, s1->generation + 1);
    EXPECT_EQ(s3->generation, s1->generation + 2);
    const uint32_t id = b.ids().at("ns/a");
    EXPECT_EQ(s3->services[id].version, s1->services[id].version);
    EXPECT_EQ(s3->default_version, s1->default_version);
    EXPECT_EQ(s3->endpoints.find(0x0a000001u), id);
}

// Per family, the views say what is done with the Service's endpoints: IPv4 as programmed, IPv6
// never yet, with the reason in the words the CLI and the status file show.
TEST(PolicyBuilderFamilies, EachFamilySaysWhatIsDone) {
    const config::Config cfg = test_config();
    PolicyBuilder b(cfg, {0, 1, 2}, kMacs);
    ServiceState dual;
    dual.key = "default/dual";
    dual.serve_here = true;
    dual.status_host = "gw-1";
    dual.ingress_ipv4 = 0xc0000232u;  // 192.0.2.50
    dual.ingress_ipv6 = net::parse_ip("2001:db8::50");
    dual.endpoint_ipv4s = {0x0a000005u};
    dual.endpoint_ipv6s = {*net::parse_ip("fd00:10:244::5")};
    ServiceState v6only = dual;
    v6only.key = "default/v6only";
    v6only.ingress_ipv4.reset();
    v6only.endpoint_ipv4s.clear();
    ServiceState v4ingress = dual;
    v4ingress.key = "default/v4ingress";
    v4ingress.ingress_ipv6.reset();
    ServiceState away = dual;
    away.key = "default/away";
    away.serve_here = false;
    away.status_host = "gw-2";
    away.reason = "gw-2 is the chosen host";
    ServiceState netm = dual;
    netm.key = "default/net";
    netm.mode = model::Mode::network;
    netm.network = "purple";
    auto snap = b.build({dual, v6only, v4ingress, away, netm});

    const ServiceView* d = b.view("default/dual");
    ASSERT_NE(d, nullptr);
    EXPECT_TRUE(d->programmed);
    EXPECT_EQ(d->ipv4, "SNAT to 192.0.2.50");
    EXPECT_EQ(d->ipv6, "SNAT to 2001:db8::50");
    EXPECT_TRUE(d->programmed6);
    EXPECT_EQ(snap->services[d->id].mode, dp::ServiceMode::snat_ingress_ip);
    EXPECT_EQ(snap->services[d->id].mode6, dp::ServiceMode::snat_ingress_ip);
    EXPECT_EQ(net::IpAddr::from_v6(snap->services[d->id].nat_ip6.b), *net::parse_ip("2001:db8::50"));
    // The pod's IPv6 address names the first Service (by key) that lists it, as its IPv4 one does.
    EXPECT_EQ(snap->endpoints6.find(net::parse_ip("fd00:10:244::5")->bytes().data()), b.view("default/away")->id);
    EXPECT_EQ(snap->endpoints.find(0x0a000005u), b.view("default/away")->id);

    const ServiceView* o = b.view("default/v6only");
    ASSERT_NE(o, nullptr);
    EXPECT_FALSE(o->programmed);
    EXPECT_EQ(o->problem, "no IPv4 ingress IP (the IPv4 data plane needs one)");
    EXPECT_EQ(o->ipv4, "not translated: no IPv4 ingress IP (the IPv4 data plane needs one)");
    EXPECT_EQ(o->ipv6, "SNAT to 2001:db8::50");
    EXPECT_TRUE(o->programmed6);
    EXPECT_EQ(snap->services[o->id].mode, dp::ServiceMode::inactive);
    EXPECT_EQ(snap->services[o->id].mode6, dp::ServiceMode::snat_ingress_ip);

    const ServiceView* i4 = b.view("default/v4ingress");
    ASSERT_NE(i4, nullptr);
    EXPECT_EQ(i4->ipv4, "SNAT to 192.0.2.50");
    EXPECT_EQ(i4->ipv6, "not translated: no IPv6 ingress IP (its IPv6 endpoints take the default action)");
    EXPECT_FALSE(i4->programmed6);
    EXPECT_EQ(snap->services[i4->id].mode6, dp::ServiceMode::inactive);

    const ServiceView* a = b.view("default/away");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->ipv4, "not translated: gw-2 is the chosen host");
    EXPECT_EQ(a->ipv6, "not translated: gw-2 is the chosen host");

    const ServiceView* n = b.view("default/net");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->ipv4, "not translated: unknown network \"purple\": no VRF of that name or table");
    EXPECT_EQ(n->ipv6, "not translated: unknown network \"purple\": no VRF of that name or table");
    ServiceState blue = netm;
    blue.network = "blue";
    b.build({blue});
    ASSERT_NE(b.view("default/net"), nullptr);
    EXPECT_EQ(b.view("default/net")->ipv4, "masquerade to the egress port's address");
    EXPECT_EQ(b.view("default/net")->ipv6, "masquerade to the egress port's address");
    // Losing an IPv6 endpoint is a new version (its sessions must stop translating).
    const uint32_t net_id = b.view("default/net")->id;
    auto before = b.build({blue});
    blue.endpoint_ipv6s.clear();
    auto after = b.build({blue});
    EXPECT_NE(after->services[net_id].version, before->services[net_id].version);
    blue.endpoint_ipv4s.clear();
    b.build({blue});
    EXPECT_EQ(b.view("default/net")->ipv4, "masquerade to the egress port's address (no IPv4 endpoints)");
    EXPECT_EQ(b.view("default/net")->ipv6, "masquerade to the egress port's address (no IPv6 endpoints)");
}

// Ingress to served IPv6 ingress IPs: every TCP and UDP port of a Service translating its IPv6 to
// its ingress IP, the first claimant by key where two Services share an address and port (as for
// IPv4), none for a Service served elsewhere or without an IPv6 ingress IP; the next hop from
// ingress.via6, on ingress.port.
TEST(PolicyBuilderFamilies, Ipv6IngressPortsAndNextHop) {
    config::Config cfg = test_config();
    const net::IpAddr ingress = *net::parse_ip("2001:db8::50");
    const net::IpAddr other = *net::parse_ip("2001:db8::60");
    const uint32_t tcp80 = 6u << 16 | 80, udp53 = 17u << 16 | 53, sctp9 = 132u << 16 | 9;
    auto lb = [&](const char* key, const net::IpAddr& ip6, std::vector<uint32_t> ports) {
        ServiceState s;
        s.key = key;
        s.serve_here = true;
        s.status_host = "gw-1";
        s.ingress_ipv4 = 0xc0000232u;
        s.ingress_ipv6 = ip6;
        s.ports = std::move(ports);
        return s;
    };
    ServiceState a = lb("default/a", ingress, {tcp80, udp53, sctp9});
    ServiceState b2 = lb("default/b", ingress, {tcp80});  // shares TCP 80 with a, which comes first
    ServiceState c = lb("default/c", other, {tcp80});
    c.serve_here = false;
    c.status_host = "gw-2";
    ServiceState d = lb("default/d", other, {udp53});
    d.ingress_ipv6.reset();
    {
        PolicyBuilder b(cfg, {0, 1, 2}, kMacs);
        auto snap = b.build({b2, c, d, a});
        const uint32_t ida = b.view("default/a")->id;
        EXPECT_EQ(snap->ingress_service6(ingress.bytes().data(), 6, 80), ida);
        EXPECT_EQ(snap->ingress_service6(ingress.bytes().data(), 17, 53), ida);
        EXPECT_EQ(snap->ingress_service6(ingress.bytes().data(), 17, 80), dp::Ip6Map::kMissing);
        EXPECT_EQ(snap->ingress_service6(ingress.bytes().data(), 132, 9), dp::Ip6Map::kMissing);
        EXPECT_EQ(snap->ingress_service6(ingress.bytes().data(), 6, 81), dp::Ip6Map::kMissing);
        EXPECT_EQ(snap->ingress_service6(other.bytes().data(), 6, 80), dp::Ip6Map::kMissing) << "served elsewhere";
        EXPECT_EQ(snap->ingress_service6(other.bytes().data(), 17, 53), dp::Ip6Map::kMissing) << "no IPv6 ingress IP";
        EXPECT_EQ(snap->ingress_ports6[0].size() + snap->ingress_ports6[1].size(), 2u);
        EXPECT_FALSE(snap->has_ingress_next_hop6) << "ingress.via6 is not configured";
        // a gone: b has TCP 80.
        snap = b.build({b2, c, d});
        EXPECT_EQ(snap->ingress_service6(ingress.bytes().data(), 6, 80), b.view("default/b")->id);
        EXPECT_EQ(snap->ingress_service6(ingress.bytes().data(), 17, 53), dp::Ip6Map::kMissing);
    }
    cfg.ingress.via6 = net::parse_ip("fe80::2");
    PolicyBuilder b(cfg, {0, 1, 2}, kMacs);
    auto snap = b.build({a});
    ASSERT_TRUE(snap->has_ingress_next_hop6);
    EXPECT_EQ(snap->ingress_next_hop6.port, 0u);
    EXPECT_FALSE(snap->ingress_next_hop6.on_link);
    EXPECT_EQ(net::IpAddr::from_v6(snap->ingress_next_hop6.gateway.b), *net::parse_ip("fe80::2"));
    EXPECT_TRUE(snap->has_ingress_next_hop) << "ingress.via is still IPv4's";
}

}  // namespace
}  // namespace egw::control
