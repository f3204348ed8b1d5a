// SPDX-License-Identifier: Apache-2.0
#include "control/dns/name_table.h"

#include <algorithm>
#include <set>

namespace egw::dns {

const char* to_string(RecordType t) {
    return t == RecordType::a ? "A" : "AAAA";
}

const char* to_string(LookupState s) {
    switch (s) {
    case LookupState::pending:
        return "pending";
    case LookupState::resolved:
        return "resolved";
    case LookupState::no_records:
        return "no records";
    case LookupState::failing:
        return "failing";
    }
    return "?";
}

std::chrono::seconds TtlPolicy::clamp(uint32_t ttl_seconds) const {
    return std::clamp(std::chrono::seconds(ttl_seconds), floor, ceiling);
}

std::vector<net::IpAddr> NameTable::address_set(const Entry& e) {
    std::vector<net::IpAddr> out;
    out.reserve(e.a.addresses.size() + e.aaaa.addresses.size());
    for (const auto* r : {&e.a, &e.aaaa})
        for (const ResolvedAddress& ra : r->addresses)
            out.push_back(ra.address);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

void NameTable::move_to(const std::string& name, RecordType type, Record& r, LookupState next) {
    // A failure that repeats is one state, however often it is retried; a failure with another
    // error is not news either (the first one was logged).
    if (r.state == next) return;
    changes_.push_back(StateChange{name, type, r.state, next, r.addresses.size(), r.error});
    r.state = next;
}

bool NameTable::set_names(const std::vector<std::string>& names, Clock::time_point now) {
    std::set<std::string> wanted(names.begin(), names.end());
    bool changed = false;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (wanted.count(it->first)) {
            ++it;
            continue;
        }
        changed |= !it->second.a.addresses.empty() || !it->second.aaaa.addresses.empty();
        it = entries_.erase(it);
    }
    for (const std::string& n : wanted) {
        auto [it, inserted] = entries_.try_emplace(n);
        if (inserted) it->second.a.due = it->second.aaaa.due = now;
    }
    return changed;
}

std::vector<std::pair<std::string, RecordType>> NameTable::take_due(Clock::time_point now) {
    std::vector<std::pair<std::string, RecordType>> out;
    for (auto& [name, e] : entries_)
        for (RecordType t : {RecordType::a, RecordType::aaaa}) {
            Record& r = e.of(t);
            if (r.in_flight || r.due > now) continue;
            r.in_flight = true;
            out.emplace_back(name, t);
        }
    return out;
}

std::optional<Clock::time_point> NameTable::next_deadline() const {
    std::optional<Clock::time_point> next;
    auto consider = [&](Clock::time_point t) {
        if (!next || t < *next) next = t;
    };
    for (const auto& [name, e] : entries_)
        for (const Record* r : {&e.a, &e.aaaa}) {
            if (!r->in_flight) consider(r->due);
            for (const ResolvedAddress& ra : r->addresses)
                consider(ra.expires);
        }
    return next;
}

bool NameTable::answered(const std::string& name, RecordType type, const std::vector<Answer>& answers,
                         Clock::time_point now) {
    auto it = entries_.find(name);
    if (it == entries_.end()) return false;
    Entry& e = it->second;
    const std::vector<net::IpAddr> before = address_set(e);
    Record& r = e.of(type);
    r.in_flight = false;
    r.failures = 0;
    r.error.clear();
    r.addresses.clear();
    std::chrono::seconds requery = policy_.negative;
    for (const Answer& ans : answers) {
        const std::chrono::seconds ttl = policy_.clamp(ans.ttl_seconds);
        requery = r.addresses.empty() ? ttl : std::min(requery, ttl);
        const Clock::time_point expires = now + 2 * ttl;
        auto same = std::find_if(r.addresses.begin(), r.addresses.end(),
                                 [&](const ResolvedAddress& x) { return x.address == ans.address; });
        if (same == r.addresses.end())
            r.addresses.push_back(ResolvedAddress{ans.address, expires});
        else
            same->expires = std::max(same->expires, expires);
    }
    std::sort(r.addresses.begin(), r.addresses.end(),
              [](const ResolvedAddress& x, const ResolvedAddress& y) { return x.address < y.address; });
    r.due = now + requery;
    move_to(name, type, r, r.addresses.empty() ? LookupState::no_records : LookupState::resolved);
    return address_set(e) != before;
}

bool NameTable::failed(const std::string& name, RecordType type, const std::string& error, Clock::time_point now) {
    auto it = entries_.find(name);
    if (it == entries_.end()) return false;
    Record& r = it->second.of(type);
    r.in_flight = false;
    r.error = error;
    const unsigned doublings = std::min(r.failures, 16u);
    ++r.failures;
    r.due = now + std::min(policy_.retry_first * (1u << doublings), policy_.retry_max);
    move_to(name, type, r, LookupState::failing);
    return false;  // the addresses stay until they expire
}

bool NameTable::expire(Clock::time_point now) {
    bool changed = false;
    for (auto& [name, e] : entries_) {
        const std::vector<net::IpAddr> before = address_set(e);
        for (RecordType t : {RecordType::a, RecordType::aaaa}) {
            Record& r = e.of(t);
            const size_t had = r.addresses.size();
            std::erase_if(r.addresses, [&](const ResolvedAddress& ra) { return ra.expires <= now; });
            // The last address of a record that cannot be re-queried ran out: worth one log line.
            if (had && r.addresses.empty()) changes_.push_back(StateChange{name, t, r.state, r.state, 0, r.error});
        }
        changed |= address_set(e) != before;
    }
    return changed;
}

Snapshot NameTable::snapshot() const {
    Snapshot out;
    for (const auto& [name, e] : entries_) {
        NameStatus& s = out[name];
        s.a = e.a.state;
        s.aaaa = e.aaaa.state;
        s.error = !e.a.error.empty() ? e.a.error : e.aaaa.error;
        for (const Record* r : {&e.a, &e.aaaa})
            s.addresses.insert(s.addresses.end(), r->addresses.begin(), r->addresses.end());
        std::sort(s.addresses.begin(), s.addresses.end(),
                  [](const ResolvedAddress& x, const ResolvedAddress& y) { return x.address < y.address; });
    }
    return out;
}

std::vector<StateChange> NameTable::take_changes() {
    return std::exchange(changes_, {});
}

}  // namespace egw::dns
