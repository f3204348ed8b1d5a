// SPDX-License-Identifier: Apache-2.0
//
// Gratuitous ARP on the control thread: when the gateway starts answering ARP for an address on a
// port, it says so on that port, so that the segment's hosts and routers replace a MAC they may
// still hold for it (another gateway's, before a failover or a host move).
//
// What is announced is read from each published snapshot, never decided apart from it: the pairs
// (port, address) the workers answer for, i.e. every port's own addresses and every served
// ingress IP on the outside ports of its Service's network (PolicySnapshot::answers_arp_for_ingress).
// A pair that appears (at start, on an election or failover, when a Service's ingress IP or
// network changes, when a reload adds an address) is announced `arp.announce_count` times,
// `arp.announce_interval_ms` apart, the first at once; a pair that disappears is not announced
// any more. The frames are RFC 5227 ARP announcements (an ARP request whose sender and target
// address are the announced one, target MAC zero, to the broadcast address); the caller makes
// them and hands them to a worker, which only transmits.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_set>
#include <vector>

#include "config/config.h"
#include "dataplane/tables/policy.h"

namespace egw::control {

class Announcer {
public:
    enum class What : uint8_t { port_address, ingress_ip };

    struct Pending {
        uint16_t port = 0;
        uint32_t ip = 0;  // host order
        What what = What::port_address;
        unsigned left = 0;     // announcements still to send
        uint64_t due_tsc = 0;  // when the next one is due
    };

    struct Stats {
        uint64_t sent = 0;     // announcements handed to a worker
        uint64_t failed = 0;   // attempts that found no mbuf or a full ring (retried)
        uint64_t started = 0;  // (port, address) pairs that began to be announced
    };

    // Sends one announcement for `ip` on `port`; false when it could not be handed over.
    using Send = std::function<bool(uint16_t port, uint32_t ip)>;

    Announcer(const config::ArpConfig& cfg, uint64_t tsc_hz) : cfg_(cfg), tsc_hz_(tsc_hz) {}

    // Looks at a snapshot: a generation not seen yet is compared with the last one's pairs.
    void update(const dp::PolicySnapshot& p, uint64_t now);
    // Sends what is due at `now`, at most kPerRun frames (the rest stays due).
    void run(uint64_t now, const Send& send);

    const Stats& stats() const { return stats_; }
    size_t pending_count() const { return pending_.size(); }
    // Announcements not finished yet, by (port, address).
    std::vector<Pending> pending() const;

    static constexpr unsigned kPerRun = 64;

private:
    static uint64_t key(uint16_t port, uint32_t ip) { return uint64_t{port} << 32 | ip; }

    const config::ArpConfig& cfg_;
    uint64_t tsc_hz_;
    uint64_t generation_ = 0;
    bool seen_ = false;
    std::unordered_set<uint64_t> answered_;  // the pairs of the last snapshot
    std::map<uint64_t, Pending> pending_;
    Stats stats_;
};

}  // namespace egw::control
