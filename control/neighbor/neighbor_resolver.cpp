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
#include "dataplane/held.h"
#include "dataplane/ipv6.h"
#include "dataplane/ndp.h"
#include "dataplane/tables/neighbor_table.h"
#include "dataplane/tables/neighbor_table6.h"

namespace egw::control {

namespace {

// Packets for an unresolved neighbour are given up after this long.
constexpr uint64_t kHoldSeconds = 3;

constexpr uint32_t kNone = ~uint32_t{0};
static_assert(dp::NeighborTable::kNone == kNone && dp::NeighborTable6::kNone == kNone);

// The ICMPv6 checksum of `len` bytes at `l4` under the pseudo-header of (src, dst).
uint16_t icmp6_checksum(const uint8_t* src, const uint8_t* dst, const uint8_t* l4, uint32_t len) {
    uint32_t sum = 0;
    auto add = [&](const uint8_t* d, uint32_t n) {
        for (uint32_t i = 0; i + 1 < n; i += 2)
            sum += uint32_t{d[i]} << 8 | d[i + 1];
        if (n & 1) sum += uint32_t{d[n - 1]} << 8;
    };
    add(src, 16);
    add(dst, 16);
    sum += len;
    sum += dp::kIp6Icmp;
    add(l4, len);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
}

}  // namespace

NeighborResolver::NeighborResolver(const config::Config& cfg, Runtime& rt)
    : cfg_(cfg), rt_(rt), tsc_hz_(rte_get_tsc_hz()), announcer_(cfg.arp, tsc_hz_) {}

NeighborResolver::~NeighborResolver() {
    // The learned entries go with the resolver; the workers have stopped (or never ran) by now.
    auto& table = *rt_.shared().neighbors;
    auto* table6 = rt_.shared().neighbors6;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (!it->second.is_static && it->second.slot != kNone) {
            if (it->first.v6) {
                table6->erase(it->second.slot);
                table6->release(it->second.slot);
            } else {
                table.erase(it->second.slot);
                table.release(it->second.slot);
            }
            it->second.slot = kNone;
        }
        free_held(it->second);
        it = entries_.erase(it);
    }
    for (const auto& c : cooling_) {
        if (c.v6)
            table6->release(c.slot);
        else
            table.release(c.slot);
    }
}

uint32_t NeighborResolver::table_insert(const NeighborKey& k) {
    return k.v6 ? rt_.shared().neighbors6->insert(k.port, k.ip6.data()) : rt_.shared().neighbors->insert(k.port, k.ip4);
}

uint32_t NeighborResolver::table_find(const NeighborKey& k) const {
    return k.v6 ? rt_.shared().neighbors6->find(k.port, k.ip6.data()) : rt_.shared().neighbors->find(k.port, k.ip4);
}

void NeighborResolver::table_set_mac(bool v6, uint32_t slot, const uint8_t* mac) {
    if (v6)
        rt_.shared().neighbors6->set_mac(slot, mac);
    else
        rt_.shared().neighbors->set_mac(slot, mac);
}

void NeighborResolver::table_invalidate(bool v6, uint32_t slot) {
    if (v6)
        rt_.shared().neighbors6->invalidate(slot);
    else
        rt_.shared().neighbors->invalidate(slot);
}

bool NeighborResolver::table_mac(bool v6, uint32_t slot, uint8_t* out) const {
    return v6 ? rt_.shared().neighbors6->mac(slot, out) : rt_.shared().neighbors->mac(slot, out);
}

bool NeighborResolver::table_take_used(bool v6, uint32_t slot) {
    return v6 ? rt_.shared().neighbors6->take_used(slot) : rt_.shared().neighbors->take_used(slot);
}

uint32_t NeighborResolver::table_used(bool v6) const {
    return v6 ? rt_.shared().neighbors6->used() : rt_.shared().neighbors->used();
}

uint32_t NeighborResolver::table_capacity(bool v6) const {
    return v6 ? rt_.shared().neighbors6->capacity() : rt_.shared().neighbors->capacity();
}

std::string NeighborResolver::address(const NeighborKey& k) {
    return k.v6 ? net::to_string(net::IpAddr::from_v6(k.ip6.data())) : config::format_ipv4(k.ip4);
}

std::string NeighborResolver::port_name(uint16_t id) const {
    const PortInfo* p = rt_.find_port(id);  // VLANs included
    return p ? p->name : std::to_string(id);
}

uint16_t NeighborResolver::port_id(const std::string& name) const {
    const PortInfo* p = rt_.find_port(name);
    return p ? p->id : 0;  // the loader checked every neighbour's port name
}

void NeighborResolver::install_static() {
    uint64_t now = rte_rdtsc();
    for (const auto& n : cfg_.neighbors) {
        uint16_t id = port_id(n.port);
        NeighborKey key = n.ip.is_v4() ? NeighborKey::of4(id, n.ip.v4()) : NeighborKey::of6(id, n.ip.bytes().data());
        uint32_t slot = table_insert(key);
        if (slot == kNone)
            throw RuntimeError(std::string("arp.max_neighbors is smaller than the static ") +
                               (key.v6 ? "IPv6" : "IPv4") + " neighbours");
        table_set_mac(key.v6, slot, n.mac.bytes);
        Entry& e = entries_[key];
        e.is_static = true;
        e.resolved = true;
        e.slot = slot;
        std::memcpy(e.mac, n.mac.bytes, 6);
        e.confirmed_tsc = e.used_tsc = now;
    }
}

std::string NeighborResolver::reload_static(const std::vector<config::NeighborConfig>& next) {
    uint64_t now = rte_rdtsc();
    std::unordered_map<NeighborKey, const config::NeighborConfig*, NeighborKeyHash> wanted;
    uint32_t new_slots[2] = {0, 0};  // IPv4, IPv6
    for (const auto& n : next) {
        uint16_t id = port_id(n.port);
        NeighborKey key = n.ip.is_v4() ? NeighborKey::of4(id, n.ip.v4()) : NeighborKey::of6(id, n.ip.bytes().data());
        wanted[key] = &n;
        if (table_find(key) == kNone) ++new_slots[key.v6];
    }
    // Learned entries give way to static ones (least recently used first); static ones do not,
    // so room is checked before anything moves, in each family's table.
    uint32_t learned[2] = {0, 0};  // slots of entries that are not static after the reload
    for (const auto& [key, e] : entries_)
        if (e.slot != kNone && !wanted.count(key)) ++learned[key.v6];
    for (bool v6 : {false, true})
        if (table_used(v6) + new_slots[v6] > table_capacity(v6) + learned[v6])
            return std::string("the ") + (v6 ? "IPv6 " : "") + "neighbour table (arp.max_neighbors " +
                   std::to_string(table_capacity(v6)) + ") has no room for " + std::to_string(new_slots[v6]) +
                   " more static neighbour(s)";
    for (auto& [key, e] : entries_) {
        if (!e.is_static || wanted.count(key)) continue;
        if (e.slot != kNone) table_invalidate(key.v6, e.slot);
        e.is_static = false;
        e.resolved = false;
        e.probing = false;
        e.requests = 0;
        e.used_tsc = now;
    }
    // Learned entries about to become static are not recycled for the others.
    for (const auto& [key, n] : wanted)
        if (auto it = entries_.find(key); it != entries_.end()) it->second.is_static = true;
    for (const auto& [key, n] : wanted) {
        uint32_t slot = take_slot(key);
        if (slot == kNone) continue;  // not reached: room was checked above
        table_set_mac(key.v6, slot, n->mac.bytes);
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
    if (!inject_or_free(m)) ++held_dropped_;
}

bool NeighborResolver::inject_or_free(rte_mbuf* m) {
    if (rte_ring_sp_enqueue(rt_.workers()[0]->inject, m) == 0) return true;
    rte_pktmbuf_free(m);
    return false;
}

void NeighborResolver::erase_slot(bool v6, uint32_t slot) {
    auto& table = *rt_.shared().neighbors;
    auto& table6 = *rt_.shared().neighbors6;
    if (v6)
        table6.erase(slot);
    else
        table.erase(slot);
    if (rte_rcu_qsbr* q = rt_.shared().qsbr)
        cooling_.push_back(Cooling{v6, slot, rte_rcu_qsbr_start(q)});
    else if (v6)
        table6.release(slot);
    else
        table.release(slot);
}

void NeighborResolver::release_cooled() {
    rte_rcu_qsbr* q = rt_.shared().qsbr;
    while (!cooling_.empty() && rte_rcu_qsbr_check(q, cooling_.front().token, false)) {
        const Cooling& c = cooling_.front();
        if (c.v6)
            rt_.shared().neighbors6->release(c.slot);
        else
            rt_.shared().neighbors->release(c.slot);
        cooling_.pop_front();
    }
}

NeighborResolver::Entries::iterator NeighborResolver::free_entry(Entries::iterator it) {
    Entry& e = it->second;
    if (e.slot != kNone) erase_slot(it->first.v6, e.slot);
    held_dropped_ += e.held.size();
    free_held(e);
    return entries_.erase(it);
}

bool NeighborResolver::recycle_lru(const NeighborKey& keep) {
    auto lru = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const Entry& e = it->second;
        if (e.is_static || e.slot == kNone || it->first.v6 != keep.v6 || it->first == keep) continue;
        if (lru == entries_.end() || e.used_tsc < lru->second.used_tsc) lru = it;
    }
    if (lru == entries_.end()) return false;
    if (!recycle_logged_)
        spdlog::info("neighbour table full ({} entries): recycling the least recently used ones, first {} on {}",
                     table_capacity(keep.v6), address(lru->first), port_name(lru->first.port));
    recycle_logged_ = true;
    free_entry(lru);
    ++recycled_;
    return true;
}

uint32_t NeighborResolver::take_slot(const NeighborKey& key) {
    uint32_t slot = table_insert(key);
    if (slot != kNone) {
        if (table_used(key.v6) < table_capacity(key.v6)) recycle_logged_ = false;
        return slot;
    }
    if (!recycle_lru(key)) return kNone;
    return table_insert(key);
}

void NeighborResolver::send_request(const NeighborKey& key, const dp::PolicySnapshot& p, const uint8_t* dst) {
    if (key.v6) {
        if (send_ns(key.port, key.ip6.data(), p, dst)) {
            ++solicitations_sent_;
            if (dst) ++probes_sent_;
        }
        return;
    }
    const uint16_t port = key.port;
    const uint32_t ip = key.ip4;
    const dp::PortPolicy& pp = p.ports[port];
    if (pp.n_addrs == 0) return;
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
        if (dst) ++probes_sent_;
    }
}

bool NeighborResolver::send_arp(uint16_t port, uint32_t sip, uint32_t tip, const dp::PolicySnapshot& p,
                                const uint8_t* dst) {
    const dp::PortPolicy& pp = p.ports[port];
    rte_mbuf* m = rte_pktmbuf_alloc(rt_.pool());
    if (!m) return false;
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

bool NeighborResolver::send_unsolicited_na(uint16_t port, const uint8_t* target, const dp::PolicySnapshot& p) {
    rte_mbuf* m = rte_pktmbuf_alloc(rt_.pool());
    if (!m) return false;
    auto* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, dp::kNaFrameLen));
    if (!f) {
        rte_pktmbuf_free(m);
        return false;
    }
    uint8_t ip[16];
    std::memcpy(ip, target, 16);
    // Override: hosts that hold another MAC for the address take this one; not Solicited (RFC
    // 4861 7.2.6); Router, as in the answers to solicitations (dataplane/ndp.h).
    dp::write_neighbor_advert(f, dp::kAllNodesMac, p.ports[port].mac, ip, dp::kAllNodes,
                              dp::kNaRouter | dp::kNaOverride);
    m->port = port;
    return inject_or_free(m);
}

bool NeighborResolver::send_ns(uint16_t port, const uint8_t* target, const dp::PolicySnapshot& p, const uint8_t* dst) {
    const dp::PortPolicy& pp = p.ports[port];
    // From the port's global address on the target's prefix, else its link-local one (which
    // every port has, and every neighbour on the link can answer).
    const uint8_t* src = pp.link_local.b;
    for (unsigned i = 0; i < pp.n_addrs6; ++i) {
        uint8_t a[16], b[16];
        dp::PolicySnapshot::mask6(pp.addrs6[i].b, pp.prefix_len6[i], a);
        dp::PolicySnapshot::mask6(target, pp.prefix_len6[i], b);
        if (std::memcmp(a, b, 16) == 0 && !dp::ip6_is_link_local(target)) {
            src = pp.addrs6[i].b;
            break;
        }
    }
    // A solicitation goes to the target's solicited-node group (ff02::1:ff00:0/104 and its last
    // 24 bits) and its Ethernet address (33:33 and the group's last 32 bits); a probe goes to the
    // target itself at the MAC it has.
    uint8_t ip_dst[16];
    uint8_t mac_dst[6];
    if (dst) {
        std::memcpy(ip_dst, target, 16);
        std::memcpy(mac_dst, dst, 6);
    } else {
        static constexpr uint8_t kSolicited[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff};
        std::memcpy(ip_dst, kSolicited, 13);
        std::memcpy(ip_dst + 13, target + 13, 3);
        mac_dst[0] = mac_dst[1] = 0x33;
        std::memcpy(mac_dst + 2, ip_dst + 12, 4);
    }
    constexpr uint16_t kNsLen = 24 + 8;  // the message and the source link-layer address option
    constexpr uint16_t kFrame = sizeof(rte_ether_hdr) + 40 + kNsLen;
    rte_mbuf* m = rte_pktmbuf_alloc(rt_.pool());
    if (!m) return false;
    auto* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kFrame));
    if (!f) {
        rte_pktmbuf_free(m);
        return false;
    }
    std::memset(f, 0, kFrame);
    std::memcpy(f, mac_dst, 6);
    std::memcpy(f + 6, pp.mac, 6);
    f[12] = 0x86;
    f[13] = 0xdd;
    uint8_t* ip = f + 14;
    ip[0] = 0x60;
    ip[4] = 0;
    ip[5] = kNsLen;
    ip[6] = dp::kIp6Icmp;
    ip[7] = 255;  // RFC 4861 7.1.1: a receiver checks it was not forwarded
    std::memcpy(ip + 8, src, 16);
    std::memcpy(ip + 24, ip_dst, 16);
    uint8_t* ns = ip + 40;
    ns[0] = dp::kNdpNeighborSolicit;
    std::memcpy(ns + 8, target, 16);
    ns[24] = 1;  // source link-layer address, 8 bytes
    ns[25] = 1;
    std::memcpy(ns + 26, pp.mac, 6);
    uint16_t c = icmp6_checksum(src, ip_dst, ns, kNsLen);
    ns[2] = static_cast<uint8_t>(c >> 8);
    ns[3] = static_cast<uint8_t>(c);
    m->port = port;
    return inject_or_free(m);
}

void NeighborResolver::advertisement(rte_mbuf* m, const dp::PolicySnapshot& p, uint64_t now) {
    // The local stage checked the message (hop limit, checksum, lengths, options); only one with
    // no extension headers is read here.
    const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
    const uint32_t len = m->data_len;
    if (len < 14 + 40 + 24 || f[14 + 6] != dp::kIp6Icmp) return;
    const uint8_t* na = f + 14 + 40;
    const uint32_t na_len = std::min<uint32_t>(len - 14 - 40, uint32_t{f[14 + 4]} << 8 | f[14 + 5]);
    const bool solicited = na[4] & 0x40, override_flag = na[4] & 0x20;
    const uint8_t* mac = nullptr;
    for (uint32_t off = 24; off + 8 <= na_len && na[off + 1] != 0; off += na[off + 1] * 8u)
        if (na[off] == 2 && na[off + 1] == 1) mac = na + off + 2;
    const bool router = na[4] & 0x80;
    NeighborKey key = NeighborKey::of6(m->port, na + 8);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.is_static) return;
    Entry& e = it->second;
    // RFC 4861 7.2.5. An incomplete entry takes the target link-layer address: reachable when
    // solicited, else stale (to be probed before it is trusted).
    if (!e.resolved) {
        if (!mac) return;
        uint8_t copy[6];
        std::memcpy(copy, mac, 6);
        note_router(key, e, router);
        learn(key, copy, p, now, solicited ? Confirmation::reachable : Confirmation::stale);
        return;
    }
    const bool other_mac = mac && std::memcmp(e.mac, mac, 6) != 0;
    if (other_mac && !override_flag) {
        // Another MAC without Override does not replace the known one; it only makes a reachable
        // entry stale, so that it is probed (at the MAC it has) before it is trusted again.
        if (!e.probing && !e.stale && now - e.confirmed_tsc <= uint64_t{cfg_.arp.reachable_s} * tsc_hz_) e.stale = true;
        return;
    }
    note_router(key, e, router);
    if (other_mac) {
        // Override: the neighbour moved (a failover, a replaced NIC). Solicited confirms the new
        // MAC; unsolicited makes it stale until a probe does.
        uint8_t copy[6];
        std::memcpy(copy, mac, 6);
        learn(key, copy, p, now, solicited ? Confirmation::reachable : Confirmation::stale);
    } else if (solicited) {
        // The MAC it has, confirmed (with or without the option: an answer to a unicast probe may
        // leave it out).
        uint8_t copy[6];
        std::memcpy(copy, e.mac, 6);
        learn(key, copy, p, now, Confirmation::reachable);
    }
}

void NeighborResolver::note_router(const NeighborKey& key, Entry& e, bool router) {
    const Entry::Role role = router ? Entry::Role::router : Entry::Role::host;
    if (e.role == Entry::Role::router && role == Entry::Role::host) {
        // RFC 4861 7.2.5: a neighbour that clears the Router flag no longer forwards; a route
        // through it will black-hole until the configuration points elsewhere.
        ++routers_lost_;
        spdlog::warn("neighbour {} on {} cleared the Router flag: it says it no longer forwards", address(key),
                     port_name(key.port));
    }
    e.role = role;
}

void NeighborResolver::sighted(const NeighborKey& key, const uint8_t* mac, const dp::PolicySnapshot& p, uint64_t now) {
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.is_static) return;
    const Entry& e = it->second;
    // The MAC it has: nothing new (a request confirms nothing about reachability).
    if (e.resolved && std::memcmp(e.mac, mac, 6) == 0) return;
    uint8_t copy[6];
    std::memcpy(copy, mac, 6);
    learn(key, copy, p, now, Confirmation::stale);
}

void NeighborResolver::learn(const NeighborKey& key, const uint8_t* mac, const dp::PolicySnapshot& p, uint64_t now,
                             Confirmation how) {
    const uint16_t port = key.port;
    auto it = entries_.find(key);
    // Only answers to our own questions are learned, so a chatty segment cannot fill the table.
    if (it == entries_.end() || it->second.is_static) return;
    Entry& e = it->second;
    if (e.slot == kNone) {
        e.slot = take_slot(key);
        if (e.slot == kNone) {
            // Every slot is static (or cooling): said once until a learn finds room again.
            if (!full_logged_)
                spdlog::warn("neighbour table full ({} entries, none to recycle): cannot add {} on {}",
                             table_capacity(key.v6), address(key), port_name(port));
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
        spdlog::info("neighbour {} on {} is {}", address(key), port_name(port), config::format_mac(ma));
    } else if (std::memcmp(e.mac, mac, 6) != 0) {
        config::MacAddr old;
        std::memcpy(old.bytes, e.mac, 6);
        spdlog::info("neighbour {} on {} moved from {} to {}", address(key), port_name(port), config::format_mac(old),
                     config::format_mac(ma));
    }
    table_set_mac(key.v6, e.slot, mac);
    std::memcpy(e.mac, mac, 6);
    e.resolved = true;
    e.probing = false;
    e.requests = 0;
    e.stale = how == Confirmation::stale;
    if (how == Confirmation::reachable) e.confirmed_tsc = now;
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
    const dp::HeldNextHop& h = dp::held_of(m, rt_.shared().next_hop_field);
    uint16_t port = m->port;
    const bool v6 = rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
    NeighborKey key = v6 ? NeighborKey::of6(port, h.v6) : NeighborKey::of4(port, h.v4);
    Entry& e = entries_[key];
    e.used_tsc = now;
    uint8_t mac[6];
    if (e.slot != kNone && table_mac(v6, e.slot, mac)) {
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
        if (e.held.empty()) e.held_since_tsc = now;
        e.held.push_back(m);
        ++held_total_;
    }
    if (e.requests == 0 || now - e.last_request_tsc > cfg_.arp.retry_ms * tsc_hz_ / 1000) {
        send_request(key, p);
        e.last_request_tsc = now;
        ++e.requests;
    }
}

void NeighborResolver::poll(const dp::PolicySnapshot& p) {
    poll(p, rte_rdtsc());
}

void NeighborResolver::poll(const dp::PolicySnapshot& p, uint64_t now) {
    now_ = now;
    announcer_.update(p, now);
    // An announcement is an ARP request for the address itself, from it (RFC 5227 section 2.3);
    // in IPv6 an unsolicited Neighbor Advertisement to all nodes (RFC 4861 7.2.6).
    announcer_.run(
        now, [&](uint16_t port, uint32_t ip) { return send_arp(port, ip, ip, p); },
        [&](uint16_t port, const uint8_t* ip) { return send_unsolicited_na(port, ip, p); });
    rte_mbuf* burst[64];
    rte_ring* ring = rt_.shared().to_control;
    unsigned n;
    while ((n = rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(burst), 64, nullptr)) > 0) {
        for (unsigned i = 0; i < n; ++i) {
            rte_mbuf* m = burst[i];
            auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
            if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
                auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
                const auto& d = arp->arp_data;
                if (dp::held_of(m, rt_.shared().next_hop_field).what == dp::kHeldArpAnswer) {
                    // The local stage's answer to a request of a neighbour that moved: its new
                    // MAC is the answer's target; then the answer leaves.
                    sighted(NeighborKey::of4(m->port, rte_be_to_cpu_32(d.arp_tip)), d.arp_tha.addr_bytes, p, now);
                    inject(m);
                    continue;
                }
                const NeighborKey key = NeighborKey::of4(m->port, rte_be_to_cpu_32(d.arp_sip));
                if (arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY))
                    learn(key, d.arp_sha.addr_bytes, p, now, Confirmation::reachable);
                else
                    sighted(key, d.arp_sha.addr_bytes, p, now);
                rte_pktmbuf_free(m);
            } else if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6) &&
                       dp::held_of(m, rt_.shared().next_hop_field).what == dp::kHeldAdvertisement) {
                advertisement(m, p, now);
                rte_pktmbuf_free(m);
            } else {
                hold(m, p, now);
            }
        }
    }
}

void NeighborResolver::tick(const dp::PolicySnapshot& p) {
    tick(p, rte_rdtsc());
}

void NeighborResolver::tick(const dp::PolicySnapshot& p, uint64_t now) {
    now_ = now;
    release_cooled();
    const uint64_t retry = cfg_.arp.retry_ms * tsc_hz_ / 1000;
    const uint64_t hold_limit = kHoldSeconds * tsc_hz_;
    const uint64_t reachable = uint64_t{cfg_.arp.reachable_s} * tsc_hz_;
    const uint64_t unused = uint64_t{cfg_.arp.unused_s} * tsc_hz_;
    const unsigned probes = cfg_.arp.probes;
    for (auto it = entries_.begin(); it != entries_.end();) {
        Entry& e = it->second;
        const NeighborKey& key = it->first;
        if (e.slot != kNone && table_take_used(key.v6, e.slot)) e.used_tsc = now;
        if (e.is_static) {
            ++it;
            continue;
        }
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
                send_request(key, p);
                e.last_request_tsc = now;
                ++e.requests;
            }
        } else if (e.probing) {
            if (now - e.last_request_tsc > retry) {
                if (e.requests >= probes) {
                    // The MAC stopped answering: packets are held and ARPed for again from now.
                    table_invalidate(key.v6, e.slot);
                    e.resolved = false;
                    e.probing = false;
                    e.requests = 0;
                    ++invalidated_;
                    config::MacAddr ma;
                    std::memcpy(ma.bytes, e.mac, 6);
                    spdlog::warn("neighbour {} on {} ({}) did not answer {} probe(s): invalidated, {} again",
                                 address(key), port_name(key.port), config::format_mac(ma), probes,
                                 key.v6 ? "solicit" : "ARP");
                } else {
                    send_request(key, p, e.mac);
                    e.last_request_tsc = now;
                    ++e.requests;
                }
            }
        } else if ((e.stale || now - e.confirmed_tsc > reachable) && now - e.used_tsc <= reachable) {
            // Stale and still in use: probe it, keeping the MAC meanwhile.
            e.probing = true;
            e.requests = 1;
            e.last_request_tsc = now;
            send_request(key, p, e.mac);
        }
        ++it;
    }
}

uint32_t NeighborResolver::entries_in_table() const {
    return rt_.shared().neighbors->used();
}

uint32_t NeighborResolver::entries_in_table6() const {
    return rt_.shared().neighbors6->used();
}

std::vector<NeighborView> NeighborResolver::list() const {
    std::vector<NeighborView> out;
    const uint64_t now = now_;  // the clock of the last poll or tick
    const uint64_t reachable = uint64_t{cfg_.arp.reachable_s} * tsc_hz_;
    for (const auto& [key, e] : entries_) {
        NeighborView v;
        v.port = port_name(key.port);
        v.ip = key.v6 ? net::IpAddr::from_v6(key.ip6.data()) : net::IpAddr::from_v4(key.ip4);
        uint8_t mac[6];
        if (e.slot != kNone && table_mac(key.v6, e.slot, mac)) {
            config::MacAddr ma;
            std::memcpy(ma.bytes, mac, 6);
            v.mac = config::format_mac(ma);
        }
        v.state = e.is_static                                    ? "static"
                  : !e.resolved                                  ? "incomplete"
                  : e.probing                                    ? "probing"
                  : e.stale || now - e.confirmed_tsc > reachable ? "stale"
                                                                 : "reachable";
        v.router = e.role == Entry::Role::router ? "yes" : e.role == Entry::Role::host ? "no" : "";
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
        v.ip = a.v6 ? net::IpAddr::from_v6(a.ip6.data()) : net::IpAddr::from_v4(a.ip);
        v.what = a.what == Announcer::What::ingress_ip ? "ingress IP" : "port address";
        v.left = a.left;
        v.next_ms = a.due_tsc > now ? (a.due_tsc - now) * 1000 / tsc_hz_ : 0;
        out.push_back(v);
    }
    return out;
}

}  // namespace egw::control
