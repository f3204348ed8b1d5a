// SPDX-License-Identifier: Apache-2.0
//
// IPv4 fragments through the NAT: each worker puts the fragments it receives together with
// DPDK's rte_ip_frag (a table of datagrams being reassembled, bounded in datagrams, fragments per
// datagram and time), and the whole datagram then takes the path of any other packet: its session
// is found or made from the ports its first fragment carries, it is translated, and output cuts
// it again for the egress port's MTU. docs/architecture.md says why reassembly rather than
// virtual reassembly.
#pragma once

#include <cstdint>

struct rte_mbuf;
struct rte_ipv4_hdr;

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
// Allocated on `socket`; nullptr (rte_errno set) when there is not the memory.
Reassembly* reassembly_create(uint32_t max_datagrams, uint32_t max_fragments, uint64_t timeout_cycles, int socket);
// Frees the state and every fragment it still holds.
void reassembly_free(Reassembly* r);

// Takes the fragment `m` (an Ethernet frame whose IPv4 header `ip` has passed the input checks)
// into the worker's table. Returns the whole datagram once its last missing fragment arrived, as
// a chain of mbufs behind the first fragment's Ethernet header, with its header checksum right
// and the fragment fields cleared (DF kept); nullptr otherwise: the fragment is held, or it was
// dropped and counted (`fragment`: the table full, more than kMaxFragmentsPerDatagram fragments,
// overlapping or inconsistent ones; or the datagram it completed came in more than the table's
// max_fragments, then counted as reassembled and dropped as one `fragment`).
rte_mbuf* reassembly_add(Worker& w, rte_mbuf* m, rte_ipv4_hdr* ip);

// Drops the datagrams that timed out, counted per fragment as `fragment_timeout` (between
// bursts; the table also reuses a timed-out entry it meets on its own).
void reassembly_expire(Worker& w);

// Drops everything held, counted as `fragment_timeout` (tests, and a worker that stops).
void reassembly_clear(Worker& w);

}  // namespace egw::dp
