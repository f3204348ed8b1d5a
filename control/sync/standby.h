// SPDX-License-Identifier: Apache-2.0
//
// The standby table: the sessions the peers host, as their events describe them, kept on this
// gateway so that it can take their Services over (docs/architecture.md, "Session sync"). A
// session is known by its outside key (remote address and port, NAT address and port,
// protocol), the key a reply is found by and the one a NAT port is allocated against; its
// Service by its NAT (outside) address. Bounded: past max_sessions a new session is refused and
// counted, an update of a known one still applies. Aged with the time left each event carried,
// counted from when it arrived here: the peer's clock never matters.
//
// Not thread safe: the sync thread owns it (transport.h), and others read it under its lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "control/sync/link.h"
#include "control/sync/wire.h"

namespace egw::sync {

struct StandbyKey {
    uint8_t family = 4;
    uint8_t protocol = 17;
    Endpoint outside, remote;
    bool operator==(const StandbyKey&) const = default;
};

struct StandbyKeyHash {
    size_t operator()(const StandbyKey& k) const;
};

struct StandbySession {
    Endpoint inside;
    uint16_t vrf = 0;
    uint8_t tcp_state = 0;
    uint32_t service_epoch = 0;
    uint32_t peer = 0;  // the gateway that sent it
    Clock::time_point expires{};
};

struct StandbyStats {
    uint64_t created = 0;         // sessions added (a create, or an update of one not known)
    uint64_t updated = 0;         // events for a session already known
    uint64_t removed = 0;         // deleted by a peer's event
    uint64_t remove_unknown = 0;  // a deletion of a session not known (its creation lost, or aged)
    uint64_t aged = 0;            // expired here with the time left they were sent with
    uint64_t full = 0;            // new sessions refused at max_sessions
    uint64_t stale_epoch = 0;     // events of an epoch older than the session's: the peer lost the Service
};

class StandbyTable {
public:
    // What one standby session costs at most: its hash node (key, session, next pointer, cached
    // hash, malloc's rounding), its bucket and its expiry entry, whose vector may hold twice what
    // it uses. Measured at 126 bytes (tests/unit/sync/test_standby.cpp); docs/operations.md sizes
    // with this bound.
    static constexpr size_t kBytesPerSession = 160;

    explicit StandbyTable(size_t max_sessions);

    // A peer's events, in the order it sent them; `now` is when they arrived.
    void apply(uint32_t peer, std::span<const Event> events, Clock::time_point now);
    // Removes what has expired by `now`; returns how many.
    size_t age(Clock::time_point now);

    size_t size() const { return sessions_.size(); }
    size_t max_sessions() const { return max_; }
    const StandbyStats& stats() const { return stats_; }
    // Sessions per Service (its NAT address).
    const std::map<Address, size_t>& per_service() const { return per_service_; }
    // Changes whenever a session is added or removed: the reserved ports changed.
    uint64_t version() const { return version_; }
    const StandbySession* find(const StandbyKey& k) const;
    void for_each(const std::function<void(const StandbyKey&, const StandbySession&)>& visit) const;

private:
    struct Expiry {
        Clock::time_point at;
        StandbyKey key;
        bool operator>(const Expiry& o) const { return at > o.at; }
    };
    void erase(std::unordered_map<StandbyKey, StandbySession, StandbyKeyHash>::iterator it);
    void schedule(const StandbyKey& k, Clock::time_point at);

    size_t max_;
    std::unordered_map<StandbyKey, StandbySession, StandbyKeyHash> sessions_;
    // A min-heap by expiry, lazily cleaned: an entry whose session has since been refreshed,
    // removed or replaced is skipped when it comes up (and the heap is rebuilt when such entries
    // outnumber the live ones).
    std::vector<Expiry> expiries_;
    std::map<Address, size_t> per_service_;
    StandbyStats stats_;
    uint64_t version_ = 0;
};

// The outside key of an event's session.
StandbyKey standby_key(const Event& e);

}  // namespace egw::sync
