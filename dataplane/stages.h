// SPDX-License-Identifier: Apache-2.0
//
// The stages of the packet path, in the order worker_process_burst() runs them over a burst of
// at most kBurst packets. One packet in order:
//
//   input       validate Ethernet/IPv4/IPv6/L4, build the flow key, pick the owning worker
//               (the common packet's addresses are filtered by nat_slow, when it gets there)
//   handoff     packets another worker owns go to its ring
//   nat_lookup  one bulk session lookup per direction
//   nat_fast    hits of the current epoch: rewrite
//   nat_slow    address filter; hits of an earlier epoch: revalidate (policy version, route
//               generation); misses: classify once, route, allocate a port, create; replies with
//               no session
//   icmp_error  ICMP errors quoting a packet of a session: checksum verified over the whole
//               message, outer and inner rewrite
//   local       ARP, echo replies of the gateway's own addresses
//   ip_forward  untranslated traffic, ingress included: TTL, next hop, egress MTU
//   icmp_reply  the gateway's own ICMP errors (TTL exceeded, unreachable) built in place
//   output      neighbour, Ethernet header, transmit or hold; frees the drops
//
// Everything here runs on the worker lcore (see worker.h for what that forbids).
#pragma once

#include <rte_byteorder.h>
#ifdef EGW_STAGE_PROFILE
#include <rte_cycles.h>
#endif

#include "dataplane/burst.h"

namespace egw::dp {

inline uint16_t be16(uint16_t v) {
    return rte_cpu_to_be_16(v);
}
inline uint32_t be32(uint32_t v) {
    return rte_cpu_to_be_32(v);
}

// Runs one stage (worker.cpp, and worker_flush() for its transmits); in the profiling build
// (EGW_STAGE_PROFILE) with TSC stamps around it (worker.h, StageProfile).
template <class F>
inline void run_stage([[maybe_unused]] Worker& w, [[maybe_unused]] ProfiledStage s, [[maybe_unused]] unsigned packets,
                      F&& stage) {
#ifdef EGW_STAGE_PROFILE
    uint64_t t0 = rte_rdtsc();
    stage();
    uint64_t spent = rte_rdtsc() - t0;
    StageProfile& pr = w.profile;
    if (spent > kProfilePreempted) {
        ++pr.preempted;
        return;
    }
    auto k = static_cast<unsigned>(s);
    pr.cycles[k] += spent;
    ++pr.runs[k];
    pr.packets[k] += packets;
#else
    stage();
#endif
}

// Fills the burst from `pkts` (n <= kBurst) and gives every packet its first next step.
void stage_input(Worker& w, const PolicySnapshot& p, Burst& b, rte_mbuf* const* pkts, unsigned n);
void stage_handoff(Worker& w, Burst& b);
void stage_nat_lookup(Worker& w, Burst& b);
void stage_nat_fast(Worker& w, const PolicySnapshot& p, Burst& b);
void stage_nat_slow(Worker& w, const PolicySnapshot& p, Burst& b);
void stage_icmp_error(Worker& w, const PolicySnapshot& p, Burst& b);
void stage_local(Worker& w, const PolicySnapshot& p, Burst& b);
void stage_ip_forward(Worker& w, const PolicySnapshot& p, Burst& b);
void stage_icmp_reply(Worker& w, const PolicySnapshot& p, Burst& b);
void stage_output(Worker& w, const PolicySnapshot& p, Burst& b);

// The rewrite of a packet whose session `s` holds (nat_fast.cpp); the slow path uses it for the
// sessions it creates or finds again.
void nat_translate(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, Session& s);
void nat_translate(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, Session6& s);

// The worker owning the session of a parsed packet (handoff.cpp). `hw_hash`: the NIC's RSS hash
// of a TCP or UDP packet from inside that is not a fragment, when its port hashes as egwd set it
// up (FlowOwners::hardware); nullptr: the owner is worked out from the packet's key. `p` tells
// ingress to a served ingress IP's Service ports, which stays where it arrived.
unsigned owner_of(const Worker& w, const PolicySnapshot& p, const PacketMeta& pk, const uint32_t* hw_hash = nullptr);

// Frames not made by the pipeline (the control thread's inject ring): transmitted on their
// m->port, dropped when it is not one of egw's ports (output.cpp); held to the port's MTU.
void output_frames(Worker& w, const PolicySnapshot& p, rte_mbuf* const* pkts, unsigned n);

// Where the gateway's own addresses are decided for IPv4: an address of the receiving port, or
// (on the way out) one of the NAT addresses.
inline bool addressed_to_gateway(const PolicySnapshot& p, uint16_t rx_port, uint32_t dst_host, Dir dir) {
    return p.is_port_address(rx_port, dst_host) || (dir == Dir::in2out && p.nat_addresses.contains(dst_host));
}

}  // namespace egw::dp
