// SPDX-License-Identifier: Apache-2.0
#include "dataplane/tables/session_table.h"

#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include <sys/mman.h>
#include <sys/random.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstdint>
#include <cstring>

namespace egw::dp {

// Vector multiply-shift (Dietzfelbinger; Thorup, "High Speed Hashing for Integers and Strings",
// 2015): the key's four 32-bit words times four random 64-bit multipliers, plus a fifth random
// word, modulo 2^64, keep the high 32 bits. Over the choice of the multipliers that is strongly
// universal: any two distinct keys share a bucket with the probability of random ones, whatever
// keys a pod chooses, as long as it cannot see the multipliers. An unkeyed CRC32 (what this was)
// lets anyone compute colliding tuples in advance, and a CRC with a secret initial value does
// not help: CRC is affine in it, so keys that collide under one value collide under all. Four
// independent multiplications cost about what the two dependent CRC32 instructions did.
uint32_t SessionTable::hash(const FlowKey& k) const {
    uint32_t w[4];
    std::memcpy(w, &k, sizeof(w));
    uint64_t h = hash_key_[0] + hash_key_[1] * w[0] + hash_key_[2] * w[1] + hash_key_[3] * w[2] + hash_key_[4] * w[3];
    return static_cast<uint32_t>(h >> 32);
}

bool SessionTable::inside_match(const Session& s, const FlowKey& k) {
    return s.pod_ip == k.src && s.remote_ip == k.dst && s.pod_port == k.sport && s.remote_port == k.dport &&
           s.proto == k.proto;
}

bool SessionTable::outside_match(const Session& s, const FlowKey& k) {
    return s.remote_ip == k.src && s.nat_ip == k.dst && s.remote_port == k.sport && s.nat_port == k.dport &&
           s.proto == k.proto;
}

// Bit j set when signature j of the bucket is h: the seven signatures are compared at once (two
// SSE2 compares of four; the eighth lane is idx[0] and is masked off).
unsigned SessionTable::sig_matches(const Bucket& bk, uint32_t h) {
#if defined(__SSE2__)
    __m128i key = _mm_set1_epi32(static_cast<int>(h));
    __m128i lo = _mm_load_si128(reinterpret_cast<const __m128i*>(&bk.sig[0]));
    __m128i hi = _mm_load_si128(reinterpret_cast<const __m128i*>(&bk.sig[4]));
    unsigned m = static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lo, key)))) |
                 static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(hi, key)))) << 4;
    return m & ((1u << kWays) - 1);
#else
    unsigned m = 0;
    for (unsigned j = 0; j < kWays; ++j)
        m |= static_cast<unsigned>(bk.sig[j] == h) << j;
    return m;
#endif
}

SessionTable::~SessionTable() {
    if (map_len_)
        munmap(memory_, map_len_);
    else
        rte_free(memory_);
}

// The table's memory is one region: the two bucket arrays, the pool and the free list. With
// DPDK on hugepages it comes from DPDK's heap (NUMA-local, on those pages). Without them
// (--no-huge) DPDK's heap is made of 4 KiB pages, and at a million sessions every lookup would
// also miss the TLB: so the region is anonymous memory aligned to 2 MiB and marked for
// transparent huge pages. It is never given to a NIC, so it needs no IOVA.
bool SessionTable::allocate(const char* name, size_t bytes, int socket) {
    constexpr size_t kHuge = size_t{2} << 20;
    if (rte_eal_has_hugepages()) {
        memory_ = rte_zmalloc_socket(name, bytes, 64, socket);
        memory_bytes_ = bytes;
        return memory_ != nullptr;
    }
    size_t len = (bytes + kHuge - 1) & ~(kHuge - 1);
    void* p = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    // Keep the 2 MiB-aligned part and give back the rest.
    auto start = reinterpret_cast<uintptr_t>(p);
    uintptr_t aligned = (start + kHuge - 1) & ~uintptr_t{kHuge - 1};
    if (aligned > start)
        munmap(p, aligned - start);
    if (aligned + len < start + len + kHuge)
        munmap(reinterpret_cast<void*>(aligned + len), start + len + kHuge - (aligned + len));
    memory_ = reinterpret_cast<void*>(aligned);
    memory_bytes_ = bytes;
    map_len_ = len;
    // Best effort: where transparent huge pages are off this is refused and 4 KiB pages remain.
    (void)madvise(memory_, len, MADV_HUGEPAGE);
    return true;
}

bool SessionTable::init(const char* name, uint32_t capacity, int socket, uint64_t seed) {
    if (seed) {
        // splitmix64: five well-mixed words out of one.
        for (uint64_t& k : hash_key_) {
            seed += 0x9e3779b97f4a7c15;
            uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
            z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
            k = z ^ (z >> 31);
        }
    } else if (getrandom(hash_key_, sizeof(hash_key_), 0) != static_cast<ssize_t>(sizeof(hash_key_))) {
        return false;
    }
    capacity_ = capacity;
    // At most half of the slots in use: 2 * capacity / 7 buckets, rounded up to a power of two.
    uint64_t want = (uint64_t{capacity} * 2 + kWays - 1) / kWays;
    uint64_t buckets = 8;
    while (buckets < want)
        buckets <<= 1;
    mask_ = static_cast<uint32_t>(buckets - 1);
    size_t table_bytes = sizeof(Bucket) * buckets;
    size_t pool_bytes = sizeof(Session) * size_t{capacity};
    size_t tcp_bytes = (sizeof(TcpWindow) * size_t{capacity} + 63) & ~size_t{63};
    uint64_t pod_slots = 16;
    while (pod_slots < uint64_t{capacity} * 2)
        pod_slots <<= 1;
    pods_mask_ = static_cast<uint32_t>(pod_slots - 1);
    size_t pod_bytes = sizeof(PodCount) * pod_slots;
    size_t free_bytes = (sizeof(uint32_t) * size_t{capacity} + 63) & ~size_t{63};
    if (!allocate(name, 2 * table_bytes + pool_bytes + tcp_bytes + pod_bytes + free_bytes, socket))
        return false;
    auto* base = static_cast<uint8_t*>(memory_);
    inside_ = reinterpret_cast<Bucket*>(base);
    outside_ = reinterpret_cast<Bucket*>(base + table_bytes);
    pool_ = reinterpret_cast<Session*>(base + 2 * table_bytes);
    tcp_ = reinterpret_cast<TcpWindow*>(base + 2 * table_bytes + pool_bytes);
    pods_ = reinterpret_cast<PodCount*>(base + 2 * table_bytes + pool_bytes + tcp_bytes);
    free_ = reinterpret_cast<uint32_t*>(base + 2 * table_bytes + pool_bytes + tcp_bytes + pod_bytes);
    std::memset(pods_, 0, pod_bytes);
    pod_key_ = (hash_key_[0] ^ hash_key_[2]) | 1;
    std::memset(inside_, 0xff, table_bytes);
    std::memset(outside_, 0xff, table_bytes);
    for (uint64_t b = 0; b < buckets; ++b)
        inside_[b].overflowed = outside_[b].overflowed = 0;
    for (uint32_t i = 0; i < capacity; ++i)
        free_[i] = capacity - 1 - i;
    n_free_ = capacity;
    return true;
}

template <bool Inside>
uint32_t SessionTable::find(const Bucket* table, const FlowKey& k, uint32_t h) const {
    uint32_t b = h & mask_;
    for (;;) {
        const Bucket& bk = table[b];
        for (unsigned m = sig_matches(bk, h); m; m &= m - 1) {
            unsigned j = static_cast<unsigned>(__builtin_ctz(m));
            if (bk.idx[j] == kEmpty)
                continue;
            const Session& s = pool_[bk.idx[j]];
            if (Inside ? inside_match(s, k) : outside_match(s, k))
                return bk.idx[j];
        }
        if (!bk.overflowed)
            return kNone;
        b = (b + 1) & mask_;
    }
}

// Three passes so that memory loads overlap: hash and prefetch every bucket, then pick the first
// signature match and prefetch its session, then confirm against the session (falling back to
// the full walk on a signature collision or an overflowed bucket).
template <bool Inside>
void SessionTable::lookup_bulk(const Bucket* table, const FlowKey* const* keys, unsigned n, uint32_t* idx,
                               uint32_t* h) const {
    for (unsigned i = 0; i < n; ++i) {
        h[i] = hash(*keys[i]);
        rte_prefetch0(&table[h[i] & mask_]);
    }
    for (unsigned i = 0; i < n; ++i) {
        const Bucket& bk = table[h[i] & mask_];
        uint32_t cand = kNone;
        for (unsigned m = sig_matches(bk, h[i]); m; m &= m - 1) {
            unsigned j = static_cast<unsigned>(__builtin_ctz(m));
            if (bk.idx[j] != kEmpty) {
                cand = bk.idx[j];
                break;
            }
        }
        idx[i] = cand;
        if (cand != kNone)
            rte_prefetch0(&pool_[cand]);
    }
    for (unsigned i = 0; i < n; ++i) {
        uint32_t c = idx[i];
        if (c != kNone && (Inside ? inside_match(pool_[c], *keys[i]) : outside_match(pool_[c], *keys[i])))
            continue;
        const Bucket& bk = table[h[i] & mask_];
        idx[i] = (c == kNone && !bk.overflowed) ? kNone : find<Inside>(table, *keys[i], h[i]);
    }
}

void SessionTable::lookup_inside(const FlowKey* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes) const {
    uint32_t h[kBulk];
    lookup_bulk<true>(inside_, keys, n, idx, hashes ? hashes : h);
}

void SessionTable::lookup_outside(const FlowKey* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes) const {
    uint32_t h[kBulk];
    lookup_bulk<false>(outside_, keys, n, idx, hashes ? hashes : h);
}

void SessionTable::prefetch_outside_match(uint32_t h) const {
    const Bucket& bk = outside_[h & mask_];
    for (unsigned m = sig_matches(bk, h); m; m &= m - 1) {
        unsigned j = static_cast<unsigned>(__builtin_ctz(m));
        if (bk.idx[j] != kEmpty) {
            rte_prefetch0(&pool_[bk.idx[j]]);
            return;
        }
    }
}

uint32_t SessionTable::find_inside(const FlowKey& k) const { return find<true>(inside_, k, hash(k)); }

uint32_t SessionTable::find_outside(const FlowKey& k) const { return find<false>(outside_, k, hash(k)); }

uint32_t SessionTable::find_outside(const FlowKey& k, uint32_t h) const { return find<false>(outside_, k, h); }

void SessionTable::insert(Bucket* table, uint32_t h, uint32_t idx) {
    // The table is never more than half full, so an empty slot is always found.
    uint32_t b = h & mask_;
    for (;;) {
        Bucket& bk = table[b];
        for (unsigned j = 0; j < kWays; ++j)
            if (bk.idx[j] == kEmpty) {
                bk.sig[j] = h;
                bk.idx[j] = idx;
                return;
            }
        ++bk.overflowed;
        b = (b + 1) & mask_;
    }
}

void SessionTable::erase(Bucket* table, uint32_t h, uint32_t idx) {
    uint32_t home = h & mask_;
    uint32_t b = home;
    for (uint32_t n = 0; n <= mask_; ++n) {
        Bucket& bk = table[b];
        for (unsigned j = 0; j < kWays; ++j)
            if (bk.idx[j] == idx) {
                bk.idx[j] = kEmpty;
                // The buckets this entry went past no longer overflow on its account.
                for (uint32_t c = home; c != b; c = (c + 1) & mask_)
                    --table[c].overflowed;
                return;
            }
        if (!bk.overflowed)
            return;
        b = (b + 1) & mask_;
    }
}

uint32_t SessionTable::create(const Session& s) { return create(s, hash(inside_key(s)), hash(outside_key(s))); }

uint32_t SessionTable::create(const Session& s, uint32_t h_inside, uint32_t h_outside) {
    if (n_free_ == 0)
        return kNone;
    uint32_t idx = free_[--n_free_];
    pool_[idx] = s;
    pool_[idx].in_use = static_cast<uint8_t>(s.in_use | kSessionInUse);
    tcp_[idx] = TcpWindow{};
    insert(inside_, h_inside, idx);
    insert(outside_, h_outside, idx);
    pod_add(s.pod_ip);
    ++active_;
    return idx;
}

void SessionTable::destroy(uint32_t idx) {
    Session& s = pool_[idx];
    if (!(s.in_use & kSessionInUse))
        return;
    erase(inside_, hash(inside_key(s)), idx);
    erase(outside_, hash(outside_key(s)), idx);
    pod_remove(s.pod_ip);
    s.in_use = 0;
    free_[n_free_++] = idx;
    --active_;
}

uint32_t SessionTable::pod_sessions(uint32_t pod) const {
    if (pod == 0)
        return 0;
    for (uint32_t i = pod_home(pod);; i = (i + 1) & pods_mask_) {
        if (pods_[i].pod == pod)
            return pods_[i].count;
        if (pods_[i].pod == 0)
            return 0;
    }
}

void SessionTable::pod_add(uint32_t pod) {
    // Never full: a pod has a slot only while it has a session, and there are twice as many
    // slots as sessions. 0 marks a free slot, so a session of 0.0.0.0 (only ever made by a
    // test of the table itself) is not counted.
    if (pod == 0)
        return;
    uint32_t i = pod_home(pod);
    while (pods_[i].pod != pod && pods_[i].pod != 0)
        i = (i + 1) & pods_mask_;
    pods_[i].pod = pod;
    ++pods_[i].count;
}

void SessionTable::pod_remove(uint32_t pod) {
    if (pod == 0)
        return;
    uint32_t i = pod_home(pod);
    while (pods_[i].pod != pod) {
        if (pods_[i].pod == 0)
            return;
        i = (i + 1) & pods_mask_;
    }
    if (--pods_[i].count)
        return;
    // Backward-shift deletion: later entries of the run that may live in the freed slot move
    // into it, so a lookup never stops early at a hole.
    for (uint32_t j = (i + 1) & pods_mask_; pods_[j].pod != 0; j = (j + 1) & pods_mask_) {
        uint32_t home = pod_home(pods_[j].pod);
        // Entry j may move to i when its home is not in the cyclic range (i, j].
        if (((j - home) & pods_mask_) >= ((j - i) & pods_mask_)) {
            pods_[i] = pods_[j];
            i = j;
        }
    }
    pods_[i] = PodCount{};
}

}  // namespace egw::dp
