// SPDX-License-Identifier: Apache-2.0
//
// Gratuitous ARP and unsolicited Neighbor Advertisements on the control thread: when the gateway
// starts answering ARP (IPv6: Neighbor Solicitations) for an address on a port, it says so on that
// port, so that the segment's hosts and routers replace a MAC they may still hold for it (another
// gateway's, before a failover or a host move).
//
// What is announced is read from each published snapshot, never decided apart from it: the pairs
// (port, address) the workers answer for, i.e. every port's own addresses and every served
// ingress IP on the outside ports of its Service's network (PolicySnapshot::answers_arp_for_ingress,
// answers_ndp_for_ingress), of both families. A port's IPv6 link-local address is not announced:
// it is made from the port's MAC, so no neighbour can hold another MAC for it. A pair that
// appears (at start, on an election or failover, when a Service's ingress IP or network changes,
// when a reload adds an address) is announced `arp.announce_count` times,
// `arp.announce_interval_ms` apart, the first at once; a pair that disappears is not announced any
// more. IPv4 frames are RFC 5227 ARP announcements (an ARP request whose sender and target
// address are the announced one, target MAC zero, to the broadcast address), IPv6 ones RFC 4861
// 7.2.6 unsolicited Neighbor Advertisements (to all nodes, Override set, Solicited clear, the
// target link-layer address; dataplane/ndp.h); the caller makes them and hands them to a worker,
// which only transmits. Each family is counted on its own.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "config/config.h"
#include "dataplane/tables/policy.h"

namespace egw::control {

class Announcer {
public:
    enum class What : uint8_t { port_address, ingress_ip };

    struct Pending {
        uint16_t port = 0;
        bool v6 = false;
        uint32_t ip = 0;                // IPv4, host order
        std::array<uint8_t, 16> ip6{};  // IPv6, network order
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
    using Send6 = std::function<bool(uint16_t port, const uint8_t* ip)>;

    Announcer(const config::ArpConfig& cfg, uint64_t tsc_hz) : cfg_(cfg), tsc_hz_(tsc_hz) {}

    // Looks at a snapshot: a generation not seen yet is compared with the last one's pairs.
    void update(const dp::PolicySnapshot& p, uint64_t now);
    // Sends what is due at `now`, at most kPerRun frames of both families (the rest stays due).
    void run(uint64_t now, const Send& send, const Send6& send6);

    const Stats& stats() const { return stats_; }    // gratuitous ARP (IPv4)
    const Stats& stats6() const { return stats6_; }  // unsolicited Neighbor Advertisements (IPv6)
    size_t pending_count() const { return pending_.size() - pending6_; }
    size_t pending_count6() const { return pending6_; }
    // Announcements not finished yet, by (port, family, address).
    std::vector<Pending> pending() const;

    static constexpr unsigned kPerRun = 64;

private:
    struct Key {
        uint16_t port;
        bool v6;
        std::array<uint8_t, 16> addr;  // IPv4: the first four bytes, network order
        auto operator<=>(const Key&) const = default;
    };
    static Key key(const Pending& a);

    const config::ArpConfig& cfg_;
    uint64_t tsc_hz_;
    uint64_t generation_ = 0;
    bool seen_ = false;
    std::set<Key> answered_;  // the pairs of the last snapshot
    std::map<Key, Pending> pending_;
    size_t pending6_ = 0;  // of pending_
    Stats stats_;
    Stats stats6_;
};

}  // namespace egw::control
