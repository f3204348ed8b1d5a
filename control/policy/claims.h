// SPDX-License-Identifier: Apache-2.0
//
// Claims: the Services (by id) that list a key (a pod, an ingress IP and port) and which of them
// owns it: the first by key, as a build from scratch in key order finds it (a pod's egress can
// leave with only one source address; an ingress port leads to only one Service). One claimant
// per key is the rule, so the first claim of each key lives in a map of one value per key
// (`First`: a FlatMap for IPv4 pods) and only keys claimed more than once have a list.
// Control thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace egw::control {

// An IPv6 address with a scope (0, or a protocol and port), as a hash key.
struct Key6 {
    uint64_t hi = 0;
    uint64_t lo = 0;
    uint32_t scope = 0;
    static Key6 of(const uint8_t* addr, uint32_t scope = 0) {
        Key6 k;
        std::memcpy(&k.hi, addr, 8);
        std::memcpy(&k.lo, addr + 8, 8);
        k.scope = scope;
        return k;
    }
    void copy_addr(uint8_t* out) const {
        std::memcpy(out, &hi, 8);
        std::memcpy(out + 8, &lo, 8);
    }
    bool operator==(const Key6&) const = default;
};

struct Key6Hash {
    size_t operator()(const Key6& k) const {
        return static_cast<size_t>((k.hi * 0x9E3779B97F4A7C15ull) ^ (k.lo * 0xC2B2AE3D27D4EB4Full) ^
                                   (uint64_t{k.scope} * 0x165667B19E3779F9ull));
    }
};

// A `First` map over std::unordered_map, for keys a FlatMap cannot hold.
template <class Key, class Hash>
class HashFirst {
public:
    static constexpr uint32_t kMissing = ~uint32_t{0};
    uint32_t find(const Key& k) const {
        auto it = map_.find(k);
        return it == map_.end() ? kMissing : it->second;
    }
    void assign(const Key& k, uint32_t id) { map_[k] = id; }
    void erase(const Key& k) { map_.erase(k); }
    void reserve(size_t n) { map_.reserve(n); }
    size_t size() const { return map_.size(); }

private:
    std::unordered_map<Key, uint32_t, Hash> map_;
};

template <class Key, class First, class Hash = std::hash<Key>>
class Claims {
public:
    static constexpr uint32_t kNone = ~uint32_t{0};

    void reserve(size_t n) { first_.reserve(n); }
    size_t size() const { return first_.size(); }

    void claim(const Key& k, uint32_t id) {
        const uint32_t first = first_.find(k);
        if (first == kNone) {
            first_.assign(k, id);
        } else if (first != id) {
            auto& more = more_[k];
            if (std::find(more.begin(), more.end(), id) == more.end()) more.push_back(id);
        }
    }

    void unclaim(const Key& k, uint32_t id) {
        auto more = more_.find(k);
        if (first_.find(k) == id) {
            if (more == more_.end()) {
                first_.erase(k);
                return;
            }
            first_.assign(k, more->second.back());
            more->second.pop_back();
        } else if (more != more_.end()) {
            std::erase(more->second, id);
        } else {
            return;
        }
        if (more->second.empty()) more_.erase(more);
    }

    // The claimant that comes first by `earlier(a, b)` (a before b); kNone when none.
    template <class Earlier>
    uint32_t owner(const Key& k, Earlier earlier) const {
        uint32_t best = first_.find(k);
        if (auto more = more_.find(k); more != more_.end())
            for (uint32_t id : more->second)
                if (earlier(id, best)) best = id;
        return best;
    }

private:
    First first_;
    std::unordered_map<Key, std::vector<uint32_t>, Hash> more_;
};

}  // namespace egw::control
