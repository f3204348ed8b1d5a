// SPDX-License-Identifier: Apache-2.0
#include "dataplane/tables/session_table.h"

#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>

#include <cstdio>
#include <cstring>

namespace egw::dp {

namespace {

rte_hash* make_hash(const char* name, uint32_t entries, int socket) {
    rte_hash_parameters params{};
    params.name = name;
    params.entries = entries;
    params.key_len = sizeof(FlowKey);
    params.hash_func = rte_hash_crc;
    params.hash_func_init_val = 0;
    params.socket_id = socket;
    // Single owner: no concurrency flags. The extendable bucket table keeps inserts from failing
    // on cuckoo path exhaustion before the pool itself is full.
    params.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
    return rte_hash_create(&params);
}

}  // namespace

SessionTable::~SessionTable() {
    if (inside_)
        rte_hash_free(inside_);
    if (outside_)
        rte_hash_free(outside_);
    rte_free(pool_);
    rte_free(free_);
}

bool SessionTable::init(const char* name, uint32_t capacity, int socket) {
    capacity_ = capacity;
    char hname[RTE_HASH_NAMESIZE];
    // rte_hash wants room for the cuckoo displacement; 25% headroom keeps inserts O(1).
    uint32_t entries = capacity + capacity / 4 + 64;
    std::snprintf(hname, sizeof hname, "%s_i", name);
    inside_ = make_hash(hname, entries, socket);
    std::snprintf(hname, sizeof hname, "%s_o", name);
    outside_ = make_hash(hname, entries, socket);
    pool_ = static_cast<Session*>(rte_zmalloc_socket("egw_sessions", sizeof(Session) * size_t{capacity}, 64, socket));
    free_ = static_cast<uint32_t*>(rte_malloc_socket("egw_session_free", sizeof(uint32_t) * size_t{capacity}, 64, socket));
    if (!inside_ || !outside_ || !pool_ || !free_)
        return false;
    for (uint32_t i = 0; i < capacity; ++i)
        free_[i] = capacity - 1 - i;
    n_free_ = capacity;
    // Measured, not estimated: rte_hash reports nothing, so count what we asked for. Buckets of
    // 8 entries (64 B) + key slots (align16(8 + 16) = 32 B each) + the free-slot ring (4 B).
    size_t hash_bytes = (size_t{entries} / 8 + 1) * 64 + size_t{entries} * 32 + size_t{entries} * 4;
    memory_bytes_ = 2 * hash_bytes + sizeof(Session) * size_t{capacity} + sizeof(uint32_t) * size_t{capacity};
    return true;
}

void SessionTable::lookup_inside(const FlowKey* const* keys, unsigned n, uint32_t* idx) const {
    void* data[kBulk];
    uint64_t hits = 0;
    rte_hash_lookup_bulk_data(inside_, reinterpret_cast<const void**>(const_cast<const FlowKey**>(keys)), n, &hits, data);
    for (unsigned i = 0; i < n; ++i)
        idx[i] = (hits >> i) & 1 ? static_cast<uint32_t>(reinterpret_cast<uintptr_t>(data[i])) : kNone;
}

void SessionTable::lookup_outside(const FlowKey* const* keys, unsigned n, uint32_t* idx) const {
    void* data[kBulk];
    uint64_t hits = 0;
    rte_hash_lookup_bulk_data(outside_, reinterpret_cast<const void**>(const_cast<const FlowKey**>(keys)), n, &hits, data);
    for (unsigned i = 0; i < n; ++i)
        idx[i] = (hits >> i) & 1 ? static_cast<uint32_t>(reinterpret_cast<uintptr_t>(data[i])) : kNone;
}

uint32_t SessionTable::find_inside(const FlowKey& k) const {
    void* data;
    return rte_hash_lookup_data(inside_, &k, &data) >= 0 ? static_cast<uint32_t>(reinterpret_cast<uintptr_t>(data)) : kNone;
}

uint32_t SessionTable::find_outside(const FlowKey& k) const {
    void* data;
    return rte_hash_lookup_data(outside_, &k, &data) >= 0 ? static_cast<uint32_t>(reinterpret_cast<uintptr_t>(data)) : kNone;
}

uint32_t SessionTable::create(const Session& s) {
    if (n_free_ == 0)
        return kNone;
    uint32_t idx = free_[--n_free_];
    FlowKey ik = inside_key(s), ok = outside_key(s);
    void* data = reinterpret_cast<void*>(uintptr_t{idx});
    if (rte_hash_add_key_data(inside_, &ik, data) < 0) {
        free_[n_free_++] = idx;
        return kNone;
    }
    if (rte_hash_add_key_data(outside_, &ok, data) < 0) {
        rte_hash_del_key(inside_, &ik);
        free_[n_free_++] = idx;
        return kNone;
    }
    pool_[idx] = s;
    pool_[idx].in_use = static_cast<uint8_t>(s.in_use | kSessionInUse);
    ++active_;
    return idx;
}

void SessionTable::destroy(uint32_t idx) {
    Session& s = pool_[idx];
    if (!(s.in_use & kSessionInUse))
        return;
    FlowKey ik = inside_key(s), ok = outside_key(s);
    rte_hash_del_key(inside_, &ik);
    rte_hash_del_key(outside_, &ok);
    s.in_use = 0;
    free_[n_free_++] = idx;
    --active_;
}

}  // namespace egw::dp
