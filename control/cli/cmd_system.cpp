// SPDX-License-Identifier: Apache-2.0
//
// Section "system": lcores, drops, the configuration, the log level, help and quit.
#include <rte_lcore.h>
#include <rte_version.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "config/config.h"
#include "config/dump.h"
#include "control/cli/handlers.h"
#include "control/cli/table.h"
#include "control/runtime/runtime.h"
#include "dataplane/drop_reason.h"

#ifndef EGW_VERSION
#define EGW_VERSION "unknown"
#endif

namespace egw::cli {

namespace {

using nlohmann::json;

// Static initialisation runs as egwd starts: close enough to its start for an uptime.
const auto kStarted = std::chrono::steady_clock::now();

// One row per leaf: "ports[1].addresses" -> "10.0.0.1/24, 10.0.0.2/24".
void flatten(const json& j, const std::string& path, Table& t) {
    if (j.is_object()) {
        if (j.empty()) t.row({path, "{}"});
        for (const auto& [k, v] : j.items())
            flatten(v, path.empty() ? k : path + "." + k, t);
    } else if (j.is_array()) {
        // Scalars share one row, unless a value has commas of its own (vdev arguments).
        bool scalars = std::all_of(j.begin(), j.end(), [](const json& x) {
            return !x.is_structured() && !(x.is_string() && x.get<std::string>().find(',') != std::string::npos);
        });
        if (scalars) {
            std::string v;
            for (const auto& x : j)
                v += (v.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : x.dump());
            t.row({path, v.empty() ? "[]" : v});
        } else {
            for (size_t i = 0; i < j.size(); ++i)
                flatten(j[i], path + "[" + std::to_string(i) + "]", t);
        }
    } else {
        t.row({path, j.is_string() ? j.get<std::string>() : j.dump()});
    }
}

}  // namespace

Reply show_lcores(Context& ctx, const Args&) {
    const auto& cfg = ctx.host.config;
    Table t(
        {"lcore", "role", "worker", "rx-queues", "rx-packets", "tx-packets", "busy-cycles", "total-cycles", "busy"});
    json rows = json::array();
    unsigned main = rte_get_main_lcore();
    t.row({num(main), "control", "-", "-", "-", "-", "-", "-", "-"});
    rows.push_back({{"lcore", main}, {"role", "control"}});
    auto& workers = ctx.host.runtime.workers();
    for (const auto& s : ctx.status()["workers"]) {
        unsigned index = s["index"].get<unsigned>();
        unsigned lcore = index < cfg.workers.size() ? cfg.workers[index] : 0;
        std::string queues;
        std::vector<std::string> qlist;
        if (index < workers.size()) {
            const dp::Worker& w = *workers[index];
            for (unsigned q = 0; q < w.n_rxq; ++q) {
                std::string name = std::to_string(w.rxq[q].port);
                if (const auto* p = ctx.find_port(name)) name = p->name;
                qlist.push_back(name + ":" + std::to_string(w.rxq[q].queue));
                queues += (queues.empty() ? "" : ",") + qlist.back();
            }
        }
        uint64_t busy = s["busy_cycles"].get<uint64_t>(), total = s["total_cycles"].get<uint64_t>();
        t.row({num(lcore), "worker", num(index), or_dash(queues), jnum(s["rx_packets"]), jnum(s["tx_packets"]),
               num(busy), num(total), percent(busy, total)});
        json j = s;
        j["lcore"] = lcore;
        j["role"] = "worker";
        j["rx_queues"] = qlist;
        rows.push_back(std::move(j));
    }
    std::string text =
        t.render() + "busy: the share of poll-loop cycles spent on iterations that moved a packet, since start.\n";
    return ok(text, rows);
}

// The JSON comes from egwd's kubernetes source: {"synced", "leader", "leader_identity",
// "election", "live_nodes", "status_writes", "label_writes", "write_failures",
// "resources": [{"name", "resource", "synced", "watching", "failing", "resource_version",
// "lists", "list_failures", "expired", "watches", "watch_closed", "watch_failures", "events",
// "bookmarks", "failures", "current_until", "last_error"}], "egress_ips": null or {"synced",
// "served", "objects", "namespaces", "pods", "selection_changes", "selected": [{"name",
// "egress_ips", "namespaces", "pods", "pod_ips"}]}} (k8s_source::describe()).
Reply show_k8s(Context& ctx, const Args&) {
    if (!ctx.host.kubernetes)
        return fail("show k8s: the state source is \"files\" (" + ctx.host.config.state.path +
                    "): egwd has no Kubernetes connection");
    json j = ctx.host.kubernetes();
    // Why watches ended: closed by the server (routine), 410 Gone (a relist), error (backoff).
    Table t({"resource", "synced", "watching", "resource-version", "lists", "watch-ends closed/410/error", "events",
             "failures", "last-error"});
    for (const auto& r : j["resources"])
        t.row({r["name"].get<std::string>(), r["synced"].get<bool>() ? "yes" : "no",
               r["watching"].get<bool>() ? "yes" : (r["failing"].get<bool>() ? "failing" : "no"),
               or_dash(r["resource_version"].get<std::string>()), jnum(r["lists"]),
               jnum(r["watch_closed"]) + "/" + jnum(r["expired"]) + "/" + jnum(r["watch_failures"]), jnum(r["events"]),
               jnum(r["failures"]), or_dash(r["last_error"].get<std::string>())});
    std::string leader = j["leader"].get<bool>() ? "this gateway" : or_dash(j["leader_identity"].get<std::string>());
    std::string text = t.render() + "synced: " + (j["synced"].get<bool>() ? "yes" : "no") +
                       "   election: " + j["election"].get<std::string>() + "   leader: " + leader +
                       "   live gateways: " + jnum(j["live_nodes"]) + "   status writes: " + jnum(j["status_writes"]) +
                       "   label writes: " + jnum(j["label_writes"]) +
                       "   write failures: " + jnum(j["write_failures"]) + "\n";
    if (const json& e = j["egress_ips"]; e.is_object()) {
        size_t selected = 0;
        for (const auto& s : e["selected"])
            selected += s["pods"].get<size_t>();
        text += "EgressIP (sources only, not served yet): " + jnum(e["objects"]) + " object(s), " +
                jnum(e["namespaces"]) + " namespace(s), " + jnum(e["pods"]) + " pod(s) kept, " +
                std::to_string(selected) + " pod selection(s)\n";
    }
    return ok(text, j);
}

// One row per address of every EgressIP, from the same JSON as show k8s ("egress_ips"): the node
// status.items names for it, or why the leader left it out (on the leader only; elsewhere "-").
Reply show_egressips(Context& ctx, const Args&) {
    if (!ctx.host.kubernetes)
        return fail("show egressips: the state source is \"files\" (" + ctx.host.config.state.path +
                    "): egwd assigns EgressIPs only with the kubernetes source");
    json j = ctx.host.kubernetes();
    json e = j["egress_ips"];
    if (!e.is_object()) return fail("show egressips: egwd does not watch EgressIPs");
    std::map<std::pair<std::string, std::string>, std::string> unhostable;  // (name, address) -> reason
    if (const json& a = e["assignment"]; a.is_object())
        for (const auto& u : a["unhostable"])
            unhostable[{u["name"].get<std::string>(), u["egress_ip"].get<std::string>()}] =
                u["reason"].get<std::string>();
    Table t({"egressip", "address", "node", "pods", "namespaces"});
    for (const auto& s : e["selected"]) {
        const std::string name = s["name"].get<std::string>();
        for (const auto& ip : s["egress_ips"]) {
            const std::string addr = ip.get<std::string>();
            std::string node = "-";
            for (const auto& item : s["assigned"])
                if (item["egress_ip"] == addr) {
                    node = item["node"].get<std::string>();
                    break;
                }
            if (auto u = unhostable.find({name, addr}); u != unhostable.end()) node = "unassigned: " + u->second;
            t.row({name, addr, node, jnum(s["pods"]), jnum(s["namespaces"])});
        }
    }
    std::string text =
        t.render() + "assigned to this gateway: " + std::to_string(e["assigned_here"].size()) + " address(es)   ";
    if (const json& a = e["assignment"]; a.is_object())
        text += "assigning: " + std::string(a["deciding"].get<bool>() ? "yes" : "waiting for fresh state") +
                "   status writes: " + jnum(a["status_writes"]) + "   write failures: " + jnum(a["write_failures"]) +
                "\n";
    else
        text += std::string("assigning: no (") +
                (j["election"] == "external" ? "election external" : "not the leader") + ")\n";
    return ok(text, e);
}

Reply show_sync(Context& ctx, const Args&) {
    if (!ctx.host.sync) return fail("show sync: session sync is off (the configuration has no \"sync\" section)");
    json j = ctx.host.sync();
    Table peers({"peer", "address", "state", "last-heard", "events out/in", "datagrams out/in", "resent", "lost in/out",
                 "unacked", "ack-lag avg", "bulk"});
    for (const auto& p : j["peers"]) {
        double heard = p["since_heard_s"].get<double>();
        uint64_t acked = p["acked"].get<uint64_t>();
        peers.row({jnum(p["id"]), p["address"].get<std::string>(), p["up"].get<bool>() ? "up" : "down",
                   heard < 0 ? "never" : fmt::format("{:.1f}s ago", heard),
                   jnum(p["events_sent"]) + "/" + jnum(p["events_received"]),
                   jnum(p["datagrams_sent"]) + "/" + jnum(p["datagrams_received"]), jnum(p["resent"]),
                   jnum(p["lost_in"]) + "/" + jnum(p["lost_out"]), jnum(p["unacknowledged"]),
                   acked ? fmt::format("{:.1f}ms", 1000 * p["ack_lag_seconds"].get<double>() / acked) : "-",
                   p["bulk_complete"].get<bool>() ? "complete" : "waiting"});
    }
    Table services({"service-address", "standby-sessions"});
    for (const auto& s : j["standby"]["services"])
        services.row({s["address"].get<std::string>(), jnum(s["sessions"])});
    const json& st = j["standby"];
    std::string refused;
    for (const auto& [reason, n] : j["refused"].items())
        if (n.get<uint64_t>() > 0) refused += (refused.empty() ? "" : ", ") + reason + " " + jnum(n);
    std::string text = peers.render() + "events out " + jnum(j["events_out"]) + ", in " + jnum(j["events_in"]) +
                       "; bytes out " + jnum(j["bytes_out"]) + ", in " + jnum(j["bytes_in"]) +
                       "; dropped on full worker rings " + jnum(j["ring_drops"]) +
                       "; refused: " + (refused.empty() ? "none" : refused) + "\n" +
                       "standby: " + jnum(st["sessions"]) + " of at most " + jnum(st["max"]) + " session(s), " +
                       jnum(st["reserved_ports"]) + " port(s) reserved, " + jnum(st["port_conflicts"]) +
                       " conflict(s) with local sessions; refused full " + jnum(st["full"]) + ", stale epoch " +
                       jnum(st["stale_epoch"]) + ", aged " + jnum(st["aged"]) + "\n" +
                       (st["services"].empty() ? std::string() : services.render()) + "bulk: asked peers " +
                       jnum(j["bulk"]["requests_sent"]) + " time(s), asked by peers " +
                       jnum(j["bulk"]["requests_received"]) + ", dumps sent " + jnum(j["bulk"]["dumps_ended"]) + " (" +
                       jnum(j["bulk"]["events_sent"]) + " of " + jnum(j["bulk"]["events_queued"]) + " event(s))\n";
    if (!j["key_error"].is_null()) text += "key file: " + j["key_error"].get<std::string>() + "\n";
    return ok(text, j);
}

// The JSON is firewall::to_json(): {"enforcing", "reject", "build_ms", "error", "ignored",
// "namespaces": [{"namespace", "status", "pod_ips", "denied", "allowed", "problems", "rules":
// [{"index", "type", "to", "ports", "addresses", "hits"}]}]}; with NS, "namespaces" holds that
// namespace only.
Reply show_egressfirewall(Context& ctx, const Args& a) {
    if (!ctx.host.egress_firewall) return fail("show egressfirewall: this egwd reads no EgressFirewall");
    json j = ctx.host.egress_firewall();
    const std::string& only = a.get("NS");
    if (!only.empty()) {
        json kept = json::array();
        for (const auto& n : j["namespaces"])
            if (n["namespace"] == only) kept.push_back(n);
        if (kept.empty()) {
            std::string why = "show egressfirewall: namespace ";
            why += only;
            why += " has no EgressFirewall in force";
            return fail(why);
        }
        j["namespaces"] = kept;
    }
    // Appended piece by piece: `const char* + std::string` makes gcc 12 warn (-Wrestrict, a
    // false positive) once inlined.
    std::string text = "enforcement: ";
    text += j["enforcing"].get<bool>() ? "on" : "off (policy.egress_firewall)";
    text += "   denied flows: ";
    text += j["reject"].get<std::string>();
    text += '\n';
    for (const auto& n : j["namespaces"]) {
        text += '\n';
        text += n["namespace"].get<std::string>();
        text += "/default: ";
        text += n["status"].get<std::string>();
        text += ", ";
        text += jnum(n["pod_ips"]);
        text += " pod address(es), ";
        text += jnum(n["denied"]);
        text += " denied, ";
        text += jnum(n["allowed"]);
        text += " allowed\n";
        Table t({"#", "type", "to", "ports", "addresses now", "hits"});
        for (const auto& r : n["rules"]) {
            std::string addrs;
            for (const auto& ad : r["addresses"]) {
                if (!addrs.empty()) addrs += ' ';
                addrs += ad.get<std::string>();
            }
            t.row({jnum(r["index"]), r["type"].get<std::string>(), r["to"].get<std::string>(),
                   or_dash(r["ports"].get<std::string>()), addrs.empty() ? "(none: matches nothing)" : addrs,
                   jnum(r["hits"])});
        }
        text += t.render();
        for (const auto& p : n["problems"]) {
            text += "  not applied: ";
            text += p.get<std::string>();
            text += '\n';
        }
    }
    if (only.empty())
        for (const auto& i : j["ignored"]) {
            text += "ignored: ";
            text += i.get<std::string>();
            text += '\n';
        }
    if (const std::string& err = j["error"].get_ref<const std::string&>(); !err.empty()) {
        text += "last build failed: ";
        text += err;
        text += '\n';
    }
    return ok(text, j);
}

Reply show_drops(Context& ctx, const Args&) {
    const json& drops = ctx.status()["drops"];
    Table t({"reason", "packets", "description"});
    for (unsigned r = 0; r < dp::kDropReasonCount; ++r) {
        const char* name = dp::kDropReasonNames[r];
        t.row({name, jnum(drops.contains(name) ? drops[name] : json(nullptr)), dp::kDropReasonHelp[r]});
    }
    return ok(t.render(), drops);
}

Reply show_icmp(Context& ctx, const Args&) {
    const json& icmp = ctx.status()["icmp"];
    const json& sent = icmp["sent"];
    Table t({"type", "sent", "description"});
    for (unsigned e = 0; e < dp::kIcmpErrorCount; ++e) {
        const char* name = dp::kIcmpErrorNames[e];
        t.row({name, jnum(sent.contains(name) ? sent[name] : json(nullptr)), dp::kIcmpErrorHelp[e]});
    }
    return ok(t.render() + "rate-limited: " + jnum(icmp["rate_limited"]) + "\n", icmp);
}

// The file's own shape (config::to_json, every section with its defaults spelt out) plus "file",
// the path egwd loaded it from: without "file", the JSON form is itself a loadable configuration.
Reply show_config(Context& ctx, const Args&) {
    const config::Config& c = ctx.host.config;
    json j = config::to_json(c);
    j["file"] = c.file;
    Table t({"key", "value"});
    flatten(j, "", t);
    return ok(t.render(), j);
}

Reply set_log_level(Context&, const Args& a) {
    const std::string& level = a.get("LEVEL");
    auto before = spdlog::default_logger()->level();
    spdlog::set_level(spdlog::level::from_str(level));
    spdlog::info("log level {} (was {}), set from the CLI", level, spdlog::level::to_string_view(before));
    return ok("log level is now " + level);
}

Reply reload_config(Context& ctx, const Args&) {
    if (!ctx.host.reload) return fail("reload config: this egwd has no configuration file to re-read");
    return ctx.host.reload();
}

Reply show_version(Context& ctx, const Args&) {
    (void)ctx;
    double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - kStarted).count();
    std::string text = std::string("egwd ") + EGW_VERSION + "\n" + rte_version() + "\nuptime " +
                       std::to_string(static_cast<uint64_t>(up)) + " s\n";
    return ok(text, json{{"egwd", EGW_VERSION}, {"dpdk", rte_version()}, {"uptime_seconds", up}});
}

Reply help(Context& ctx, const Args& a) {
    return ok(ctx.grammar.help(a.get("SECTION")));
}

Reply quit(Context& ctx, const Args&) {
    Reply r = ok(ctx.origin == Origin::console ? "stopping egwd" : "bye");
    r.quit = true;
    return r;
}

}  // namespace egw::cli
