// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/sync.h"

#include <string>

namespace egw::metrics {

namespace {

constexpr Family kDatagrams{"sync_datagrams_total",
                            Type::counter,
                            "Session sync datagrams sent to the peers (out) and accepted from them (in), "
                            "keep-alives, acknowledgements and resends included",
                            {"direction"}};
constexpr Family kEvents{"sync_events_total",
                         Type::counter,
                         "Session events sent to the peers (out, once per event whatever the number of peers) and "
                         "received new from them (in)",
                         {"direction"}};
constexpr Family kBytes{
    "sync_bytes_total", Type::counter, "Bytes of the sync datagrams (UDP payload), by direction", {"direction"}};
constexpr Family kPeerUp{"sync_peer_up",
                         Type::gauge,
                         "1 while the peer has been heard within three keep-alive "
                         "intervals (3 s)",
                         {"peer"}};
constexpr Family kResent{
    "sync_resent_datagrams_total", Type::counter, "Datagrams sent again because the peer asked (NACK)", {"peer"}};
constexpr Family kLost{"sync_lost_datagrams_total",
                       Type::counter,
                       "Datagrams given up: from the peer (announced LOST, or past the window), or to the peer (asked "
                       "for after the resend buffer let them go)",
                       {"peer", "direction"}};
constexpr Family kUnacked{"sync_unacknowledged_datagrams",
                          Type::gauge,
                          "Datagrams kept for resending until the peer acknowledges them",
                          {"peer"}};
constexpr Family kAckLag{"sync_ack_lag_seconds",
                         Type::histogram,
                         "From sending a datagram of events to the peer's acknowledgement of it; without traffic the "
                         "acknowledgement rides on the next keep-alive (up to 1 s)",
                         {"peer"}};
constexpr Family kRefused{
    "sync_refused_datagrams_total", Type::counter, "Datagrams refused and dropped, by reason", {"reason"}};
constexpr Family kDropped{"sync_dropped_events_total",
                          Type::counter,
                          "Session events dropped, by reason: ring_full (a worker's ring), standby_full (the standby "
                          "table's bound), stale_epoch (from a host that has since lost the Service)",
                          {"reason"}};
constexpr Family kStandby{"sync_standby_sessions",
                          Type::gauge,
                          "Peers' sessions in the standby table, by Service (its NAT address)",
                          {"address"}};
constexpr Family kStandbyMax{"sync_standby_max_sessions", Type::gauge,
                             "The standby table's bound (sync.standby_max_sessions)"};
constexpr Family kStandbyChanges{"sync_standby_changes_total",
                                 Type::counter,
                                 "Standby sessions added (created), updated, removed by the peer, aged out, and "
                                 "deletions of sessions not held (remove_unknown)",
                                 {"change"}};
constexpr Family kReserved{"sync_reserved_ports", Type::gauge,
                           "NAT ports (outside keys) of standby sessions that the workers never give to a local flow"};
constexpr Family kConflicts{"sync_port_conflicts", Type::gauge,
                            "Local sessions holding a reserved port, at the control thread's last check"};

constexpr Family kBulkComplete{"sync_bulk_complete",
                               Type::gauge,
                               "1 once the peer's whole dump (bulk sync) has arrived since this gateway asked for it",
                               {"peer"}};
constexpr Family kBulkEvents{"sync_bulk_events_total",
                             Type::counter,
                             "Events of this gateway's dumps for the peers: queued (sessions listed) and sent",
                             {"state"}};

std::string peer_label(uint32_t id) {
    return std::to_string(id);
}

}  // namespace

void write_sync(Writer& w, const sync::SyncServiceStats& s) {
    w.family(kDatagrams);
    w.sample(kDatagrams, {"out"}, s.datagrams_out);
    w.sample(kDatagrams, {"in"}, s.datagrams_in);
    w.family(kEvents);
    w.sample(kEvents, {"out"}, s.events_out);
    w.sample(kEvents, {"in"}, s.events_in);
    w.family(kBytes);
    w.sample(kBytes, {"out"}, s.bytes_out);
    w.sample(kBytes, {"in"}, s.bytes_in);

    w.family(kPeerUp);
    for (const auto& p : s.peers)
        w.sample(kPeerUp, {peer_label(p.id)}, uint64_t{p.alive});
    w.family(kResent);
    for (const auto& p : s.peers)
        w.sample(kResent, {peer_label(p.id)}, p.link.resent);
    w.family(kLost);
    for (const auto& p : s.peers) {
        w.sample(kLost, {peer_label(p.id), "in"}, p.link.lost);
        w.sample(kLost, {peer_label(p.id), "out"}, p.link.lost_announced);
    }
    w.family(kUnacked);
    for (const auto& p : s.peers)
        w.sample(kUnacked, {peer_label(p.id)}, uint64_t{p.unacknowledged});
    w.family(kAckLag);
    for (const auto& p : s.peers) {
        Histogram h(std::vector<double>(sync::kAckLagBounds.begin(), sync::kAckLagBounds.end()));
        h.set(std::vector<uint64_t>(p.link.ack_lag.begin(), p.link.ack_lag.end()), p.link.ack_lag_seconds);
        w.histogram(kAckLag, {peer_label(p.id)}, h);
    }

    w.family(kBulkComplete);
    for (const auto& p : s.peers)
        w.sample(kBulkComplete, {peer_label(p.id)}, uint64_t{p.bulk_complete});
    w.family(kBulkEvents);
    w.sample(kBulkEvents, {"queued"}, s.bulk_queued);
    w.sample(kBulkEvents, {"sent"}, s.bulk_sent);

    w.family(kRefused);
    for (size_t r = 0; r < sync::kRefusalCount; ++r)
        w.sample(kRefused, {sync::refusal_name(static_cast<sync::Refusal>(r))}, s.refused[r]);
    w.family(kDropped);
    w.sample(kDropped, {"ring_full"}, s.ring_drops);
    w.sample(kDropped, {"standby_full"}, s.standby.full);
    w.sample(kDropped, {"stale_epoch"}, s.standby.stale_epoch);

    w.family(kStandby);
    for (const auto& [addr, n] : s.standby_per_service)
        w.sample(kStandby, {sync::address_text(addr)}, uint64_t{n});
    w.family(kStandbyMax);
    w.sample(kStandbyMax, {}, uint64_t{s.standby_max});
    w.family(kStandbyChanges);
    w.sample(kStandbyChanges, {"created"}, s.standby.created);
    w.sample(kStandbyChanges, {"updated"}, s.standby.updated);
    w.sample(kStandbyChanges, {"removed"}, s.standby.removed);
    w.sample(kStandbyChanges, {"aged"}, s.standby.aged);
    w.sample(kStandbyChanges, {"remove_unknown"}, s.standby.remove_unknown);
    w.family(kReserved);
    w.sample(kReserved, {}, s.reserved_ports);
    w.family(kConflicts);
    w.sample(kConflicts, {}, s.port_conflicts);
}

}  // namespace egw::metrics
