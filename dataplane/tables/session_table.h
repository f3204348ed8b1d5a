// SPDX-License-Identifier: Apache-2.0
//
// SessionTable and SessionTable6: the NAPT sessions of ONE worker, IPv4 and IPv6, in two tables
// of the same design (BasicSessionTable below, one instance per family).
//
// Writer and reader: the owning worker lcore only, for both tables. Each session belongs to
// exactly one worker: the NAT port space of every address, IPv4 or IPv6, is cut into one block
// per worker (see nat_ports.h), so a reply's destination port names the worker that made the
// session, and packets that arrive on another worker are handed to the owner through a ring
// before any lookup. Hence no locks and no lock-free hash flags: two indexes (inside->outside and
// outside->inside keys) over one pool of sessions (64 bytes for IPv4, 128 for IPv6).
//
// Why two tables and not one with a family-tagged key: an IPv6 key (40 bytes) and session (three
// addresses, two next hops) do not fit the IPv4 session's one cache line, and a common session
// type would make every IPv4 hit read two lines; two instances of one template keep IPv4 as it
// was and cost IPv6 one more line per hit (prefetched with the first).
//
// The indexes are egw's own, not rte_hash: a bucket is one cache line of ten (16-bit signature,
// 32-bit session index) pairs, and the key is checked against the session itself, so a hit costs the
// bucket line and the session line(s) that translation reads anyway (rte_hash adds a key-store
// line). The hash is keyed with random multipliers drawn when the table is made (see hash() in
// session_table.cpp), so a pod cannot pick flows that pile up in one bucket chain. Buckets are
// kept at most half full below the full size, and at most thirteen sixteenths full at it (with every
// session of `capacity` in use: kFullLoadNum / kFullLoadDen); an insert that finds its bucket
// full moves on to the next one and counts in the full one that an entry went past it; a lookup
// stops at the first bucket that no live entry went past. Deleting empties the slot and takes the
// entry's count back off the buckets it went past, so chains shrink again as sessions come and go.
// Growth: the bucket arrays start at kInitialBuckets and double whenever they are three eighths
// full, up to the size `capacity` needs. A few thousand sessions then live in a few hundred KiB of
// buckets instead of being spread over the tens of MiB a million-session table has (every hit
// reads its bucket: one line per packet that stays in L2, or not). A doubling is done in slices
// between bursts (grow_step()), never all at once: the old arrays' chains move over home by home
// into the new (empty) ones; meanwhile a key whose old home has not moved yet is looked up, added
// and removed in the old arrays, every other key in the new ones. An insert that would make the
// old arrays more than half full finishes the doubling on the spot, so the half-full bound holds
// whatever the rate of new sessions.
// Publication: none; other threads never touch either table. The control thread asks for a copy
// (Worker::dump_*: the listing walks the IPv4 table's slots, then the IPv6 table's) and the
// worker fills it between bursts.
// Reclamation: a session is freed on the spot by its worker (expiry sweep, policy change, TCP
// close); the pools and hashes are freed at shutdown after the worker has stopped.
// Memory: one region per table, allocated by the control thread in init(): DPDK's heap when DPDK
// runs on hugepages, else anonymous memory on transparent huge pages, populated at once so that
// no create takes a page fault (session_table.cpp). The bucket arrays of successive sizes
// alternate between two parts of it (the full size, and half of it in the pool's last slots,
// which no session reaches before the last doubling has finished), so a doubling never writes
// over the arrays it reads.
#pragma once

#include <rte_prefetch.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dataplane/ipv6.h"
#include "dataplane/tables/pod_budget.h"

namespace egw::dp {

// Five-tuple in network byte order as read from the packet. For ICMP echo the identifier is the
// "source port" on the inside and the "destination port" of the outside key; the other port is 0.
struct FlowKey {
    uint32_t src;
    uint32_t dst;
    uint16_t sport;
    uint16_t dport;
    uint8_t proto;
    uint8_t pad[3];
};
static_assert(sizeof(FlowKey) == 16);

// The TCP state of a session (dataplane/tcp_track.h; docs/architecture.md "TCP tracking"):
// established once both sides have been seen, half-closed after one FIN, closing after both FINs
// or an RST within the window; session_timeout() picks the timeout from it.
enum TcpSeen : uint8_t {
    kTcpSeenInside = 1,
    kTcpSeenOutside = 2,
    kTcpClosing = 4,
    kTcpFinInside = 8,
    kTcpFinOutside = 16,
};

// The sequence space of a TCP session, beside its Session (which is one full cache line): side 0
// is the pod, side 1 the remote. Written by tracked TCP segments only.
struct TcpWindow {
    static constexpr uint8_t kScaleUnknown = 0xff;
    uint32_t end[2] = {};      // the sequence number just past what the side has sent
    uint16_t max_win[2] = {};  // the largest window field the side sent outside a SYN (0: none)
    uint8_t wscale[2] = {kScaleUnknown, kScaleUnknown};  // the window scale its SYN offered
    uint8_t known = 0;                                   // bit side: end[side] is set
    uint8_t unused = 0;
};
static_assert(sizeof(TcpWindow) == 16);

struct alignas(64) Session {
    // All addresses and ports in network byte order, as they appear on the wire. In this order
    // each key's addresses and its ports lie side by side as they do in a FlowKey, inside (pod,
    // remote) and outside (remote, NAT) alike, so a lookup compares a key in two words.
    uint32_t pod_ip;
    uint32_t remote_ip;
    uint32_t nat_ip;
    uint16_t pod_port;
    uint16_t remote_port;
    uint16_t nat_port;
    uint8_t proto;
    uint8_t tcp_seen;

    // The policy version this translation was made under, its low kSessionVersionBits bits; the
    // byte left over is the EgressQoS mark of the packets toward the remote side
    // (tables/egress_qos.h; 0: none), which the fast path reads beside the deltas.
    uint32_t service_version : 24;
    uint32_t dscp_mark : 8;
    uint16_t service_id;  // 0: default-action masquerade
    uint8_t vrf;
    uint8_t in_use;  // SessionFlags

    uint32_t epoch;      // low bits of the snapshot generation this session was last checked under
    uint64_t last_seen;  // TSC

    uint16_t out_port;      // egress port toward the remote side
    uint16_t in_port;       // egress port toward the pod; kPortUnset until the first reply
    uint32_t out_neighbor;  // NeighborTable slot or NeighborTable::kNone
    uint32_t in_neighbor;
    uint32_t out_next_hop;  // host order: gateway, or the remote itself when on-link
    uint32_t in_next_hop;   // host order

    uint16_t l3_delta;  // RFC 1624 delta pod_ip -> nat_ip (folded)
    uint16_t l4_delta;  // + pod_port -> nat_port, and the pseudo-header for TCP/UDP
};
static_assert(sizeof(Session) == 64, "a session must stay one cache line");

inline constexpr uint16_t kPortUnset = 0xffff;

// A session keeps the low 24 bits of its policy version: a version that came round again to the
// same 24 bits would have to pass 16.7 million changes of one Service while the session lay idle.
inline constexpr unsigned kSessionVersionBits = 24;
inline constexpr uint32_t session_version(uint32_t version) {
    return version & ((uint32_t{1} << kSessionVersionBits) - 1);
}

enum SessionFlags : uint8_t {
    kSessionInUse = 1,
    kSessionMasquerade = 2,  // translated to the egress port's address, so bound to that port
};

// An IPv6 session: two cache lines, so that IPv4 keeps its one-line Session. The first line holds
// what a lookup compares and what revalidation reads (the tuple, the policy it was made under),
// the second what the rewrite and the output stage use. All addresses and ports in network
// order, the next hops too.
struct alignas(64) Session6 {
    Ip6 pod_ip;
    Ip6 remote_ip;
    Ip6 nat_ip;
    uint16_t pod_port;
    uint16_t remote_port;
    uint16_t nat_port;
    uint8_t proto;  // IPPROTO_TCP, IPPROTO_UDP or 58 (ICMPv6 echo)
    uint8_t tcp_seen;
    uint32_t service_version : 24;  // as Session's
    uint32_t dscp_mark : 8;
    uint16_t service_id;
    uint8_t vrf;
    uint8_t in_use;  // SessionFlags

    uint32_t epoch;
    uint16_t out_port;
    uint16_t in_port;       // kPortUnset until the first reply
    uint64_t last_seen;     // TSC
    uint32_t out_neighbor;  // NeighborTable6 slot or NeighborTable6::kNone
    uint32_t in_neighbor;
    uint16_t l4_delta;  // RFC 1624 delta of pod_ip, pod_port -> nat_ip, nat_port (folded): every
                        // IPv6 transport checksum, ICMPv6's too, covers the pseudo-header
    uint8_t unused[6];
    Ip6 out_next_hop;  // the gateway, or the remote itself when on-link
    Ip6 in_next_hop;
};
static_assert(sizeof(Session6) == 128, "an IPv6 session is two cache lines");

// What the table needs to know of a family: its key and session types, how a session's two keys
// are made and matched, and how its pod address is counted.
struct SessionFamily4 {
    using Key = FlowKey;
    using Entry = Session;
    using Pod = uint32_t;  // network order; 0 marks a free slot of the pod counts
    static constexpr unsigned kHashWords = sizeof(Key) / 4;
    static Key inside_key(const Entry& s) { return Key{s.pod_ip, s.remote_ip, s.pod_port, s.remote_port, s.proto, {}}; }
    static Key outside_key(const Entry& s) {
        return Key{s.remote_ip, s.nat_ip, s.remote_port, s.nat_port, s.proto, {}};
    }
    // A key against the session's addresses at `addresses` and ports at `ports` (Session's layout).
    static bool words_match(const Entry& s, size_t addresses, size_t ports, const Key& k) {
        uint64_t sa, ka;
        uint32_t sp, kp;
        __builtin_memcpy(&sa, reinterpret_cast<const uint8_t*>(&s) + addresses, 8);
        __builtin_memcpy(&sp, reinterpret_cast<const uint8_t*>(&s) + ports, 4);
        __builtin_memcpy(&ka, &k.src, 8);
        __builtin_memcpy(&kp, &k.sport, 4);
        return ((sa ^ ka) | (sp ^ kp) | uint32_t(s.proto ^ k.proto)) == 0;
    }
    static_assert(offsetof(Key, dst) == offsetof(Key, src) + 4 && offsetof(Key, dport) == offsetof(Key, sport) + 2);
    static_assert(offsetof(Entry, remote_ip) == offsetof(Entry, pod_ip) + 4 &&
                  offsetof(Entry, nat_ip) == offsetof(Entry, remote_ip) + 4 &&
                  offsetof(Entry, remote_port) == offsetof(Entry, pod_port) + 2 &&
                  offsetof(Entry, nat_port) == offsetof(Entry, remote_port) + 2);
    static bool inside_match(const Entry& s, const Key& k) {
        return words_match(s, offsetof(Entry, pod_ip), offsetof(Entry, pod_port), k);
    }
    static bool outside_match(const Entry& s, const Key& k) {
        return words_match(s, offsetof(Entry, remote_ip), offsetof(Entry, remote_port), k);
    }
    static Pod pod_of(const Entry& s) { return s.pod_ip; }
    static bool pod_free(Pod p) { return p == 0; }
    static bool pod_equal(Pod a, Pod b) { return a == b; }
    static uint32_t pod_mix(Pod p, const uint64_t* key) {
        return static_cast<uint32_t>((uint64_t{p} * ((key[0] ^ key[2]) | 1)) >> 32);
    }
};

struct SessionFamily6 {
    using Key = FlowKey6;
    using Entry = Session6;
    using Pod = Ip6;  // :: (never a pod: the input filter drops it as a source) marks a free slot
    static constexpr unsigned kHashWords = sizeof(Key) / 4;
    // One direction's key: its source and destination address and port, as its packets carry them.
    static Key key_of(const Ip6& src, const Ip6& dst, uint16_t sport, uint16_t dport, uint8_t proto) {
        Key k{};
        std::memcpy(k.src, src.b, 16);
        std::memcpy(k.dst, dst.b, 16);
        k.sport = sport;
        k.dport = dport;
        k.proto = proto;
        return k;
    }
    static bool key_is(const Key& k, const Ip6& src, const Ip6& dst, uint16_t sport, uint16_t dport, uint8_t proto) {
        return ip6_equal(src.b, k.src) && ip6_equal(dst.b, k.dst) && sport == k.sport && dport == k.dport &&
               proto == k.proto;
    }
    static Key inside_key(const Entry& s) { return key_of(s.pod_ip, s.remote_ip, s.pod_port, s.remote_port, s.proto); }
    static Key outside_key(const Entry& s) { return key_of(s.remote_ip, s.nat_ip, s.remote_port, s.nat_port, s.proto); }
    static bool inside_match(const Entry& s, const Key& k) {
        return key_is(k, s.pod_ip, s.remote_ip, s.pod_port, s.remote_port, s.proto);
    }
    static bool outside_match(const Entry& s, const Key& k) {
        return key_is(k, s.remote_ip, s.nat_ip, s.remote_port, s.nat_port, s.proto);
    }
    static Pod pod_of(const Entry& s) { return s.pod_ip; }
    static bool pod_free(const Pod& p) { return ip6_is_unspecified(p.b); }
    static bool pod_equal(const Pod& a, const Pod& b) { return ip6_equal(a.b, b.b); }
    // Vector multiply-shift of the address's four words with the table's random words.
    static uint32_t pod_mix(const Pod& p, const uint64_t* key) {
        uint32_t w[4];
        std::memcpy(w, p.b, 16);
        return static_cast<uint32_t>((key[0] + key[1] * w[0] + key[2] * w[1] + key[3] * w[2] + key[4] * w[3]) >> 32);
    }
};

template <class F>
class BasicSessionTable {
public:
    using Key = typename F::Key;
    using Entry = typename F::Entry;
    using Pod = typename F::Pod;
    static constexpr uint32_t kNone = ~uint32_t{0};
    static constexpr unsigned kBulk = 32;

    BasicSessionTable() = default;
    BasicSessionTable(const BasicSessionTable&) = delete;
    BasicSessionTable& operator=(const BasicSessionTable&) = delete;
    ~BasicSessionTable();

    // `name` labels the DPDK allocations. The hash key is drawn from the kernel's random source
    // (getrandom), or derived from `seed` when it is not 0 (tests that need a repeatable layout).
    // Returns false when memory or randomness runs out.
    bool init(const char* name, uint32_t capacity, int socket, uint64_t seed = 0);

    uint32_t capacity() const { return capacity_; }
    uint32_t active() const { return active_; }
    // Every session in use has an index below this: one past the highest slot ever handed out.
    // Freed slots are taken again before any new one, so it stays at the most sessions open
    // at once, however large `capacity` is.
    uint32_t slots_handed_out() const { return handed_out_; }

    // Bulk lookups: idx[i] = session index or kNone. n <= kBulk. With `hashes`, also
    // hashes[i] = key_hash(*keys[i]), which a create of that key may reuse.
    void lookup_inside(const Key* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes = nullptr) const;
    void lookup_outside(const Key* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes = nullptr) const;
    // A lookup begun early, as soon as the key is known (the input stage, while it goes on with
    // the rest of the burst): returns key_hash(k) and sets `home` to the key's bucket in the
    // inside or outside index, prefetched. The *_begun lookups then take those hashes and buckets
    // (hashes[i] = key_hash(*keys[i])), which have had the rest of the input stage to arrive. A
    // bucket is valid until the table next changes: the input stage hands them to the same
    // burst's lookup, before any create and outside the doubling's steps (grow_step(), between
    // bursts).
    using Home = const void*;
    uint32_t begin_inside(const Key& k, Home& home) const { return begin<true>(k, home); }
    uint32_t begin_outside(const Key& k, Home& home) const { return begin<false>(k, home); }
    void lookup_inside_begun(const Key* const* keys, unsigned n, uint32_t* idx, const uint32_t* hashes,
                             const Home* homes) const;
    void lookup_outside_begun(const Key* const* keys, unsigned n, uint32_t* idx, const uint32_t* hashes,
                              const Home* homes) const;
    // A begun lookup's second step, once its bucket has had time to arrive: the session of the
    // first signature match in it (kNone if none), prefetched. The caller passes it to
    // probe_begun() as `cand`, for which it is valid under the same rule as the bucket. Input
    // takes this step a few keys behind begin_*() (LookupQueue::cand), so that the session lines
    // are on their way while input parses the rest of the burst; at 1,000,000 sessions both lines
    // miss, and the second could not start before the first had arrived.
    uint32_t scan_begun(Home home, uint32_t h) const {
        const Bucket& bk = *static_cast<const Bucket*>(home);
        for (unsigned m = sig_matches(bk, h); m; m &= m - 1) {
            uint32_t c = bk.idx[__builtin_ctz(m)];
            if (c != kEmpty) {
                // rte_prefetch0, an asm statement: where the result is not used
                // (prefetch_outside_match()), gcc drops a loop whose only effect is
                // __builtin_prefetch.
                rte_prefetch0(&pool_[c]);
                // An IPv6 session's second line: what its rewrite and output read.
                if constexpr (sizeof(Entry) > 64) rte_prefetch0(reinterpret_cast<const uint8_t*>(&pool_[c]) + 64);
                return c;
            }
        }
        return kNone;
    }
    // The begun lookups of keys[0..n) in one index (inside or outside, as they were begun), each
    // result handed to found(k, idx) in key order as soon as it is known (idx = kNone on a miss),
    // so that the caller acts on one hit while the later sessions are still on their way:
    // scan_begun() for the keys from `scanned` on (cand[k] for the ones before, which the caller
    // scanned already), then each candidate confirmed against its key (the full walk on a
    // signature collision or an overflowed bucket). n <= kBulk.
    template <bool Inside, class Found>
    void probe_begun(const Key* const* keys, unsigned n, const uint32_t* h, const Home* homes, uint32_t* cand,
                     unsigned scanned, Found&& found) const {
        for (unsigned i = scanned; i < n; ++i)
            cand[i] = scan_begun(homes[i], h[i]);
        for (unsigned i = 0; i < n; ++i) {
            uint32_t c = cand[i];
            if (c == kNone || !(Inside ? F::inside_match(pool_[c], *keys[i]) : F::outside_match(pool_[c], *keys[i]))) {
                const Bucket& bk = *home<Inside>(h[i]);
                c = (c == kNone && !bk.overflowed) ? kNone
                    : Inside                       ? find_inside(*keys[i], h[i])
                                                   : find_outside(*keys[i], h[i]);
            }
            found(i, c);
        }
    }
    uint32_t find_inside(const Key& k) const;
    uint32_t find_outside(const Key& k) const;
    // The same when h = key_hash(k) is already known.
    uint32_t find_inside(const Key& k, uint32_t h) const;
    uint32_t find_outside(const Key& k, uint32_t h) const;

    // Creates a session from `s` (its tuple fields must be set), indexing both keys.
    // Returns kNone when the pool is full.
    uint32_t create(const Entry& s);
    // The same when the keys' hashes are already known: h_inside = key_hash(inside_key(s)),
    // h_outside = key_hash(outside_key(s)) (the miss lookup and the port probe computed them).
    uint32_t create(const Entry& s, uint32_t h_inside, uint32_t h_outside);
    void destroy(uint32_t idx);

    // Hints for a batch of creates; none of them changes the table. A new session costs a port
    // probe (outside bucket, and the session a signature match points to) and a pool line to
    // write, all cold in a large table: issuing these for a whole burst before the creates run
    // one by one lets the misses overlap instead of queueing behind each other.
    uint32_t key_hash(const Key& k) const { return hash(k); }
    // Buckets per index now: outside a doubling, key_hash(k) & (bucket_count() - 1) is the bucket
    // a key starts in. It grows with the sessions up to max_bucket_count().
    uint32_t bucket_count() const { return mask_ + 1; }
    uint32_t max_bucket_count() const { return max_mask_ + 1; }
    // The outside bucket of hash `h`.
    void prefetch_outside_bucket(uint32_t h) const { __builtin_prefetch(home<false>(h), 0, 3); }
    // The session of the first signature match in that bucket; call once the bucket has arrived.
    void prefetch_outside_match(uint32_t h) const { scan_begun(home<false>(h), h); }

    // One slice of a doubling of the bucket arrays, when one is under way (see the top of this
    // file): the owning worker calls it between bursts. Bounded: kMovePerStep homes per index.
    void grow_step() {
        if (__builtin_expect(growing(), 0)) grow_slice();
    }
    // A doubling is under way exactly while there are old arrays to empty.
    bool growing() const { return old_inside_ != nullptr; }
    // Every doubling under way, finished now (tests; an insert that needs the room).
    void finish_growth() {
        while (growing())
            grow_slice();
    }
    static constexpr uint32_t kInitialBuckets = 1024;
    // Slots per bucket (see Bucket).
    static constexpr unsigned kWays = 10;
    // The most the full-size arrays are filled with every session of `capacity` in use: thirteen
    // sixteenths, so that a capacity of 1,000,000 fits 131,072 buckets (76 % full).
    static constexpr unsigned kFullLoadNum = 13;
    static constexpr unsigned kFullLoadDen = 16;
    static constexpr uint32_t kMovePerStep = 256;
    // The session line the create `ahead` creates from now will fill (if no destroy comes first).
    // Free slots that were used before are a list linked through the slots themselves: only its
    // head is known without reading a slot (take_slot() prefetches the next one as it takes the
    // head). Slots never handed out follow one another.
    void prefetch_free_slot(unsigned ahead) const {
        if (free_head_ != kNone) {
            if (ahead == 0) __builtin_prefetch(&pool_[free_head_], 1, 3);
        } else if (handed_out_ + ahead < capacity_) {
            __builtin_prefetch(&pool_[handed_out_ + ahead], 1, 3);
        }
    }

    Entry& at(uint32_t idx) { return pool_[idx]; }
    const Entry& at(uint32_t idx) const { return pool_[idx]; }
    // Session idx's lines, toward a read (the expiry sweep's next slots).
    void prefetch_session(uint32_t idx) const {
        __builtin_prefetch(&pool_[idx], 0, 3);
        if constexpr (sizeof(Entry) > 64) __builtin_prefetch(reinterpret_cast<const uint8_t*>(&pool_[idx]) + 64, 0, 3);
    }
    // The TCP sequence space of session idx (reset when the session is created).
    TcpWindow& tcp(uint32_t idx) { return tcp_[idx]; }
    void prefetch_tcp(uint32_t idx) const { __builtin_prefetch(&tcp_[idx], 1, 3); }

    // Sessions of the pod `pod` (network order) in this table, kept on create and destroy for the
    // per-pod session limit. At most kMaxPods pods hold sessions at once: a create for one more
    // pod is refused (kNone) as a create into a full pool is. The counts are sized by pods, not
    // by sessions, since a million sessions come from far fewer pods; Kubernetes supports
    // clusters of at most 150,000 pods, and each worker's table may see every one of them.
    static constexpr uint32_t kMaxPods = 150000;
    uint32_t pods_with_sessions() const { return pods_in_use_; }
    uint32_t pod_sessions(const Pod& pod) const;
    void prefetch_pod(const Pod& pod) const { __builtin_prefetch(&pods_[pod_home(pod)], 0, 3); }
    // With several workers the per-pod limit is one budget they share (pod_budget.h): a session
    // made here was admitted against `budget` by its creator, and destroy() gives it back.
    void share_pod_budget(const PodBudget* budget) { pod_budget_ = budget; }

    static Key inside_key(const Entry& s) { return F::inside_key(s); }
    static Key outside_key(const Entry& s) { return F::outside_key(s); }

    // The table's one region (buckets, pool, TCP windows, pod counts), every page of
    // it resident from init() on.
    const void* memory() const { return memory_; }
    size_t memory_bytes() const { return memory_bytes_; }

private:
    static constexpr uint32_t kEmpty = ~uint32_t{0};
    // Ten (signature, session index) pairs in a line: 16-bit signatures (the hash's high half)
    // beside 32-bit indexes. Seven pairs of 32-bit signatures made 9.1 bytes a slot where this is
    // 6.4, and at a million sessions needed twice the buckets (a power of two of seven-slot
    // buckets cannot hold a million sessions in 131,072 of them). A signature no longer holds
    // the whole hash, so below 65,536 buckets a doubling rehashes the entries it moves from their
    // sessions (move_home()); a lookup still reads the bucket line and the session line.
    struct alignas(64) Bucket {
        uint16_t sig[kWays];
        uint32_t overflowed;  // live entries that went past this bucket because it was full
        uint32_t idx[kWays];
    };
    static_assert(sizeof(Bucket) == 64);
    static_assert(offsetof(Bucket, overflowed) == 2 * kWays);
    static uint16_t signature(uint32_t h) { return static_cast<uint16_t>(h >> 16); }

    // Keyed multiply-add over the key's 32-bit words (session_table.cpp says why).
    uint32_t hash(const Key& k) const {
        uint32_t w[F::kHashWords];
        __builtin_memcpy(w, &k, sizeof(w));
        uint64_t h = hash_key_[0];
        for (unsigned i = 0; i < F::kHashWords; ++i)
            h += hash_key_[i + 1] * w[i];
        return static_cast<uint32_t>(h >> 32);
    }
    // Bit j set when signature j of the bucket is h's: the ten signatures are compared at once
    // (eight in one SSE2 compare, the last two in a second whose other lanes are masked off).
    static unsigned sig_matches(const Bucket& bk, uint32_t h) {
#if defined(__SSE2__)
        __m128i key = _mm_set1_epi16(static_cast<short>(signature(h)));
        __m128i lo = _mm_load_si128(reinterpret_cast<const __m128i*>(&bk.sig[0]));
        __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&bk.sig[8]));
        __m128i eq = _mm_packs_epi16(_mm_cmpeq_epi16(lo, key), _mm_cmpeq_epi16(hi, key));
        return static_cast<unsigned>(_mm_movemask_epi8(eq)) & ((1u << kWays) - 1);
#else
        unsigned m = 0;
        for (unsigned j = 0; j < kWays; ++j)
            m |= static_cast<unsigned>(bk.sig[j] == signature(h)) << j;
        return m;
#endif
    }
    // A chain: the array a key's chain is in, and that array's mask.
    struct Chain {
        Bucket* table;
        uint32_t mask;
    };
    // Where the chain of hash h is: in the current arrays, or, during a doubling, in the old ones
    // while its old home has not moved yet.
    template <bool Inside>
    Chain chain(uint32_t h) const {
        if (__builtin_expect(growing(), 0) && (h & old_mask_) >= split_)
            return Chain{Inside ? old_inside_ : old_outside_, old_mask_};
        return Chain{Inside ? inside_ : outside_, mask_};
    }
    template <bool Inside>
    const Bucket* home(uint32_t h) const {
        Chain c = chain<Inside>(h);
        return &c.table[h & c.mask];
    }
    // begin_inside() and begin_outside(): the hash, and the home bucket prefetched and handed out.
    template <bool Inside>
    uint32_t begin(const Key& k, Home& found) const {
        uint32_t h = hash(k);
        const Bucket* b = home<Inside>(h);
        __builtin_prefetch(b, 0, 3);
        found = b;
        return h;
    }
    template <bool Inside>
    uint32_t find(const Key& k, uint32_t h) const;
    template <bool Inside>
    void lookup_bulk(const Key* const* keys, unsigned n, uint32_t* idx, uint32_t* h) const;
    bool allocate(const char* name, size_t bytes, int socket);
    static void insert(Chain c, uint32_t h, uint32_t idx);
    uint32_t hash_of(bool inside, uint32_t idx) const {
        return hash(inside ? F::inside_key(pool_[idx]) : F::outside_key(pool_[idx]));
    }
    static void erase(Chain c, uint32_t h, uint32_t idx);
    // Empties slot j of bucket b, whose entry started at bucket `from`.
    static void erase_slot(Chain c, uint32_t from, uint32_t b, unsigned j);

    // Growth (see the top of this file).
    // The array of one index for a mask: arrays of successive sizes alternate between the full
    // size's part of the region and the half size's.
    Bucket* array_for(unsigned index, uint32_t mask) const {
        unsigned level = static_cast<unsigned>(__builtin_ctz(max_mask_ + 1) - __builtin_ctz(mask + 1));
        return parts_[index][level & 1];
    }
    // Before an insert: starts a doubling when the arrays are 3/8 full, finishes one at once
    // when the old arrays would be more than half full.
    void make_room();
    void grow_slice();
    template <bool Inside>
    void move_home(Chain from, Chain to, uint32_t home);
    // The sessions in the home bucket `home` of `from`, toward move_home()'s rehashing.
    void prefetch_home_sessions(const Bucket* from, uint32_t home) const;
    // The pods' session counts: open addressing with linear probing over pod_slots_ slots, half
    // as many again as the pods that may hold sessions at once (pod_limit_), so never more than
    // two thirds full. A pod's home is its hash scaled to the slot count (no power of two needed).
    struct PodCount {
        Pod pod;  // F::pod_free() when the slot is free
        uint32_t count;
    };
    uint32_t pod_home(const Pod& pod) const {
        return static_cast<uint32_t>((uint64_t{F::pod_mix(pod, hash_key_)} * pod_slots_) >> 32);
    }
    uint32_t pod_next(uint32_t i) const {
        return i + 1 == pod_slots_ ? 0 : i + 1;
    }
    // Steps from slot `from` forward to slot `to`, wrapping at the end.
    uint32_t pod_distance(uint32_t from, uint32_t to) const {
        return to >= from ? to - from : to + pod_slots_ - from;
    }
    // False, and nothing counted, when `pod` is new and pod_limit_ pods hold sessions already.
    bool pod_add(const Pod& pod);
    void pod_remove(const Pod& pod);
    // A free slot, taken: the list's head (a slot freed before), else the next never handed out.
    uint32_t take_slot() {
        if (free_head_ == kNone) return handed_out_++;
        uint32_t idx = free_head_;
        __builtin_memcpy(&free_head_, &pool_[idx], sizeof(free_head_));
        if (free_head_ != kNone) __builtin_prefetch(&pool_[free_head_], 1, 3);
        return idx;
    }
    // Whether the arrays of the half size (or smaller) may still be read: until the last doubling
    // has finished.
    bool half_arrays_live() const {
        return mask_ < max_mask_ || growing();
    }

    uint64_t hash_key_[F::kHashWords + 1] = {};  // random multipliers of hash() (and pod_home())
    Bucket* inside_ = nullptr;                   // the current arrays
    Bucket* outside_ = nullptr;
    uint32_t mask_ = 0;
    uint32_t max_mask_ = 0;          // the arrays' mask at full size
    Bucket* parts_[2][2] = {};       // [inside, outside][full size, half size]
    Bucket* old_inside_ = nullptr;   // during a doubling: the arrays being emptied, their mask,
    Bucket* old_outside_ = nullptr;  // and the first of their homes that has not moved yet
    uint32_t old_mask_ = 0;
    uint32_t split_ = 0;
    Entry* pool_ = nullptr;
    TcpWindow* tcp_ = nullptr;
    PodCount* pods_ = nullptr;
    uint32_t pod_slots_ = 0;
    uint32_t pod_limit_ = 0;  // min(capacity, kMaxPods)
    uint32_t pods_in_use_ = 0;
    const PodBudget* pod_budget_ = nullptr;
    // Free slots: those below handed_out_ that were used and freed, a LIFO list linked through
    // their first four bytes (kNone ends it), then every slot from handed_out_ on.
    uint32_t free_head_ = kNone;
    uint32_t half_from_ = 0;  // the first pool slot the half size's arrays take (capacity_: none)
    uint32_t capacity_ = 0;
    uint32_t active_ = 0;
    uint32_t handed_out_ = 0;
    void* memory_ = nullptr;
    size_t memory_bytes_ = 0;
    size_t map_len_ = 0;  // length of memory_'s anonymous mapping; 0: memory_ is DPDK heap
};

// IPv4: 64-byte sessions and 16-byte keys. IPv6: 128-byte sessions and 40-byte keys, in a table
// of its own beside it (Worker::sessions6), so an IPv4 hit still reads one session line.
using SessionTable = BasicSessionTable<SessionFamily4>;
using SessionTable6 = BasicSessionTable<SessionFamily6>;
extern template class BasicSessionTable<SessionFamily4>;
extern template class BasicSessionTable<SessionFamily6>;

}  // namespace egw::dp
