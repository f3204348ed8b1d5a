// SPDX-License-Identifier: Apache-2.0
#include "control/sync/standby.h"

#include <algorithm>
#include <cstring>

namespace egw::sync {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

uint64_t address_words(const Address& a, uint64_t h) {
    uint64_t lo, hi;
    std::memcpy(&lo, a.data(), 8);
    std::memcpy(&hi, a.data() + 8, 8);
    return mix(mix(h, lo), hi);
}

}  // namespace

size_t StandbyKeyHash::operator()(const StandbyKey& k) const {
    uint64_t h = uint64_t{k.family} << 40 | uint64_t{k.protocol} << 32 | uint64_t{k.outside.port} << 16 | k.remote.port;
    h = address_words(k.remote.addr, address_words(k.outside.addr, mix(0, h)));
    return static_cast<size_t>(h ^ (h >> 29));
}

StandbyKey standby_key(const Event& e) {
    return StandbyKey{e.family, e.protocol, e.outside, e.remote};
}

StandbyTable::StandbyTable(size_t max_sessions) : max_(max_sessions) {}

const StandbySession* StandbyTable::find(const StandbyKey& k) const {
    auto it = sessions_.find(k);
    return it == sessions_.end() ? nullptr : &it->second;
}

void StandbyTable::for_each(const std::function<void(const StandbyKey&, const StandbySession&)>& visit) const {
    for (const auto& [k, s] : sessions_)
        visit(k, s);
}

void StandbyTable::schedule(const StandbyKey& k, Clock::time_point at) {
    expiries_.push_back({at, k});
    std::push_heap(expiries_.begin(), expiries_.end(), std::greater<>());
}

void StandbyTable::erase(std::unordered_map<StandbyKey, StandbySession, StandbyKeyHash>::iterator it) {
    auto svc = per_service_.find(it->first.outside.addr);
    if (svc != per_service_.end() && --svc->second == 0) per_service_.erase(svc);
    sessions_.erase(it);
    ++version_;
}

void StandbyTable::apply(uint32_t peer, std::span<const Event> events, Clock::time_point now) {
    for (const Event& e : events) {
        StandbyKey k = standby_key(e);
        auto it = sessions_.find(k);
        if (e.kind == EventKind::remove) {
            if (it == sessions_.end()) {
                ++stats_.remove_unknown;
            } else if (e.service_epoch < it->second.service_epoch) {
                ++stats_.stale_epoch;
            } else {
                erase(it);
                ++stats_.removed;
            }
            continue;
        }
        Clock::time_point expires = now + std::chrono::milliseconds(e.time_left_ms);
        if (it == sessions_.end()) {
            // A refresh or state change of a session whose creation was lost still describes it
            // whole: it is taken as a creation.
            if (sessions_.size() >= max_) {
                ++stats_.full;
                continue;
            }
            it = sessions_.emplace(k, StandbySession{}).first;
            ++per_service_[k.outside.addr];
            ++stats_.created;
            ++version_;
        } else if (e.service_epoch < it->second.service_epoch) {
            ++stats_.stale_epoch;
            continue;
        } else {
            ++stats_.updated;
        }
        StandbySession& s = it->second;
        s.inside = e.inside;
        s.vrf = e.vrf;
        s.tcp_state = e.tcp_state;
        s.service_epoch = e.service_epoch;
        s.peer = peer;
        if (s.expires != expires) {
            s.expires = expires;
            schedule(k, expires);
        }
    }
}

size_t StandbyTable::age(Clock::time_point now) {
    size_t n = 0;
    while (!expiries_.empty() && expiries_.front().at <= now) {
        std::pop_heap(expiries_.begin(), expiries_.end(), std::greater<>());
        Expiry x = std::move(expiries_.back());
        expiries_.pop_back();
        auto it = sessions_.find(x.key);
        if (it == sessions_.end() || it->second.expires != x.at) continue;  // refreshed or removed since
        erase(it);
        ++stats_.aged;
        ++n;
    }
    // Refreshes leave their old entries behind: past twice the live sessions (and a floor, so a
    // small table is not rebuilt on every refresh), the heap is made again from the sessions.
    if (expiries_.size() > 2 * sessions_.size() + 1024) {
        expiries_.clear();
        for (const auto& [k, s] : sessions_)
            expiries_.push_back({s.expires, k});
        std::make_heap(expiries_.begin(), expiries_.end(), std::greater<>());
    }
    return n;
}

}  // namespace egw::sync
