// SPDX-License-Identifier: Apache-2.0
//
// ARP on the control thread: the only writer of the neighbour table.
//
// Workers hand over two kinds of mbufs through the control ring: ARP replies, and packets whose
// next hop has no MAC yet (with the next hop in an mbuf dynfield). Held packets wait here, a
// bounded number in all, while requests are retransmitted; when the reply comes they get their
// Ethernet header and go back to worker 0 to be sent. The gratuitous ARPs the Announcer decides
// (announcer.h) are made here too and leave the same way.
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
    std::string state;    // "static", "reachable", "incomplete"
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
    // Retransmits requests, drops packets held too long, refreshes old entries.
    void tick(const dp::PolicySnapshot& p);

    std::vector<NeighborView> list() const;
    // Gratuitous ARPs not finished yet, by port and address.
    std::vector<AnnouncementView> announcing() const;
    uint64_t held_dropped() const { return held_dropped_; }
    uint64_t requests_sent() const { return requests_sent_; }
    const Announcer& announcer() const { return announcer_; }

private:
    struct Entry {
        bool is_static = false;
        bool resolved = false;
        uint64_t resolved_tsc = 0;
        uint64_t last_request_tsc = 0;
        unsigned requests = 0;
        std::deque<rte_mbuf*> held;
    };
    void learn(uint16_t port, uint32_t ip, const uint8_t* mac, const dp::PolicySnapshot& p);
    void hold(rte_mbuf* m, const dp::PolicySnapshot& p);
    void send_request(uint16_t port, uint32_t ip, const dp::PolicySnapshot& p);
    // An ARP request on `port` from (port MAC, sip) for `tip`; false when it could not be sent.
    bool send_arp(uint16_t port, uint32_t sip, uint32_t tip, const dp::PolicySnapshot& p);
    bool inject_or_free(rte_mbuf* m);
    void inject(rte_mbuf* m);
    void free_held(Entry& e);
    std::string port_name(uint16_t id) const;
    uint16_t port_id(const std::string& name) const;

    const config::Config& cfg_;
    Runtime& rt_;
    std::unordered_map<uint64_t, Entry> entries_;
    unsigned held_total_ = 0;
    uint64_t held_dropped_ = 0;
    uint64_t requests_sent_ = 0;
    uint64_t tsc_hz_ = 0;
    Announcer announcer_;
};

}  // namespace egw::control
