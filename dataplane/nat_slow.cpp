// SPDX-License-Identifier: Apache-2.0
//
// Stage nat_slow: packets with no usable session, in packet order.
//   - Outgoing: classify (the gateway's own address, a cluster destination, which EgressService
//     or default action, TTL, route, NAT address) once, with classify.h's two halves; then
//     allocate a port and create the session, and rewrite as a hit. IPv4 and IPv6 alike.
//   - Back from outside with no session: echo requests to the gateway, ingress to a served
//     ingress IP of either family (ingress.h), routing untouched when that is the default
//     action, else no_session.
//   - Hits the fast path found stale: the session is closed here, so that closes and creates
//     happen in packet order, as if the burst were handled one packet at a time.
//
// Before the ordered pass, every outgoing packet of the burst is classified and the lines its
// create will touch (the endpoint, the outside bucket of the first port candidates, the session
// a taken port belongs to, the pool line to fill) are requested together, so that their cache
// misses overlap instead of queueing one create behind the other.
#include <netinet/in.h>
#include <rte_branch_prediction.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include <cstring>

#include "dataplane/address_filter.h"
#include "dataplane/checksum.h"
#include "dataplane/classify.h"
#include "dataplane/gateway_icmp_error.h"
#include "dataplane/ingress.h"
#include "dataplane/ip_forward.h"
#include "dataplane/family.h"
#include "dataplane/nat_ports.h"
#include "dataplane/nat_rewrite.h"
#include "dataplane/nat_session.h"
#include "dataplane/stages.h"

namespace egw::dp {

namespace {

// For a packet that will create a session: hashes the outside keys of the two ports its probe
// reads first (the pod's own when it lies in this worker's block, taken whenever another pod of
// the same NAT address already uses it toward this remote; and the first random one), keeps the
// hashes in the packet for allocate_port*() and the create, and prefetches their buckets, the pool
// slot the create fills (the `slot`-th of the burst) and the pod's count. `k` is the outside key
// without its port. Returns whether the pod's own port was hashed.
template <class Table>
bool plan_ports(const Worker& w, const Table& st, PacketMeta& pk, typename Table::Key k, uint16_t pod_port,
                uint32_t seed, unsigned slot, const typename Table::Pod& pod) {
    bool own = pod_port_in_block(w, pod_port);
    if (own) {
        k.dport = pod_port;
        pk.probe_hash[0] = st.key_hash(k);
        st.prefetch_outside_bucket(pk.probe_hash[0]);
    }
    k.dport = probe_next(w, seed);
    pk.probe_hash[1] = st.key_hash(k);
    pk.probe_hashed = true;
    st.prefetch_outside_bucket(pk.probe_hash[1]);
    st.prefetch_free_slot(slot);
    // Every create counts its pod (a limit may be set later), whether or not a limit holds now.
    st.prefetch_pod(pod);
    return own;
}

// The sessions those buckets name, once the buckets have had the rest of the burst's time to
// arrive.
template <class Table>
void prefetch_probed(const Table& st, const Burst& b, const unsigned* pos, const bool* own, unsigned n) {
    for (unsigned j = 0; j < n; ++j) {
        const PacketMeta& pk = b.pkt[pos[j]];
        if (own[j]) st.prefetch_outside_match(pk.probe_hash[0]);
        st.prefetch_outside_match(pk.probe_hash[1]);
    }
}

// The packets of one family whose creates planning prefetched for: `own`, whether the pod's own
// port was hashed.
struct ProbePlan {
    unsigned pos[kBurst];
    bool own[kBurst];
    unsigned n = 0;
};

// Classifies outgoing packet i of family F and, when it will create a session, plans its ports.
template <class F>
void plan_one(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i, ProbePlan& plan) {
    PacketMeta& pk = b.pkt[i];
    classify_untranslated<F>(p, b.m[i]->port, pk, pk.flow);
    if (pk.flow.action == NewFlow::Action::translate) classify_translation<F>(p, pk, pk.flow);
    if (pk.flow.action != NewFlow::Action::translate || pk.session != F::Sessions::kNone) return;
    const auto& key = F::key(pk);
    plan.own[plan.n] = plan_ports(w, F::sessions(w), pk, F::planned_outside_key(pk), key.sport, probe_seed(key), plan.n,
                                  F::pod_of(pk));
    plan.pos[plan.n++] = i;
}

// Classifies the burst's outgoing packets and prefetches what their creates will read. Pure
// reads and prefetches: which packets open sessions, with which ports, is decided in the ordered
// pass.
void plan_outgoing(Worker& w, const PolicySnapshot& p, Burst& b, uint32_t outgoing) {
    uint32_t outgoing6 = 0;
    for_each_packet(outgoing, [&](unsigned i) {
        if (likely(!b.pkt[i].v6))
            p.endpoints.prefetch(rte_be_to_cpu_32(b.pkt[i].ip->src_addr));
        else
            outgoing6 |= 1u << i;
    });
    for_each_packet(outgoing6, [&](unsigned i) { p.endpoints6.prefetch(b.pkt[i].ip6->src_addr); });
    ProbePlan plan, plan6;
    for_each_packet(outgoing, [&](unsigned i) {
        b.pkt[i].probe_hashed = false;
        if (unlikely(b.pkt[i].v6))
            plan_one<Family6>(w, p, b, i, plan6);
        else
            plan_one<Family4>(w, p, b, i, plan);
    });
    prefetch_probed(w.sessions, b, plan.pos, plan.own, plan.n);
    prefetch_probed(w.sessions6, b, plan6.pos, plan6.own, plan6.n);
}

// Whether a pod's TCP segment may open a session: never an RST or a FIN (the end of something
// this gateway does not know, and a session made for it would only take a port), nor a SYN+ACK
// (the answer to a connection from outside, which has no session here); a SYN always; any
// other segment (a connection under way, for example across an egwd restart) unless strict.
inline bool tcp_may_open(const uint8_t* l4, bool strict) {
    uint8_t f = reinterpret_cast<const rte_tcp_hdr*>(l4)->tcp_flags;
    if (f & (RTE_TCP_RST_FLAG | RTE_TCP_FIN_FLAG)) return false;
    if (f & RTE_TCP_SYN_FLAG) return !(f & RTE_TCP_ACK_FLAG);
    return !strict;
}

// sessions.max_per_pod: with one worker its table's own count of the pod's sessions; with
// several, the budget they share (pod_budget.h), of which a session is taken here and given back
// by pod_refund() when the session is not made after all, or by the table when it closes.
template <class Table, class Pod>
bool pod_admitted(Worker& w, const Table& t, const Pod& pod) {
    uint32_t limit = w.shared->pod_session_limit;
    if (!limit) return true;
    if (const PodBudget* budget = w.shared->pod_budget) return budget->admit(pod_budget_key(pod), limit);
    return t.pod_sessions(pod) < limit;
}

template <class Pod>
void pod_refund(Worker& w, const Pod& pod) {
    if (w.shared->pod_session_limit && w.shared->pod_budget) w.shared->pod_budget->release(pod_budget_key(pod));
}

// The destination port an EgressFirewall rule's `ports` compares (network order), 0 for protocols
// without one (an echo, an unknown protocol). TCP and UDP have it in the flow key already.
template <class F>
uint16_t firewall_dst_port_be(const PacketMeta& pk, uint8_t protocol) {
    if (pk.kind == Kind::tcp || pk.kind == Kind::udp) {
        if constexpr (F::kIpv6)
            return pk.key6.dport;
        else
            return pk.key.dport;
    }
    if (protocol == IPPROTO_SCTP && pk.l4 != nullptr && pk.l4_len >= 4) {
        uint16_t port;
        std::memcpy(&port, pk.l4 + 2, 2);
        return port;
    }
    return 0;
}

// EgressFirewall (docs/kubernetes.md): whether a pod's new flow may leave, decided once, before
// its session is made or it is routed untouched. Only a pod of a namespace with a firewall is
// classified; the verdict is counted per rule (or as allowed by default) in the worker's row. A
// denied flow is dropped, or answered with administratively prohibited when so configured.
template <class F>
bool egress_firewall_allows(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    const EgressFirewallPolicy* fw = p.egress_firewall.get();
    if (likely(fw == nullptr)) return true;
    const PacketMeta& pk = b.pkt[i];
    uint32_t id;
    uint32_t result = 0;
    if constexpr (F::kIpv6) {
        id = fw->pods6.size() == 0 ? Ip6Map::kMissing : fw->pods6.find(pk.ip6->src_addr);
        if (id == Ip6Map::kMissing) return true;
        FirewallKey6 key{};
        key.protocol = pk.l4_proto;
        key.firewall_be = rte_cpu_to_be_32(id);
        std::memcpy(key.dst, pk.ip6->dst_addr, 16);
        key.dst_port_be = firewall_dst_port_be<F>(pk, key.protocol);
        const FirewallKey6* keys[1] = {&key};
        fw->table->classify6(keys, &result, 1);
    } else {
        id = fw->pods.size() == 0 ? FlatMap::kMissing : fw->pods.find(rte_be_to_cpu_32(pk.ip->src_addr));
        if (id == FlatMap::kMissing) return true;
        FirewallKey4 key{};
        key.protocol = pk.ip->next_proto_id;
        key.firewall_be = rte_cpu_to_be_32(id);
        key.dst_be = pk.ip->dst_addr;
        key.dst_port_be = firewall_dst_port_be<F>(pk, key.protocol);
        const FirewallKey4* keys[1] = {&key};
        fw->table->classify4(keys, &result, 1);
    }
    count(fw->hits_of(w.index)[fw->slot_of(id, result)]);
    if (likely(!firewall_denies(result))) return true;
    if (fw->reject_icmp)
        reply_icmp_error(b, i, F::kIpv6 ? IcmpError::firewall_prohibited6 : IcmpError::firewall_prohibited,
                         DropReason::egress_firewall_denied);
    else
        b.drop(i, DropReason::egress_firewall_denied);
    return false;
}

// Creates the session of an outgoing packet classified `translate`, in the table of its family.
// Returns its index, or kNone with the packet marked as a drop.
template <class F>
uint32_t create_session(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    const PacketMeta& pk = b.pkt[i];
    const NewFlow& f = pk.flow;
    typename F::Sessions& st = F::sessions(w);
    constexpr uint32_t kNone = F::Sessions::kNone;
    typename F::SessionEntry s{};
    F::take_tuple(s, pk);
    s.vrf = f.vrf;
    s.nat_ip = F::nat_ip(f);
    s.in_use = f.masquerade ? kSessionMasquerade : 0;
    s.service_id = f.service_id;
    s.service_version = session_version(f.version);
    s.dscp_mark = qos_mark(p, s);
    ServiceCounters& sc = w.service_counters[s.service_id];
    // One pod may not take the table: past its limit it is refused, whoever else waits.
    if (!pod_admitted(w, st, s.pod_ip)) {
        b.drop(i, DropReason::pod_session_limit);
        return kNone;
    }
    // A full table may hold sessions that expired since the sweep last passed them: one of them
    // makes room before the new flow is refused (and before a port is chosen, since it frees one).
    if (unlikely(st.active() == st.capacity()) && !F::reclaim_expired(w, p)) {
        pod_refund(w, s.pod_ip);
        b.drop(i, DropReason::session_limit);
        return kNone;
    }
    uint32_t h_outside = 0;
    if (!allocate_port(w, st, p, s, pk.probe_hashed ? pk.probe_hash : nullptr, h_outside)) {
        pod_refund(w, s.pod_ip);
        count(sc.port_alloc_failures);
        b.drop(i, DropReason::port_exhausted);
        return kNone;
    }
    s.epoch = checked_epoch(p, w.n_ports, s);
    F::aim_out(s, f);
    s.out_neighbor = F::kNoNeighbor;
    s.in_port = kPortUnset;
    s.in_neighbor = F::kNoNeighbor;
    F::set_deltas(s);
    s.last_seen = w.now;
    // The miss lookup hashed the inside key (pk.key is the inside key of an outgoing packet).
    uint32_t idx = st.create(s, pk.key_hash, h_outside);
    if (idx == kNone) {
        pod_refund(w, s.pod_ip);
        b.drop(i, DropReason::session_limit);
        return idx;
    }
    count(sc.sessions_created);
    count(w.counters.sessions_created);
    if constexpr (F::kIpv6) {
        count(sc.sessions6_created);
        count(w.counters.sessions6_created);
    }
    record_sync_event(w, SyncEventKind::create, s, s.last_seen + session_timeout(w.shared->timeouts, s));
    return idx;
}

// The session of an outgoing packet classified `translate`, made and used at once.
template <class F>
void open_session(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    uint32_t idx = create_session<F>(w, p, b, i);
    if (idx == F::Sessions::kNone) return;
    b.pkt[i].session = idx;
    nat_translate(w, p, b, i, F::sessions(w).at(idx));
}

void new_outgoing(Worker& w, const PolicySnapshot& p, Burst& b, unsigned i) {
    PacketMeta& pk = b.pkt[i];
    switch (pk.flow.action) {
    case NewFlow::Action::local:
        b.set_next(i, Next::local);
        return;
    case NewFlow::Action::route:
        if (pk.flow.service_id != kDefaultPolicyId) count(w.counters.ingress_out);
        if (pk.flow.leaves_cluster &&
            (pk.v6 ? !egress_firewall_allows<Ipv6>(w, p, b, i) : !egress_firewall_allows<Ipv4>(w, p, b, i)))
            return;
        b.to_forward(i, pk.flow.vrf);
        return;
    case NewFlow::Action::drop:
        b.drop(i, pk.flow.reason);
        return;
    case NewFlow::Action::reject:
        reply_icmp_error(b, i, pk.flow.icmp, pk.flow.reason);
        return;
    case NewFlow::Action::translate:
        break;
    }
    if (pk.kind == Kind::tcp && !tcp_may_open(pk.l4, w.shared->tcp_strict)) {
        b.drop(i, DropReason::tcp_not_opening);
        return;
    }
    if (pk.v6) {
        if (egress_firewall_allows<Ipv6>(w, p, b, i)) open_session<Ipv6>(w, p, b, i);
    } else if (egress_firewall_allows<Ipv4>(w, p, b, i)) {
        open_session<Ipv4>(w, p, b, i);
    }
}

// Back from outside with no session, either family: echo requests to the receiving port's
// addresses answered; ingress to a served ingress IP (ingress.h), else a NAT address has no
// session for it; the port's own address otherwise has none either; elsewhere traffic of flows
// that were routed untouched goes back untouched, but only when untouched routing is the policy.
template <class F>
void miss_incoming(const PolicySnapshot& p, Burst& b, unsigned i) {
    const PacketMeta& pk = b.pkt[i];
    const uint16_t rx_port = b.m[i]->port;
    const bool to_port = F::to_port_address(p, rx_port, pk);
    if (to_port && F::echo_request(pk)) {
        b.set_next(i, Next::local);
        return;
    }
    if (uint32_t flags = F::nat_address_flags(p, pk); flags != F::kMissing) {
        if (!forward_ingress<F>(p, b, i, flags)) b.drop(i, DropReason::no_session);
        return;
    }
    if (p.default_action == DefaultAction::route && !to_port) {
        b.to_forward(i, p.ports[rx_port].vrf);
        return;
    }
    b.drop(i, DropReason::no_session);
}

}  // namespace

void stage_nat_slow(Worker& w, const PolicySnapshot& p, Burst& b) {
    // Input's common path leaves the address filter to this stage (checked_epoch() in
    // nat_session.h says why): a miss, or a hit of an earlier epoch, is filtered before anything
    // else is decided for it. A packet parse() has judged passes again.
    uint32_t slow = 0;
    uint32_t outgoing = 0;
    for_each_packet(b.pending(Next::nat_slow), [&](unsigned i) {
        const PacketMeta& pk = b.pkt[i];
        DropReason r = pk.v6 ? filter_addresses6(p, b.m[i]->port, pk.ip6->src_addr, pk.ip6->dst_addr, false)
                             : filter_addresses(p, w.n_ports, rte_be_to_cpu_32(pk.ip->src_addr),
                                                rte_be_to_cpu_32(pk.ip->dst_addr), false);
        if (unlikely(r != DropReason::count)) {
            b.drop(i, r);
            return;
        }
        slow |= 1u << i;
        if (pk.dir == Dir::in2out) outgoing |= 1u << i;
    });
    if (outgoing) plan_outgoing(w, p, b, outgoing);
    for_each_packet(slow, [&](unsigned i) {
        PacketMeta& pk = b.pkt[i];
        if (pk.kind != Kind::other) {
            // Creates and closes of earlier packets: the lookup may be out of date (two packets
            // of one new flow must share one session; a reply must not be matched to a slot its
            // session left).
            if (unlikely(w.counters.sessions_created != b.created_at_lookup ||
                         w.counters.sessions_closed != b.closed_at_lookup))
                pk.session = lookup_again(w, pk);
            if (pk.session != SessionTable::kNone) {
                // The Service's policy changed (or its route moved): the old translation must not
                // be used again. Outgoing packets start a new session under the current policy.
                auto usable = [&](auto& table) {
                    auto& s = table.at(pk.session);
                    if (session_usable(p, w.n_ports, s)) {
                        nat_translate(w, p, b, i, s);
                        return true;
                    }
                    close_session(w, table, pk.session);
                    return false;
                };
                if (pk.v6 ? usable(w.sessions6) : usable(w.sessions)) return;
                pk.session = SessionTable::kNone;
                if (pk.dir == Dir::out2in) {
                    b.drop(i, DropReason::stale_session);
                    return;
                }
            }
        }
        if (pk.dir == Dir::in2out)
            new_outgoing(w, p, b, i);
        else if (pk.v6)
            miss_incoming<Family6>(p, b, i);
        else
            miss_incoming<Family4>(p, b, i);
    });
}

}  // namespace egw::dp
