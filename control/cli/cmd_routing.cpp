// SPDX-License-Identifier: Apache-2.0
//
// Section "routing": VRFs and routes as PolicyBuilder programmed them from the configuration
// (its ConfigTables: connected routes from port addresses, then static routes), and the
// neighbour table.
#include <algorithm>

#include "config/config.h"
#include "control/cli/handlers.h"
#include "control/cli/table.h"
#include "control/policy/policy_builder.h"

namespace egw::cli {

namespace {

using nlohmann::json;

struct RouteRow {
    std::string prefix;
    std::string via;  // "" on-link
    std::string port;
    std::string type;  // connected, static
};

// The routes of one VRF as the last snapshot holds them (connected routes from port addresses,
// then static routes), not as the configuration file says them: what workers look up.
std::vector<RouteRow> routes_of(const control::PolicyBuilder& policy, uint8_t vrf) {
    std::vector<RouteRow> out;
    const control::ConfigTables* tables = policy.config_tables();
    if (!tables) return out;
    for (const auto& r : tables->routes())
        if (r.vrf == vrf)
            out.push_back({net::to_string(r.prefix), r.via ? net::to_string(*r.via) : "", r.port,
                           r.connected ? "connected" : "static"});
    return out;
}

uint8_t vrf_index_of(const config::Config& cfg, const config::VrfConfig& v) {
    return static_cast<uint8_t>(&v - cfg.vrfs.data());
}

}  // namespace

Reply show_vrfs(Context& ctx, const Args&) {
    const config::Config& cfg = ctx.host.config;
    Table t({"vrf", "table", "ports", "routes", "services"});
    json rows = json::array();
    for (const auto& v : cfg.vrfs) {
        std::vector<std::string> ports, services;
        for (const auto& p : cfg.ports)
            if (p.vrf == v.name) ports.push_back(p.name);
        for (const auto& s : ctx.host.policy.views())
            if (s.programmed && s.vrf == v.name) services.push_back(s.state.key);
        auto joined = [](const std::vector<std::string>& xs) {
            std::string out;
            for (const auto& x : xs)
                out += (out.empty() ? "" : ",") + x;
            return or_dash(out);
        };
        size_t routes = routes_of(ctx.host.policy, vrf_index_of(cfg, v)).size();
        t.row({v.name, num(v.table), joined(ports), num(routes), joined(services)});
        rows.push_back(
            {{"name", v.name}, {"table", v.table}, {"ports", ports}, {"routes", routes}, {"services", services}});
    }
    return ok(t.render(), rows);
}

Reply show_routes(Context& ctx, const Args& a) {
    const config::VrfConfig* v = ctx.host.config.find_vrf(a.get("VRF"));
    if (!v) return fail("no VRF \"" + a.get("VRF") + "\" (show vrfs lists them)");
    Table t({"prefix", "via", "port", "type"});
    json rows = json::array();
    for (const auto& r : routes_of(ctx.host.policy, vrf_index_of(ctx.host.config, *v))) {
        t.row({r.prefix, or_dash(r.via), r.port, r.type});
        rows.push_back({{"prefix", r.prefix},
                        {"via", r.via.empty() ? json(nullptr) : json(r.via)},
                        {"port", r.port},
                        {"type", r.type}});
    }
    std::string text = "VRF " + v->name + " (table " + std::to_string(v->table) + ")\n" + t.render();
    bool fallback = v->name != ctx.host.config.vrfs.front().name;
    if (fallback)
        text += "Destinations without a route here are looked up in VRF " + ctx.host.config.vrfs.front().name + ".\n";
    return ok(text, json{{"vrf", v->name},
                         {"table", v->table},
                         {"routes", rows},
                         {"falls_back_to", fallback ? json(ctx.host.config.vrfs.front().name) : json(nullptr)}});
}

Reply show_neighbors(Context& ctx, const Args&) {
    Table t({"port", "ip", "mac", "state", "router", "held"});
    json list = ctx.status()["neighbors"];
    auto order = [](const json& n) {
        return std::make_pair(jstr(n["port"]), net::parse_ip(jstr(n["ip"])).value_or(net::IpAddr{}));
    };
    std::sort(list.begin(), list.end(), [&](const json& x, const json& y) { return order(x) < order(y); });
    for (const auto& n : list)
        t.row({jstr(n["port"]), jstr(n["ip"]), or_dash(jstr(n["mac"])), jstr(n["state"]), or_dash(jstr(n["router"])),
               jnum(n["held"])});
    return ok(t.render(), list);
}

// The counters, then the addresses still being announced (gratuitous ARP after the gateway began
// to answer for them).
Reply show_arp(Context& ctx, const Args&) {
    json arp = ctx.status()["arp"];
    Table counters({"counter", "value"});
    for (const char* k :
         {"requests_sent", "solicitations_sent", "probes_sent", "invalidated", "freed", "recycled", "routers_lost",
          "neighbors", "neighbors6", "announcements_sent", "announcements_failed", "addresses_announced",
          "ndp_announcements_sent", "ndp_announcements_failed", "ndp_addresses_announced"})
        counters.row({k, jnum(arp[k])});
    Table t({"port", "ip", "what", "left", "next-ms"});
    json list = arp["announcing"];
    for (const auto& a : list)
        t.row({jstr(a["port"]), jstr(a["ip"]), jstr(a["what"]), jnum(a["left"]), jnum(a["next_ms"])});
    std::string text = counters.render();
    text += '\n';
    if (list.empty())
        text += "no gratuitous ARP in progress\n";
    else
        text += t.render();
    return ok(text, arp);
}

}  // namespace egw::cli
