// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/state.h"

#include <algorithm>

namespace egw::metrics {

const ServiceEntry* ControlView::find_service(std::string_view key) const {
    auto it = std::lower_bound(services.begin(), services.end(), key,
                               [](const ServiceEntry& s, std::string_view k) { return s.key < k; });
    return it != services.end() && it->key == key ? &*it : nullptr;
}

uint64_t& ServiceCounters::operator[](dp::ServiceCounter which) {
    switch (which) {
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) \
    case dp::ServiceCounter::name:                                                                  \
        return name;
        EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
    case dp::ServiceCounter::count:
        break;
    }
    __builtin_unreachable();
}

ServiceCounters sum_service(std::span<dp::Worker* const> workers, uint32_t id) {
    ServiceCounters c;
    if (id >= dp::kMaxServices) return c;
    for (const dp::Worker* w : workers) {
        const dp::ServiceCounters& s = w->service_counters[id];
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) \
    c.name += load_counter(s.name);
        EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
    }
    return c;
}

namespace {

uint64_t minus(uint64_t v, uint64_t base) {
    return v >= base ? v - base : 0;
}

ServiceCounters minus(const ServiceCounters& c, const ServiceCounters& b) {
    ServiceCounters out;
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) \
    out.name = minus(c.name, b.name);
    EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
    return out;
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
