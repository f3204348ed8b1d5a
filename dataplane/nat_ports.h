// SPDX-License-Identifier: Apache-2.0
//
// NAT ports: how the configured range is cut into one block per worker, and how a worker picks
// a free port of its block for a new session.
//
// Ownership: the range [nat_port_min, nat_port_max] is split into n_workers equal blocks (the
// last worker also takes the remainder), so a reply's destination port names the worker that
// made its session (handoff.cpp). Every NAT address has the whole range toward every remote.
//
// Allocation is endpoint-dependent: a port is free when (remote, NAT address, remote port,
// port) is not an outside key of the worker's table. The probe tries the pod's own port first
// when it lies in this worker's block, then pseudo-random ports of the block seeded by the tuple:
// unlike a linear walk this does not pile up behind runs of taken ports, so the expected number
// of probes stays 1/(1 - fill) and kProbeAttempts misses in a row only happen when the block is
// really full. The slow path's prefetch hints use the same sequence, so they load what the
// probe reads.
//
// Service ports: on a NAT address that is also a served ingress IP, a port one of its Services
// lists for the protocol (the snapshot's `ingress_ports`) is never given out, so that a packet
// from outside to that address and port is always ingress, never a reply (ingress.h), and any
// worker can forward it without asking the block's owner (handoff.cpp). A session that already
// holds such a port when a Service starts listing it keeps it until it ends
// (docs/architecture.md, "Ownership and steering").
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/stages.h"

namespace egw::dp {

inline constexpr unsigned kProbeAttempts = 64;

// Size of every worker's block of the range.
inline uint32_t port_block_size(const DataplaneShared& sh) {
    uint32_t span = uint32_t{sh.nat_port_max} - sh.nat_port_min + 1;
    return span / sh.n_workers;
}

inline bool pod_port_in_block(const Worker& w, uint16_t pod_port_be) {
    uint16_t want = rte_be_to_cpu_16(pod_port_be);
    return want >= w.nat_port_lo && want <= w.nat_port_hi;
}

inline uint32_t probe_seed(uint32_t pod_ip, uint16_t pod_port, uint32_t remote_ip, uint16_t remote_port) {
    uint32_t x = (pod_ip * 0x9E3779B1u) ^ (uint32_t{pod_port} * 0x85EBCA6Bu) ^ (remote_ip * 0xC2B2AE35u) ^ remote_port ^
                 0x27d4eb2fu;
    return x == 0 ? 1 : x;  // xorshift never leaves zero
}

// The next random candidate, in network order.
inline uint16_t probe_next(const Worker& w, uint32_t& x) {
    uint32_t span = uint32_t{w.nat_port_hi} - w.nat_port_lo + 1;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return be16(static_cast<uint16_t>(w.nat_port_lo + x % span));
}

// Whether `port` (network order) of `proto` on `nat_ip` is a Service's port on its ingress IP.
// ICMP identifiers are no Service's. Asked only when some Service lists ports (any_service_ports),
// so that a gateway without ingress pays one test per new session, not a lookup per candidate.
inline bool service_port(const PolicySnapshot& p, uint32_t nat_ip, uint8_t proto, uint16_t port) {
    return p.ingress_service(rte_be_to_cpu_32(nat_ip), proto, rte_be_to_cpu_16(port)) != FlatMap::kMissing;
}

inline bool service_port(const PolicySnapshot& p, const Ip6& nat_ip, uint8_t proto, uint16_t port) {
    return p.ingress_service6(nat_ip.b, proto, rte_be_to_cpu_16(port)) != Ip6Map::kMissing;
}

inline bool any_service_ports(const PolicySnapshot& p, const Session&) {
    return p.ingress_ports.size() != 0;
}

inline bool any_service_ports(const PolicySnapshot& p, const Session6&) {
    return p.ingress_ports6[0].size() + p.ingress_ports6[1].size() != 0;
}

// The probe's seed of an IPv6 tuple: the addresses folded into 32 bits each.
inline uint32_t probe_seed6(const uint8_t* pod_ip, uint16_t pod_port, const uint8_t* remote_ip, uint16_t remote_port) {
    uint32_t a[4], r[4];
    std::memcpy(a, pod_ip, 16);
    std::memcpy(r, remote_ip, 16);
    return probe_seed(a[0] ^ a[1] ^ a[2] ^ a[3], pod_port, r[0] ^ r[1] ^ r[2] ^ r[3], remote_port);
}

// The probe's seed of a flow's tuple (its inside key), for either family.
inline uint32_t probe_seed(const FlowKey& k) {
    return probe_seed(k.src, k.sport, k.dst, k.dport);
}
inline uint32_t probe_seed(const FlowKey6& k) {
    return probe_seed6(k.src, k.sport, k.dst, k.dport);
}

// The probe's seed of a session's tuple, for either family.
inline uint32_t probe_seed(const Session& s) {
    return probe_seed(s.pod_ip, s.pod_port, s.remote_ip, s.remote_port);
}
inline uint32_t probe_seed(const Session6& s) {
    return probe_seed6(s.pod_ip.b, s.pod_port, s.remote_ip.b, s.remote_port);
}

// Picks a NAT port for `s` (tuple and nat_ip set; an F::SessionEntry of table `st`, the worker's
// of its family) in this worker's block, keeping the pod's port when it is free and no Service's
// (service_port) and no peer's (port_reservations.h). Returns false when kProbeAttempts candidates in a row were taken.
// `hint`, when not null, holds the hashes of the first two candidates' outside keys (the pod's port, the first random
// one) as planning computed them; on success `h_chosen` is the hash of the chosen port's outside key, for the create.
template <class Table, class S>
inline bool allocate_port(const Worker& w, const Table& st, const PolicySnapshot& p, S& s, const uint32_t* hint,
                          uint32_t& h_chosen) {
    typename Table::Key k = Table::outside_key(s);
    const bool reserved = unlikely(any_service_ports(p, s));
    // The peers' ports (session sync): asked only of a port the table has free.
    const PortReservations* peers = w.shared ? w.shared->reservations.load(std::memory_order_acquire) : nullptr;
    auto port_free = [&](uint32_t h) {
        return st.find_outside(k, h) == Table::kNone && !(peers && peers->reserved(k));
    };
    if (pod_port_in_block(w, s.pod_port) && !(reserved && service_port(p, s.nat_ip, s.proto, s.pod_port))) {
        k.dport = s.pod_port;
        uint32_t h = hint ? hint[0] : st.key_hash(k);
        if (port_free(h)) {
            s.nat_port = s.pod_port;
            h_chosen = h;
            return true;
        }
    }
    uint32_t x = probe_seed(s);
    for (unsigned i = 0; i < kProbeAttempts; ++i) {
        k.dport = probe_next(w, x);
        if (reserved && service_port(p, s.nat_ip, s.proto, k.dport)) continue;
        uint32_t h = hint && i == 0 ? hint[1] : st.key_hash(k);
        if (port_free(h)) {
            s.nat_port = k.dport;
            h_chosen = h;
            return true;
        }
    }
    return false;
}

}  // namespace egw::dp
