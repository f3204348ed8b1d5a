// SPDX-License-Identifier: Apache-2.0
//
// Section "ports": port statistics from ethdev, through the status document where it has them.
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "control/cli/handlers.h"
#include "control/cli/table.h"
#include "control/runtime/runtime.h"

namespace egw::cli {

namespace {

using nlohmann::json;

// The ports `sel` names ("all", a name or an id). The grammar has checked that it is one.
std::vector<const control::PortInfo*> selected(Context& ctx, const std::string& sel) {
    std::vector<const control::PortInfo*> out;
    for (const auto& p : ctx.host.runtime.ports())
        if (sel == "all" || p.name == sel || std::to_string(p.id) == sel) out.push_back(&p);
    return out;
}

// The steering state of a port: nullptr for an inside port.
const control::Steering::Port* steering_of(Context& ctx, uint16_t id) {
    for (const auto& p : ctx.host.runtime.steering().ports())
        if (p.id == id) return &p;
    return nullptr;
}

size_t installed_rules(const control::Steering::Port& p) {
    size_t n = 0;
    for (const auto& [ip, flows] : p.flows)
        n += flows.size();
    return n;
}

}  // namespace

Reply show_port_stats(Context& ctx, const Args& a) {
    auto ports = selected(ctx, a.get("PORTS"));
    Table t({"port", "name", "device", "rx-packets", "rx-bytes", "rx-missed", "rx-errors", "tx-packets", "tx-bytes",
             "tx-errors", "tx-refused", "tx-stalls", "stalled"});
    json rows = json::array();
    for (const auto& s : ctx.status()["ports"]) {
        for (const auto* p : ports) {
            if (p->name != jstr(s["name"])) continue;
            json j = s;
            j["id"] = p->id;
            t.row({num(p->id), p->name, p->device, jnum(s["rx_packets"]), jnum(s["rx_bytes"]), jnum(s["rx_missed"]),
                   jnum(s["rx_errors"]), jnum(s["tx_packets"]), jnum(s["tx_bytes"]), jnum(s["tx_errors"]),
                   jnum(s["tx_refused"]), jnum(s["tx_stalls"]), jnum(s["tx_stalled_queues"])});
            rows.push_back(std::move(j));
        }
    }
    return ok(t.render(), rows);
}

Reply show_port_xstats(Context& ctx, const Args& a) {
    const control::PortInfo* p = ctx.find_port(a.get("PORT"));
    if (!p) return fail("no port \"" + a.get("PORT") + "\" (show port stats all lists them)");
    int n = rte_eth_xstats_get_names(p->id, nullptr, 0);
    if (n < 0) return fail("port " + p->name + ": cannot read the extended statistics: " + rte_strerror(-n));
    std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
    std::vector<rte_eth_xstat> values(static_cast<size_t>(n));
    int got_names = rte_eth_xstats_get_names(p->id, names.data(), static_cast<unsigned>(n));
    int got = rte_eth_xstats_get(p->id, values.data(), static_cast<unsigned>(n));
    if (got_names < 0 || got < 0) return fail("port " + p->name + ": cannot read the extended statistics");
    Table t({"name", "value"});
    json j = json::object();
    for (int i = 0; i < got && i < got_names; ++i) {
        const char* name = values[static_cast<size_t>(i)].id < static_cast<uint64_t>(got_names)
                               ? names[values[static_cast<size_t>(i)].id].name
                               : "?";
        t.row({name, num(values[static_cast<size_t>(i)].value)});
        j[name] = values[static_cast<size_t>(i)].value;
    }
    std::string head = "port " + std::to_string(p->id) + " (" + p->name + ", " + p->device + ")\n";
    return ok(head + t.render(), json{{"port", p->name}, {"id", p->id}, {"xstats", j}});
}

Reply clear_port_stats(Context& ctx, const Args& a) {
    std::string done;
    for (const auto* p : selected(ctx, a.get("PORTS"))) {
        int rc = rte_eth_stats_reset(p->id);
        if (rc < 0 && rc != -ENOTSUP)
            return fail("port " + p->name + ": cannot reset the statistics: " + rte_strerror(-rc));
        rc = rte_eth_xstats_reset(p->id);
        if (rc < 0 && rc != -ENOTSUP)
            return fail("port " + p->name + ": cannot reset the extended statistics: " + rte_strerror(-rc));
        done += (done.empty() ? "" : ", ") + p->name;
    }
    return ok("statistics cleared: " + done);
}

Reply show_port_info(Context& ctx, const Args& a) {
    Table t({"port", "name", "device", "driver", "mac", "link", "speed-mbps", "mtu", "rx-queues", "tx-queues", "rss",
             "steering"});
    json rows = json::array();
    for (const auto* p : selected(ctx, a.get("PORTS"))) {
        rte_eth_dev_info info{};
        int rc = rte_eth_dev_info_get(p->id, &info);
        rte_ether_addr mac{};
        rte_eth_macaddr_get(p->id, &mac);
        char mac_text[RTE_ETHER_ADDR_FMT_SIZE];
        rte_ether_format_addr(mac_text, sizeof mac_text, &mac);
        rte_eth_link link{};
        rte_eth_link_get_nowait(p->id, &link);
        uint16_t mtu = 0;
        rte_eth_dev_get_mtu(p->id, &mtu);
        std::string driver = rc == 0 && info.driver_name ? info.driver_name : "";
        bool up = link.link_status == RTE_ETH_LINK_UP;
        uint32_t speed = up ? link.link_speed : 0;
        std::string rss = control::describe_rss(p->rss_hf);
        const auto* st = steering_of(ctx, p->id);
        std::string steering = st ? control::to_string(st->mode) : "-";
        t.row({num(p->id), p->name, p->device, driver, mac_text, up ? "up" : "down", num(speed), num(mtu),
               num(info.nb_rx_queues), num(info.nb_tx_queues), rss, steering});
        rows.push_back({{"id", p->id},
                        {"name", p->name},
                        {"device", p->device},
                        {"driver", driver},
                        {"mac", mac_text},
                        {"link_up", up},
                        {"speed_mbps", speed},
                        {"mtu", mtu},
                        {"rx_queues", info.nb_rx_queues},
                        {"tx_queues", info.nb_tx_queues},
                        {"rss", rss},
                        {"steering", st ? json(steering) : json(nullptr)}});
    }
    return ok(t.render(), rows);
}

Reply show_vlans(Context& ctx, const Args&) {
    Table t({"port", "name", "parent", "vlan", "role", "vrf", "mtu", "addresses", "rx-packets", "tx-packets",
             "tx-refused"});
    json rows = json::array();
    const json& status = ctx.status();
    for (const auto& v : ctx.host.runtime.vlan_ports()) {
        const config::PortConfig* pc = ctx.host.config.find_port(v.name);
        if (!pc) continue;
        std::string addresses;
        json jaddrs = json::array();
        for (const auto& a : pc->addresses) {
            if (!addresses.empty()) addresses += ',';
            addresses += net::to_string(a);
            jaddrs.push_back(net::to_string(a));
        }
        json s = json::object();
        if (status.contains("vlans"))
            for (const auto& row : status["vlans"])
                if (jstr(row["name"]) == v.name) s = row;
        t.row({num(v.id), v.name, v.parent, num(v.vlan), config::to_string(pc->role), pc->vrf, num(pc->mtu),
               addresses.empty() ? "-" : addresses, jnum(s["rx_packets"]), jnum(s["tx_packets"]),
               jnum(s["tx_refused"])});
        rows.push_back({{"id", v.id},
                        {"name", v.name},
                        {"parent", v.parent},
                        {"vlan", v.vlan},
                        {"role", config::to_string(pc->role)},
                        {"vrf", pc->vrf},
                        {"mtu", pc->mtu},
                        {"addresses", jaddrs},
                        {"rx_packets", s.value("rx_packets", uint64_t{0})},
                        {"tx_packets", s.value("tx_packets", uint64_t{0})},
                        {"tx_refused", s.value("tx_refused", uint64_t{0})}});
    }
    if (rows.empty()) return ok("no VLANs configured\n", rows);
    return ok(t.render(), rows);
}

Reply clear_counters(Context& ctx, const Args&) {
    Args all;
    all.values["PORTS"] = "all";
    return clear_port_stats(ctx, all);
}

}  // namespace egw::cli

namespace egw::cli {

Reply show_steering(Context& ctx, const Args&) {
    const auto& steering = ctx.host.runtime.steering();
    Table ports({"port", "name", "mode", "rules", "icmp", "why software"});
    json jports = json::array();
    std::string rules_text;
    for (const auto& p : steering.ports()) {
        bool hw = p.mode == control::Steering::Mode::rte_flow;
        size_t installed = installed_rules(p);
        ports.row({num(p.id), p.name, control::to_string(p.mode), num(installed), hw && p.icmp ? "steered" : "software",
                   or_dash(p.reason)});
        json rules = json::array();
        for (uint32_t ip : steering.nat_ips())
            for (const auto& r : steering.rules_of(ip)) {
                if (r.proto == control::SteeredProto::icmp && !p.icmp) continue;
                rules.push_back(control::testpmd_flow_create(p.id, r));
            }
        if (!rules.empty()) {
            rules_text += "\n" + p.name +
                          (hw ? ": rules in force (testpmd syntax)\n"
                              : ": rules a NIC with rte_flow would get (testpmd syntax; not installed)\n");
            for (const auto& r : rules)
                rules_text += "  " + r.get<std::string>() + "\n";
        }
        jports.push_back({{"id", p.id},
                          {"name", p.name},
                          {"mode", control::to_string(p.mode)},
                          {"reason", p.reason},
                          {"icmp_steered", hw && p.icmp},
                          {"rules_installed", installed},
                          {"rules", rules}});
    }
    Table workers({"worker", "nat-ports", "handed-off"});
    json jworkers = json::array();
    const auto& blocks = steering.blocks();
    for (const auto& s : ctx.status()["workers"]) {
        unsigned index = s["index"].get<unsigned>();
        std::string block =
            index < blocks.size() ? std::to_string(blocks[index].lo) + "-" + std::to_string(blocks[index].hi) : "-";
        workers.row({num(index), block, jnum(s["handed_off"])});
        jworkers.push_back({{"index", index}, {"nat_ports", block}, {"handed_off", s["handed_off"]}});
    }
    // Rules are made for IPv4 NAT addresses only: an IPv6 reply (NAPT66) reaches its owner by the
    // software hand-off whatever the port's mode (dataplane/handoff.cpp: the same port blocks).
    std::string text =
        ports.render() + "\n" + workers.render() +
        "handed-off: replies this worker received and passed to their owner's ring.\n"
        "IPv6 replies (NAPT66) are always handed off in software: rules cover IPv4 NAT addresses only.\n" +
        rules_text;
    return ok(text, json{{"ports", jports}, {"workers", jworkers}, {"ipv6_replies", "software"}});
}

}  // namespace egw::cli
