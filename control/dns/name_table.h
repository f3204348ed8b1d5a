// SPDX-License-Identifier: Apache-2.0
//
// What the DNS resolver (resolver.h) knows about each wanted name, without any I/O: when each of
// its two queries (A and AAAA) is due, which addresses the last good answers gave and until when
// they hold, and whether a name's set of addresses changed. The resolver thread feeds it answers
// and failures; the unit tests feed it the same with a clock of their own.
//
// The rules (docs/architecture.md, "DNS names"):
// - A TTL is clamped to [floor, ceiling] before use. The floor keeps a zero or tiny TTL from
//   turning into a query storm; the ceiling (30 minutes by default, as OVN-Kubernetes caps it)
//   bounds how long a long-lived answer goes unchecked.
// - A query is repeated when its answer's smallest clamped TTL runs out.
// - An address from a good answer holds for two clamped TTLs: one until the re-query, one more so
//   that a failed re-query (server down, timeout, SERVFAIL) does not drop it at once. A client in
//   the cluster that resolved the name just before our re-query uses that address as long.
// - A good answer replaces the record type's addresses at once, added and removed alike.
//   NXDOMAIN and "no records of this type" are good answers with no addresses.
// - A failed query keeps the last good addresses until they expire, and is retried after
//   retry_first, doubling up to retry_max.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/ip.h"

namespace egw::dns {

using Clock = std::chrono::steady_clock;

enum class RecordType : uint8_t { a, aaaa };
const char* to_string(RecordType t);  // "A" / "AAAA"

struct TtlPolicy {
    std::chrono::seconds floor{5};
    std::chrono::seconds ceiling{1800};
    std::chrono::seconds negative{30};    // re-query after NXDOMAIN or no records of the type
    std::chrono::seconds retry_first{2};  // re-query after the first failed query
    std::chrono::seconds retry_max{60};   // the doubling stops here
    std::chrono::seconds clamp(uint32_t ttl_seconds) const;
};

enum class LookupState : uint8_t {
    pending,     // not answered yet
    resolved,    // the last answer had addresses
    no_records,  // the last answer was NXDOMAIN or had no record of the type
    failing,     // the last query failed; the last good addresses hold until they expire
};
const char* to_string(LookupState s);

struct ResolvedAddress {
    net::IpAddr address;
    Clock::time_point expires;
    bool operator==(const ResolvedAddress&) const = default;
};

struct NameStatus {
    std::vector<ResolvedAddress> addresses;  // both families, sorted by address, each once
    LookupState a = LookupState::pending;
    LookupState aaaa = LookupState::pending;
    std::string error;  // the last failure of either query; "" once both answered well
};
using Snapshot = std::map<std::string, NameStatus>;

// A record type of a name moved from one state to another, or (from == to) lost its last address
// to expiry: what the resolver logs, once.
struct StateChange {
    std::string name;
    RecordType type;
    LookupState from;
    LookupState to;
    size_t addresses;   // of this record type, after the change
    std::string error;  // for `failing`
};

struct Answer {
    net::IpAddr address;
    uint32_t ttl_seconds;
};

class NameTable {
public:
    explicit NameTable(TtlPolicy policy) : policy_(policy) {}

    // Replaces the wanted names: new ones are due at once, names no longer wanted are forgotten.
    // True when a forgotten name had addresses (the snapshot changed).
    bool set_names(const std::vector<std::string>& names, Clock::time_point now);

    // The queries due at `now`, marked in flight so they are handed out once.
    std::vector<std::pair<std::string, RecordType>> take_due(Clock::time_point now);
    // The earliest time a query falls due or an address expires; nullopt when nothing will.
    std::optional<Clock::time_point> next_deadline() const;

    // A query's outcome. Both return true when the name's set of addresses changed. Outcomes for
    // names no longer wanted are ignored.
    bool answered(const std::string& name, RecordType type, const std::vector<Answer>& answers, Clock::time_point now);
    bool failed(const std::string& name, RecordType type, const std::string& error, Clock::time_point now);

    // Drops the addresses whose time ran out. True when any name's set of addresses changed.
    bool expire(Clock::time_point now);

    Snapshot snapshot() const;
    // The state changes since the last call, in order.
    std::vector<StateChange> take_changes();

    const TtlPolicy& policy() const { return policy_; }

private:
    struct Record {
        LookupState state = LookupState::pending;
        std::vector<ResolvedAddress> addresses;  // sorted
        Clock::time_point due{};
        bool in_flight = false;
        unsigned failures = 0;  // in a row
        std::string error;
    };
    struct Entry {
        Record a;
        Record aaaa;
        Record& of(RecordType t) { return t == RecordType::a ? a : aaaa; }
    };

    static std::vector<net::IpAddr> address_set(const Entry& e);
    void move_to(const std::string& name, RecordType type, Record& r, LookupState next);

    TtlPolicy policy_;
    std::map<std::string, Entry> entries_;
    std::vector<StateChange> changes_;
};

}  // namespace egw::dns
