// SPDX-License-Identifier: Apache-2.0
//
// IPv4 and IPv6 fragments through the NAT: each worker puts the fragments it receives together
// with DPDK's rte_ip_frag (one table of datagrams being reassembled for both families, bounded in
// datagrams, fragments per datagram and time), and the whole datagram then takes the path of any
// other packet: its session is found or made from the ports its first fragment carries, it is
// translated, and output cuts it again: IPv4 for the egress port's MTU, IPv6 no larger than the
// largest fragment it came in (a router never makes IPv6 fragments larger than the sender did).
// docs/architecture.md says why reassembly rather than virtual reassembly.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include <cstdint>

struct rte_ipv4_hdr;
struct rte_ipv6_hdr;

namespace egw::dp {

struct Worker;
struct Reassembly;

// The largest number of fragments one datagram may arrive in (DPDK's build-time
// RTE_LIBRTE_IP_FRAG_MAX_FRAG); a datagram in more is dropped.
extern const unsigned kMaxFragmentsPerDatagram;

// A worker's reassembly state (sized from the configuration's `reassembly` section,
// config::ReassemblyConfig) for at most `max_datagrams` datagrams being put together at once,
// each dropped when it is not complete `timeout_cycles` (TSC) after its first fragment arrived,
// and each refused when it came in more than `max_fragments` fragments (at most
// kMaxFragmentsPerDatagram; a lower limit is checked when the datagram is complete, by marks in
// the mbuf dynfield DataplaneShared::next_hop_field, which must then be registered).
// A source (IPv4 or IPv6 address) may hold at most `max_per_source` of the datagrams at once (0:
// a quarter of max_datagrams); a fragment that would start one more is refused
// (reassembly_source_limit), so that one source cannot fill the table for all.
// Allocated on `socket`; nullptr (rte_errno set) when there is not the memory.
Reassembly* reassembly_create(uint32_t max_datagrams, uint32_t max_fragments, uint32_t max_per_source,
                              uint64_t timeout_cycles, int socket);
// Frees the state and every fragment it still holds.
void reassembly_free(Reassembly* r);
// The datagrams in reassembly, all of them and those of one source (`src`: 4 or 16 bytes, network
// order): for tests and listings on the worker's own thread.
uint32_t reassembly_held(const Reassembly& r);
uint32_t reassembly_held_by(const Reassembly& r, const uint8_t* src, bool v6);

// Takes the fragment `m` (an Ethernet frame whose IPv4 header `ip` has passed the input checks)
// into the worker's table. Returns the whole datagram once its last missing fragment arrived, as
// a chain of mbufs behind the first fragment's Ethernet header, with its header checksum right
// and the fragment fields cleared (DF kept); nullptr otherwise: the fragment is held, or it was
// dropped and counted: `reassembly_table_full` (it would start a datagram and the table has no
// room), `reassembly_source_limit` (its source holds max_per_source datagrams), `fragment` (more
// than kMaxFragmentsPerDatagram fragments, overlapping or inconsistent ones; or the datagram it
// completed came in more than the table's max_fragments, then counted as reassembled and dropped
// as one `fragment`).
rte_mbuf* reassembly_add(Worker& w, rte_mbuf* m, rte_ipv4_hdr* ip);

// The same for an IPv6 fragment `m` (its fixed header `ip6` has passed the input checks and its
// Fragment header says offset or more fragments). rte_ip_frag takes a Fragment header only right
// behind the fixed header (it removes it from there): a fragment with other extension headers in
// front of it is dropped as `fragment`, and so is one whose datagram would pass 65,535 bytes of
// payload. The whole datagram has its Fragment header removed, its payload length set, and is
// marked as put together here (reassembled6_fragment_size()).
rte_mbuf* reassembly_add6(Worker& w, rte_mbuf* m, rte_ipv6_hdr* ip6);

// An IPv6 datagram put together by reassembly_add6() carries, until it leaves, the DPDK dynamic
// flag reassembled6_flag in ol_flags and in the dynamic field at reassembled6_size_field the size
// of the largest fragment it came in (IPv6 header and Fragment header included). Registered by the
// first reassembly_create() (0 and -1 before, or when DPDK had no room: IPv6 fragments then make
// datagrams that are not marked, and are held to the egress MTU as any IPv6 packet is).
extern uint64_t reassembled6_flag;
extern int reassembled6_size_field;

// The size of the largest fragment an IPv6 datagram put together here came in; 0 for any other
// packet.
inline uint16_t reassembled6_fragment_size(const rte_mbuf* m) {
    if (likely(!(m->ol_flags & reassembled6_flag))) return 0;
    return *RTE_MBUF_DYNFIELD(m, reassembled6_size_field, const uint16_t*);
}

// A Fragment header identification for an IPv6 datagram this worker cuts into fragments: a
// per-worker sequence from a random start, so that datagrams of several pods translated to one
// address do not share one (RFC 7739).
uint32_t reassembly_fragment_id6(Worker& w);

// Drops the datagrams that timed out, counted per fragment as `fragment_timeout` (between
// bursts; the table also reuses a timed-out entry it meets on its own).
void reassembly_expire(Worker& w);

// Drops everything held, counted as `fragment_timeout` (tests, and a worker that stops).
void reassembly_clear(Worker& w);

}  // namespace egw::dp
