// SPDX-License-Identifier: Apache-2.0
//
// SessionTable: the NAPT sessions of ONE worker.
//
// Writer and reader: the owning worker lcore only. Each session belongs to exactly one worker:
// the NAT port space of every address is cut into one block per worker (see nat_ports.h), so a
// reply's destination port names the worker that made the session, and packets that arrive on
// another worker are handed to the owner through a ring before any lookup. Hence no locks and no
// lock-free hash flags: two indexes (inside->outside and outside->inside keys) over one pool
// of 64-byte sessions.
//
// The indexes are egw's own, not rte_hash: a bucket is one cache line of seven (signature,
// session index) pairs, and the key is checked against the session itself, so a hit costs the
// bucket line and the session line that translation reads anyway (rte_hash adds a key-store
// line). The hash is keyed with random multipliers drawn when the table is made (see hash() in
// session_table.cpp), so a pod cannot pick flows that pile up in one bucket chain. Buckets are kept at most half full; an insert that finds its bucket full moves on to
// the next one and counts in the full one that an entry went past it; a lookup stops at the
// first bucket that no live entry went past. Deleting empties the slot and takes the entry's
// count back off the buckets it went past, so chains shrink again as sessions come and go.
// Publication: none; other threads never touch it. The control thread asks for a copy
// (Worker::dump_*) and the worker fills it between bursts.
// Reclamation: a session is freed on the spot by its worker (expiry sweep, policy change, TCP
// close); the pool and hashes are freed at shutdown after the worker has stopped.
// Memory: one region, allocated by the control thread in init(): DPDK's heap when DPDK runs on
// hugepages, else anonymous memory on transparent huge pages (session_table.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

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
    uint32_t end[2] = {};        // the sequence number just past what the side has sent
    uint16_t max_win[2] = {};    // the largest window field the side sent outside a SYN (0: none)
    uint8_t wscale[2] = {kScaleUnknown, kScaleUnknown};  // the window scale its SYN offered
    uint8_t known = 0;           // bit side: end[side] is set
    uint8_t unused = 0;
};
static_assert(sizeof(TcpWindow) == 16);

struct alignas(64) Session {
    // All addresses and ports in network byte order, as they appear on the wire.
    uint32_t pod_ip;
    uint32_t remote_ip;
    uint16_t pod_port;
    uint16_t remote_port;
    uint32_t nat_ip;
    uint16_t nat_port;
    uint8_t proto;
    uint8_t tcp_seen;

    uint32_t service_version;  // the policy version this translation was made under
    uint16_t service_id;       // 0: default-action masquerade
    uint8_t vrf;
    uint8_t in_use;            // SessionFlags

    uint32_t epoch;             // low bits of the snapshot generation this session was last checked under
    uint64_t last_seen;         // TSC

    uint16_t out_port;          // egress port toward the remote side
    uint16_t in_port;           // egress port toward the pod; kPortUnset until the first reply
    uint32_t out_neighbor;      // NeighborTable slot or NeighborTable::kNone
    uint32_t in_neighbor;
    uint32_t out_next_hop;      // host order: gateway, or the remote itself when on-link
    uint32_t in_next_hop;       // host order

    uint16_t l3_delta;          // RFC 1624 delta pod_ip -> nat_ip (folded)
    uint16_t l4_delta;          // + pod_port -> nat_port, and the pseudo-header for TCP/UDP
};
static_assert(sizeof(Session) == 64, "a session must stay one cache line");

inline constexpr uint16_t kPortUnset = 0xffff;

enum SessionFlags : uint8_t {
    kSessionInUse = 1,
    kSessionMasquerade = 2,    // translated to the egress port's address, so bound to that port
};

class SessionTable {
public:
    static constexpr uint32_t kNone = ~uint32_t{0};
    static constexpr unsigned kBulk = 32;

    SessionTable() = default;
    SessionTable(const SessionTable&) = delete;
    SessionTable& operator=(const SessionTable&) = delete;
    ~SessionTable();

    // `name` labels the DPDK allocations. The hash key is drawn from the kernel's random source
    // (getrandom), or derived from `seed` when it is not 0 (tests that need a repeatable layout).
    // Returns false when memory or randomness runs out.
    bool init(const char* name, uint32_t capacity, int socket, uint64_t seed = 0);

    uint32_t capacity() const { return capacity_; }
    uint32_t active() const { return active_; }

    // Bulk lookups: idx[i] = session index or kNone. n <= kBulk. With `hashes`, also
    // hashes[i] = key_hash(*keys[i]), which a create of that key may reuse.
    void lookup_inside(const FlowKey* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes = nullptr) const;
    void lookup_outside(const FlowKey* const* keys, unsigned n, uint32_t* idx, uint32_t* hashes = nullptr) const;
    uint32_t find_inside(const FlowKey& k) const;
    uint32_t find_outside(const FlowKey& k) const;
    // The same when h = key_hash(k) is already known.
    uint32_t find_outside(const FlowKey& k, uint32_t h) const;

    // Creates a session from `s` (its tuple fields must be set), indexing both keys.
    // Returns kNone when the pool is full.
    uint32_t create(const Session& s);
    // The same when the keys' hashes are already known: h_inside = key_hash(inside_key(s)),
    // h_outside = key_hash(outside_key(s)) (the miss lookup and the port probe computed them).
    uint32_t create(const Session& s, uint32_t h_inside, uint32_t h_outside);
    void destroy(uint32_t idx);

    // Hints for a batch of creates; none of them changes the table. A new session costs a port
    // probe (outside bucket, and the session a signature match points to) and a pool line to
    // write, all cold in a large table: issuing these for a whole burst before the creates run
    // one by one lets the misses overlap instead of queueing behind each other.
    uint32_t key_hash(const FlowKey& k) const { return hash(k); }
    // Buckets per index: key_hash(k) & (bucket_count() - 1) is the bucket a key starts in.
    uint32_t bucket_count() const { return mask_ + 1; }
    // The outside bucket of hash `h`.
    void prefetch_outside_bucket(uint32_t h) const { __builtin_prefetch(&outside_[h & mask_], 0, 3); }
    // The session of the first signature match in that bucket; call once the bucket has arrived.
    void prefetch_outside_match(uint32_t h) const;
    // The session line the create `ahead` creates from now will fill (if no destroy comes first).
    void prefetch_free_slot(unsigned ahead) const {
        if (ahead < n_free_)
            __builtin_prefetch(&pool_[free_[n_free_ - 1 - ahead]], 1, 3);
    }

    Session& at(uint32_t idx) { return pool_[idx]; }
    const Session& at(uint32_t idx) const { return pool_[idx]; }
    // The TCP sequence space of session idx (reset when the session is created).
    TcpWindow& tcp(uint32_t idx) { return tcp_[idx]; }
    void prefetch_tcp(uint32_t idx) const { __builtin_prefetch(&tcp_[idx], 1, 3); }

    // Sessions of the pod `pod_ip` (network order) in this table, kept on create and destroy
    // for the per-pod session limit.
    uint32_t pod_sessions(uint32_t pod_ip) const;
    void prefetch_pod(uint32_t pod_ip) const { __builtin_prefetch(&pods_[pod_home(pod_ip)], 0, 3); }

    static FlowKey inside_key(const Session& s) {
        return FlowKey{s.pod_ip, s.remote_ip, s.pod_port, s.remote_port, s.proto, {}};
    }
    static FlowKey outside_key(const Session& s) {
        return FlowKey{s.remote_ip, s.nat_ip, s.remote_port, s.nat_port, s.proto, {}};
    }

    size_t memory_bytes() const { return memory_bytes_; }

private:
    static constexpr uint32_t kEmpty = ~uint32_t{0};
    static constexpr unsigned kWays = 7;
    struct alignas(64) Bucket {
        uint32_t sig[kWays];
        uint32_t idx[kWays];
        uint32_t overflowed;  // live entries that went past this bucket because it was full
        uint32_t unused;
    };
    static_assert(sizeof(Bucket) == 64);

    uint32_t hash(const FlowKey& k) const;
    static unsigned sig_matches(const Bucket& bk, uint32_t h);
    static bool inside_match(const Session& s, const FlowKey& k);
    static bool outside_match(const Session& s, const FlowKey& k);
    template <bool Inside>
    uint32_t find(const Bucket* table, const FlowKey& k, uint32_t h) const;
    template <bool Inside>
    void lookup_bulk(const Bucket* table, const FlowKey* const* keys, unsigned n, uint32_t* idx, uint32_t* h) const;
    bool allocate(const char* name, size_t bytes, int socket);
    void insert(Bucket* table, uint32_t h, uint32_t idx);
    void erase(Bucket* table, uint32_t h, uint32_t idx);
    // The pods' session counts: open addressing with linear probing over pods_mask_ + 1 slots,
    // at least twice as many as sessions, so never more than half full.
    struct PodCount {
        uint32_t pod;  // network order; 0 (never a pod: the input filter drops 0.0.0.0/8) when free
        uint32_t count;
    };
    uint32_t pod_home(uint32_t pod) const {
        return static_cast<uint32_t>((uint64_t{pod} * pod_key_) >> 32) & pods_mask_;
    }
    void pod_add(uint32_t pod);
    void pod_remove(uint32_t pod);

    uint64_t hash_key_[5] = {};  // random multipliers of hash()
    Bucket* inside_ = nullptr;
    Bucket* outside_ = nullptr;
    uint32_t mask_ = 0;
    Session* pool_ = nullptr;
    TcpWindow* tcp_ = nullptr;
    PodCount* pods_ = nullptr;
    uint32_t pods_mask_ = 0;
    uint64_t pod_key_ = 0;       // random odd multiplier of pod_home()
    uint32_t* free_ = nullptr;  // stack of free indices
    uint32_t n_free_ = 0;
    uint32_t capacity_ = 0;
    uint32_t active_ = 0;
    void* memory_ = nullptr;
    size_t memory_bytes_ = 0;
    size_t map_len_ = 0;  // length of memory_'s anonymous mapping; 0: memory_ is DPDK heap
};

}  // namespace egw::dp
