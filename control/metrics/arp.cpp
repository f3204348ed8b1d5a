// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/arp.h"

#include "control/neighbor/neighbor_resolver.h"

namespace egw::metrics {

namespace {

constexpr Family kArpRequests{"arp_requests_total", Type::counter,
                              "ARP requests the control thread sent to resolve or refresh next hops"};
constexpr Family kArpAnnouncements{"arp_announcements_total", Type::counter,
                                   "Gratuitous ARPs sent for addresses the gateway began to answer for (port addresses "
                                   "at start, ingress IPs when their Service began to be served here)"};
constexpr Family kArpAnnouncementFailures{"arp_announcement_failures_total", Type::counter,
                                          "Gratuitous ARPs that found no mbuf or a full inject ring (retried)"};
constexpr Family kArpAnnouncementsPending{"arp_announcements_pending", Type::gauge,
                                          "Addresses whose gratuitous ARPs are not all sent yet"};
constexpr Family kArpProbes{"arp_probes_total", Type::counter,
                            "Unicast ARP probes of stale neighbours still in use (also in arp_requests_total)"};
constexpr Family kArpInvalidated{"arp_neighbors_invalidated_total", Type::counter,
                                 "Neighbour MACs dropped after arp.probes unanswered probes (traffic is held and ARPed "
                                 "for again)"};
constexpr Family kArpFreed{"arp_neighbors_freed_total", Type::counter,
                           "Learned neighbours freed: unused for arp.unused_s, or never answered"};
constexpr Family kArpRecycled{"arp_neighbors_recycled_total", Type::counter,
                              "Least recently used learned neighbours given up for a new next hop in a full table"};
constexpr Family kArpNeighbors{"arp_neighbors", Type::gauge,
                               "Neighbour table entries in use (static and learned), of arp.max_neighbors"};
constexpr Family kNdpSolicitations{"ndp_solicitations_total", Type::counter,
                                   "Neighbor Solicitations the control thread sent to resolve or probe IPv6 next hops"};
constexpr Family kNdpAnnouncements{"ndp_announcements_total", Type::counter,
                                   "Unsolicited Neighbor Advertisements sent for IPv6 addresses the gateway began to "
                                   "answer for (port addresses at start, ingress IPs when their Service began to be "
                                   "served here)"};
constexpr Family kNdpAnnouncementFailures{
    "ndp_announcement_failures_total", Type::counter,
    "Unsolicited Neighbor Advertisements that found no mbuf or a full inject ring (retried)"};
constexpr Family kNdpAnnouncementsPending{
    "ndp_announcements_pending", Type::gauge,
    "IPv6 addresses whose unsolicited Neighbor Advertisements are not all sent yet"};
constexpr Family kNdpNeighbors{"ndp_neighbors", Type::gauge,
                               "IPv6 neighbour table entries in use (static and learned), of arp.max_neighbors"};

}  // namespace

void ArpCounters::store(const control::NeighborResolver& resolver) {
    const auto& s = resolver.announcer().stats();
    v_[0].store(resolver.requests_sent(), std::memory_order_relaxed);
    v_[1].store(s.sent, std::memory_order_relaxed);
    v_[2].store(s.failed, std::memory_order_relaxed);
    v_[3].store(resolver.announcer().pending_count(), std::memory_order_relaxed);
    v_[4].store(resolver.probes_sent(), std::memory_order_relaxed);
    v_[5].store(resolver.invalidated(), std::memory_order_relaxed);
    v_[6].store(resolver.freed(), std::memory_order_relaxed);
    v_[7].store(resolver.recycled(), std::memory_order_relaxed);
    v_[8].store(resolver.entries_in_table(), std::memory_order_relaxed);
    v_[9].store(resolver.solicitations_sent(), std::memory_order_relaxed);
    v_[10].store(resolver.entries_in_table6(), std::memory_order_relaxed);
    const auto& s6 = resolver.announcer().stats6();
    v_[11].store(s6.sent, std::memory_order_relaxed);
    v_[12].store(s6.failed, std::memory_order_relaxed);
    v_[13].store(resolver.announcer().pending_count6(), std::memory_order_relaxed);
}

ArpReading ArpCounters::load() const {
    ArpReading r;
    r.requests = v_[0].load(std::memory_order_relaxed);
    r.announcements = v_[1].load(std::memory_order_relaxed);
    r.announcement_failures = v_[2].load(std::memory_order_relaxed);
    r.announcements_pending = v_[3].load(std::memory_order_relaxed);
    r.probes = v_[4].load(std::memory_order_relaxed);
    r.invalidated = v_[5].load(std::memory_order_relaxed);
    r.freed = v_[6].load(std::memory_order_relaxed);
    r.recycled = v_[7].load(std::memory_order_relaxed);
    r.neighbors = v_[8].load(std::memory_order_relaxed);
    r.solicitations = v_[9].load(std::memory_order_relaxed);
    r.neighbors6 = v_[10].load(std::memory_order_relaxed);
    r.ndp_announcements = v_[11].load(std::memory_order_relaxed);
    r.ndp_announcement_failures = v_[12].load(std::memory_order_relaxed);
    r.ndp_announcements_pending = v_[13].load(std::memory_order_relaxed);
    return r;
}

void write_arp(Writer& w, const ArpReading& r) {
    w.family(kArpRequests);
    w.sample(kArpRequests, {}, r.requests);
    w.family(kArpAnnouncements);
    w.sample(kArpAnnouncements, {}, r.announcements);
    w.family(kArpAnnouncementFailures);
    w.sample(kArpAnnouncementFailures, {}, r.announcement_failures);
    w.family(kArpAnnouncementsPending);
    w.sample(kArpAnnouncementsPending, {}, r.announcements_pending);
    w.family(kArpProbes);
    w.sample(kArpProbes, {}, r.probes);
    w.family(kArpInvalidated);
    w.sample(kArpInvalidated, {}, r.invalidated);
    w.family(kArpFreed);
    w.sample(kArpFreed, {}, r.freed);
    w.family(kArpRecycled);
    w.sample(kArpRecycled, {}, r.recycled);
    w.family(kArpNeighbors);
    w.sample(kArpNeighbors, {}, r.neighbors);
    w.family(kNdpSolicitations);
    w.sample(kNdpSolicitations, {}, r.solicitations);
    w.family(kNdpNeighbors);
    w.sample(kNdpNeighbors, {}, r.neighbors6);
    w.family(kNdpAnnouncements);
    w.sample(kNdpAnnouncements, {}, r.ndp_announcements);
    w.family(kNdpAnnouncementFailures);
    w.sample(kNdpAnnouncementFailures, {}, r.ndp_announcement_failures);
    w.family(kNdpAnnouncementsPending);
    w.sample(kNdpAnnouncementsPending, {}, r.ndp_announcements_pending);
}

}  // namespace egw::metrics
