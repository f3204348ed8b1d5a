// SPDX-License-Identifier: Apache-2.0
//
// Whether a session may still be used under the current policy snapshot, and how a session
// ends: shared by the NAT stages (on every hit) and the maintenance a worker does between bursts
// (expiry sweep, flush).
#pragma once

#include <type_traits>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_ip.h>

#include "dataplane/address_filter.h"
#include "dataplane/burst.h"
#include "dataplane/sync_record.h"
#include "dataplane/worker.h"

namespace egw::dp {

template <class S>
inline uint32_t current_version(const PolicySnapshot& p, const S& s) {
    return s.service_id == kDefaultPolicyId ? p.default_version : p.services[s.service_id].version;
}

// Whether a session may go on translating under `p`. A new version of its Service's policy does
// not end it by itself: it is re-evaluated, and kept (under the new version) when its pod is still
// an endpoint of the Service and would be given the same translation now. So a Service losing
// one endpoint ends that endpoint's sessions, not those of the pods that stay.
inline bool policy_holds(const PolicySnapshot& p, Session& s) {
    uint32_t version = current_version(p, s);
    if (likely(session_version(version) == s.service_version)) return true;
    if (s.service_id == kDefaultPolicyId) {
        // Only masquerade makes default sessions; under another default action they end.
        if (p.default_action != DefaultAction::masquerade) return false;
        // Some pods became endpoints of a served Service: this session stays with the default
        // action only if its pod is not one of them.
        uint32_t sid = p.endpoints.find(rte_be_to_cpu_32(s.pod_ip));
        if (sid != FlatMap::kMissing && p.services[sid].mode != ServiceMode::inactive) return false;
        s.service_version = session_version(version);
        return true;
    }
    const ServicePolicy& sp = p.services[s.service_id];
    bool masquerade = s.in_use & kSessionMasquerade;
    bool same = sp.vrf == s.vrf && p.endpoints.find(rte_be_to_cpu_32(s.pod_ip)) == s.service_id &&
                (sp.mode == ServiceMode::snat_ingress_ip ? !masquerade && rte_cpu_to_be_32(sp.nat_ip) == s.nat_ip
                                                         : sp.mode == ServiceMode::masquerade && masquerade);
    if (!same) return false;
    s.service_version = session_version(version);
    return true;
}

// The same for an IPv6 session, against the Service's IPv6 side (mode6, nat_ip6, endpoints6).
inline bool policy_holds(const PolicySnapshot& p, Session6& s) {
    uint32_t version = current_version(p, s);
    if (likely(session_version(version) == s.service_version)) return true;
    if (s.service_id == kDefaultPolicyId) {
        if (p.default_action != DefaultAction::masquerade) return false;
        uint32_t sid = p.endpoints6.find(s.pod_ip.b);
        if (sid != Ip6Map::kMissing && p.services[sid].mode6 != ServiceMode::inactive) return false;
        s.service_version = session_version(version);
        return true;
    }
    const ServicePolicy& sp = p.services[s.service_id];
    bool masquerade = s.in_use & kSessionMasquerade;
    bool same = sp.vrf == s.vrf && p.endpoints6.find(s.pod_ip.b) == s.service_id &&
                (sp.mode6 == ServiceMode::snat_ingress_ip ? !masquerade && ip6_equal(sp.nat_ip6.b, s.nat_ip.b)
                                                          : sp.mode6 == ServiceMode::masquerade && masquerade);
    if (!same) return false;
    s.service_version = session_version(version);
    return true;
}

// The EgressQoS mark (tables/egress_qos.h) of a session's packets toward the remote side under
// `p`: what its pod's rules give its remote address.
inline uint8_t qos_mark(const PolicySnapshot& p, const Session& s) {
    return p.egress_qos.mark4(rte_be_to_cpu_32(s.pod_ip), rte_be_to_cpu_32(s.remote_ip));
}
inline uint8_t qos_mark(const PolicySnapshot& p, const Session6& s) {
    return p.egress_qos.mark6(s.pod_ip.b, s.remote_ip.b);
}

// Re-resolves the cached routes of a session. Returns false when the session can no longer be
// used as it is (no route, or a masquerade whose egress port changed).
inline bool refresh_routes(const PolicySnapshot& p, Session& s) {
    const NextHop* nh = p.lookup_route(s.vrf, rte_be_to_cpu_32(s.remote_ip));
    if (!nh) return false;
    // A masquerading session is bound to its egress port's address.
    if (nh->port != s.out_port && (s.in_use & kSessionMasquerade)) return false;
    s.out_port = nh->port;
    s.out_next_hop = nh->gateway ? nh->gateway : rte_be_to_cpu_32(s.remote_ip);
    s.out_neighbor = NeighborTable::kNone;
    s.in_port = kPortUnset;
    s.in_neighbor = NeighborTable::kNone;
    return true;
}

inline bool refresh_routes(const PolicySnapshot& p, Session6& s) {
    const NextHop6* nh = p.lookup_route6(s.vrf, s.remote_ip.b);
    if (!nh) return false;
    if (nh->port != s.out_port && (s.in_use & kSessionMasquerade)) return false;
    s.out_port = nh->port;
    s.out_next_hop = nh->on_link ? s.remote_ip : nh->gateway;
    s.out_neighbor = NeighborTable6::kNone;
    s.in_port = kPortUnset;
    s.in_neighbor = NeighborTable6::kNone;
    return true;
}

// The epoch a session is given when it is created or checked under `p`: p's generation, which lets
// its hits skip every check (nat_fast.cpp), only when all three of its addresses pass the address
// filter under `p`. Input's common path does not filter addresses: a hit's two addresses are two
// of its session's, so a session of the current epoch vouches for them. A session whose NAT
// address is filtered (a misconfigured ingress IP, a port address that became a directed
// broadcast) keeps an older epoch, and each of its packets takes the slow path, which filters it.
inline uint32_t checked_epoch(const PolicySnapshot& p, unsigned n_ports, const Session& s) {
    uint32_t gen = static_cast<uint32_t>(p.generation);
    return address_passes(p, n_ports, rte_be_to_cpu_32(s.nat_ip)) ? gen : gen - 1;
}
inline uint32_t checked_epoch(const PolicySnapshot& p, unsigned, const Session6& s) {
    uint32_t gen = static_cast<uint32_t>(p.generation);
    return address6_passes(s.nat_ip.b) ? gen : gen - 1;
}

// Whether a session of an earlier epoch may be used as it is: its policy holds and its cached
// routes are current. A session remembers the snapshot generation it was last checked under (its
// epoch), so a hit under the same snapshot costs one comparison in the fast path (nat_fast.cpp)
// and reads nothing outside the session; this is the slow path's check of the others. Under a
// newer snapshot the policy is checked again, and the routes only when they changed since the
// epoch (so a publication for an unrelated Service does not send every session back to the route
// and neighbour tables). The packet's own addresses have been filtered (stage_nat_slow).
template <class S>
inline bool session_usable(const PolicySnapshot& p, unsigned n_ports, S& s) {
    if (likely(s.epoch == static_cast<uint32_t>(p.generation))) return true;
    if (!policy_holds(p, s)) return false;
    // An EgressQoS change reaches the sessions made before it here, one publication later at most.
    s.dscp_mark = qos_mark(p, s);
    if (static_cast<int32_t>(static_cast<uint32_t>(p.route_generation) - s.epoch) > 0 && !refresh_routes(p, s))
        return false;
    s.epoch = checked_epoch(p, n_ports, s);
    return true;
}

// Whether a session still holds the flow of `pk` (it may have been closed, and its slot taken by
// another flow, since the lookup).
inline bool session_has_key(const Session& s, const PacketMeta& pk) {
    const FlowKey& k = pk.key;
    if (!(s.in_use & kSessionInUse) || s.proto != k.proto) return false;
    if (pk.dir == Dir::in2out)
        return s.pod_ip == k.src && s.remote_ip == k.dst && s.pod_port == k.sport && s.remote_port == k.dport;
    return s.remote_ip == k.src && s.nat_ip == k.dst && s.remote_port == k.sport && s.nat_port == k.dport;
}

inline bool session_has_key(const Session6& s, const PacketMeta& pk) {
    const FlowKey6& k = pk.key6;
    if (!(s.in_use & kSessionInUse) || s.proto != k.proto) return false;
    if (pk.dir == Dir::in2out)
        return ip6_equal(s.pod_ip.b, k.src) && ip6_equal(s.remote_ip.b, k.dst) && s.pod_port == k.sport &&
               s.remote_port == k.dport;
    return ip6_equal(s.remote_ip.b, k.src) && ip6_equal(s.nat_ip.b, k.dst) && s.remote_port == k.sport &&
           s.nat_port == k.dport;
}

// The session of `pk` now, when the lookup made for the burst may be out of date.
inline uint32_t lookup_again(const Worker& w, const PacketMeta& pk) {
    if (pk.v6) {
        if (pk.session != SessionTable6::kNone && session_has_key(w.sessions6.at(pk.session), pk)) return pk.session;
        return pk.dir == Dir::in2out ? w.sessions6.find_inside(pk.key6) : w.sessions6.find_outside(pk.key6);
    }
    if (pk.session != SessionTable::kNone && session_has_key(w.sessions.at(pk.session), pk)) return pk.session;
    return pk.dir == Dir::in2out ? w.sessions.find_inside(pk.key) : w.sessions.find_outside(pk.key);
}

// Closes session `idx` of `table` (w.sessions or w.sessions6). sessions_closed counts both
// families, sessions6_closed the IPv6 ones of them (the worker's and the Service's).
template <class Table>
inline void close_session(Worker& w, Table& table, uint32_t idx) {
    auto& s = table.at(idx);
    ServiceCounters& sc = w.service_counters[s.service_id];
    count(sc.sessions_closed);
    count(w.counters.sessions_closed);
    if constexpr (std::is_same_v<Table, SessionTable6>) {
        count(sc.sessions6_closed);
        count(w.counters.sessions6_closed);
    }
    record_sync_event(w, SyncEventKind::remove, s, 0);
    table.destroy(idx);
}

inline void close_session(Worker& w, uint32_t idx) {
    close_session(w, w.sessions, idx);
}

template <class S>
inline uint64_t session_timeout(const Timeouts& t, const S& s) {
    switch (s.proto) {
    case IPPROTO_TCP:
        // Opening (one side seen) and closing: transitory. Both sides seen: established, or
        // half-closed once one of them sent a FIN (the other may go on sending for long).
        if ((s.tcp_seen & kTcpClosing) ||
            (s.tcp_seen & (kTcpSeenInside | kTcpSeenOutside)) != (kTcpSeenInside | kTcpSeenOutside))
            return t.tcp_transitory;
        return s.tcp_seen & (kTcpFinInside | kTcpFinOutside) ? t.tcp_half_closed : t.tcp_established;
    case IPPROTO_UDP:
        return t.udp;
    default:  // ICMP and ICMPv6 echo
        return t.icmp;
    }
}

}  // namespace egw::dp
