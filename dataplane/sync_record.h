// SPDX-License-Identifier: Apache-2.0
//
// Session sync's one call at each point where a session begins or ends: create_session<F>()
// (nat_slow.cpp, both families) and close_session() (nat_session.h), which every deletion
// goes through, the maintenance sweep's expiry included. With sync off the worker has no ring
// and the call is one predictable branch on the slow path; the established path never calls it.
#pragma once

#include <cstring>
#include <type_traits>

#include "dataplane/sync_events.h"
#include "dataplane/tables/session_table.h"
#include "dataplane/worker.h"

namespace egw::dp {

// The event of a session. expires_tsc: when the session expires on this host's TSC (0 for a
// deletion). Also the control thread's, for a bulk dump of the sessions the workers list.
template <class S>
inline SyncEvent sync_event_of(SyncEventKind kind, const S& s, uint64_t expires_tsc) {
    SyncEvent e{};
    e.kind = kind;
    e.proto = s.proto;
    e.tcp_seen = s.tcp_seen;
    e.vrf = s.vrf;
    e.service_id = s.service_id;
    e.expires_tsc = expires_tsc;
    e.inside_port = s.pod_port;
    e.outside_port = s.nat_port;
    e.remote_port = s.remote_port;
    if constexpr (std::is_same_v<S, Session6>) {
        e.family = 6;
        std::memcpy(e.inside_addr, s.pod_ip.b, 16);
        std::memcpy(e.outside_addr, s.nat_ip.b, 16);
        std::memcpy(e.remote_addr, s.remote_ip.b, 16);
    } else {
        e.family = 4;
        std::memcpy(e.inside_addr, &s.pod_ip, 4);
        std::memcpy(e.outside_addr, &s.nat_ip, 4);
        std::memcpy(e.remote_addr, &s.remote_ip, 4);
    }
    return e;
}

template <class S>
inline void record_sync_event(Worker& w, SyncEventKind kind, const S& s, uint64_t expires_tsc) {
    SyncEventRing* ring = w.sync_events;
    if (!ring) return;
    ring->push(sync_event_of(kind, s, expires_tsc));  // a full ring counts what it drops; never waits
}

}  // namespace egw::dp
