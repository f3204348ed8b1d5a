// SPDX-License-Identifier: Apache-2.0
//
// ARP and IPv6 Neighbor Solicitation on the control thread: the only writer of the neighbour
// tables (IPv4: neighbor_table.h, IPv6: neighbor_table6.h).
//
// Workers hand over three kinds of mbufs through the control ring: ARP replies, Neighbor
// Advertisements, and packets whose next hop has no MAC yet (with the next hop in an mbuf
// dynfield, dataplane/held.h). Held packets wait here, a bounded number in all, while requests
// are retransmitted; when the reply comes they get their Ethernet header and go back to worker 0
// to be sent. An IPv6 next hop is asked for with a Neighbor Solicitation to its solicited-node
// multicast address (RFC 4861 7.2.2), from the port's global address on the target's prefix or
// else its link-local one, with a source link-layer address option; a probe of a stale entry is a
// unicast solicitation to the address and the MAC it has. Both families share the entry map, the
// hold queue and its bound, the timers and the aging below; each table is full on its own (both
// have arp.max_neighbors slots) and recycles its own family's entries. The gratuitous ARPs and
// unsolicited Neighbor Advertisements the Announcer decides (announcer.h) are made here too and
// leave the same way.
//
// Learned entries age, much as Linux's do: a MAC is reachable for arp.reachable_s after its last
// reply, then stale. A stale entry that packets still use is probed (unicast requests to the MAC
// it has, arp.retry_ms apart, the MAC staying in use meanwhile); arp.probes unanswered probes
// invalidate the MAC, so that the next packets are held and ARPed for again. An entry no packet
// used for arp.unused_s is freed, and so is a next hop that never answered arp.probes requests
// once nothing waits for it. A learned reply that finds the table full takes the slot of the least
// recently used learned entry. Use is what the workers mark in the table's slots (`used`), read
// and cleared at every tick. Freed slots cool for an RCU grace period before they take a key
// again (neighbor_table.h).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "config/ip.h"
#include "control/neighbor/announcer.h"
#include "dataplane/tables/policy.h"

struct rte_mbuf;

namespace egw::control {

class Runtime;

struct NeighborView {
    std::string port;
    net::IpAddr ip;
    std::string mac;     // "" while unresolved
    std::string state;   // "static", "reachable", "stale", "probing", "incomplete"
    std::string router;  // IPv6: "yes" or "no" as its last Neighbor Advertisement said; "" unknown
    unsigned held = 0;
};

struct AnnouncementView {
    std::string port;
    net::IpAddr ip;        // either family
    std::string what;      // "port address", "ingress IP"
    unsigned left = 0;     // gratuitous ARPs (IPv6: unsolicited Neighbor Advertisements) still to send
    uint64_t next_ms = 0;  // until the next one
};

// An entry's key: a port and a next hop of either family.
struct NeighborKey {
    uint16_t port = 0;
    bool v6 = false;
    uint32_t ip4 = 0;               // host order
    std::array<uint8_t, 16> ip6{};  // network order
    static NeighborKey of4(uint16_t port, uint32_t ip) {
        NeighborKey k;
        k.port = port;
        k.ip4 = ip;
        return k;
    }
    static NeighborKey of6(uint16_t port, const uint8_t* ip) {
        NeighborKey k;
        k.port = port;
        k.v6 = true;
        std::memcpy(k.ip6.data(), ip, 16);
        return k;
    }
    bool operator==(const NeighborKey&) const = default;
};
struct NeighborKeyHash {
    size_t operator()(const NeighborKey& k) const {
        uint64_t hi, lo;
        std::memcpy(&hi, k.ip6.data(), 8);
        std::memcpy(&lo, k.ip6.data() + 8, 8);
        uint64_t h = (uint64_t{k.port} << 33 | uint64_t{k.v6} << 32 | k.ip4) * 0x9E3779B97F4A7C15ull;
        h ^= hi * 0xC2B2AE3D27D4EB4Full;
        h ^= lo * 0x165667B19E3779F9ull;
        return static_cast<size_t>(h ^ (h >> 29));
    }
};

class NeighborResolver {
public:
    NeighborResolver(const config::Config& cfg, Runtime& rt);
    ~NeighborResolver();

    // Static entries of the configuration. Throws RuntimeError when the table is too small.
    void install_static();
    // After a configuration reload: makes `next` the static entries. Entries no longer listed
    // become ordinary ones, resolved by ARP again when traffic needs them; new and changed ones
    // take their MAC at once. Returns "" when done, or why not (the table has no room), and then
    // nothing has changed.
    std::string reload_static(const std::vector<config::NeighborConfig>& next);
    // Takes what the workers sent, and sends the gratuitous ARPs that are due. Call often, with the
    // snapshot the workers use: a new one may start announcements.
    void poll(const dp::PolicySnapshot& p);
    void poll(const dp::PolicySnapshot& p, uint64_t now_tsc);
    // Retransmits requests, drops packets held too long, ages entries (probes, invalidates, frees).
    void tick(const dp::PolicySnapshot& p);
    void tick(const dp::PolicySnapshot& p, uint64_t now_tsc);

    std::vector<NeighborView> list() const;
    // Gratuitous ARPs not finished yet, by port and address.
    std::vector<AnnouncementView> announcing() const;
    // Counters of both families but where one is named.
    uint64_t held_dropped() const { return held_dropped_; }
    uint64_t requests_sent() const { return requests_sent_; }            // ARP requests (IPv4)
    uint64_t solicitations_sent() const { return solicitations_sent_; }  // Neighbor Solicitations (IPv6)
    uint64_t probes_sent() const { return probes_sent_; }    // unicast probes of stale entries (in the two above)
    uint64_t invalidated() const { return invalidated_; }    // MACs dropped after unanswered probes
    uint64_t freed() const { return freed_; }                // entries freed: unused, or never answered
    uint64_t recycled() const { return recycled_; }          // least recently used entries given to a new next hop
    uint64_t routers_lost() const { return routers_lost_; }  // IPv6 neighbours that cleared the Router flag
    uint32_t entries_in_table() const;                       // IPv4 slots holding a next hop (static ones too)
    uint32_t entries_in_table6() const;                      // IPv6 slots holding a next hop (static ones too)
    const Announcer& announcer() const { return announcer_; }

private:
    struct Entry {
        bool is_static = false;
        bool resolved = false;  // the table has its MAC
        bool probing = false;   // stale and in use: unicast probes under way
        // Stale before reachable_s is up: its MAC came unconfirmed (a gratuitous ARP, an
        // unsolicited advertisement) or another MAC was advertised without Override.
        bool stale = false;
        enum class Role : uint8_t { unknown, router, host } role = Role::unknown;  // IPv6: the Router flag
        uint32_t slot = ~uint32_t{0};  // in the table; none until the first reply
        uint8_t mac[6] = {};
        uint64_t confirmed_tsc = 0;  // the last reply
        uint64_t used_tsc = 0;       // the last time packets were seen using it
        uint64_t last_request_tsc = 0;
        uint64_t held_since_tsc = 0;  // the oldest packet of `held`
        unsigned requests = 0;        // of the current round (resolution or probes)
        std::deque<rte_mbuf*> held;
    };
    using Entries = std::unordered_map<NeighborKey, Entry, NeighborKeyHash>;
    // How far a MAC that is learned may be trusted: an answer to our request (an ARP reply, a
    // solicited advertisement) makes the entry reachable; anything else leaves it stale, to be
    // probed when packets use it.
    enum class Confirmation { reachable, stale };
    // `mac` for the key, when an entry asked for it or holds it.
    void learn(const NeighborKey& key, const uint8_t* mac, const dp::PolicySnapshot& p, uint64_t now, Confirmation how);
    // An ARP request (a gratuitous one included) from a known neighbour: a MAC other than the one
    // it has is taken at once, stale (as Linux does).
    void sighted(const NeighborKey& key, const uint8_t* mac, const dp::PolicySnapshot& p, uint64_t now);
    // A Neighbor Advertisement a worker passed on, as RFC 4861 7.2.5 says (Override, Solicited,
    // Router).
    void advertisement(rte_mbuf* m, const dp::PolicySnapshot& p, uint64_t now);
    // The Router flag of an advertisement: recorded, and said when a router stops being one.
    void note_router(const NeighborKey& key, Entry& e, bool router);
    void hold(rte_mbuf* m, const dp::PolicySnapshot& p, uint64_t now);
    // An ARP request (IPv6: a Neighbor Solicitation) for the key's next hop, broadcast (multicast),
    // or to `dst` (a probe) when given.
    void send_request(const NeighborKey& key, const dp::PolicySnapshot& p, const uint8_t* dst = nullptr);
    // An ARP request on `port` from (port MAC, sip) for `tip`; false when it could not be sent.
    bool send_arp(uint16_t port, uint32_t sip, uint32_t tip, const dp::PolicySnapshot& p, const uint8_t* dst = nullptr);
    // An unsolicited Neighbor Advertisement of `target` on `port` to all nodes (the announcer's
    // IPv6 frames); false when it could not be sent.
    bool send_unsolicited_na(uint16_t port, const uint8_t* target, const dp::PolicySnapshot& p);
    // A Neighbor Solicitation on `port` for `target`; false when it could not be sent.
    bool send_ns(uint16_t port, const uint8_t* target, const dp::PolicySnapshot& p, const uint8_t* dst = nullptr);
    // A table slot for the key, recycling the least recently used learned entry of its family
    // (other than `keep`) when the table is full; kNone when nothing could be recycled.
    uint32_t take_slot(const NeighborKey& key);
    bool recycle_lru(const NeighborKey& keep);
    // Takes the entry out of the table and the map; returns the next element.
    Entries::iterator free_entry(Entries::iterator it);
    void erase_slot(bool v6, uint32_t slot);
    // The table of a family, as the writer sees it.
    uint32_t table_insert(const NeighborKey& key);
    uint32_t table_find(const NeighborKey& key) const;
    void table_set_mac(bool v6, uint32_t slot, const uint8_t* mac);
    void table_invalidate(bool v6, uint32_t slot);
    bool table_mac(bool v6, uint32_t slot, uint8_t* out) const;
    bool table_take_used(bool v6, uint32_t slot);
    uint32_t table_used(bool v6) const;
    uint32_t table_capacity(bool v6) const;
    static std::string address(const NeighborKey& key);
    void release_cooled();
    bool inject_or_free(rte_mbuf* m);
    void inject(rte_mbuf* m);
    void free_held(Entry& e);
    std::string port_name(uint16_t id) const;
    uint16_t port_id(const std::string& name) const;

    const config::Config& cfg_;
    Runtime& rt_;
    Entries entries_;
    // Erased slots waiting for the workers' grace period, oldest first.
    struct Cooling {
        bool v6;
        uint32_t slot;
        uint64_t token;  // RCU
    };
    std::deque<Cooling> cooling_;
    unsigned held_total_ = 0;
    uint64_t held_dropped_ = 0;
    uint64_t requests_sent_ = 0;
    uint64_t solicitations_sent_ = 0;
    uint64_t probes_sent_ = 0;
    uint64_t invalidated_ = 0;
    uint64_t freed_ = 0;
    uint64_t recycled_ = 0;
    uint64_t routers_lost_ = 0;
    bool full_logged_ = false;     // "table full" said once per streak of refused learns
    bool recycle_logged_ = false;  // "recycling" said once per streak of recycles
    uint64_t tsc_hz_ = 0;
    uint64_t now_ = 0;  // the TSC of the last poll or tick
    Announcer announcer_;
};

}  // namespace egw::control
