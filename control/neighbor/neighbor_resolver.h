// SPDX-License-Identifier: Apache-2.0
//
// ARP on the control thread: the only writer of the neighbour table.
//
// Workers hand over two kinds of mbufs through the control ring: ARP replies, and packets whose
// next hop has no MAC yet (with the next hop in an mbuf dynfield). Held packets wait here, a
// bounded number in all, while requests are retransmitted; when the reply comes they get their
// Ethernet header and go back to worker 0 to be sent. The gratuitous ARPs the Announcer decides
// (announcer.h) are made here too and leave the same way.
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

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "control/neighbor/announcer.h"
#include "dataplane/tables/policy.h"

struct rte_mbuf;

namespace egw::control {

class Runtime;

struct NeighborView {
    std::string port;
    uint32_t ip = 0;
    std::string mac;      // "" while unresolved
    std::string state;    // "static", "reachable", "stale", "probing", "incomplete"
    unsigned held = 0;
};

struct AnnouncementView {
    std::string port;
    uint32_t ip = 0;
    std::string what;     // "port address", "ingress IP"
    unsigned left = 0;    // gratuitous ARPs still to send
    uint64_t next_ms = 0; // until the next one
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
    uint64_t held_dropped() const { return held_dropped_; }
    uint64_t requests_sent() const { return requests_sent_; }
    uint64_t probes_sent() const { return probes_sent_; }      // unicast probes of stale entries (in requests_sent)
    uint64_t invalidated() const { return invalidated_; }      // MACs dropped after unanswered probes
    uint64_t freed() const { return freed_; }                  // entries freed: unused, or never answered
    uint64_t recycled() const { return recycled_; }            // least recently used entries given to a new next hop
    uint32_t entries_in_table() const;                          // slots holding a next hop (static ones too)
    const Announcer& announcer() const { return announcer_; }

private:
    struct Entry {
        bool is_static = false;
        bool resolved = false;             // the table has its MAC
        bool probing = false;              // stale and in use: unicast probes under way
        uint32_t slot = ~uint32_t{0};      // in the table; none until the first reply
        uint8_t mac[6] = {};
        uint64_t confirmed_tsc = 0;        // the last reply
        uint64_t used_tsc = 0;             // the last time packets were seen using it
        uint64_t last_request_tsc = 0;
        uint64_t held_since_tsc = 0;       // the oldest packet of `held`
        unsigned requests = 0;             // of the current round (resolution or probes)
        std::deque<rte_mbuf*> held;
    };
    using Entries = std::unordered_map<uint64_t, Entry>;
    void learn(uint16_t port, uint32_t ip, const uint8_t* mac, const dp::PolicySnapshot& p, uint64_t now);
    void hold(rte_mbuf* m, const dp::PolicySnapshot& p, uint64_t now);
    // An ARP request for `ip` on `port`, broadcast, or to `dst` (a probe) when given.
    void send_request(uint16_t port, uint32_t ip, const dp::PolicySnapshot& p, const uint8_t* dst = nullptr);
    // An ARP request on `port` from (port MAC, sip) for `tip`; false when it could not be sent.
    bool send_arp(uint16_t port, uint32_t sip, uint32_t tip, const dp::PolicySnapshot& p,
                  const uint8_t* dst = nullptr);
    // A table slot for (port, ip), recycling the least recently used learned entry (other than
    // `keep`) when the table is full; kNone when nothing could be recycled.
    uint32_t take_slot(uint16_t port, uint32_t ip, uint64_t keep);
    bool recycle_lru(uint64_t keep);
    // Takes the entry out of the table and the map; returns the next element.
    Entries::iterator free_entry(Entries::iterator it);
    void erase_slot(uint32_t slot);
    void release_cooled();
    bool inject_or_free(rte_mbuf* m);
    void inject(rte_mbuf* m);
    void free_held(Entry& e);
    std::string port_name(uint16_t id) const;
    uint16_t port_id(const std::string& name) const;

    const config::Config& cfg_;
    Runtime& rt_;
    Entries entries_;
    // Erased slots waiting for the workers' grace period: (slot, RCU token), oldest first.
    std::deque<std::pair<uint32_t, uint64_t>> cooling_;
    unsigned held_total_ = 0;
    uint64_t held_dropped_ = 0;
    uint64_t requests_sent_ = 0;
    uint64_t probes_sent_ = 0;
    uint64_t invalidated_ = 0;
    uint64_t freed_ = 0;
    uint64_t recycled_ = 0;
    bool full_logged_ = false;     // "table full" said once per streak of refused learns
    bool recycle_logged_ = false;  // "recycling" said once per streak of recycles
    uint64_t tsc_hz_ = 0;
    uint64_t now_ = 0;             // the TSC of the last poll or tick
    Announcer announcer_;
};

}  // namespace egw::control
