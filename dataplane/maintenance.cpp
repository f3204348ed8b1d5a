// SPDX-License-Identifier: Apache-2.0
//
// What a worker does between bursts, on its own table: the expiry sweep (idle sessions, and
// sessions whose policy no longer holds), and the control thread's requests for a session
// listing and for closing a Service's sessions (Worker::dump_*, Worker::flush_*).
#include <rte_branch_prediction.h>
#include <rte_byteorder.h>

#include <algorithm>
#include <cstring>

#include "dataplane/nat_session.h"
#include "dataplane/worker.h"

namespace egw::dp {

namespace {

// Looks at the slot under `cursor` and moves the cursor on: a session there that has been idle
// past its timeout, or whose policy no longer holds, is closed. Whether one was. Sessions of a
// withdrawn or changed policy are reclaimed here too, so their ports return to the pool even when
// no packet comes to notice.
template <class Table>
bool expire_at(Worker& w, const PolicySnapshot& p, const Timeouts& t, Table& st, uint32_t end, uint32_t& cursor) {
    uint32_t idx = cursor;
    cursor = idx + 1 >= end ? 0 : idx + 1;
    auto& s = st.at(idx);
    if (!(s.in_use & kSessionInUse)) return false;
    if (w.now - s.last_seen > session_timeout(t, s) || !policy_holds(p, s)) {
        count(w.counters.sessions_expired);
        close_session(w, st, idx);
        return true;
    }
    return false;
}

// kSweepPerIteration slots of one table from `cursor` on. The sweep walks only the slots that
// have been handed out (every session lies below slots_handed_out()): walking all of
// sessions.max would bring a cold line per slot into the cache that the burst's sessions and
// frames need, 2,000,000 slots for 10,000 sessions on the rig, and would come back to each
// session that much later.
template <class Table>
void expire_step(Worker& w, const PolicySnapshot& p, Table& st, uint32_t& cursor) {
    if (st.active() == 0) return;
    uint32_t end = st.slots_handed_out();
    const Timeouts& t = w.shared->timeouts;
    for (unsigned i = 0; i < kSweepPerIteration; ++i)
        expire_at(w, p, t, st, end, cursor);
    // The next step's slots, on their way while the worker polls and runs its bursts: waiting
    // for each line here cost egwd 4 % of its cycles on the rig at 10,000 flows.
    for (uint32_t i = 0, idx = cursor; i < kSweepPerIteration && i < end; ++i) {
        st.prefetch_session(idx);
        idx = idx + 1 >= end ? 0 : idx + 1;
    }
}

// One step of `st`'s sweep when it is due. The interval is worked out again only when the table
// has handed out more slots: a pass of sweep_pass_ticks over them, steps at most
// sweep_step_max_ticks apart. slots_handed_out() only grows from 0, so one that differs from the
// last is at least 1.
template <class Table>
void expire_paced(Worker& w, const PolicySnapshot& p, Table& st, uint32_t& cursor, SweepPace& pace) {
    if (w.now < pace.next) return;
    uint32_t end = st.slots_handed_out();
    if (end != pace.slots) {
        const DataplaneShared& sh = *w.shared;
        pace.interval = std::min(sh.sweep_pass_ticks * kSweepPerIteration / end, sh.sweep_step_max_ticks);
        pace.slots = end;
    }
    pace.next = w.now + pace.interval;
    expire_step(w, p, st, cursor);
}

template <class Table>
bool reclaim_expired(Worker& w, const PolicySnapshot& p, Table& st, uint32_t& cursor, uint64_t& failed_at) {
    uint32_t end = st.slots_handed_out();
    // A full table that had nothing to give a moment ago is not scanned again for every packet
    // of the same iteration.
    if (end == 0 || failed_at == w.now) return false;
    const Timeouts& t = w.shared->timeouts;
    // The slots just ahead of the sweep are the ones it looked at longest ago.
    for (unsigned i = 0; i < kReclaimScan; ++i)
        if (expire_at(w, p, t, st, end, cursor)) return true;
    failed_at = w.now;
    return false;
}

// Whether the firewall now denies an IPv4 session's flow; counts the deciding hit when it does.
bool firewall_denies_session(Worker& w, const EgressFirewallPolicy& fw, const Session& s) {
    uint32_t id = fw.pods.size() == 0 ? FlatMap::kMissing : fw.pods.find(rte_be_to_cpu_32(s.pod_ip));
    if (id == FlatMap::kMissing) return false;
    FirewallKey4 key{};
    key.protocol = s.proto;
    key.firewall_be = rte_cpu_to_be_32(id);
    key.dst_be = s.remote_ip;
    key.dst_port_be = s.remote_port;
    const FirewallKey4* keys[1] = {&key};
    uint32_t result = 0;
    fw.table->classify4(keys, &result, 1);
    if (!firewall_denies(result)) return false;
    count(fw.hits_of(w.index)[fw.slot_of(id, result)]);
    return true;
}

bool firewall_denies_session(Worker& w, const EgressFirewallPolicy& fw, const Session6& s) {
    uint32_t id = fw.pods6.size() == 0 ? Ip6Map::kMissing : fw.pods6.find(s.pod_ip.b);
    if (id == Ip6Map::kMissing) return false;
    FirewallKey6 key{};
    key.protocol = s.proto;
    key.firewall_be = rte_cpu_to_be_32(id);
    std::memcpy(key.dst, s.remote_ip.b, 16);
    key.dst_port_be = s.remote_port;
    const FirewallKey6* keys[1] = {&key};
    uint32_t result = 0;
    fw.table->classify6(keys, &result, 1);
    if (!firewall_denies(result)) return false;
    count(fw.hits_of(w.index)[fw.slot_of(id, result)]);
    return true;
}

}  // namespace

void worker_sweep_firewall(Worker& w, const PolicySnapshot& p) {
    const EgressFirewallPolicy* fw = p.egress_firewall.get();
    const uint32_t version = fw ? fw->version : 0;
    if (unlikely(version != w.firewall_version)) {
        // A new rule set (or none): sessions made under the old one are looked at again. Without
        // any firewall nothing is denied, so there is nothing to look at.
        w.firewall_version = version;
        w.firewall_cursor = 0;
        w.firewall_sweeping = fw != nullptr;
    }
    if (likely(!w.firewall_sweeping)) return;
    const uint32_t cap4 = w.sessions.capacity();
    const uint32_t slots = dump_slots(w);
    auto cut = [&](auto& st, uint32_t idx) {
        const auto& s = st.at(idx);
        if ((s.in_use & kSessionInUse) && firewall_denies_session(w, *fw, s)) {
            count(w.counters.sessions_expired);
            close_session(w, st, idx);
        }
    };
    uint32_t i = w.firewall_cursor;
    for (uint32_t looked = 0;; ++i, ++looked) {
        i = first_slot_handed_out(w, i);
        if (i == slots || looked == kFirewallSweepPerIteration) break;
        if (i < cap4)
            cut(w.sessions, i);
        else
            cut(w.sessions6, i - cap4);
    }
    w.firewall_cursor = i;
    if (i == slots) w.firewall_sweeping = false;
}

void worker_expire_step(Worker& w, const PolicySnapshot& p) {
    expire_step(w, p, w.sessions, w.sweep_cursor);
    expire_step(w, p, w.sessions6, w.sweep_cursor6);
}

void worker_expire_paced(Worker& w, const PolicySnapshot& p) {
    expire_paced(w, p, w.sessions, w.sweep_cursor, w.sweep_pace);
    expire_paced(w, p, w.sessions6, w.sweep_cursor6, w.sweep_pace6);
}

bool worker_reclaim_expired(Worker& w, const PolicySnapshot& p) {
    return reclaim_expired(w, p, w.sessions, w.sweep_cursor, w.reclaim_failed_at);
}

bool worker_reclaim_expired6(Worker& w, const PolicySnapshot& p) {
    return reclaim_expired(w, p, w.sessions6, w.sweep_cursor6, w.reclaim_failed_at6);
}

void worker_serve_dump(Worker& w) {
    uint32_t req = w.dump_request.load(std::memory_order_acquire);
    if (req == w.dump_done.load(std::memory_order_relaxed)) return;
    SessionTable& st = w.sessions;
    if (req != w.dump_serving) {
        // A new request (or a newer one while an older was still being served: the control
        // thread only asks again for a listing from the start, so the scan starts over).
        w.dump_serving = req;
        uint32_t slots = dump_slots(w);
        w.dump_cursor = std::min(w.dump_start, slots);
        w.dump_end = w.dump_scan && w.dump_scan < slots - w.dump_cursor ? w.dump_cursor + w.dump_scan : slots;
        w.dump_count = 0;
    }
    // The IPv4 table's slots, then the IPv6 table's, each up to its slots_handed_out().
    uint32_t cap4 = st.capacity();
    uint32_t i = w.dump_cursor;
    uint32_t n = w.dump_count;
    for (uint32_t looked = 0; n < w.dump_capacity; ++i, ++looked) {
        i = std::min(first_slot_handed_out(w, i), w.dump_end);
        if (i == w.dump_end || looked == kDumpScanPerIteration) break;
        SessionRecord& r = w.dump_buffer[n];
        if (i < cap4) {
            const Session& s = st.at(i);
            if (!(s.in_use & kSessionInUse)) continue;
            r.session = s;
            r.v6 = false;
            r.idle_ticks = w.now - s.last_seen;
        } else {
            const Session6& s = w.sessions6.at(i - cap4);
            if (!(s.in_use & kSessionInUse)) continue;
            r.session6 = s;
            r.v6 = true;
            r.idle_ticks = w.now - s.last_seen;
        }
        ++n;
    }
    w.dump_count = n;
    w.dump_cursor = i;
    if (i == w.dump_end || n == w.dump_capacity) {
        // Where the next page would start, past the slots never handed out: a full buffer with
        // nothing after it is then a complete listing, and the pager skips what is left unused.
        w.dump_next = first_slot_handed_out(w, i);
        w.dump_done.store(req, std::memory_order_release);
    }
}

void worker_finish_dump(Worker& w) {
    while (w.dump_done.load(std::memory_order_relaxed) != w.dump_request.load(std::memory_order_acquire))
        worker_serve_dump(w);
}

void worker_serve_flush(Worker& w) {
    uint32_t req = w.flush_request.load(std::memory_order_acquire);
    if (req == w.flush_done.load(std::memory_order_relaxed)) return;
    // The IPv4 table's slots, then the IPv6 table's, as a listing walks them.
    uint32_t cap4 = w.sessions.capacity();
    uint32_t slots = dump_slots(w);
    auto flush = [&](auto& st, uint32_t idx) {
        const auto& s = st.at(idx);
        if ((s.in_use & kSessionInUse) && (w.flush_service == kFlushAll || s.service_id == w.flush_service)) {
            close_session(w, st, idx);
            ++w.flush_closed;
        }
    };
    uint32_t i = w.flush_cursor;
    for (uint32_t looked = 0;; ++i, ++looked) {
        i = first_slot_handed_out(w, i);
        if (i == slots || looked == kFlushPerIteration) break;
        if (i < cap4)
            flush(w.sessions, i);
        else
            flush(w.sessions6, i - cap4);
    }
    w.flush_cursor = i;
    if (i == slots) {
        w.flush_cursor = 0;
        w.flush_done.store(req, std::memory_order_release);
    }
}

}  // namespace egw::dp
