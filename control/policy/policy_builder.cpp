// SPDX-License-Identifier: Apache-2.0
#include "control/policy/policy_builder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <set>
#include <cstring>
#include <iterator>

namespace egw::control {

namespace {

bool same_vrfs(const std::vector<config::VrfConfig>& a, const std::vector<config::VrfConfig>& b) {
    return std::equal(
        a.begin(), a.end(), b.begin(), b.end(),
        [](const config::VrfConfig& x, const config::VrfConfig& y) { return x.name == y.name && x.table == y.table; });
}

bool by_key(const ServiceView& v, const std::string& key) {
    return v.state.key < key;
}

}  // namespace

std::string ipv4_translation(const model::ServiceState& s, const dp::ServicePolicy& pol, const std::string& problem) {
    const std::string none = s.endpoint_ipv4s.empty() ? " (no IPv4 endpoints)" : "";
    switch (pol.mode) {
    case dp::ServiceMode::snat_ingress_ip:
        return "SNAT to " + config::format_ipv4(pol.nat_ip) + none;
    case dp::ServiceMode::masquerade:
        return "masquerade to the egress port's address" + none;
    case dp::ServiceMode::inactive:
        break;
    }
    return "not translated: " + (!s.serve_here ? s.reason : problem.empty() ? std::string("not programmed") : problem);
}

std::string ipv6_translation(const model::ServiceState& s, const dp::ServicePolicy& pol, const std::string& problem) {
    const std::string none = s.endpoint_ipv6s.empty() ? " (no IPv6 endpoints)" : "";
    switch (pol.mode6) {
    case dp::ServiceMode::snat_ingress_ip:
        return "SNAT to " + net::to_string(net::IpAddr::from_v6(pol.nat_ip6.b)) + none;
    case dp::ServiceMode::masquerade:
        return "masquerade to the egress port's address" + none;
    case dp::ServiceMode::inactive:
        break;
    }
    std::string why;
    if (!s.serve_here)
        why = s.reason;
    else if (!problem.empty() && problem.rfind("no IPv4 ingress IP", 0) != 0)
        why = problem;  // an unknown network or the Service limit holds for both families
    else if (s.mode == model::Mode::load_balancer_ip && !s.ingress_ipv6)
        why = "no IPv6 ingress IP (its IPv6 endpoints take the default action)";
    else
        why = problem.empty() ? "not programmed" : problem;
    return "not translated: " + why;
}

PolicyBuilder::PolicyBuilder(const config::Config& cfg, std::vector<uint16_t> port_ids,
                             std::vector<std::array<uint8_t, 6>> port_macs)
    : cfg_(cfg),
      port_ids_(std::move(port_ids)),
      port_macs_(std::move(port_macs)),
      key_of_(dp::kMaxServices),
      vrfs_seen_(cfg.vrfs) {}

int PolicyBuilder::resolve_vrf(const std::string& network) const {
    if (network.empty()) return dp::kDefaultVrf;
    const config::VrfConfig* v = cfg_.find_vrf(network);
    if (!v) return -1;
    return static_cast<int>(v - cfg_.vrfs.data());
}

uint32_t PolicyBuilder::id_for(const std::string& key) {
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    uint32_t id;
    if (!free_ids_.empty()) {
        id = free_ids_.back();
        free_ids_.pop_back();
    } else if (next_id_ < dp::kMaxServices) {
        id = next_id_++;
    } else {
        return 0;
    }
    key_of_[id] = &ids_.emplace(key, id).first->first;
    return id;
}

std::vector<ServiceView>::iterator PolicyBuilder::find_view(const std::string& key) {
    auto it = std::lower_bound(views_.begin(), views_.end(), key, by_key);
    return it != views_.end() && it->state.key == key ? it : views_.end();
}

const ServiceView* PolicyBuilder::view(const std::string& key) const {
    auto it = std::lower_bound(views_.begin(), views_.end(), key, by_key);
    return it != views_.end() && it->state.key == key ? &*it : nullptr;
}

void PolicyBuilder::claim(uint32_t ip, uint32_t id) {
    const uint32_t first = first_claim_.find(ip);
    if (first == dp::FlatMap::kMissing) {
        first_claim_.assign(ip, id);
    } else if (first != id) {
        auto& more = more_claims_[ip];
        if (std::find(more.begin(), more.end(), id) == more.end()) more.push_back(id);
    }
}

void PolicyBuilder::unclaim(uint32_t ip, uint32_t id) {
    auto more = more_claims_.find(ip);
    if (first_claim_.find(ip) == id) {
        if (more == more_claims_.end()) {
            first_claim_.erase(ip);
            return;
        }
        first_claim_.assign(ip, more->second.back());
        more->second.pop_back();
    } else if (more != more_claims_.end()) {
        more->second.erase(std::remove(more->second.begin(), more->second.end(), id), more->second.end());
    } else {
        return;
    }
    if (more->second.empty()) more_claims_.erase(more);
}

// Two Services may claim the same pod: the first by name keeps it, as a pod's egress can leave
// with only one source address.
uint32_t PolicyBuilder::owner_of(uint32_t ip) const {
    uint32_t best = first_claim_.find(ip);
    auto more = more_claims_.find(ip);
    if (more != more_claims_.end())
        for (uint32_t id : more->second)
            if (*key_of_[id] < *key_of_[best]) best = id;
    return best;
}

bool PolicyBuilder::served(uint32_t ip) const {
    uint32_t id = endpoints_.find(ip);
    return id != dp::FlatMap::kMissing && services_[id].mode != dp::ServiceMode::inactive;
}

// An ingress IP that is also a port address keeps both flags. An ingress IP is answered to ARP on
// the outside ports of the networks of the Services translating to it.
uint32_t PolicyBuilder::nat_flags(uint32_t ip) const {
    uint32_t flags = 0;
    if (auto it = ingress_refs_.find(ip); it != ingress_refs_.end()) {
        flags |= dp::kNatIngressIp;
        for (uint8_t vrf : it->second)
            flags |= arp_ports_[vrf] << dp::kNatArpPortsShift;
    }
    if (std::binary_search(port_nat_.begin(), port_nat_.end(), ip)) flags |= dp::kNatPortAddress;
    return flags;
}

void PolicyBuilder::claim_ingress_ports(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id) {
    if (pol.mode != dp::ServiceMode::snat_ingress_ip) return;
    for (uint32_t pp : s.ports) {
        const uint64_t k =
            dp::PolicySnapshot::ingress_key(pol.nat_ip, static_cast<uint8_t>(pp >> 16), static_cast<uint16_t>(pp));
        auto& claims = ingress_port_claims_[k];
        claims.push_back(id);
        const uint32_t holder = ingress_ports_.find(k);
        if (holder == dp::FlatMap::kMissing || *key_of_[id] < *key_of_[holder]) ingress_ports_.assign(k, id);
    }
}

void PolicyBuilder::unclaim_ingress_ports(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id) {
    if (pol.mode != dp::ServiceMode::snat_ingress_ip) return;
    for (uint32_t pp : s.ports) {
        const uint64_t k =
            dp::PolicySnapshot::ingress_key(pol.nat_ip, static_cast<uint8_t>(pp >> 16), static_cast<uint16_t>(pp));
        auto it = ingress_port_claims_.find(k);
        if (it == ingress_port_claims_.end()) continue;
        std::erase(it->second, id);
        if (it->second.empty()) {
            ingress_port_claims_.erase(it);
            ingress_ports_.erase(k);
            continue;
        }
        if (ingress_ports_.find(k) != id) continue;
        uint32_t best = it->second.front();
        for (uint32_t other : it->second)
            if (*key_of_[other] < *key_of_[best]) best = other;
        ingress_ports_.assign(k, best);
    }
}

void PolicyBuilder::rebuild_nat() {
    std::vector<std::pair<uint64_t, uint32_t>> items;
    items.reserve(ingress_refs_.size() + port_nat_.size());
    for (const auto& [ip, n] : ingress_refs_)
        items.emplace_back(ip, nat_flags(ip));
    for (uint32_t ip : port_nat_)
        items.emplace_back(ip, nat_flags(ip));
    nat_.build(items);
}

std::unique_ptr<dp::PolicySnapshot> PolicyBuilder::build(const std::vector<model::ServiceState>& services) {
    // The callers hand them over sorted by key; anything else is sorted here.
    std::vector<const model::ServiceState*> in;
    in.reserve(services.size());
    for (const auto& s : services)
        in.push_back(&s);
    auto key_less = [](const model::ServiceState* a, const model::ServiceState* b) { return a->key < b->key; };
    if (!std::is_sorted(in.begin(), in.end(), key_less)) std::stable_sort(in.begin(), in.end(), key_less);
    // A merge of the two sorted lists: what is new, what differs, what is gone.
    std::vector<Work> work;
    auto v = views_.begin();
    for (size_t i = 0; i < in.size(); ++i) {
        const model::ServiceState* s = in[i];
        if (i + 1 < in.size() && in[i + 1]->key == s->key) continue;
        for (; v != views_.end() && v->state.key < s->key; ++v)
            work.push_back(Work{&v->state.key, nullptr});
        if (v != views_.end() && v->state.key == s->key) {
            if (!(v->state == *s)) work.push_back(Work{&s->key, s});
            ++v;
        } else {
            work.push_back(Work{&s->key, s});
        }
    }
    for (; v != views_.end(); ++v)
        work.push_back(Work{&v->state.key, nullptr});
    return commit(std::move(work));
}

std::unique_ptr<dp::PolicySnapshot> PolicyBuilder::apply(const model::ServiceDelta& delta) {
    std::vector<Work> work;
    work.reserve(delta.changed.size() + delta.removed.size());
    for (const auto& k : delta.removed)
        work.push_back(Work{&k, nullptr});
    for (const auto& s : delta.changed)
        work.push_back(Work{&s.key, &s});
    // One entry per key: the last state given, and a state beats a removal of the same key.
    std::reverse(work.begin(), work.end());
    std::stable_sort(work.begin(), work.end(), [](const Work& a, const Work& b) { return *a.key < *b.key; });
    work.erase(std::unique(work.begin(), work.end(), [](const Work& a, const Work& b) { return *a.key == *b.key; }),
               work.end());
    // What the last build already had costs nothing more.
    std::erase_if(work, [&](const Work& w) {
        const ServiceView* v = view(*w.key);
        return w.next ? v && v->state == *w.next : !v;
    });
    return commit(std::move(work));
}

// `work` is sorted by key, one entry per key, each a real change. Every Service not in it keeps
// its id, version, claims and view untouched: that is what makes a change cheap.
std::unique_ptr<dp::PolicySnapshot> PolicyBuilder::commit(std::vector<Work> work) {
    // Services that must be resolved again although their state is the same: all of them when a
    // VRF was renamed or renumbered, and those over the id limit (an id may have come free).
    // They take part in key order like any other, as they would in a build from scratch. Their
    // states are copied: views_ changes under the loops below.
    const bool vrfs_changed = !same_vrfs(vrfs_seen_, cfg_.vrfs);
    std::vector<model::ServiceState> again;
    if (vrfs_changed || !idless_.empty()) {
        vrfs_seen_ = cfg_.vrfs;
        again.reserve(vrfs_changed ? views_.size() : idless_.size());
        if (vrfs_changed)
            for (const auto& v : views_)
                again.push_back(v.state);
        else
            for (const auto& key : idless_)
                again.push_back(find_view(key)->state);
        std::vector<Work> all;
        all.reserve(work.size() + again.size());
        auto w = work.begin();
        for (const auto& s : again) {
            for (; w != work.end() && *w->key < s.key; ++w)
                all.push_back(*w);
            if (w != work.end() && *w->key == s.key)
                all.push_back(*w++);
            else
                all.push_back(Work{&s.key, &s});
        }
        all.insert(all.end(), w, work.end());
        work = std::move(all);
    }

    // Every pod whose owner, or whose owner's mode, may change, and whether it was translated.
    std::vector<uint32_t> touched;
    for (const Work& w : work) {
        auto v = find_view(*w.key);
        if (v != views_.end() && v->id != 0)
            touched.insert(touched.end(), v->state.endpoint_ipv4s.begin(), v->state.endpoint_ipv4s.end());
        if (w.next) touched.insert(touched.end(), w.next->endpoint_ipv4s.begin(), w.next->endpoint_ipv4s.end());
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    endpoints_.reserve(endpoints_.size() + touched.size());
    first_claim_.reserve(first_claim_.size() + touched.size());
    std::vector<bool> was_served(touched.size());
    for (size_t i = 0; i < touched.size(); ++i)
        was_served[i] = served(touched[i]);

    std::vector<uint32_t> nat_changed;
    auto drop_nat = [&](const dp::ServicePolicy& pol) {
        if (pol.mode != dp::ServiceMode::snat_ingress_ip) return;
        auto it = ingress_refs_.find(pol.nat_ip);
        it->second.erase(std::find(it->second.begin(), it->second.end(), pol.vrf));
        if (it->second.empty()) ingress_refs_.erase(it);
        nat_changed.push_back(pol.nat_ip);
    };

    // views_ is neither grown nor shrunk until the end (work's keys may point into it): gone
    // Services are marked, new ones collected, and both merged in one pass.
    std::vector<size_t> gone;
    std::vector<ServiceView> added;

    // Ids of Services that disappeared are released for reuse, in key order, before any is taken.
    for (const Work& w : work) {
        if (w.next) continue;
        auto v = find_view(*w.key);
        if (v->id != 0) {
            const uint32_t id = v->id;
            for (uint32_t ip : v->state.endpoint_ipv4s)
                unclaim(ip, id);
            unclaim_ingress_ports(v->state, services_[id], id);
            drop_nat(services_[id]);
            services_[id] = dp::ServicePolicy{};
            key_of_[id] = nullptr;
            free_ids_.push_back(id);
            ids_.erase(v->state.key);
        }
        idless_.erase(v->state.key);
        gone.push_back(static_cast<size_t>(v - views_.begin()));
    }

    for (const Work& w : work) {
        if (!w.next) continue;
        const model::ServiceState& s = *w.next;
        auto vit = find_view(s.key);
        ServiceView& v = vit != views_.end() ? *vit : added.emplace_back();
        const uint32_t old_id = v.id;
        ServiceView next;
        next.id = id_for(s.key);
        if (next.id == 0) {
            next.problem = "too many Services (limit " + std::to_string(dp::kMaxServices - 1) + ")";
            next.ipv4 = ipv4_translation(s, dp::ServicePolicy{}, next.problem);
            next.ipv6 = ipv6_translation(s, dp::ServicePolicy{}, next.problem);
            next.state = s;
            v = std::move(next);
            idless_.insert(s.key);
            continue;
        }
        if (old_id == 0) idless_.erase(s.key);
        dp::ServicePolicy pol;
        int vrf = resolve_vrf(s.network);
        if (vrf >= 0) next.vrf = cfg_.vrfs[static_cast<size_t>(vrf)].name;
        if (s.serve_here) {
            if (vrf < 0) {
                next.problem = "unknown network \"" + s.network + "\": no VRF of that name or table";
            } else if (s.mode == model::Mode::load_balancer_ip) {
                if (s.ingress_ipv4 || s.ingress_ipv6) pol.vrf = static_cast<uint8_t>(vrf);
                if (s.ingress_ipv4) {
                    pol.mode = dp::ServiceMode::snat_ingress_ip;
                    pol.nat_ip = *s.ingress_ipv4;
                } else {
                    next.problem = "no IPv4 ingress IP (the IPv4 data plane needs one)";
                }
                // Each family by its own ingress IP: without an IPv6 one, the IPv6 endpoints
                // take the default action, as IPv4 ones do without an IPv4 one.
                if (s.ingress_ipv6) {
                    pol.mode6 = dp::ServiceMode::snat_ingress_ip;
                    std::copy(s.ingress_ipv6->bytes().begin(), s.ingress_ipv6->bytes().end(), pol.nat_ip6.b);
                }
            } else {
                pol.mode = dp::ServiceMode::masquerade;
                pol.mode6 = dp::ServiceMode::masquerade;
                pol.vrf = static_cast<uint8_t>(vrf);
            }
        }
        next.programmed = pol.mode != dp::ServiceMode::inactive;
        next.programmed6 = pol.mode6 != dp::ServiceMode::inactive;
        next.ipv4 = ipv4_translation(s, pol, next.problem);
        next.ipv6 = ipv6_translation(s, pol, next.problem);
        // The version survives while nothing a session depends on changed. Losing an endpoint
        // counts (its sessions must stop translating); gaining one does not. An id this Service
        // did not have before (new, or reused after another Service) has no previous translation.
        const dp::ServicePolicy prev = services_[next.id];
        const bool same = old_id == next.id && prev.mode == pol.mode && prev.vrf == pol.vrf &&
                          prev.nat_ip == pol.nat_ip && prev.mode6 == pol.mode6 &&
                          std::memcmp(prev.nat_ip6.b, pol.nat_ip6.b, 16) == 0 &&
                          std::includes(s.endpoint_ipv4s.begin(), s.endpoint_ipv4s.end(),
                                        v.state.endpoint_ipv4s.begin(), v.state.endpoint_ipv4s.end()) &&
                          std::includes(s.endpoint_ipv6s.begin(), s.endpoint_ipv6s.end(),
                                        v.state.endpoint_ipv6s.begin(), v.state.endpoint_ipv6s.end());
        pol.version = same ? prev.version : next_version_++;
        if (old_id != 0) {
            drop_nat(prev);
            unclaim_ingress_ports(v.state, prev, old_id);
            for (uint32_t ip : v.state.endpoint_ipv4s)
                unclaim(ip, old_id);
        }
        if (pol.mode == dp::ServiceMode::snat_ingress_ip) {
            ingress_refs_[pol.nat_ip].push_back(pol.vrf);
            nat_changed.push_back(pol.nat_ip);
        }
        for (uint32_t ip : s.endpoint_ipv4s)
            claim(ip, next.id);
        claim_ingress_ports(s, pol, next.id);
        services_[next.id] = pol;
        next.state = s;
        v = std::move(next);
    }

    if (!gone.empty()) {
        size_t out = gone.front();
        for (size_t in = out, g = 0; in < views_.size(); ++in) {
            if (g < gone.size() && gone[g] == in) {
                ++g;
                continue;
            }
            if (out != in) views_[out] = std::move(views_[in]);
            ++out;
        }
        views_.erase(views_.begin() + static_cast<ptrdiff_t>(out), views_.end());
    }
    if (!added.empty()) {
        const size_t mid = views_.size();
        std::move(added.begin(), added.end(), std::back_inserter(views_));
        std::inplace_merge(views_.begin(), views_.begin() + static_cast<ptrdiff_t>(mid), views_.end(),
                           [](const ServiceView& a, const ServiceView& b) { return a.state.key < b.state.key; });
    }

    // Owners of the touched pods, and whether the default policy needs a new version: pods that a
    // Service now translates may hold sessions made by the default action. Those must move to the
    // Service's translation, so the default policy gets a new version whenever the set of
    // translated pods gains a member; the workers then re-check each default session once.
    bool gained = false;
    for (size_t i = 0; i < touched.size(); ++i) {
        const uint32_t ip = touched[i];
        const uint32_t owner = owner_of(ip);
        if (owner == dp::FlatMap::kMissing)
            endpoints_.erase(ip);
        else if (endpoints_.find(ip) != owner)
            endpoints_.assign(ip, owner);
        gained = gained || (!was_served[i] && served(ip));
    }
    if (gained) ++default_version_;

    std::sort(nat_changed.begin(), nat_changed.end());
    nat_changed.erase(std::unique(nat_changed.begin(), nat_changed.end()), nat_changed.end());
    for (uint32_t ip : nat_changed) {
        uint32_t flags = nat_flags(ip);
        if (flags)
            nat_.assign(ip, flags);
        else
            nat_.erase(ip);
    }
    return assemble();
}

// The snapshot: what the configuration decides, built afresh, and copies of the Service tables.
std::unique_ptr<dp::PolicySnapshot> PolicyBuilder::assemble() {
    auto snap = std::make_unique<dp::PolicySnapshot>();
    snap->generation = ++generation_;
    snap->default_action = cfg_.default_action;  // one enum (dataplane/tables/roles.h)
    // A new default action (a configuration reload) must reach the flows it already translates:
    // a new version makes the workers re-check every default session, and only masquerade keeps
    // one (dataplane/nat_session.h, policy_holds).
    if (last_default_action_ && *last_default_action_ != cfg_.default_action) ++default_version_;
    last_default_action_ = cfg_.default_action;

    // Ports, connected routes and the outside addresses used for masquerade.
    std::vector<std::pair<uint64_t, uint32_t>> routes;
    std::vector<uint32_t> port_nat;
    std::map<uint8_t, std::vector<uint8_t>> lengths;
    auto add_route = [&](uint8_t vrf, const net::IpPrefix& prefix, uint16_t port, uint32_t via) {
        snap->next_hops.push_back(dp::NextHop{port, via});
        routes.emplace_back(dp::PolicySnapshot::route_key(vrf, prefix.len, prefix.network4()),
                            static_cast<uint32_t>(snap->next_hops.size() - 1));
        lengths[vrf].push_back(prefix.len);
    };
    // IPv6: the ports' addresses and routes, and the NAT addresses (outside port addresses here,
    // served ingress IPs below).
    std::vector<dp::Ip6Map::Item> routes6;
    std::map<uint8_t, std::vector<uint8_t>> lengths6;
    std::vector<std::pair<net::IpAddr, uint32_t>> nat6;
    auto add_route6 = [&](uint8_t vrf, const net::IpPrefix& prefix, uint16_t port, const net::IpAddr* via) {
        dp::NextHop6 nh;
        nh.port = port;
        nh.on_link = via == nullptr;
        if (via) std::copy(via->bytes().begin(), via->bytes().end(), nh.gateway.b);
        snap->next_hops6.push_back(nh);
        dp::Ip6Map::Item it{};
        dp::PolicySnapshot::mask6(prefix.addr.bytes().data(), prefix.len, it.addr);
        it.scope = dp::PolicySnapshot::route_scope6(vrf, prefix.len);
        it.value = static_cast<uint32_t>(snap->next_hops6.size() - 1);
        routes6.push_back(it);
        lengths6[vrf].push_back(prefix.len);
    };
    for (size_t i = 0; i < cfg_.ports.size(); ++i) {
        const config::PortConfig& pc = cfg_.ports[i];
        uint16_t id = port_ids_[i];
        dp::PortPolicy& pp = snap->ports[id];
        pp.role = pc.role;
        pp.vrf = static_cast<uint8_t>(resolve_vrf(pc.vrf));
        std::copy(port_macs_[id].begin(), port_macs_[id].end(), pp.mac);
        pp.mtu = static_cast<uint16_t>(pc.mtu);
        // The link-local address of the port: fe80::/64 with the modified EUI-64 of its MAC.
        const auto& mac = port_macs_[id];
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
        for (const auto& a : pc.addresses) {
            if (a.is_v6()) {
                if (pp.n_addrs6 == dp::kMaxPortAddresses) continue;
                std::copy(a.addr.bytes().begin(), a.addr.bytes().end(), pp.addrs6[pp.n_addrs6].b);
                pp.prefix_len6[pp.n_addrs6] = a.len;
                ++pp.n_addrs6;
                add_route6(pp.vrf, a, id, nullptr);
                if (pc.role == config::PortRole::outside) nat6.push_back({a.addr, dp::kNatPortAddress});
                continue;
            }
            if (pp.n_addrs == dp::kMaxPortAddresses) break;
            pp.addrs[pp.n_addrs] = a.addr.v4();
            pp.prefix_len[pp.n_addrs] = a.len;
            ++pp.n_addrs;
            add_route(pp.vrf, a, id, 0);
            if (pc.role == config::PortRole::outside) port_nat.push_back(a.addr.v4());
        }
    }
    snap->index_ports();
    // Static routes come after connected ones so that an explicit route for the same prefix wins.
    for (const auto& r : cfg_.routes) {
        size_t pi = static_cast<size_t>(cfg_.find_port(r.port) - cfg_.ports.data());
        if (r.prefix.is_v6()) {
            add_route6(static_cast<uint8_t>(resolve_vrf(r.vrf)), r.prefix, port_ids_[pi], r.via ? &*r.via : nullptr);
            continue;
        }
        add_route(static_cast<uint8_t>(resolve_vrf(r.vrf)), r.prefix, port_ids_[pi], r.via ? r.via->v4() : 0);
    }
    // Sessions cache their egress port and next hop: only a change of the routes makes them
    // look again, not every publication.
    std::vector<uint64_t> route_sig;
    route_sig.reserve(routes.size() * 2);
    for (const auto& [key, nh] : routes) {
        route_sig.push_back(key);
        route_sig.push_back(uint64_t{snap->next_hops[nh].port} << 32 | snap->next_hops[nh].gateway);
    }
    for (const dp::Ip6Map::Item& it : routes6) {
        uint64_t w[2];
        std::memcpy(w, it.addr, 16);
        const dp::NextHop6& nh = snap->next_hops6[it.value];
        uint64_t g[2];
        std::memcpy(g, nh.gateway.b, 16);
        route_sig.insert(route_sig.end(), {w[0], w[1], uint64_t{it.scope} << 32 | nh.port, g[0], g[1]});
    }
    if (route_sig != last_routes_) {
        last_routes_ = std::move(route_sig);
        route_generation_ = snap->generation;
    }
    snap->route_generation = route_generation_;
    snap->routes.build(routes);
    for (auto& [vrf, lens] : lengths) {
        std::sort(lens.begin(), lens.end(), std::greater<>());
        lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
        snap->vrf_prefix_lengths[vrf] = lens;
    }
    snap->routes6.build(routes6);
    for (auto& [vrf, lens] : lengths6) {
        std::sort(lens.begin(), lens.end(), std::greater<>());
        lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
        snap->vrf_prefix_lengths6[vrf] = lens;
    }

    for (const auto* cidrs : {&cfg_.cluster.pod_cidrs, &cfg_.cluster.service_cidrs})
        for (const auto& c : *cidrs)
            if (c.is_v4()) snap->cluster_cidrs.emplace_back(c.network4(), c.mask4());
    std::vector<std::pair<uint64_t, uint32_t>> nodes;
    std::vector<dp::Ip6Map::Item> nodes6;
    for (const net::IpAddr& ip : cfg_.cluster.node_ips) {
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
    for (const auto* cidrs : {&cfg_.cluster.pod_cidrs, &cfg_.cluster.service_cidrs})
        for (const auto& c : *cidrs)
            if (c.is_v6()) {
                dp::Ip6 net;
                dp::PolicySnapshot::mask6(c.addr.bytes().data(), c.len, net.b);
                snap->cluster_cidrs6.emplace_back(net, c.len);
            }

    // The outside ports of each network; a network with none of its own reaches the outside
    // through the default table, so its ingress IPs are answered on the default network's ports.
    std::vector<uint32_t> arp_ports(dp::kMaxVrfs);
    for (unsigned id = 0; id < dp::kMaxPorts; ++id)
        if (snap->ports[id].role == dp::PortRole::outside) arp_ports[snap->ports[id].vrf] |= 1u << id;
    for (uint32_t& mask : arp_ports)
        if (mask == 0) mask = arp_ports[dp::kDefaultVrf];

    std::sort(port_nat.begin(), port_nat.end());
    port_nat.erase(std::unique(port_nat.begin(), port_nat.end()), port_nat.end());
    if (port_nat != port_nat_ || arp_ports != arp_ports_) {
        port_nat_ = std::move(port_nat);
        arp_ports_ = std::move(arp_ports);
        rebuild_nat();
    }

    // IPv6 ingress IPs of the LoadBalancerIP Services served here, answered to Neighbor
    // Solicitations on the outside ports of their networks as IPv4 ones are to ARP. Made afresh
    // from the views at every publication (a walk over the Services).
    for (const ServiceView& v : views_) {
        const model::ServiceState& st = v.state;
        if (!st.serve_here || st.mode != model::Mode::load_balancer_ip || !st.ingress_ipv6 || v.id == 0) continue;
        int vrf = resolve_vrf(st.network);
        if (vrf >= 0)
            nat6.push_back(
                {*st.ingress_ipv6, dp::kNatIngressIp | arp_ports_[static_cast<size_t>(vrf)] << dp::kNatArpPortsShift});
    }
    std::sort(nat6.begin(), nat6.end());
    std::vector<dp::Ip6Map::Item> nat6_items;
    for (const auto& [ip, flags] : nat6) {
        if (!nat6_items.empty() && std::memcmp(nat6_items.back().addr, ip.bytes().data(), 16) == 0) {
            nat6_items.back().value |= flags;
            continue;
        }
        dp::Ip6Map::Item it{};
        std::copy(ip.bytes().begin(), ip.bytes().end(), it.addr);
        it.value = flags;
        nat6_items.push_back(it);
    }
    snap->nat_addresses6.build(nat6_items);

    // Ingress to served IPv6 ingress IPs: (ingress IP, Service port) of every spec.ports entry of
    // a Service translating its IPv6 to its ingress IP, per protocol. Two Services claiming one:
    // the first by key, as for IPv4 (views_ is sorted by key, and a later duplicate overwrites an
    // earlier one in an Ip6Map, so they are listed from the last).
    std::array<std::vector<dp::Ip6Map::Item>, 2> ingress6;
    for (auto v = views_.rbegin(); v != views_.rend(); ++v) {
        const dp::ServicePolicy& pol = services_[v->id];
        if (v->id == 0 || pol.mode6 != dp::ServiceMode::snat_ingress_ip) continue;
        for (uint32_t pp : v->state.ports) {
            const auto proto = static_cast<uint8_t>(pp >> 16);
            if (proto != dp::PolicySnapshot::kProtoTcp && proto != dp::PolicySnapshot::kProtoUdp) continue;
            dp::Ip6Map::Item it{};
            std::copy(std::begin(pol.nat_ip6.b), std::end(pol.nat_ip6.b), it.addr);
            it.scope = static_cast<uint16_t>(pp);
            it.value = v->id;
            ingress6[proto == dp::PolicySnapshot::kProtoUdp].push_back(it);
        }
    }
    for (size_t k = 0; k < ingress6.size(); ++k)
        snap->ingress_ports6[k].build(ingress6[k]);

    // IPv6 endpoints -> Service id, the first Service by key owning a pod claimed twice (as for
    // IPv4), made afresh from the views at every publication. Pods a Service now translates may
    // hold sessions the default action made: as for IPv4, the default policy gets a new version
    // when the set of translated IPv6 pods gains a member.
    std::vector<dp::Ip6Map::Item> endpoints6;
    std::vector<std::array<uint8_t, 16>> served6;
    {
        std::set<std::array<uint8_t, 16>> seen;
        for (const ServiceView& v : views_) {
            if (v.id == 0) continue;
            const bool translated = services_[v.id].mode6 != dp::ServiceMode::inactive;
            for (const net::IpAddr& ip : v.state.endpoint_ipv6s) {
                std::array<uint8_t, 16> a;
                std::copy(ip.bytes().begin(), ip.bytes().end(), a.begin());
                if (!seen.insert(a).second) continue;
                dp::Ip6Map::Item it{};
                std::copy(a.begin(), a.end(), it.addr);
                it.value = v.id;
                endpoints6.push_back(it);
                if (translated) served6.push_back(a);
            }
        }
    }
    snap->endpoints6.build(endpoints6);
    std::sort(served6.begin(), served6.end());
    if (!std::includes(served6_.begin(), served6_.end(), served6.begin(), served6.end())) {
        ++default_version_;
    }
    served6_ = std::move(served6);

    snap->services = services_;
    snap->endpoints = endpoints_;
    snap->nat_addresses = nat_;
    snap->ingress_ports = ingress_ports_;
    if (cfg_.ingress.via) {
        const config::PortConfig* pc = cfg_.find_port(cfg_.ingress.port);
        snap->ingress_next_hop =
            dp::NextHop{port_ids_[static_cast<size_t>(pc - cfg_.ports.data())], cfg_.ingress.via->v4()};
        snap->has_ingress_next_hop = true;
    }
    if (cfg_.ingress.via6) {
        const config::PortConfig* pc = cfg_.find_port(cfg_.ingress.port);
        dp::NextHop6 nh;
        nh.port = port_ids_[static_cast<size_t>(pc - cfg_.ports.data())];
        nh.on_link = false;
        std::copy(cfg_.ingress.via6->bytes().begin(), cfg_.ingress.via6->bytes().end(), nh.gateway.b);
        snap->ingress_next_hop6 = nh;
        snap->has_ingress_next_hop6 = true;
    }
    snap->default_version = default_version_;
    return snap;
}

}  // namespace egw::control
