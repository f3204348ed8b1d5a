// SPDX-License-Identifier: Apache-2.0
//
// A burst as the stages see it: the packets, what the input stage parsed out of each, its
// session, and the step each packet takes next.
//
// The stages run in the order of `Next` below, each over the packets whose next step is its own
// (worker.cpp calls them). A stage only decides: it rewrites headers, reads and writes sessions,
// and sets the packet's next step; it never transmits and never frees. `output` is the one place
// that transmits, holds for ARP and frees drops, in packet order. A packet only ever moves to a
// later stage, so one pass of each stage finishes the burst.
//
// For each step the burst keeps a bit mask of the packets waiting for it, so a stage visits only
// its own packets (in packet order) and an idle stage costs one test.
#pragma once

#include <cstdint>

#include "dataplane/drop_reason.h"
#include "dataplane/gateway_icmp_error_kinds.h"
#include "dataplane/ipv6.h"
#include "dataplane/tables/policy.h"
#include "dataplane/tables/session_table.h"
#include "dataplane/worker.h"

struct rte_mbuf;
struct rte_ipv4_hdr;
struct rte_ipv6_hdr;

namespace egw::dp {

// What the input stage found.
enum class Kind : uint8_t {
    arp,
    tcp,
    udp,
    icmp_echo,   // echo request inside->outside, echo reply outside->inside
    icmp_error,  // destination unreachable, time exceeded, parameter problem, source quench
    other,       // anything else: may only be routed untouched
    ndp,         // IPv6 Neighbor Discovery (ICMPv6 133-137): for the local stage only
};

enum class Dir : uint8_t { in2out, out2in };

// The steps, in the order the stages run.
enum class Next : uint8_t {
    handoff,     // owned by another worker (handoff.cpp)
    nat_lookup,  // has a flow key: look its session up (nat_fast.cpp)
    nat_fast,    // session found: revalidate and rewrite (nat_fast.cpp)
    nat_slow,    // no session, a stale one, or no key: classify, route, create (nat_slow.cpp)
    icmp_error,  // an ICMP error quoting a packet of a session: translate it (nat_icmp_error.cpp)
    local,       // ARP or an ICMP echo for the gateway itself (local.cpp)
    ip_forward,  // forwarded untranslated: TTL and route (ip_forward.cpp)
    icmp_reply,  // to be answered with an ICMP error of the gateway's own (gateway_icmp_error.cpp)
    output,      // out_port and next_hop set: neighbour, Ethernet header, transmit or hold (output.cpp)
    transmit,    // a finished frame (ARP and echo replies): transmit on out_port as it is
    drop,        // freed and counted under `reason` by output
    gone,        // given away (hand-off ring, control ring)
    count
};

// The one classification of an outgoing packet with no session (nat_slow.cpp), made once per
// packet and used both to prepare a burst's creates and to make them.
struct NewFlow {
    enum class Action : uint8_t { translate, route, local, drop, reject };
    Action action;
    DropReason reason;    // drop, reject
    uint8_t vrf;          // translate, route
    uint16_t service_id;  // translate: kDefaultPolicyId for the default action's masquerade;
                          // route: an ingress reply's Service (ingress.h), else kDefaultPolicyId
    bool masquerade;      // translate: to the egress port's address
    uint32_t version;     // translate: the policy version the session is made under
    uint32_t nat_ip;      // translate: network order
    const NextHop* nh;    // translate
    Ip6 nat_ip6;          // translate, IPv6
    const NextHop6* nh6;  // translate, IPv6
    IcmpError icmp;       // reject: answered with this ICMP error (gateway_icmp_error.h)
    bool leaves_cluster;  // route: a pod's flow out of the cluster (the default action), which an
                          // EgressFirewall governs; not an ingress answer nor a cluster destination
};

struct PacketMeta {
    Kind kind;
    Dir dir;
    bool v6;  // IPv6: ip6, l4_proto and key6 hold what ip and key hold for IPv4
    Next next;
    DropReason reason;  // when next == drop
    uint8_t owner;      // handoff: the owning worker
    uint8_t vrf;        // ip_forward: the table to route in
    bool via_ingress;   // ip_forward: toward the family's ingress next hop (ingress.h), not routed
    uint16_t out_port;  // output, transmit
    uint32_t session;   // SessionTable index, or SessionTable::kNone
    union {
        uint32_t next_hop;  // output, IPv4: host order
        Ip6 next_hop6;      // output, IPv6: network order
    };
    uint32_t* neighbor;  // output: cached neighbour slot (a session's, or neighbor_slot)
    uint32_t neighbor_slot;
    rte_ipv4_hdr* ip;   // IPv4 only
    rte_ipv6_hdr* ip6;  // IPv6 only
    uint8_t l4_proto;   // IPv6: the transport protocol at the end of the extension headers
    uint8_t* l4;
    uint32_t l4_len;
    // ICMP errors: the quoted (inner) IPv4 header and its L4 header.
    rte_ipv4_hdr* inner_ip;
    rte_ipv6_hdr* inner_ip6;
    uint8_t* inner_l4;
    uint32_t inner_l4_len;
    // Network order. Outgoing: (pod, remote, pod port, remote port); back: (remote, NAT address,
    // remote port, NAT port); for ICMP errors, the quoted packet's tuple turned around.
    // IPv6 packets use key6 the same way.
    union {
        FlowKey key;
        FlowKey6 key6;
    };
    uint32_t key_hash;  // nat_lookup: the session table's hash of `key`, which a create reuses
    NewFlow flow;       // nat_slow, outgoing packets
    // nat_slow, outgoing misses: the hashes of the first two outside keys the port probe tries
    // (the pod's own port, the first random one), computed when the burst's creates are planned;
    // probe_hashed says that they were.
    bool probe_hashed;
    uint32_t probe_hash[2];
    IcmpError icmp;     // icmp_reply: which error (`reason` says why the packet is not forwarded)
    uint32_t icmp_aux;  // icmp_reply: bytes 4-7 of the ICMP header, host order (next-hop MTU)
};

// The packets nat_lookup looks up in one table in one direction, in packet order, with what its
// bulk lookup takes: their hashes and keys. Input queues them as it sets their next step, so the
// lookup does not sort the burst again.
template <class Key>
struct LookupQueue {
    unsigned n = 0;
    uint8_t pos[kBurst];
    uint32_t hash[kBurst];
    const Key* key[kBurst];
    const void* home[kBurst];  // the key's bucket, as the table's begin_*() found it
    // The candidate sessions of the first `scanned` keys, as the table's scan_begun() found them
    // in their buckets while input went on (the lookup scans the rest).
    unsigned scanned = 0;
    uint32_t cand[kBurst];
};

struct Burst {
    static_assert(kBurst <= 32, "a step's packets are a 32-bit mask");
    unsigned n = 0;
    uint32_t waiting[static_cast<unsigned>(Next::count)] = {};
    // The table's create/close counts when the burst's sessions were looked up: once the slow
    // path has created or closed one, a lookup of the burst may be out of date.
    uint64_t created_at_lookup = 0;
    uint64_t closed_at_lookup = 0;
    // The IPv6 packets among nat_fast's (set by nat_lookup, the only stage that sends packets there).
    uint32_t fast6 = 0;
    // nat_lookup's packets by table and direction (index: Dir), queued by input, the only stage
    // that sends packets there. An IPv6 packet on a worker without an IPv6 table is in none.
    LookupQueue<FlowKey> lookup4[2];
    LookupQueue<FlowKey6> lookup6[2];
    rte_mbuf* m[kBurst];
    PacketMeta pkt[kBurst];

    uint32_t pending(Next s) const { return waiting[static_cast<unsigned>(s)]; }

    void set_next(unsigned i, Next s) {
        waiting[static_cast<unsigned>(pkt[i].next)] &= ~(1u << i);
        waiting[static_cast<unsigned>(s)] |= 1u << i;
        pkt[i].next = s;
    }

    void drop(unsigned i, DropReason r) {
        pkt[i].reason = r;
        set_next(i, Next::drop);
    }

    // Toward ip_forward: routed in table `vrf`.
    void to_forward(unsigned i, uint8_t vrf) {
        pkt[i].vrf = vrf;
        pkt[i].via_ingress = false;
        set_next(i, Next::ip_forward);
    }
    // Toward ip_forward: forwarded to the ingress next hop of the packet's family (ingress.h).
    void to_forward_ingress(unsigned i) {
        pkt[i].via_ingress = true;
        set_next(i, Next::ip_forward);
    }

    // Toward output: translated or routed to `port` via `next_hop` (IPv4: host order; IPv6: 16
    // bytes, network order), with the neighbour slot cache `neighbor` (a session's, or none).
    template <class Hop>
    void to_output(unsigned i, uint16_t port, const Hop& next_hop, uint32_t* neighbor) {
        PacketMeta& pk = pkt[i];
        aim(pk, port, next_hop, neighbor);
        set_next(i, Next::output);
    }

    // to_output() for a stage that moves the packets it marked to output in one step at its end
    // (nat_fast.cpp): the next step is written, the masks are not, so the packet's bit stays in
    // the stage's own mask until then. It saves each packet set_next()'s read-modify-write of two
    // mask words, which every packet's waits for the one before it to finish.
    template <class Hop>
    void mark_output(unsigned i, uint16_t port, const Hop& next_hop, uint32_t* neighbor) {
        PacketMeta& pk = pkt[i];
        aim(pk, port, next_hop, neighbor);
        pk.next = Next::output;
    }
    // The end of stage `s`, which marked the packets `marked` with mark_output().
    void settle_marked(Next s, uint32_t marked) {
        waiting[static_cast<unsigned>(s)] &= ~marked;
        waiting[static_cast<unsigned>(Next::output)] |= marked;
    }

private:
    // Where output sends the packet; the next hop's type says its family.
    static void aim(PacketMeta& pk, uint16_t port, uint32_t next_hop, uint32_t* neighbor) {
        pk.out_port = port;
        pk.next_hop = next_hop;
        pk.neighbor = neighbor;
    }
    static void aim(PacketMeta& pk, uint16_t port, const uint8_t* next_hop6, uint32_t* neighbor) {
        pk.out_port = port;
        __builtin_memcpy(pk.next_hop6.b, next_hop6, 16);
        pk.neighbor = neighbor;
    }
    static void aim(PacketMeta& pk, uint16_t port, const Ip6& next_hop6, uint32_t* neighbor) {
        aim(pk, port, next_hop6.b, neighbor);
    }
};

// Calls f(i) for every packet of `mask`, in packet order.
template <class F>
inline void for_each_packet(uint32_t mask, F&& f) {
    while (mask) {
        unsigned i = static_cast<unsigned>(__builtin_ctz(mask));
        mask &= mask - 1;
        f(i);
    }
}

}  // namespace egw::dp
