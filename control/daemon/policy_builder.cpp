// SPDX-License-Identifier: Apache-2.0
#include "control/daemon/policy_builder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <unordered_set>

namespace egw::control {

PolicyBuilder::PolicyBuilder(const config::Config& cfg, std::vector<uint16_t> port_ids,
                             std::vector<std::array<uint8_t, 6>> port_macs)
    : cfg_(cfg), port_ids_(std::move(port_ids)), port_macs_(std::move(port_macs)) {}

int PolicyBuilder::resolve_vrf(const std::string& network) const {
    if (network.empty())
        return dp::kDefaultVrf;
    const config::VrfConfig* v = cfg_.find_vrf(network);
    if (!v)
        return -1;
    return static_cast<int>(v - cfg_.vrfs.data());
}

uint32_t PolicyBuilder::id_for(const std::string& key) {
    auto it = ids_.find(key);
    if (it != ids_.end())
        return it->second;
    uint32_t id;
    if (!free_ids_.empty()) {
        id = free_ids_.back();
        free_ids_.pop_back();
    } else if (next_id_ < dp::kMaxServices) {
        id = next_id_++;
    } else {
        return 0;
    }
    ids_.emplace(key, id);
    return id;
}

std::unique_ptr<dp::PolicySnapshot> PolicyBuilder::build(const std::vector<model::ServiceState>& services) {
    auto snap = std::make_unique<dp::PolicySnapshot>();
    snap->generation = ++generation_;
    switch (cfg_.default_action) {
    case config::DefaultAction::route: snap->default_action = dp::DefaultAction::route; break;
    case config::DefaultAction::masquerade: snap->default_action = dp::DefaultAction::masquerade; break;
    case config::DefaultAction::drop: snap->default_action = dp::DefaultAction::drop; break;
    }

    // Ports, connected routes and the outside addresses used for masquerade.
    std::vector<std::pair<uint64_t, uint32_t>> routes;
    std::vector<std::pair<uint64_t, uint32_t>> nat_addresses;
    std::map<uint8_t, std::vector<uint8_t>> lengths;
    auto add_route = [&](uint8_t vrf, const config::Ipv4Prefix& prefix, uint16_t port, uint32_t via) {
        snap->next_hops.push_back(dp::NextHop{port, via});
        routes.emplace_back(dp::PolicySnapshot::route_key(vrf, prefix.len, prefix.network()),
                            static_cast<uint32_t>(snap->next_hops.size() - 1));
        lengths[vrf].push_back(prefix.len);
    };
    for (size_t i = 0; i < cfg_.ports.size(); ++i) {
        const config::PortConfig& pc = cfg_.ports[i];
        uint16_t id = port_ids_[i];
        dp::PortPolicy& pp = snap->ports[id];
        pp.role = pc.role == config::PortRole::inside ? dp::PortRole::inside : dp::PortRole::outside;
        pp.vrf = static_cast<uint8_t>(resolve_vrf(pc.vrf));
        std::copy(port_macs_[id].begin(), port_macs_[id].end(), pp.mac);
        for (const auto& a : pc.addresses) {
            if (pp.n_addrs == dp::kMaxPortAddresses)
                break;
            pp.addrs[pp.n_addrs] = a.addr;
            pp.prefix_len[pp.n_addrs] = a.len;
            ++pp.n_addrs;
            add_route(pp.vrf, a, id, 0);
            if (pc.role == config::PortRole::outside)
                nat_addresses.emplace_back(a.addr, dp::kNatPortAddress);
        }
    }
    // Static routes come after connected ones so that an explicit route for the same prefix wins.
    for (const auto& r : cfg_.routes) {
        size_t pi = static_cast<size_t>(cfg_.find_port(r.port) - cfg_.ports.data());
        add_route(static_cast<uint8_t>(resolve_vrf(r.vrf)), r.prefix, port_ids_[pi], r.via.value_or(0));
    }
    snap->routes.build(routes);
    for (auto& [vrf, lens] : lengths) {
        std::sort(lens.begin(), lens.end(), std::greater<>());
        lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
        snap->vrf_prefix_lengths[vrf] = lens;
    }

    for (const auto& c : cfg_.cluster.pod_cidrs)
        snap->cluster_cidrs.emplace_back(c.network(), c.mask());
    for (const auto& c : cfg_.cluster.service_cidrs)
        snap->cluster_cidrs.emplace_back(c.network(), c.mask());
    std::vector<std::pair<uint64_t, uint32_t>> nodes;
    for (uint32_t ip : cfg_.cluster.node_ips)
        nodes.emplace_back(ip, 1);
    snap->node_ips.build(nodes);

    // Services. Ids of Services that disappeared are released for reuse.
    std::unordered_set<std::string_view> present;
    present.reserve(services.size());
    for (const auto& s : services)
        present.insert(s.key);
    for (auto it = ids_.begin(); it != ids_.end();) {
        if (!present.count(it->first)) {
            last_.erase(it->second);
            free_ids_.push_back(it->second);
            it = ids_.erase(it);
        } else {
            ++it;
        }
    }

    std::vector<std::pair<uint64_t, uint32_t>> endpoints;
    std::vector<ServiceView> views;
    std::map<uint32_t, Programmed> programmed;
    for (const auto& s : services) {
        ServiceView v;
        v.state = s;
        v.id = id_for(s.key);
        if (v.id == 0) {
            v.problem = "too many Services (limit " + std::to_string(dp::kMaxServices - 1) + ")";
            views.push_back(std::move(v));
            continue;
        }
        dp::ServicePolicy pol;
        int vrf = resolve_vrf(s.network);
        if (vrf >= 0)
            v.vrf = cfg_.vrfs[static_cast<size_t>(vrf)].name;
        if (s.serve_here) {
            if (vrf < 0) {
                v.problem = "unknown network \"" + s.network + "\": no VRF of that name or table";
            } else if (s.mode == model::Mode::load_balancer_ip) {
                if (s.ingress_ipv4) {
                    pol.mode = dp::ServiceMode::snat_ingress_ip;
                    pol.nat_ip = *s.ingress_ipv4;
                    pol.vrf = static_cast<uint8_t>(vrf);
                } else {
                    v.problem = "no IPv4 ingress IP (the IPv4 data plane needs one)";
                }
            } else {
                pol.mode = dp::ServiceMode::masquerade;
                pol.vrf = static_cast<uint8_t>(vrf);
            }
        }
        v.programmed = pol.mode != dp::ServiceMode::inactive;
        // The version survives while nothing a session depends on changed. Losing an endpoint
        // counts (its sessions must stop translating); gaining one does not.
        auto prev = last_.find(v.id);
        bool same = prev != last_.end() && prev->second.policy.mode == pol.mode && prev->second.policy.vrf == pol.vrf &&
                    prev->second.policy.nat_ip == pol.nat_ip &&
                    std::includes(s.endpoint_ipv4s.begin(), s.endpoint_ipv4s.end(), prev->second.endpoints.begin(),
                                  prev->second.endpoints.end());
        pol.version = same ? prev->second.policy.version : next_version_++;
        snap->services[v.id] = pol;
        programmed[v.id] = Programmed{pol, s.endpoint_ipv4s};
        if (pol.mode == dp::ServiceMode::snat_ingress_ip)
            nat_addresses.emplace_back(pol.nat_ip, dp::kNatIngressIp);
        for (uint32_t ip : s.endpoint_ipv4s)
            endpoints.emplace_back(ip, v.id);
        views.push_back(std::move(v));
    }
    last_ = std::move(programmed);
    // Pods that a Service now translates may hold sessions made by the default action. Those must
    // move to the Service's translation, so the default policy gets a new version whenever the
    // set of translated pods gains a member; the workers then re-check each default session once.
    // Two Services may claim the same pod: the first by name keeps it, as a pod's egress can
    // leave with only one source address. FlatMap keeps the last of equal keys, so feed it the
    // claims backwards.
    std::reverse(endpoints.begin(), endpoints.end());
    snap->endpoints.build(endpoints);
    std::vector<uint32_t> served;
    served.reserve(endpoints.size());
    snap->endpoints.for_each([&](uint64_t ip, uint32_t id) {
        if (snap->services[id].mode != dp::ServiceMode::inactive)
            served.push_back(static_cast<uint32_t>(ip));
    });
    std::sort(served.begin(), served.end());
    if (!std::includes(served_endpoints_.begin(), served_endpoints_.end(), served.begin(), served.end()))
        ++default_version_;
    served_endpoints_ = std::move(served);
    snap->default_version = default_version_;
    // An ingress IP that is also a port address keeps both flags.
    std::map<uint32_t, uint32_t> merged;
    for (auto& [ip, flags] : nat_addresses)
        merged[static_cast<uint32_t>(ip)] |= flags;
    std::vector<std::pair<uint64_t, uint32_t>> nat_items(merged.begin(), merged.end());
    snap->nat_addresses.build(nat_items);
    views_ = std::move(views);
    return snap;
}

}  // namespace egw::control
