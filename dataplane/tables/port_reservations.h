// SPDX-License-Identifier: Apache-2.0
//
// NAT ports the peers' sessions hold (session sync's standby table, docs/architecture.md
// "Session sync"): their outside keys, which no local flow may be given, so that the sessions
// can be taken over with the ports they have. The control thread builds a set from its standby
// table and publishes it whole with RCU (publish.h), as it does the policy; a worker reads it only
// when allocate_port() (nat_ports.h) has found a port free in its own table, so the established
// path never looks at it, and with no standby session there is no set at all.
//
// Immutable once built: open addressing with linear probing over a power-of-two array at most
// half full, a key's slot from a multiplicative hash of its words. Protocol 0 (no session's)
// marks an empty slot.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/ipv6.h"
#include "dataplane/tables/session_table.h"

namespace egw::dp {

class PortReservations {
public:
    // Outside keys (remote, NAT address, remote port, NAT port, protocol; padding zero) as
    // BasicSessionTable::outside_key() makes them. Allocates: control thread only.
    PortReservations(const std::vector<FlowKey>& v4, const std::vector<FlowKey6>& v6) : v4_(v4), v6_(v6) {}

    bool reserved(const FlowKey& k) const { return v4_.contains(k); }
    bool reserved(const FlowKey6& k) const { return v6_.contains(k); }
    size_t size() const { return v4_.size() + v6_.size(); }

private:
    template <class K>
    class Set {
    public:
        explicit Set(const std::vector<K>& keys) {
            size_t cap = 2;
            while (cap < 2 * keys.size())
                cap <<= 1;
            slots_.assign(cap, K{});
            mask_ = cap - 1;
            for (const K& k : keys) {
                size_t i = hash(k) & mask_;
                while (slots_[i].proto != 0 && std::memcmp(&slots_[i], &k, sizeof(K)) != 0)
                    i = (i + 1) & mask_;
                if (slots_[i].proto == 0) ++size_;
                slots_[i] = k;
            }
        }
        bool contains(const K& k) const {
            if (size_ == 0) return false;
            for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
                if (slots_[i].proto == 0) return false;
                if (std::memcmp(&slots_[i], &k, sizeof(K)) == 0) return true;
            }
        }
        size_t size() const { return size_; }

    private:
        static size_t hash(const K& k) {
            static_assert(sizeof(K) % 8 == 0);
            uint64_t h = 0;
            for (size_t at = 0; at < sizeof(K); at += 8) {
                uint64_t w;
                std::memcpy(&w, reinterpret_cast<const uint8_t*>(&k) + at, 8);
                h = (h ^ w) * 0x9E3779B97F4A7C15ull;
            }
            return static_cast<size_t>(h ^ (h >> 32));
        }
        std::vector<K> slots_;
        size_t mask_ = 0;
        size_t size_ = 0;
    };

    Set<FlowKey> v4_;
    Set<FlowKey6> v6_;
};

}  // namespace egw::dp
