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

}  // namespace

void ArpCounters::store(const control::NeighborResolver& resolver) {
    const auto& s = resolver.announcer().stats();
    v_[0].store(resolver.requests_sent(), std::memory_order_relaxed);
    v_[1].store(s.sent, std::memory_order_relaxed);
    v_[2].store(s.failed, std::memory_order_relaxed);
    v_[3].store(resolver.announcer().pending_count(), std::memory_order_relaxed);
}

ArpReading ArpCounters::load() const {
    return ArpReading{v_[0].load(std::memory_order_relaxed), v_[1].load(std::memory_order_relaxed),
                      v_[2].load(std::memory_order_relaxed), v_[3].load(std::memory_order_relaxed)};
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
}

}  // namespace egw::metrics
