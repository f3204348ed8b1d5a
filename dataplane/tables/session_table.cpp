// SPDX-License-Identifier: Apache-2.0
#include "dataplane/tables/session_table.h"

#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include <sys/mman.h>
#include <sys/random.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

namespace egw::dp {

namespace {
// MADV_COLLAPSE, Linux's value: glibc declares it from 2.37 on. A kernel older than 6.1 refuses it
// (EINVAL), which allocate() ignores.
#if defined(MADV_COLLAPSE)
constexpr int kMadviseCollapse = MADV_COLLAPSE;
#else
constexpr int kMadviseCollapse = 25;
#endif
}  // namespace

// Both families share this code (explicitly instantiated at the end); only the key, the session
// and the pod address differ (SessionFamily4, SessionFamily6 in the header).

// Vector multiply-shift (Dietzfelbinger; Thorup, "High Speed Hashing for Integers and Strings",
// 2015): the key's four 32-bit words times four random 64-bit multipliers, plus a fifth random
// word, modulo 2^64, keep the high 32 bits. Over the choice of the multipliers that is strongly
// universal: any two distinct keys share a bucket with the probability of random ones, whatever
// keys a pod chooses, as long as it cannot see the multipliers. An unkeyed CRC32 (what this was)
// lets anyone compute colliding tuples in advance, and a CRC with a secret initial value does
// not help: CRC is affine in it, so keys that collide under one value collide under all. Four
// independent multiplications cost about what the two dependent CRC32 instructions did.
// An IPv6 key is ten words (ten multiplications), an IPv4 key four.
// (hash() itself is in the header: the input stage hashes its keys as it builds them.)

template <class F>
BasicSessionTable<F>::~BasicSessionTable() {
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
template <class F>
bool BasicSessionTable<F>::allocate(const char* name, size_t bytes, int socket) {
    constexpr size_t kHuge = size_t{2} << 20;
    if (rte_eal_has_hugepages()) {
        memory_ = rte_zmalloc_socket(name, bytes, 64, socket);
        memory_bytes_ = bytes;
        return memory_ != nullptr;
    }
    size_t len = (bytes + kHuge - 1) & ~(kHuge - 1);
    void* p = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    // Keep the 2 MiB-aligned part and give back the rest.
    auto start = reinterpret_cast<uintptr_t>(p);
    uintptr_t aligned = (start + kHuge - 1) & ~uintptr_t{kHuge - 1};
    if (aligned > start) munmap(p, aligned - start);
    if (aligned + len < start + len + kHuge)
        munmap(reinterpret_cast<void*>(aligned + len), start + len + kHuge - (aligned + len));
    memory_ = reinterpret_cast<void*>(aligned);
    memory_bytes_ = bytes;
    map_len_ = len;
    // Best effort: where transparent huge pages are off this is refused and 4 KiB pages remain.
    (void)madvise(memory_, len, MADV_HUGEPAGE);
    // Every page now, as DPDK's hugepages are: otherwise the worker takes a page fault (and the
    // kernel zeroes a page for it) each time a create reaches an untouched part of the pool,
    // which is a system call's cost on the packet path, paid while sessions are filling.
    if (madvise(memory_, len, MADV_POPULATE_WRITE) != 0) std::memset(memory_, 0, len);
    // Where the faults above fell back to 4 KiB pages (no free 2 MiB page at that moment), ask
    // the kernel to gather them into 2 MiB pages now. Which sets of a physically indexed L2 a
    // line takes depends, on 4 KiB pages, on the frames the kernel happened to hand out, which
    // differ on every start; when the lines a worker touches fill much of its L2 (10,000 flows)
    // one start's frames conflict more than the next one's (docs/performance.md, "Run to run").
    // On 2 MiB pages the sets follow the region's own layout, which is fixed (2 MiB-aligned).
    // Best effort, like MADV_HUGEPAGE: kernels before 6.1 refuse it.
    (void)madvise(memory_, len, kMadviseCollapse);
    return true;
}

template <class F>
bool BasicSessionTable<F>::init(const char* name, uint32_t capacity, int socket, uint64_t seed) {
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
    // Full size: the fewest buckets (a power of two) that hold `capacity` with at most five
    // eighths of their slots in use. Below it the arrays double at three eighths and so stay at
    // most half full; only the last size fills past half, and only when the table is nearly full.
    // (Half full at capacity, rounded up to a power of two, left a million sessions over twice
    // the buckets they need: 101 of the 203 bytes per session were bucket arrays, most of them
    // empty. docs/architecture.md "Session table memory".)
    uint64_t want = (uint64_t{capacity} * kFullLoadDen + kWays * kFullLoadNum - 1) / (kWays * kFullLoadNum);
    uint64_t buckets = 8;
    while (buckets < want)
        buckets <<= 1;
    max_mask_ = static_cast<uint32_t>(buckets - 1);
    mask_ = std::min(max_mask_, kInitialBuckets - 1);
    // Per index: the full size's part, and the half size's when the arrays will ever double.
    const uint64_t part_buckets = mask_ < max_mask_ ? buckets + buckets / 2 : buckets;
    size_t table_bytes = sizeof(Bucket) * part_buckets;
    size_t pool_bytes = sizeof(Entry) * size_t{capacity};
    size_t tcp_bytes = (sizeof(TcpWindow) * size_t{capacity} + 63) & ~size_t{63};
    // Half as many slots again as sessions, in whole lines: never full, and at most two thirds
    // full when every session is another pod's (a few pods with many sessions each is the usual
    // case). Not rounded to a power of two (pod_home() scales the hash instead of masking it),
    // which at 1,000,000 took twice the slots needed: 17 bytes per session where 12 do.
    uint64_t pod_slots = std::max<uint64_t>(16, uint64_t{capacity} + uint64_t{capacity} / 2);
    pod_slots = (pod_slots + 7) & ~uint64_t{7};
    pod_slots_ = static_cast<uint32_t>(pod_slots);
    size_t pod_bytes = (sizeof(PodCount) * pod_slots + 63) & ~size_t{63};
    size_t free_bytes = (sizeof(uint32_t) * size_t{capacity} + 63) & ~size_t{63};
    if (!allocate(name, 2 * table_bytes + pool_bytes + tcp_bytes + pod_bytes + free_bytes, socket)) return false;
    auto* base = static_cast<uint8_t*>(memory_);
    for (unsigned index = 0; index < 2; ++index) {
        auto* part = reinterpret_cast<Bucket*>(base + index * table_bytes);
        parts_[index][0] = part;
        parts_[index][1] = part + buckets;  // unused when the arrays never double
    }
    pool_ = reinterpret_cast<Entry*>(base + 2 * table_bytes);
    tcp_ = reinterpret_cast<TcpWindow*>(base + 2 * table_bytes + pool_bytes);
    pods_ = reinterpret_cast<PodCount*>(base + 2 * table_bytes + pool_bytes + tcp_bytes);
    free_ = reinterpret_cast<uint32_t*>(base + 2 * table_bytes + pool_bytes + tcp_bytes + pod_bytes);
    std::memset(pods_, 0, pod_bytes);
    // Every bucket of both parts empty: the arrays of every size start out empty, and a doubling
    // needs no clearing (and, without hugepages, takes no page faults) when it begins.
    std::memset(base, 0xff, 2 * table_bytes);
    for (unsigned index = 0; index < 2; ++index)
        for (uint64_t b = 0; b < part_buckets; ++b)
            parts_[index][0][b].overflowed = 0;
    inside_ = array_for(0, mask_);
    outside_ = array_for(1, mask_);
    for (uint32_t i = 0; i < capacity; ++i)
        free_[i] = capacity - 1 - i;
    n_free_ = capacity;
    return true;
}

template <class F>
template <bool Inside>
uint32_t BasicSessionTable<F>::find(const Key& k, uint32_t h) const {
    const Chain c = chain<Inside>(h);
    uint32_t b = h & c.mask;
    for (;;) {
        const Bucket& bk = c.table[b];
        for (unsigned m = sig_matches(bk, h); m; m &= m - 1) {
            unsigned j = static_cast<unsigned>(__builtin_ctz(m));
            if (bk.idx[j] == kEmpty) continue;
            const Entry& s = pool_[bk.idx[j]];
            if (Inside ? F::inside_match(s, k) : F::outside_match(s, k)) return bk.idx[j];
        }
        if (!bk.overflowed) return kNone;
        b = (b + 1) & c.mask;
    }
}

// Three passes so that memory loads overlap: hash and prefetch every bucket, then pick the first
// signature match and prefetch its session, then confirm against the session (falling back to
// the full walk on a signature collision or an overflowed bucket).
template <class F>
template <bool Inside>
void BasicSessionTable<F>::lookup_bulk(const Key* const* keys, unsigned n, uint32_t* idx, uint32_t* h) const {
    Home homes[kBulk];
    uint32_t cand[kBulk];
    for (unsigned i = 0; i < n; ++i)
        h[i] = begin<Inside>(*keys[i], homes[i]);
    probe_begun<Inside>(keys, n, h, homes, cand, 0, [idx](unsigned k, uint32_t found) { idx[k] = found; });
}

template <class F>
void BasicSessionTable<F>::lookup_inside(const Key* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes) const {
    uint32_t h[kBulk];
    lookup_bulk<true>(keys, n, idx, hashes ? hashes : h);
}

template <class F>
void BasicSessionTable<F>::lookup_outside(const Key* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes) const {
    uint32_t h[kBulk];
    lookup_bulk<false>(keys, n, idx, hashes ? hashes : h);
}

template <class F>
void BasicSessionTable<F>::lookup_inside_begun(const Key* const* keys, unsigned n, uint32_t* idx,
                                               const uint32_t* hashes, const Home* homes) const {
    uint32_t cand[kBulk];
    probe_begun<true>(keys, n, hashes, homes, cand, 0, [idx](unsigned k, uint32_t found) { idx[k] = found; });
}

template <class F>
void BasicSessionTable<F>::lookup_outside_begun(const Key* const* keys, unsigned n, uint32_t* idx,
                                                const uint32_t* hashes, const Home* homes) const {
    uint32_t cand[kBulk];
    probe_begun<false>(keys, n, hashes, homes, cand, 0, [idx](unsigned k, uint32_t found) { idx[k] = found; });
}

template <class F>
uint32_t BasicSessionTable<F>::find_inside(const Key& k) const {
    return find<true>(k, hash(k));
}

template <class F>
uint32_t BasicSessionTable<F>::find_outside(const Key& k) const {
    return find<false>(k, hash(k));
}

template <class F>
uint32_t BasicSessionTable<F>::find_inside(const Key& k, uint32_t h) const {
    return find<true>(k, h);
}

template <class F>
uint32_t BasicSessionTable<F>::find_outside(const Key& k, uint32_t h) const {
    return find<false>(k, h);
}

template <class F>
void BasicSessionTable<F>::insert(Chain c, uint32_t h, uint32_t idx) {
    // The arrays are never more than five eighths full, so an empty slot is always found.
    uint32_t b = h & c.mask;
    for (;;) {
        Bucket& bk = c.table[b];
        for (unsigned j = 0; j < kWays; ++j)
            if (bk.idx[j] == kEmpty) {
                bk.sig[j] = h;
                bk.idx[j] = idx;
                return;
            }
        ++bk.overflowed;
        b = (b + 1) & c.mask;
    }
}

template <class F>
void BasicSessionTable<F>::erase_slot(Chain c, uint32_t from, uint32_t b, unsigned j) {
    c.table[b].idx[j] = kEmpty;
    // The buckets this entry went past no longer overflow on its account.
    for (uint32_t k = from; k != b; k = (k + 1) & c.mask)
        --c.table[k].overflowed;
}

template <class F>
void BasicSessionTable<F>::erase(Chain c, uint32_t h, uint32_t idx) {
    const uint32_t from = h & c.mask;
    uint32_t b = from;
    for (uint32_t n = 0; n <= c.mask; ++n) {
        Bucket& bk = c.table[b];
        for (unsigned j = 0; j < kWays; ++j)
            if (bk.idx[j] == idx) {
                erase_slot(c, from, b, j);
                return;
            }
        if (!bk.overflowed) return;
        b = (b + 1) & c.mask;
    }
}

// Growth. Each step is bounded; the worker interleaves them with its bursts.
template <class F>
void BasicSessionTable<F>::make_room() {
    if (!growing()) {
        // Three eighths full: double, so that the arrays below full size are never more than half
        // full. (A quarter moved a third more entries while filling, and left a million sessions
        // spread over twice the buckets they need: docs/performance-log.md.) The arrays to come
        // are empty already: init() emptied both parts, and a doubling leaves the arrays it
        // moved away from empty again.
        if (mask_ < max_mask_ && uint64_t{active_ + 1} * 8 > uint64_t{3 * kWays} * (mask_ + 1)) {
            old_inside_ = inside_;
            old_outside_ = outside_;
            old_mask_ = mask_;
            mask_ = mask_ * 2 + 1;
            inside_ = array_for(0, mask_);
            outside_ = array_for(1, mask_);
            split_ = 0;
        }
        return;
    }
    // New entries whose old home has not moved still go to the old arrays: they must not become
    // more than half full.
    if (uint64_t{active_ + 1} * 2 > uint64_t{kWays} * (old_mask_ + 1)) {
        finish_growth();
        make_room();
    }
}

template <class F>
void BasicSessionTable<F>::grow_slice() {
    const uint32_t end = std::min(split_ + kMovePerStep, old_mask_ + 1);
    for (uint32_t h = split_; h < end; ++h) {
        move_home(Chain{old_inside_, old_mask_}, Chain{inside_, mask_}, h);
        move_home(Chain{old_outside_, old_mask_}, Chain{outside_, mask_}, h);
    }
    split_ = end;
    if (end == old_mask_ + 1) {
        old_inside_ = old_outside_ = nullptr;
        old_mask_ = split_ = 0;
    }
}

// Moves every entry whose chain starts at `home` in `from` to its chain in `to`. Such entries sit
// in `home` and in the buckets after it, up to the first one that nothing went past.
template <class F>
void BasicSessionTable<F>::move_home(Chain from, Chain to, uint32_t home) {
    uint32_t b = home;
    for (;;) {
        Bucket& bk = from.table[b];
        for (unsigned j = 0; j < kWays; ++j) {
            if (bk.idx[j] == kEmpty || (bk.sig[j] & from.mask) != home) continue;
            insert(to, bk.sig[j], bk.idx[j]);
            erase_slot(from, home, b, j);
        }
        // Erasing only changes the counts of buckets before b: this one's still says whether
        // anything of `home` lies further on.
        if (!bk.overflowed) return;
        b = (b + 1) & from.mask;
    }
}

template <class F>
uint32_t BasicSessionTable<F>::create(const Entry& s) {
    return create(s, hash(F::inside_key(s)), hash(F::outside_key(s)));
}

template <class F>
uint32_t BasicSessionTable<F>::create(const Entry& s, uint32_t h_inside, uint32_t h_outside) {
    if (n_free_ == 0) return kNone;
    make_room();
    uint32_t idx = free_[--n_free_];
    if (idx >= handed_out_) handed_out_ = idx + 1;
    pool_[idx] = s;
    pool_[idx].in_use = static_cast<uint8_t>(s.in_use | kSessionInUse);
    tcp_[idx] = TcpWindow{};
    insert(chain<true>(h_inside), h_inside, idx);
    insert(chain<false>(h_outside), h_outside, idx);
    pod_add(F::pod_of(s));
    ++active_;
    return idx;
}

template <class F>
void BasicSessionTable<F>::destroy(uint32_t idx) {
    Entry& s = pool_[idx];
    if (!(s.in_use & kSessionInUse)) return;
    const uint32_t h_inside = hash(F::inside_key(s)), h_outside = hash(F::outside_key(s));
    erase(chain<true>(h_inside), h_inside, idx);
    erase(chain<false>(h_outside), h_outside, idx);
    pod_remove(F::pod_of(s));
    if (pod_budget_) pod_budget_->release(pod_budget_key(F::pod_of(s)));
    s.in_use = 0;
    free_[n_free_++] = idx;
    --active_;
}

template <class F>
uint32_t BasicSessionTable<F>::pod_sessions(const Pod& pod) const {
    if (F::pod_free(pod)) return 0;
    for (uint32_t i = pod_home(pod);; i = pod_next(i)) {
        if (F::pod_equal(pods_[i].pod, pod)) return pods_[i].count;
        if (F::pod_free(pods_[i].pod)) return 0;
    }
}

template <class F>
void BasicSessionTable<F>::pod_add(const Pod& pod) {
    // Never full: a pod has a slot only while it has a session, and there are more slots than
    // sessions. The free marker (0.0.0.0, ::) is never a pod, so a session of it (only
    // ever made by a test of the table itself) is not counted.
    if (F::pod_free(pod)) return;
    uint32_t i = pod_home(pod);
    while (!F::pod_equal(pods_[i].pod, pod) && !F::pod_free(pods_[i].pod))
        i = pod_next(i);
    pods_[i].pod = pod;
    ++pods_[i].count;
}

template <class F>
void BasicSessionTable<F>::pod_remove(const Pod& pod) {
    if (F::pod_free(pod)) return;
    uint32_t i = pod_home(pod);
    while (!F::pod_equal(pods_[i].pod, pod)) {
        if (F::pod_free(pods_[i].pod)) return;
        i = pod_next(i);
    }
    if (--pods_[i].count) return;
    // Backward-shift deletion: later entries of the run that may live in the freed slot move
    // into it, so a lookup never stops early at a hole.
    for (uint32_t j = pod_next(i); !F::pod_free(pods_[j].pod); j = pod_next(j)) {
        uint32_t home = pod_home(pods_[j].pod);
        // Entry j may move to i when its home is not in the cyclic range (i, j].
        if (pod_distance(home, j) >= pod_distance(i, j)) {
            pods_[i] = pods_[j];
            i = j;
        }
    }
    pods_[i] = PodCount{};
}

template class BasicSessionTable<SessionFamily4>;
template class BasicSessionTable<SessionFamily6>;

}  // namespace egw::dp
