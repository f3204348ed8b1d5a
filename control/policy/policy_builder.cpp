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
    return vrf_index(cfg_, network);
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

bool PolicyBuilder::served(uint32_t ip) const {
    uint32_t id = endpoints_.find(ip);
    return id != dp::FlatMap::kMissing && services_[id].mode != dp::ServiceMode::inactive;
}

bool PolicyBuilder::served6(const Key6& ip) const {
    uint8_t a[16];
    ip.copy_addr(a);
    uint32_t id = endpoints6_.find(a);
    return id != dp::Ip6Map::kMissing && services_[id].mode6 != dp::ServiceMode::inactive;
}

// An ingress IP that is also a port address keeps both flags. An ingress IP is answered to ARP on
// the outside ports of the networks of the Services translating to it.
uint32_t PolicyBuilder::nat_flags(uint32_t ip) const {
    uint32_t flags = 0;
    if (auto it = ingress_refs_.find(ip); it != ingress_refs_.end()) {
        flags |= dp::kNatIngressIp;
        for (uint8_t vrf : it->second)
            flags |= config_->arp_ports()[vrf] << dp::kNatArpPortsShift;
    }
    const auto& outside = config_->outside_addresses();
    if (std::binary_search(outside.begin(), outside.end(), ip)) flags |= dp::kNatPortAddress;
    return flags;
}

// The same for IPv6, answered to Neighbor Solicitations.
uint32_t PolicyBuilder::nat_flags6(const Key6& ip) const {
    uint32_t flags = 0;
    if (auto it = ingress_refs6_.find(ip); it != ingress_refs6_.end()) {
        flags |= dp::kNatIngressIp;
        for (uint8_t vrf : it->second)
            flags |= config_->arp_ports()[vrf] << dp::kNatArpPortsShift;
    }
    Ip6Bytes a;
    ip.copy_addr(a.data());
    const auto& outside = config_->outside_addresses6();
    if (std::binary_search(outside.begin(), outside.end(), a)) flags |= dp::kNatPortAddress;
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
        if (holder == dp::FlatMap::kMissing || earlier(id, holder)) ingress_ports_.assign(k, id);
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
            if (earlier(other, best)) best = other;
        ingress_ports_.assign(k, best);
    }
}

// IPv6: (ingress IP, protocol << 16 | port) of each TCP or UDP port; the owners are looked up
// again for the keys touched, once every Service of the commit is claimed (settle_ingress6).
void PolicyBuilder::claim_ingress_ports6(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id,
                                         bool claim) {
    if (pol.mode6 != dp::ServiceMode::snat_ingress_ip) return;
    for (uint32_t pp : s.ports) {
        const auto proto = static_cast<uint8_t>(pp >> 16);
        if (proto != dp::PolicySnapshot::kProtoTcp && proto != dp::PolicySnapshot::kProtoUdp) continue;
        const Key6 k = Key6::of(pol.nat_ip6.b, pp);
        if (claim)
            ingress6_claims_.claim(k, id);
        else
            ingress6_claims_.unclaim(k, id);
        touched_.ingress6.push_back(k);
    }
}

void PolicyBuilder::rebuild_nat() {
    std::vector<std::pair<uint64_t, uint32_t>> items;
    const auto& outside = config_->outside_addresses();
    items.reserve(ingress_refs_.size() + outside.size());
    for (const auto& [ip, n] : ingress_refs_)
        items.emplace_back(ip, nat_flags(ip));
    for (uint32_t ip : outside)
        items.emplace_back(ip, nat_flags(ip));
    nat_.build(items);
}

void PolicyBuilder::rebuild_nat6() {
    std::vector<dp::Ip6Map::Item> items;
    auto add = [&](const Key6& k) {
        dp::Ip6Map::Item it{};
        k.copy_addr(it.addr);
        it.value = nat_flags6(k);
        items.push_back(it);
    };
    for (const auto& [ip, n] : ingress_refs6_)
        add(ip);
    for (const Ip6Bytes& ip : config_->outside_addresses6())
        add(Key6::of(ip.data()));
    nat6_.build(items);
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

// Remakes the configuration's tables when the configuration is no longer the one they were made
// from; returns whether it did. Sessions look up their routes again only when the routes changed.
bool PolicyBuilder::refresh_config() {
    if (config_ && config_->made_from(cfg_)) return false;
    auto next = std::make_unique<ConfigTables>(cfg_, port_ids_, port_macs_);
    const std::vector<uint64_t> none;
    if (next->route_signature() != (config_ ? config_->route_signature() : none)) route_generation_ = generation_ + 1;
    config_ = std::move(next);
    return true;
}

// `work` is sorted by key, one entry per key, each a real change. Every Service not in it keeps
// its id, version, claims and view untouched: that is what makes a change cheap.
std::unique_ptr<dp::PolicySnapshot> PolicyBuilder::commit(std::vector<Work> work) {
    const bool reconfigured = refresh_config();
    std::vector<model::ServiceState> again;  // outlives `work`, which may point into it
    add_unchanged_to_resolve(work, again);
    touched_ = Touched{};
    touch_pods(work);

    // views_ is neither grown nor shrunk until the end (work's keys may point into it): gone
    // Services are marked, new ones collected, and both merged in one pass.
    std::vector<size_t> gone;
    std::vector<ServiceView> added;
    release_gone(work, gone);
    for (const Work& w : work)
        if (w.next) resolve(*w.next, added);
    merge_views(gone, added);

    settle_pods();
    settle_nat(reconfigured);
    settle_ingress6();
    return assemble();
}

// Services that must be resolved again although their state is the same: all of them when a VRF
// was renamed or renumbered, and those over the id limit (an id may have come free). They take
// part in key order like any other, as they would in a build from scratch. Their states are
// copied into `again`: views_ changes while the work is done.
void PolicyBuilder::add_unchanged_to_resolve(std::vector<Work>& work, std::vector<model::ServiceState>& again) {
    const bool vrfs_changed = !same_vrfs(vrfs_seen_, cfg_.vrfs);
    if (!vrfs_changed && idless_.empty()) return;
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

// Every pod of either family whose owner, or whose owner's mode, may change, and whether it was
// translated before.
void PolicyBuilder::touch_pods(const std::vector<Work>& work) {
    Touched& t = touched_;
    auto add6 = [&](const std::vector<net::IpAddr>& ips) {
        for (const net::IpAddr& ip : ips)
            t.pods6.push_back(Key6::of(ip.bytes().data()));
    };
    for (const Work& w : work) {
        auto v = find_view(*w.key);
        if (v != views_.end() && v->id != 0) {
            t.pods.insert(t.pods.end(), v->state.endpoint_ipv4s.begin(), v->state.endpoint_ipv4s.end());
            add6(v->state.endpoint_ipv6s);
        }
        if (w.next) {
            t.pods.insert(t.pods.end(), w.next->endpoint_ipv4s.begin(), w.next->endpoint_ipv4s.end());
            add6(w.next->endpoint_ipv6s);
        }
    }
    std::sort(t.pods.begin(), t.pods.end());
    t.pods.erase(std::unique(t.pods.begin(), t.pods.end()), t.pods.end());
    endpoints_.reserve(endpoints_.size() + t.pods.size());
    pods_.reserve(pods_.size() + t.pods.size());
    t.pods_served.resize(t.pods.size());
    for (size_t i = 0; i < t.pods.size(); ++i)
        t.pods_served[i] = served(t.pods[i]);
    t.pods6_served.resize(t.pods6.size());
    for (size_t i = 0; i < t.pods6.size(); ++i)
        t.pods6_served[i] = served6(t.pods6[i]);
}

// Ids of Services that disappeared are released for reuse, in key order, before any is taken.
void PolicyBuilder::release_gone(const std::vector<Work>& work, std::vector<size_t>& gone) {
    for (const Work& w : work) {
        if (w.next) continue;
        auto v = find_view(*w.key);
        if (v->id != 0) {
            const uint32_t id = v->id;
            unprogram(v->state, services_[id], id);
            services_[id] = dp::ServicePolicy{};
            key_of_[id] = nullptr;
            free_ids_.push_back(id);
            ids_.erase(v->state.key);
        }
        idless_.erase(v->state.key);
        gone.push_back(static_cast<size_t>(v - views_.begin()));
    }
}

// What a Service's state makes of it on this gateway, both families.
PolicyBuilder::Resolved PolicyBuilder::resolve_policy(const model::ServiceState& s) const {
    Resolved r;
    dp::ServicePolicy& pol = r.pol;
    const int vrf = resolve_vrf(s.network);
    if (vrf >= 0) r.vrf = cfg_.vrfs[static_cast<size_t>(vrf)].name;
    if (!s.serve_here) return r;
    if (vrf < 0) {
        r.problem = "unknown network \"" + s.network + "\": no VRF of that name or table";
    } else if (s.mode == model::Mode::load_balancer_ip) {
        if (s.ingress_ipv4 || s.ingress_ipv6) pol.vrf = static_cast<uint8_t>(vrf);
        if (s.ingress_ipv4) {
            pol.mode = dp::ServiceMode::snat_ingress_ip;
            pol.nat_ip = *s.ingress_ipv4;
        } else {
            r.problem = "no IPv4 ingress IP (the IPv4 data plane needs one)";
        }
        // Each family by its own ingress IP: without an IPv6 one, the IPv6 endpoints take the
        // default action, as IPv4 ones do without an IPv4 one.
        if (s.ingress_ipv6) {
            pol.mode6 = dp::ServiceMode::snat_ingress_ip;
            std::copy(s.ingress_ipv6->bytes().begin(), s.ingress_ipv6->bytes().end(), pol.nat_ip6.b);
        }
    } else {
        pol.mode = dp::ServiceMode::masquerade;
        pol.mode6 = dp::ServiceMode::masquerade;
        pol.vrf = static_cast<uint8_t>(vrf);
    }
    return r;
}

// A new or changed Service: its id, policy, version and view; its old claims replaced.
void PolicyBuilder::resolve(const model::ServiceState& s, std::vector<ServiceView>& added) {
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
        return;
    }
    if (old_id == 0) idless_.erase(s.key);
    Resolved r = resolve_policy(s);
    dp::ServicePolicy& pol = r.pol;
    next.vrf = std::move(r.vrf);
    next.problem = std::move(r.problem);
    next.programmed = pol.mode != dp::ServiceMode::inactive;
    next.programmed6 = pol.mode6 != dp::ServiceMode::inactive;
    next.ipv4 = ipv4_translation(s, pol, next.problem);
    next.ipv6 = ipv6_translation(s, pol, next.problem);
    // The version survives while nothing a session depends on changed. Losing an endpoint counts
    // (its sessions must stop translating); gaining one does not. An id this Service did not have
    // before (new, or reused after another Service) has no previous translation.
    const dp::ServicePolicy prev = services_[next.id];
    const bool same = old_id == next.id && prev.mode == pol.mode && prev.vrf == pol.vrf && prev.nat_ip == pol.nat_ip &&
                      prev.mode6 == pol.mode6 && std::memcmp(prev.nat_ip6.b, pol.nat_ip6.b, 16) == 0 &&
                      std::includes(s.endpoint_ipv4s.begin(), s.endpoint_ipv4s.end(), v.state.endpoint_ipv4s.begin(),
                                    v.state.endpoint_ipv4s.end()) &&
                      std::includes(s.endpoint_ipv6s.begin(), s.endpoint_ipv6s.end(), v.state.endpoint_ipv6s.begin(),
                                    v.state.endpoint_ipv6s.end());
    pol.version = same ? prev.version : next_version_++;
    if (old_id != 0) unprogram(v.state, prev, old_id);
    program(s, pol, next.id);
    services_[next.id] = pol;
    next.state = s;
    v = std::move(next);
}

// Claims what the Service's policy makes it own: its pods, its ingress IPs and ports.
void PolicyBuilder::program(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id) {
    if (pol.mode == dp::ServiceMode::snat_ingress_ip) {
        ingress_refs_[pol.nat_ip].push_back(pol.vrf);
        touched_.nat.push_back(pol.nat_ip);
    }
    for (uint32_t ip : s.endpoint_ipv4s)
        pods_.claim(ip, id);
    claim_ingress_ports(s, pol, id);
    if (pol.mode6 == dp::ServiceMode::snat_ingress_ip) {
        const Key6 k = Key6::of(pol.nat_ip6.b);
        ingress_refs6_[k].push_back(pol.vrf);
        touched_.nat6.push_back(k);
    }
    for (const net::IpAddr& ip : s.endpoint_ipv6s)
        pods6_.claim(Key6::of(ip.bytes().data()), id);
    claim_ingress_ports6(s, pol, id, true);
}

// The reverse of program(), for the state and policy the Service was programmed with.
void PolicyBuilder::unprogram(const model::ServiceState& s, const dp::ServicePolicy& pol, uint32_t id) {
    if (pol.mode == dp::ServiceMode::snat_ingress_ip) {
        auto it = ingress_refs_.find(pol.nat_ip);
        it->second.erase(std::find(it->second.begin(), it->second.end(), pol.vrf));
        if (it->second.empty()) ingress_refs_.erase(it);
        touched_.nat.push_back(pol.nat_ip);
    }
    unclaim_ingress_ports(s, pol, id);
    for (uint32_t ip : s.endpoint_ipv4s)
        pods_.unclaim(ip, id);
    if (pol.mode6 == dp::ServiceMode::snat_ingress_ip) {
        const Key6 k = Key6::of(pol.nat_ip6.b);
        auto it = ingress_refs6_.find(k);
        it->second.erase(std::find(it->second.begin(), it->second.end(), pol.vrf));
        if (it->second.empty()) ingress_refs6_.erase(it);
        touched_.nat6.push_back(k);
    }
    claim_ingress_ports6(s, pol, id, false);
    for (const net::IpAddr& ip : s.endpoint_ipv6s)
        pods6_.unclaim(Key6::of(ip.bytes().data()), id);
}

void PolicyBuilder::merge_views(const std::vector<size_t>& gone, std::vector<ServiceView>& added) {
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
}

// Owners of the touched pods, and whether the default policy needs a new version: pods that a
// Service now translates may hold sessions made by the default action. Those must move to the
// Service's translation, so the default policy gets a new version whenever the set of translated
// pods of a family gains a member; the workers then re-check each default session once.
void PolicyBuilder::settle_pods() {
    const Touched& t = touched_;
    auto earlier_by_key = [this](uint32_t a, uint32_t b) { return earlier(a, b); };
    bool gained = false;
    for (size_t i = 0; i < t.pods.size(); ++i) {
        const uint32_t ip = t.pods[i];
        const uint32_t owner = pods_.owner(ip, earlier_by_key);
        if (owner == dp::FlatMap::kMissing)
            endpoints_.erase(ip);
        else if (endpoints_.find(ip) != owner)
            endpoints_.assign(ip, owner);
        gained = gained || (!t.pods_served[i] && served(ip));
    }
    if (gained) ++default_version_;

    bool gained6 = false;
    for (size_t i = 0; i < t.pods6.size(); ++i) {
        const Key6& ip = t.pods6[i];
        uint8_t a[16];
        ip.copy_addr(a);
        const uint32_t owner = pods6_.owner(ip, earlier_by_key);
        if (owner == dp::Ip6Map::kMissing)
            endpoints6_.erase(a, 0);
        else if (endpoints6_.find(a) != owner)
            endpoints6_.assign(a, 0, owner);
    }
    // Once every owner is in place: a pod touched twice is judged by its final owner.
    for (size_t i = 0; i < t.pods6.size(); ++i)
        gained6 = gained6 || (!t.pods6_served[i] && served6(t.pods6[i]));
    if (gained6) ++default_version_;
}

// The NAT addresses of both families: made again from the ingress IPs and the outside
// addresses after a configuration change (the ports answering for them may have moved), else
// patched for the addresses a Service took or gave up.
void PolicyBuilder::settle_nat(bool reconfigured) {
    if (reconfigured) {
        rebuild_nat();
        rebuild_nat6();
        return;
    }
    for (uint32_t ip : touched_.nat) {
        const uint32_t flags = nat_flags(ip);
        if (flags)
            nat_.assign(ip, flags);
        else
            nat_.erase(ip);
    }
    for (const Key6& k : touched_.nat6) {
        uint8_t a[16];
        k.copy_addr(a);
        const uint32_t flags = nat_flags6(k);
        if (flags)
            nat6_.assign(a, 0, flags);
        else
            nat6_.erase(a, 0);
    }
}

// Ingress to served IPv6 ingress IPs: for each (ingress IP, protocol, port) a Service took or gave
// up, the first claimant by key, as for IPv4.
void PolicyBuilder::settle_ingress6() {
    for (const Key6& k : touched_.ingress6) {
        uint8_t a[16];
        k.copy_addr(a);
        const auto port = static_cast<uint16_t>(k.scope);
        dp::Ip6Map& map = ingress_ports6_[(k.scope >> 16) == dp::PolicySnapshot::kProtoUdp];
        const uint32_t owner = ingress6_claims_.owner(k, [this](uint32_t x, uint32_t y) { return earlier(x, y); });
        if (owner == dp::Ip6Map::kMissing)
            map.erase(a, port);
        else
            map.assign(a, port, owner);
    }
}

// The snapshot: copies of the configuration's tables and of the Service tables.
std::unique_ptr<dp::PolicySnapshot> PolicyBuilder::assemble() {
    auto snap = std::make_unique<dp::PolicySnapshot>();
    snap->generation = ++generation_;
    snap->default_action = cfg_.default_action;  // one enum (dataplane/tables/roles.h)
    // A new default action (a configuration reload) must reach the flows it already translates:
    // a new version makes the workers re-check every default session, and only masquerade keeps
    // one (dataplane/nat_session.h, policy_holds).
    if (last_default_action_ && *last_default_action_ != cfg_.default_action) ++default_version_;
    last_default_action_ = cfg_.default_action;
    config_->copy_into(*snap);
    snap->route_generation = route_generation_;
    snap->services = services_;
    snap->endpoints = endpoints_;
    snap->nat_addresses = nat_;
    snap->ingress_ports = ingress_ports_;
    snap->endpoints6 = endpoints6_;
    snap->nat_addresses6 = nat6_;
    snap->ingress_ports6 = ingress_ports6_;
    snap->egress_firewall = egress_firewall_;
    snap->default_version = default_version_;
    snap->egress_qos = egress_qos_;
    return snap;
}

}  // namespace egw::control
