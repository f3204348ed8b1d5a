// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/kubernetes.h"

namespace egw::metrics {

namespace {

// --- watch health, per resource ---------------------------------------------------------------

constexpr Family kSynced{"k8s_synced",
                         Type::gauge,
                         "1 once the first complete list of the resource has been read; nothing is programmed "
                         "before every resource is synced",
                         {"resource"}};
constexpr Family kWatchOpen{
    "k8s_watch_open", Type::gauge, "1 while a watch stream of the resource is open", {"resource"}};
constexpr Family kWatchRestarts{"k8s_watch_restarts_total",
                                Type::counter,
                                "Watch streams that ended, by reason: closed (the server's timeout, routine), "
                                "expired (410 Gone, a relist follows) or error (refused, cut, HTTP error, bad event)",
                                {"resource", "reason"}};
constexpr Family kRelists{"k8s_relists_total",
                          Type::counter,
                          "Complete lists of the resource after the first one (after a 410 or the relist period)",
                          {"resource"}};
constexpr Family kListFailures{"k8s_list_failures_total",
                               Type::counter,
                               "List attempts of the resource that failed (each retry counts)",
                               {"resource"}};
constexpr Family kEvents{"k8s_watch_events_total",
                         Type::counter,
                         "ADDED, MODIFIED and DELETED events of the resource applied to the cache",
                         {"resource"}};
constexpr Family kBookmarks{
    "k8s_watch_bookmarks_total", Type::counter, "BOOKMARK events of the resource", {"resource"}};
constexpr Family kLastSync{"k8s_last_sync_timestamp_seconds",
                           Type::gauge,
                           "Until when the cache of the resource is known to have been current (Unix time): now "
                           "while a watch is open, else the end of the last list or watch; absent before the first "
                           "list",
                           {"resource"}};

void write_resources(Writer& w, const std::vector<k8s::ReflectorStatus>& resources) {
    w.family(kSynced);
    for (const auto& r : resources)
        w.sample(kSynced, {r.resource}, uint64_t{r.synced});
    w.family(kWatchOpen);
    for (const auto& r : resources)
        w.sample(kWatchOpen, {r.resource}, uint64_t{r.watching});
    w.family(kWatchRestarts);
    for (const auto& r : resources) {
        w.sample(kWatchRestarts, {r.resource, "closed"}, r.watch_closed);
        w.sample(kWatchRestarts, {r.resource, "expired"}, r.expired);
        w.sample(kWatchRestarts, {r.resource, "error"}, r.watch_failures);
    }
    w.family(kRelists);
    for (const auto& r : resources)
        w.sample(kRelists, {r.resource}, r.lists > 0 ? r.lists - 1 : uint64_t{0});
    w.family(kListFailures);
    for (const auto& r : resources)
        w.sample(kListFailures, {r.resource}, r.list_failures);
    w.family(kEvents);
    for (const auto& r : resources)
        w.sample(kEvents, {r.resource}, r.events);
    w.family(kBookmarks);
    for (const auto& r : resources)
        w.sample(kBookmarks, {r.resource}, r.bookmarks);
    w.family(kLastSync);
    for (const auto& r : resources)
        if (r.current_until > 0) w.sample(kLastSync, {r.resource}, r.current_until);
}

// --- election ---------------------------------------------------------------------------------

constexpr Family kLeader{"leader", Type::gauge,
                         "1 while this egwd holds the leader Lease and decides status.host for every gateway; "
                         "always 0 with election external"};
constexpr Family kLeaderTransitions{"leader_transitions_total", Type::counter, "Times this egwd became the leader"};
constexpr Family kLiveGateways{"election_live_gateways", Type::gauge,
                               "Gateways whose liveness Lease is current, as the leader sees them (0 on a follower)"};
constexpr Family kAssigned{"election_assigned_services", Type::gauge,
                           "EgressServices the leader has given a host (0 on a follower)"};
constexpr Family kRenewals{"election_lease_renewals_total", Type::counter,
                           "Successful renewals of this gateway's liveness Lease"};
constexpr Family kWrites{"k8s_writes_total",
                         Type::counter,
                         "Successful write-backs of the leader: EgressService status.host (object status) and "
                         "gateway node labels (object node_labels)",
                         {"object"}};
constexpr Family kWriteFailures{"k8s_write_failures_total",
                                Type::counter,
                                "Failed write-backs of the leader (each one is retried with backoff), by object",
                                {"object"}};

void write_election(Writer& w, const k8s_source::ControllerStats& e) {
    w.family(kLeader);
    w.sample(kLeader, {}, uint64_t{e.leader});
    w.family(kLeaderTransitions);
    w.sample(kLeaderTransitions, {}, e.leader_transitions);
    w.family(kLiveGateways);
    w.sample(kLiveGateways, {}, uint64_t{e.leader ? e.live_nodes : 0});
    w.family(kAssigned);
    w.sample(kAssigned, {}, uint64_t{e.leader ? e.allocations : 0});
    w.family(kRenewals);
    w.sample(kRenewals, {}, e.lease_renewals);
    w.family(kWrites);
    w.sample(kWrites, {"status"}, e.status_writes);
    w.sample(kWrites, {"node_labels"}, e.label_writes);
    w.family(kWriteFailures);
    w.sample(kWriteFailures, {"status"}, e.status_write_failures);
    w.sample(kWriteFailures, {"node_labels"}, e.label_write_failures);
}

}  // namespace

void write_kubernetes(Writer& w, const std::vector<k8s::ReflectorStatus>& resources,
                      const k8s_source::ControllerStats& election) {
    write_resources(w, resources);
    write_election(w, election);
}

}  // namespace egw::metrics
