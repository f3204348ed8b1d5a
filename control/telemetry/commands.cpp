// SPDX-License-Identifier: Apache-2.0
#include "control/telemetry/commands.h"

#include <rte_telemetry.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "control/metrics/exporter.h"

namespace egw::telemetry {

namespace {

std::mutex g_mu;
const metrics::Exporter* g_source = nullptr;

// The telemetry library's limits (rte_telemetry.h): strings of at most 127 characters, 256
// dictionary entries, 512 array entries, and one reply of at most 16 KiB of JSON.
constexpr size_t kMaxString = RTE_TEL_MAX_STRING_LEN - 1;
constexpr size_t kReplyBudget = 12 * 1024;

std::string clip(const std::string& s) {
    return s.size() <= kMaxString ? s : s.substr(0, kMaxString);
}

void add_string(rte_tel_data* d, const char* key, const std::string& value) {
    rte_tel_data_add_dict_string(d, key, clip(value).c_str());
}

// Runs `fill` with the source locked in; -ENODEV once egwd is shutting down.
template <typename F>
int with_source(F fill) {
    std::lock_guard lock(g_mu);
    if (!g_source) return -ENODEV;
    return fill(*g_source);
}

int cmd_info(const char*, const char*, rte_tel_data* d) {
    return with_source([&](const metrics::Exporter& x) {
        auto v = x.view();
        metrics::Readings r = x.read(*v);
        const auto& p = x.process();
        double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        rte_tel_data_start_dict(d);
        add_string(d, "version", p.version);
        add_string(d, "dpdk_version", p.dpdk_version);
        add_string(d, "node", v->node);
        rte_tel_data_add_dict_u64(d, "generation", v->generation);
        rte_tel_data_add_dict_int(d, "ready", x.readiness().empty() ? 1 : 0);
        uint64_t uptime = now > p.start_unix ? static_cast<uint64_t>(now - p.start_unix) : 0;
        rte_tel_data_add_dict_u64(d, "uptime_seconds", uptime);
        rte_tel_data_add_dict_u64(d, "workers", v->workers.size());
        rte_tel_data_add_dict_u64(d, "ports", v->ports.size());
        rte_tel_data_add_dict_u64(d, "services", v->services.size());
        rte_tel_data_add_dict_u64(d, "sessions_active", r.sessions_active);
        add_string(d, "default_action", v->default_action);
        return 0;
    });
}

int cmd_services(const char*, const char*, rte_tel_data* d) {
    return with_source([&](const metrics::Exporter& x) {
        auto v = x.view();
        rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
        size_t used = 0, n = 0;
        for (const auto& s : v->services) {
            used += s.key.size() + 4;
            if (used > kReplyBudget || n == RTE_TEL_MAX_ARRAY_ENTRIES)
                break;  // the rest is in /metrics and the status file
            rte_tel_data_add_array_string(d, clip(s.key).c_str());
            ++n;
        }
        return 0;
    });
}

int cmd_service(const char*, const char* params, rte_tel_data* d) {
    if (!params || !*params) return -EINVAL;
    return with_source([&](const metrics::Exporter& x) {
        auto v = x.view();
        const metrics::ServiceEntry* s = v->find_service(params);
        if (!s) return -EINVAL;
        metrics::Readings r = x.read(*v);
        size_t i = static_cast<size_t>(s - v->services.data());
        const metrics::ServiceCounters& c = r.services[i];
        rte_tel_data_start_dict(d);
        add_string(d, "key", s->key);
        add_string(d, "source_ip_by", s->source_ip_by);
        add_string(d, "status_host", s->status_host);
        add_string(d, "reason", s->reason);
        rte_tel_data_add_dict_int(d, "programmed", s->programmed ? 1 : 0);
        add_string(d, "ingress_ip", s->ingress_ip);
        add_string(d, "nat_address", s->nat_address ? metrics::format_ipv4(s->nat_address) : "");
        add_string(d, "network", s->network);
        add_string(d, "vrf", s->vrf);
        rte_tel_data_add_dict_u64(d, "endpoints", s->endpoints);
        // IPv6 beside IPv4: `programmed` is the IPv4 side (as egw_service_programmed), so a
        // Service translating only one family says which.
        rte_tel_data_add_dict_int(d, "programmed_ipv6", s->ipv6_translated ? 1 : 0);
        add_string(d, "ingress_ipv6", s->ingress_ipv6);
        rte_tel_data_add_dict_u64(d, "endpoints_ipv6", s->endpoints_ipv6);
        // The list's counters with a telemetry key (dataplane/service_counters.h), the open
        // sessions between the traffic and the sessions as in /metrics.
        auto add_part = [&](dp::ServiceCounterPart part) {
            for (unsigned k = 0; k < dp::kServiceCounterCount; ++k) {
                const dp::ServiceCounterInfo& info = dp::kServiceCounterInfo[k];
                if (info.part == part && *info.telemetry)
                    rte_tel_data_add_dict_u64(d, info.telemetry, c[static_cast<dp::ServiceCounter>(k)]);
            }
        };
        add_part(dp::ServiceCounterPart::traffic);
        rte_tel_data_add_dict_u64(d, "sessions_active", r.services_active[i]);
        add_part(dp::ServiceCounterPart::sessions);
        add_part(dp::ServiceCounterPart::failures);
        return 0;
    });
}

int cmd_drops(const char*, const char*, rte_tel_data* d) {
    return with_source([&](const metrics::Exporter& x) {
        metrics::Readings r = x.read(*x.view());
        rte_tel_data_start_dict(d);
        for (unsigned i = 0; i < dp::kDropReasonCount; ++i)
            rte_tel_data_add_dict_u64(d, dp::kDropReasonNames[i], r.drops[i]);
        return 0;
    });
}

int cmd_sessions_count(const char*, const char*, rte_tel_data* d) {
    return with_source([&](const metrics::Exporter& x) {
        auto v = x.view();
        metrics::Readings r = x.read(*v);
        uint64_t created = 0, expired = 0, active6 = 0;
        rte_tel_data* per = rte_tel_data_alloc();
        if (!per) return -ENOMEM;
        rte_tel_data_start_dict(per);
        for (const auto& l : r.lcores) {
            created += l[dp::WorkerCounter::sessions_created];
            expired += l[dp::WorkerCounter::sessions_expired];
            active6 += l.sessions_active_ipv6();
            rte_tel_data_add_dict_u64(per, std::to_string(l.lcore).c_str(), l.sessions_active());
        }
        rte_tel_data_start_dict(d);
        rte_tel_data_add_dict_u64(d, "active", r.sessions_active);
        rte_tel_data_add_dict_u64(d, "capacity", v->max_sessions);
        rte_tel_data_add_dict_u64(d, "active_ipv6", active6);
        rte_tel_data_add_dict_u64(d, "capacity_ipv6", v->max_sessions_ipv6);
        rte_tel_data_add_dict_u64(d, "created", created);
        rte_tel_data_add_dict_u64(d, "expired", expired);
        rte_tel_data_add_dict_container(d, "active_per_lcore", per, 0);
        return 0;
    });
}

int cmd_snat_ports(const char*, const char* params, rte_tel_data* d) {
    // The parameter is an address of either family in any form it may be written in.
    std::optional<net::IpAddr> only;
    if (params && *params && !(only = net::parse_ip(params))) return -EINVAL;
    return with_source([&](const metrics::Exporter& x) {
        auto v = x.view();
        metrics::Readings r = x.read(*v);
        // Keyed by the address with '_' for '.' and ':': dictionary keys may only hold
        // [A-Za-z0-9_/], and DPDK 22.11 nests dicts in dicts but not in arrays. The keys of the
        // two families cannot meet: an IPv6 one has an empty group ("2001_db8_2__50") or eight.
        rte_tel_data_start_dict(d);
        size_t n = 0;
        for (const auto& a : v->nat_addresses) {
            if (only && a.ip != *only) continue;
            if (++n > RTE_TEL_MAX_DICT_ENTRIES) break;
            const std::string ip = net::to_string(a.ip);
            rte_tel_data* e = rte_tel_data_alloc();
            if (!e) return -ENOMEM;
            rte_tel_data_start_dict(e);
            add_string(e, "address", ip);
            add_string(e, "family", net::to_string(a.ip.family()));
            add_string(e, "kind", a.kind);
            rte_tel_data_add_dict_u64(e, "capacity", v->nat_ports);
            // Always a number: the sessions of the traffic that can only use this address; `exact`
            // says whether that is all of them (0: some masquerading traffic may leave through it
            // or through another address, and is not counted).
            rte_tel_data_add_dict_u64(e, "sessions", metrics::sessions_on(a, *v, r));
            rte_tel_data_add_dict_u64(e, "exact", a.exact ? 1 : 0);
            std::string key = ip;
            std::replace(key.begin(), key.end(), '.', '_');
            std::replace(key.begin(), key.end(), ':', '_');
            rte_tel_data_add_dict_container(d, key.c_str(), e, 0);
        }
        if (only && n == 0) return -EINVAL;
        return 0;
    });
}

int cmd_lcores(const char*, const char*, rte_tel_data* d) {
    return with_source([&](const metrics::Exporter& x) {
        metrics::Readings r = x.read(*x.view());
        rte_tel_data_start_dict(d);
        for (const auto& l : r.lcores) {
            rte_tel_data* e = rte_tel_data_alloc();
            if (!e) return -ENOMEM;
            rte_tel_data_start_dict(e);
            for (unsigned i = 0; i < dp::kWorkerCounterCount; ++i)
                if (dp::kWorkerCounterInfo[i].scope == dp::CounterScope::lcore)
                    rte_tel_data_add_dict_u64(e, dp::kWorkerCounterInfo[i].name, l.counters[i]);
            rte_tel_data_add_dict_container(d, std::to_string(l.lcore).c_str(), e, 0);
        }
        return 0;
    });
}

struct Command {
    const char* name;
    telemetry_cb fn;
    const char* help;
};

constexpr Command kCommands[] = {
    {"/egw/info", cmd_info, "egw version, node, policy generation, readiness and counts. Takes no parameters."},
    {"/egw/services", cmd_services, "Keys (namespace/name) of the EgressServices egwd knows. Takes no parameters."},
    {"/egw/service", cmd_service,
     "One EgressService: mode, host, NAT address, VRF and counters. Parameter: namespace/name."},
    {"/egw/drops", cmd_drops, "Packets dropped, by reason. Takes no parameters."},
    {"/egw/sessions/count", cmd_sessions_count,
     "NAT sessions: active, capacity, created, expired, per lcore. Takes no parameters."},
    {"/egw/snat/ports", cmd_snat_ports,
     "Per NAT address of either family: sessions and capacity. Optional parameter: the address."},
    {"/egw/lcores", cmd_lcores,
     "Per worker lcore: its counters (busy and total TSC cycles, iterations, packets, sessions, ...). Takes no "
     "parameters."},
};

void register_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (const Command& c : kCommands)
            if (int rc = rte_telemetry_register_cmd(c.name, c.fn, c.help); rc != 0)
                spdlog::warn("telemetry: cannot register {}: error {}", c.name, rc);
    });
}

}  // namespace

Commands::Commands(const metrics::Exporter& source) {
    {
        std::lock_guard lock(g_mu);
        g_source = &source;
    }
    register_once();
}

Commands::~Commands() {
    std::lock_guard lock(g_mu);
    g_source = nullptr;
}

}  // namespace egw::telemetry
