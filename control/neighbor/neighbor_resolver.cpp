// SPDX-License-Identifier: Apache-2.0
#include "control/neighbor/neighbor_resolver.h"

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "control/runtime/runtime.h"
#include "dataplane/tables/neighbor_table.h"

namespace egw::control {

namespace {

// Packets for an unresolved neighbour are given up after this long.
constexpr uint64_t kHoldSeconds = 3;

}  // namespace

NeighborResolver::NeighborResolver(const config::Config& cfg, Runtime& rt)
    : cfg_(cfg), rt_(rt), tsc_hz_(rte_get_tsc_hz()), announcer_(cfg.arp, tsc_hz_) {}

NeighborResolver::~NeighborResolver() {
    // The learned entries go with the resolver; the workers have stopped (or never ran) by now.
    auto& table = *rt_.shared().neighbors;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (!it->second.is_static && it->second.slot != dp::NeighborTable::kNone) {
            table.erase(it->second.slot);
            table.release(it->second.slot);
            it->second.slot = dp::NeighborTable::kNone;
        }
        free_held(it->second);
        it = entries_.erase(it);
    }
    for (const auto& [slot, token] : cooling_)
        table.release(slot);
}

std::string NeighborResolver::port_name(uint16_t id) const {
    for (const auto& p : rt_.ports())
        if (p.id == id)
            return p.name;
    return std::to_string(id);
}

uint16_t NeighborResolver::port_id(const std::string& name) const {
    for (const auto& p : rt_.ports())
        if (p.name == name)
            return p.id;
    return 0;  // the loader checked every neighbour's port name
}

void NeighborResolver::install_static() {
    auto& table = *rt_.shared().neighbors;
    uint64_t now = rte_rdtsc();
    for (const auto& n : cfg_.neighbors) {
        if (!n.ip.is_v4())
            continue;  // IPv6 neighbours are configured but the data plane has no IPv6 yet
        uint16_t id = port_id(n.port);
        uint32_t slot = table.insert(id, n.ip.v4());
        if (slot == dp::NeighborTable::kNone)
            throw RuntimeError("arp.max_neighbors is smaller than the static neighbours");
        table.set_mac(slot, n.mac.bytes);
        Entry& e = entries_[dp::NeighborTable::make_key(id, n.ip.v4())];
        e.is_static = true;
        e.resolved = true;
        e.slot = slot;
        std::memcpy(e.mac, n.mac.bytes, 6);
        e.confirmed_tsc = e.used_tsc = now;
    }
}

std::string NeighborResolver::reload_static(const std::vector<config::NeighborConfig>& next) {
    auto& table = *rt_.shared().neighbors;
    uint64_t now = rte_rdtsc();
    std::unordered_map<uint64_t, const config::NeighborConfig*> wanted;
    uint32_t new_slots = 0;
    for (const auto& n : next) {
        if (!n.ip.is_v4())
            continue;
        uint16_t id = port_id(n.port);
        wanted[dp::NeighborTable::make_key(id, n.ip.v4())] = &n;
        if (table.find(id, n.ip.v4()) == dp::NeighborTable::kNone)
            ++new_slots;
    }
    // Learned entries give way to static ones (least recently used first); static ones do not,
    // so room is checked before anything moves.
    uint32_t learned = 0;  // slots of entries that are not static after the reload
    for (const auto& [key, e] : entries_)
        if (e.slot != dp::NeighborTable::kNone && !wanted.count(key))
            ++learned;
    if (table.used() + new_slots > table.capacity() + learned)
        return "the neighbour table (arp.max_neighbors " + std::to_string(table.capacity()) + ") has no room for " +
               std::to_string(new_slots) + " more static neighbour(s)";
    for (auto& [key, e] : entries_) {
        if (!e.is_static || wanted.count(key))
            continue;
        if (e.slot != dp::NeighborTable::kNone)
            table.invalidate(e.slot);
        e.is_static = false;
        e.resolved = false;
        e.probing = false;
        e.requests = 0;
        e.used_tsc = now;
    }
    // Learned entries about to become static are not recycled for the others.
    for (const auto& [key, n] : wanted)
        if (auto it = entries_.find(key); it != entries_.end())
            it->second.is_static = true;
    for (const auto& [key, n] : wanted) {
        uint32_t slot = take_slot(port_id(n->port), n->ip.v4(), key);
        if (slot == dp::NeighborTable::kNone)
            continue;  // not reached: room was checked above
        table.set_mac(slot, n->mac.bytes);
        Entry& e = entries_[key];
        e.is_static = true;
        e.resolved = true;
        e.probing = false;
        e.slot = slot;
        std::memcpy(e.mac, n->mac.bytes, 6);
        e.confirmed_tsc = e.used_tsc = now;
        // Packets held while it was unresolved: rare (a reload in the middle of an ARP wait), and
        // counted like any other held packet that is given up.
        held_dropped_ += e.held.size();
        free_held(e);
    }
    return "";
}

void NeighborResolver::free_held(Entry& e) {
    for (rte_mbuf* m : e.held)
        rte_pktmbuf_free(m);
    held_total_ -= static_cast<unsigned>(e.held.size());
    e.held.clear();
}

void NeighborResolver::inject(rte_mbuf* m) {
    if (!inject_or_free(m))
        ++held_dropped_;
}

bool NeighborResolver::inject_or_free(rte_mbuf* m) {
    if (rte_ring_sp_enqueue(rt_.workers()[0]->inject, m) == 0)
        return true;
    rte_pktmbuf_free(m);
    return false;
}

void NeighborResolver::erase_slot(uint32_t slot) {
    auto& table = *rt_.shared().neighbors;
    table.erase(slot);
    if (rte_rcu_qsbr* q = rt_.shared().qsbr)
        cooling_.emplace_back(slot, rte_rcu_qsbr_start(q));
    else
        table.release(slot);
}

void NeighborResolver::release_cooled() {
    auto& table = *rt_.shared().neighbors;
    rte_rcu_qsbr* q = rt_.shared().qsbr;
    while (!cooling_.empty() && rte_rcu_qsbr_check(q, cooling_.front().second, false)) {
        table.release(cooling_.front().first);
        cooling_.pop_front();
    }
}

NeighborResolver::Entries::iterator NeighborResolver::free_entry(Entries::iterator it) {
    Entry& e = it->second;
    if (e.slot != dp::NeighborTable::kNone)
        erase_slot(e.slot);
    held_dropped_ += e.held.size();
    free_held(e);
    return entries_.erase(it);
}

bool NeighborResolver::recycle_lru(uint64_t keep) {
    auto lru = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const Entry& e = it->second;
        if (e.is_static || e.slot == dp::NeighborTable::kNone || it->first == keep)
            continue;
        if (lru == entries_.end() || e.used_tsc < lru->second.used_tsc)
            lru = it;
    }
    if (lru == entries_.end())
        return false;
    uint16_t port = static_cast<uint16_t>((lru->first >> 32) - 1);
    uint32_t ip = static_cast<uint32_t>(lru->first);
    if (!recycle_logged_)
        spdlog::info("neighbour table full ({} entries): recycling the least recently used ones, first {} on {}",
                     rt_.shared().neighbors->capacity(), config::format_ipv4(ip), port_name(port));
    recycle_logged_ = true;
    free_entry(lru);
    ++recycled_;
    return true;
}

uint32_t NeighborResolver::take_slot(uint16_t port, uint32_t ip, uint64_t keep) {
    auto& table = *rt_.shared().neighbors;
    uint32_t slot = table.insert(port, ip);
    if (slot != dp::NeighborTable::kNone) {
        if (table.used() < table.capacity())
            recycle_logged_ = false;
        return slot;
    }
    if (!recycle_lru(keep))
        return dp::NeighborTable::kNone;
    return table.insert(port, ip);
}

void NeighborResolver::send_request(uint16_t port, uint32_t ip, const dp::PolicySnapshot& p, const uint8_t* dst) {
    const dp::PortPolicy& pp = p.ports[port];
    if (pp.n_addrs == 0)
        return;
    uint32_t sip = pp.addrs[0];
    for (unsigned i = 0; i < pp.n_addrs; ++i) {
        uint32_t mask = pp.prefix_len[i] ? ~uint32_t{0} << (32 - pp.prefix_len[i]) : 0;
        if ((pp.addrs[i] & mask) == (ip & mask)) {
            sip = pp.addrs[i];
            break;
        }
    }
    if (send_arp(port, sip, ip, p, dst)) {
        ++requests_sent_;
        if (dst)
            ++probes_sent_;
    }
}

bool NeighborResolver::send_arp(uint16_t port, uint32_t sip, uint32_t tip, const dp::PolicySnapshot& p,
                                const uint8_t* dst) {
    const dp::PortPolicy& pp = p.ports[port];
    rte_mbuf* m = rte_pktmbuf_alloc(rt_.pool());
    if (!m)
        return false;
    char* frame = rte_pktmbuf_append(m, sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr));
    if (!frame) {
        rte_pktmbuf_free(m);
        return false;
    }
    auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
    if (dst)
        std::memcpy(eth->dst_addr.addr_bytes, dst, 6);
    else
        std::memset(eth->dst_addr.addr_bytes, 0xff, 6);
    std::memcpy(eth->src_addr.addr_bytes, pp.mac, 6);
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
    auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
    arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
    arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    arp->arp_hlen = 6;
    arp->arp_plen = 4;
    arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
    std::memcpy(arp->arp_data.arp_sha.addr_bytes, pp.mac, 6);
    arp->arp_data.arp_sip = rte_cpu_to_be_32(sip);
    std::memset(arp->arp_data.arp_tha.addr_bytes, 0, 6);
    arp->arp_data.arp_tip = rte_cpu_to_be_32(tip);
    m->port = port;
    return inject_or_free(m);
}

void NeighborResolver::learn(uint16_t port, uint32_t ip, const uint8_t* mac, const dp::PolicySnapshot& p,
                             uint64_t now) {
    uint64_t key = dp::NeighborTable::make_key(port, ip);
    auto it = entries_.find(key);
    // Only answers to our own questions are learned, so a chatty segment cannot fill the table.
    if (it == entries_.end() || it->second.is_static)
        return;
    Entry& e = it->second;
    auto& table = *rt_.shared().neighbors;
    if (e.slot == dp::NeighborTable::kNone) {
        e.slot = take_slot(port, ip, key);
        if (e.slot == dp::NeighborTable::kNone) {
            // Every slot is static (or cooling): said once until a learn finds room again.
            if (!full_logged_)
                spdlog::warn("neighbour table full ({} entries, none to recycle): cannot add {} on {}",
                             table.capacity(), config::format_ipv4(ip), port_name(port));
            full_logged_ = true;
            return;
        }
        full_logged_ = false;
        e.used_tsc = now;  // whoever asked is about to use it
        e.resolved = false;
    }
    config::MacAddr ma;
    std::memcpy(ma.bytes, mac, 6);
    // Once per streak: when the MAC becomes known (first, or after it was invalidated) or
    // changes; the replies to refreshes that confirm it say nothing.
    if (!e.resolved) {
        spdlog::info("neighbour {} on {} is {}", config::format_ipv4(ip), port_name(port), config::format_mac(ma));
    } else if (std::memcmp(e.mac, mac, 6) != 0) {
        config::MacAddr old;
        std::memcpy(old.bytes, e.mac, 6);
        spdlog::info("neighbour {} on {} moved from {} to {}", config::format_ipv4(ip), port_name(port),
                     config::format_mac(old), config::format_mac(ma));
    }
    table.set_mac(e.slot, mac);
    std::memcpy(e.mac, mac, 6);
    e.resolved = true;
    e.probing = false;
    e.confirmed_tsc = now;
    e.requests = 0;
    while (!e.held.empty()) {
        rte_mbuf* m = e.held.front();
        e.held.pop_front();
        --held_total_;
        auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
        std::memcpy(eth->dst_addr.addr_bytes, mac, 6);
        std::memcpy(eth->src_addr.addr_bytes, p.ports[port].mac, 6);
        m->port = port;
        inject(m);
    }
}

void NeighborResolver::hold(rte_mbuf* m, const dp::PolicySnapshot& p, uint64_t now) {
    uint32_t next_hop = *RTE_MBUF_DYNFIELD(m, rt_.shared().next_hop_field, uint32_t*);
    uint16_t port = m->port;
    uint64_t key = dp::NeighborTable::make_key(port, next_hop);
    Entry& e = entries_[key];
    e.used_tsc = now;
    auto& table = *rt_.shared().neighbors;
    uint8_t mac[6];
    if (e.slot != dp::NeighborTable::kNone && table.mac(e.slot, mac)) {
        // Resolved between the worker's look and now.
        auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
        std::memcpy(eth->dst_addr.addr_bytes, mac, 6);
        std::memcpy(eth->src_addr.addr_bytes, p.ports[port].mac, 6);
        inject(m);
        return;
    }
    if (held_total_ >= cfg_.arp.hold_packets) {
        ++held_dropped_;
        rte_pktmbuf_free(m);
    } else {
        if (e.held.empty())
            e.held_since_tsc = now;
        e.held.push_back(m);
        ++held_total_;
    }
    if (e.requests == 0 || now - e.last_request_tsc > cfg_.arp.retry_ms * tsc_hz_ / 1000) {
        send_request(port, next_hop, p);
        e.last_request_tsc = now;
        ++e.requests;
    }
}

void NeighborResolver::poll(const dp::PolicySnapshot& p) { poll(p, rte_rdtsc()); }

void NeighborResolver::poll(const dp::PolicySnapshot& p, uint64_t now) {
    now_ = now;
    announcer_.update(p, now);
    // An announcement is an ARP request for the address itself, from it (RFC 5227 section 2.3).
    announcer_.run(now, [&](uint16_t port, uint32_t ip) { return send_arp(port, ip, ip, p); });
    rte_mbuf* burst[64];
    rte_ring* ring = rt_.shared().to_control;
    unsigned n;
    while ((n = rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(burst), 64, nullptr)) > 0) {
        for (unsigned i = 0; i < n; ++i) {
            rte_mbuf* m = burst[i];
            auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
            if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
                auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
                learn(m->port, rte_be_to_cpu_32(arp->arp_data.arp_sip), arp->arp_data.arp_sha.addr_bytes, p, now);
                rte_pktmbuf_free(m);
            } else {
                hold(m, p, now);
            }
        }
    }
}

void NeighborResolver::tick(const dp::PolicySnapshot& p) { tick(p, rte_rdtsc()); }

void NeighborResolver::tick(const dp::PolicySnapshot& p, uint64_t now) {
    now_ = now;
    release_cooled();
    auto& table = *rt_.shared().neighbors;
    const uint64_t retry = cfg_.arp.retry_ms * tsc_hz_ / 1000;
    const uint64_t hold_limit = kHoldSeconds * tsc_hz_;
    const uint64_t reachable = uint64_t{cfg_.arp.reachable_s} * tsc_hz_;
    const uint64_t unused = uint64_t{cfg_.arp.unused_s} * tsc_hz_;
    const unsigned probes = cfg_.arp.probes;
    for (auto it = entries_.begin(); it != entries_.end();) {
        Entry& e = it->second;
        if (e.slot != dp::NeighborTable::kNone && table.take_used(e.slot))
            e.used_tsc = now;
        if (e.is_static) {
            ++it;
            continue;
        }
        uint16_t port = static_cast<uint16_t>((it->first >> 32) - 1);
        uint32_t ip = static_cast<uint32_t>(it->first);
        if (!e.held.empty() && now - e.held_since_tsc > hold_limit) {
            held_dropped_ += e.held.size();
            free_held(e);
        }
        if (e.held.empty() && now - e.used_tsc > unused) {
            // Nothing sent through it for arp.unused_s.
            it = free_entry(it);
            ++freed_;
            continue;
        }
        if (!e.resolved) {
            if (e.requests > 0 && now - e.last_request_tsc > retry) {
                if (e.requests >= probes && e.held.empty()) {
                    // Never answered and nothing waits: given up. A packet for it starts over.
                    it = free_entry(it);
                    ++freed_;
                    continue;
                }
                send_request(port, ip, p);
                e.last_request_tsc = now;
                ++e.requests;
            }
        } else if (e.probing) {
            if (now - e.last_request_tsc > retry) {
                if (e.requests >= probes) {
                    // The MAC stopped answering: packets are held and ARPed for again from now.
                    table.invalidate(e.slot);
                    e.resolved = false;
                    e.probing = false;
                    e.requests = 0;
                    ++invalidated_;
                    config::MacAddr ma;
                    std::memcpy(ma.bytes, e.mac, 6);
                    spdlog::warn("neighbour {} on {} ({}) did not answer {} probe(s): invalidated, ARP again",
                                 config::format_ipv4(ip), port_name(port), config::format_mac(ma), probes);
                } else {
                    send_request(port, ip, p, e.mac);
                    e.last_request_tsc = now;
                    ++e.requests;
                }
            }
        } else if (now - e.confirmed_tsc > reachable && now - e.used_tsc <= reachable) {
            // Stale and still in use: probe it, keeping the MAC meanwhile.
            e.probing = true;
            e.requests = 1;
            e.last_request_tsc = now;
            send_request(port, ip, p, e.mac);
        }
        ++it;
    }
}

uint32_t NeighborResolver::entries_in_table() const { return rt_.shared().neighbors->used(); }

std::vector<NeighborView> NeighborResolver::list() const {
    std::vector<NeighborView> out;
    auto& table = *rt_.shared().neighbors;
    const uint64_t now = now_;  // the clock of the last poll or tick
    const uint64_t reachable = uint64_t{cfg_.arp.reachable_s} * tsc_hz_;
    for (const auto& [key, e] : entries_) {
        NeighborView v;
        uint16_t port = static_cast<uint16_t>((key >> 32) - 1);
        v.port = port_name(port);
        v.ip = static_cast<uint32_t>(key);
        uint8_t mac[6];
        if (e.slot != dp::NeighborTable::kNone && table.mac(e.slot, mac)) {
            config::MacAddr ma;
            std::memcpy(ma.bytes, mac, 6);
            v.mac = config::format_mac(ma);
        }
        v.state = e.is_static  ? "static"
                  : !e.resolved ? "incomplete"
                  : e.probing   ? "probing"
                  : now - e.confirmed_tsc > reachable ? "stale"
                                                      : "reachable";
        v.held = static_cast<unsigned>(e.held.size());
        out.push_back(v);
    }
    return out;
}

std::vector<AnnouncementView> NeighborResolver::announcing() const {
    std::vector<AnnouncementView> out;
    uint64_t now = rte_rdtsc();
    for (const auto& a : announcer_.pending()) {
        AnnouncementView v;
        v.port = port_name(a.port);
        v.ip = a.ip;
        v.what = a.what == Announcer::What::ingress_ip ? "ingress IP" : "port address";
        v.left = a.left;
        v.next_ms = a.due_tsc > now ? (a.due_tsc - now) * 1000 / tsc_hz_ : 0;
        out.push_back(v);
    }
    return out;
}

}  // namespace egw::control
