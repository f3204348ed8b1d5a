// SPDX-License-Identifier: Apache-2.0
//
// The worker that owns a flow from inside, chosen in software from the flow's own key, so that
// every packet of the flow reaches it however it arrived: whole or in fragments (a NIC's RSS
// hashes IPv4 fragments by their addresses only, their whole datagram is owned by its ports), and
// every ICMP error about it (whose quote names the flow). The function is the one the NICs apply:
// the Toeplitz hash (Microsoft's RSS) with egw's key over the addresses and, for TCP and UDP, the
// ports, taken through egw's redirection table (RETA) to a worker. egwd programs that key and
// table into every port with RSS (control/runtime/runtime.cpp), so on a NIC a flow's unfragmented
// packets already arrive on their owner: their hardware hash is used as it is (no hash computed
// here, no hand-off); fragments, ICMP errors and the packets of ports without RSS are hashed here.
#pragma once

#include <rte_byteorder.h>

#include <cstdint>
#include <cstring>

#include "dataplane/tables/policy.h"
#include "dataplane/tables/session_table.h"

namespace egw::dp {

// The Toeplitz key: 40 bytes, as many as an IPv6 4-tuple needs (36 bytes of input, plus 4).
inline constexpr unsigned kRssKeyBytes = 40;
// Redirection table entries egw uses at most (NICs have 64 to 512).
inline constexpr unsigned kMaxRetaEntries = 512;

// Microsoft's RSS verification key, the default of many NICs: it spreads addresses and ports well
// and lets the hash be checked against the published test vectors.
inline constexpr uint8_t kRssKey[kRssKeyBytes] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
                                                  0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
                                                  0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
                                                  0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

// Who owns what the hash says (DataplaneShared::flow_owners), written before the workers start.
struct FlowOwners {
    uint32_t key[kRssKeyBytes / 4] = {};  // kRssKey as 32-bit words in host order
    uint32_t mask = 0;                    // redirection entries in use - 1 (a power of two - 1)
    uint8_t worker[kMaxRetaEntries] = {};
    // Ports whose NIC hashes TCP and UDP of both families with this key and table and delivers the
    // hash (RTE_MBUF_F_RX_RSS_HASH): a bit per DPDK port id.
    uint32_t hardware = 0;
};

// The table for `n_workers` workers over `entries` redirection entries (a power of two, at most
// kMaxRetaEntries): entry j belongs to worker j % n_workers, the way egwd fills every port's RETA.
inline void flow_owners_init(FlowOwners& o, unsigned n_workers, unsigned entries) {
    for (unsigned k = 0; k < kRssKeyBytes / 4; ++k) {
        uint32_t v;
        std::memcpy(&v, kRssKey + 4 * k, 4);
        o.key[k] = rte_be_to_cpu_32(v);
    }
    o.mask = entries - 1;
    for (unsigned j = 0; j < kMaxRetaEntries; ++j)
        o.worker[j] = static_cast<uint8_t>(n_workers ? (j & o.mask) % n_workers : 0);
    o.hardware = 0;
}

// The Toeplitz hash of `words` 32-bit words of input (host order, as the bytes go on the wire):
// for every set bit of the input, the 32 bits of the key that start at it. DPDK's rte_softrss()
// (rte_thash.h) gives the same hash but tests all 32 bits of every word; on a port without RSS
// every packet from inside is hashed here, so this walks only the set bits.
inline uint32_t toeplitz(const FlowOwners& o, const uint32_t* in, unsigned words) {
    uint32_t h = 0;
    for (unsigned j = 0; j < words; ++j)
        for (uint32_t bits = in[j]; bits; bits &= bits - 1) {
            unsigned i = static_cast<unsigned>(__builtin_ctz(bits));
            uint64_t window = uint64_t{o.key[j]} << 32 | o.key[j + 1];
            h ^= static_cast<uint32_t>(window >> (i + 1));
        }
    return h;
}

// What a NIC hashes of a flow: the addresses, and the ports of TCP and UDP (RSS types
// ipv4-tcp/udp, ipv6-tcp/udp; anything else by its addresses, ipv4/ipv6-other).
inline bool hashes_ports(uint8_t proto) {
    return proto == 6 /* TCP */ || proto == 17 /* UDP */;
}

// The hash of a flow key as it travels (source, destination, source port, destination port).
inline uint32_t flow_hash(const FlowOwners& o, const FlowKey& k) {
    uint32_t in[3] = {rte_be_to_cpu_32(k.src), rte_be_to_cpu_32(k.dst),
                      uint32_t{rte_be_to_cpu_16(k.sport)} << 16 | rte_be_to_cpu_16(k.dport)};
    return toeplitz(o, in, hashes_ports(k.proto) ? 3 : 2);
}

inline uint32_t flow_hash(const FlowOwners& o, const FlowKey6& k) {
    uint32_t in[9];
    for (unsigned j = 0; j < 4; ++j) {
        uint32_t s, d;
        std::memcpy(&s, k.src + 4 * j, 4);
        std::memcpy(&d, k.dst + 4 * j, 4);
        in[j] = rte_be_to_cpu_32(s);
        in[4 + j] = rte_be_to_cpu_32(d);
    }
    in[8] = uint32_t{rte_be_to_cpu_16(k.sport)} << 16 | rte_be_to_cpu_16(k.dport);
    return toeplitz(o, in, hashes_ports(k.proto) ? 9 : 8);
}

inline unsigned owner_of_hash(const FlowOwners& o, uint32_t hash) {
    return o.worker[hash & o.mask];
}

// The owner of the flow of `key` from inside (an ICMP error's: the flow its quote names).
template <class Key>
inline unsigned flow_owner(const FlowOwners& o, const Key& key) {
    return owner_of_hash(o, flow_hash(o, key));
}

}  // namespace egw::dp
