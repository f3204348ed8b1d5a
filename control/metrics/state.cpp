// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/state.h"

#include <algorithm>

namespace egw::metrics {

const ServiceEntry* ControlView::find_service(std::string_view key) const {
    auto it = std::lower_bound(services.begin(), services.end(), key,
                               [](const ServiceEntry& s, std::string_view k) { return s.key < k; });
    return it != services.end() && it->key == key ? &*it : nullptr;
}

ServiceCounters sum_service(std::span<dp::Worker* const> workers, uint32_t id) {
    ServiceCounters c;
    if (id >= dp::kMaxServices) return c;
    for (const dp::Worker* w : workers) {
        const dp::ServiceCounters& s = w->service_counters[id];
        c.packets_out += load_counter(s.packets_out);
        c.bytes_out += load_counter(s.bytes_out);
        c.packets_in += load_counter(s.packets_in);
        c.bytes_in += load_counter(s.bytes_in);
        c.sessions_created += load_counter(s.sessions_created);
        c.sessions_closed += load_counter(s.sessions_closed);
        c.port_alloc_failures += load_counter(s.port_alloc_failures);
        c.sessions6_created += load_counter(s.sessions6_created);
        c.sessions6_closed += load_counter(s.sessions6_closed);
    }
    return c;
}

namespace {

uint64_t minus(uint64_t v, uint64_t base) {
    return v >= base ? v - base : 0;
}

ServiceCounters minus(const ServiceCounters& c, const ServiceCounters& b) {
    return ServiceCounters{minus(c.packets_out, b.packets_out),
                           minus(c.bytes_out, b.bytes_out),
                           minus(c.packets_in, b.packets_in),
                           minus(c.bytes_in, b.bytes_in),
                           minus(c.sessions_created, b.sessions_created),
                           minus(c.sessions_closed, b.sessions_closed),
                           minus(c.port_alloc_failures, b.port_alloc_failures),
                           minus(c.sessions6_created, b.sessions6_created),
                           minus(c.sessions6_closed, b.sessions6_closed)};
}

}  // namespace

uint64_t LcoreReading::sessions_active() const {
    return minus((*this)[dp::WorkerCounter::sessions_created], (*this)[dp::WorkerCounter::sessions_closed]);
}

uint64_t LcoreReading::sessions_active_ipv6() const {
    return minus((*this)[dp::WorkerCounter::sessions6_created], (*this)[dp::WorkerCounter::sessions6_closed]);
}

Readings read_counters(const ControlView& view, std::span<dp::Worker* const> workers, uint64_t neighbor_held_dropped) {
    Readings r;
    r.services.reserve(view.services.size());
    r.services_active.reserve(view.services.size());
    r.services_active6.reserve(view.services.size());
    for (const ServiceEntry& s : view.services) {
        // Id 0 is the default action's; a Service without an id (over the limit) has no counters.
        ServiceCounters raw = s.id == dp::kDefaultPolicyId ? ServiceCounters{} : sum_service(workers, s.id);
        r.services_active.push_back(raw.sessions_active());
        r.services_active6.push_back(raw.sessions_active_ipv6());
        r.services.push_back(minus(raw, s.baseline));
    }
    r.default_action = sum_service(workers, dp::kDefaultPolicyId);

    for (const dp::Worker* w : workers) {
        const dp::WorkerCounters& c = w->counters;
        for (unsigned i = 0; i < dp::kDropReasonCount; ++i)
            r.drops[i] += load_counter(c.drops[i]);
        for (unsigned i = 0; i < dp::kIcmpErrorCount; ++i)
            r.icmp_sent[i] += load_counter(c.icmp_sent[i]);
        LcoreReading l;
        l.index = w->index;
        l.lcore = w->index < view.workers.size() ? view.workers[w->index].lcore : w->index;
        for (unsigned i = 0; i < dp::kWorkerCounterCount; ++i) {
            l.counters[i] = load_counter(c.*dp::kWorkerCounterField[i]);
            r.totals[i] += l.counters[i];
        }
        r.sessions_active += l.sessions_active();
        r.lcores.push_back(l);
    }
    r.drops[static_cast<unsigned>(dp::DropReason::neighbor_unresolved)] += neighbor_held_dropped;
    return r;
}

uint64_t sessions_on(const NatAddressEntry& entry, const ControlView& view, const Readings& r) {
    const bool v6 = entry.ip.is_v6();
    uint64_t n = 0;
    for (uint32_t id : entry.service_ids) {
        if (id == dp::kDefaultPolicyId) {
            n += r.default_action.sessions_active(entry.ip.family());
            continue;
        }
        for (size_t i = 0; i < view.services.size(); ++i)
            if (view.services[i].id == id) {
                const uint64_t all = r.services_active[i], six = std::min(r.services_active6[i], all);
                n += v6 ? six : all - six;
            }
    }
    return n;
}

std::string format_ipv4(uint32_t ip) {
    return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xff) + "." + std::to_string((ip >> 8) & 0xff) +
           "." + std::to_string(ip & 0xff);
}

}  // namespace egw::metrics
