// SPDX-License-Identifier: Apache-2.0
//
// Section "services": the evaluated EgressServices (PolicyBuilder views), with the counters
// collect_status() sums over the workers.
#include <algorithm>

#include "config/config.h"
#include "control/cli/handlers.h"
#include "control/cli/table.h"
#include "control/policy/policy_builder.h"
#include "control/model/objects.h"

namespace egw::cli {

namespace {

using nlohmann::json;

std::string namespace_of(const std::string& key) {
    return key.substr(0, key.find('/'));
}

const json* status_of(Context& ctx, const std::string& key) {
    for (const auto& s : ctx.status()["services"])
        if (jstr(s["key"]) == key) return &s;
    return nullptr;
}

std::string selector_text(const model::LabelSelector& sel) {
    if (sel.empty()) return "{} (every node)";
    std::string out;
    for (const auto& [k, v] : sel.match_labels)
        out += (out.empty() ? "" : ", ") + k + "=" + v;
    for (const auto& e : sel.match_expressions) {
        std::string values;
        for (const auto& v : e.values)
            values += (values.empty() ? "" : ",") + v;
        out += (out.empty() ? "" : ", ") + e.key + " " + e.op + (values.empty() ? "" : " (" + values + ")");
    }
    return out;
}

json selector_json(const model::LabelSelector& sel) {
    json exprs = json::array();
    for (const auto& e : sel.match_expressions)
        exprs.push_back({{"key", e.key}, {"operator", e.op}, {"values", e.values}});
    return {{"matchLabels", sel.match_labels}, {"matchExpressions", exprs}};
}

}  // namespace

Reply show_services(Context& ctx, const Args& a) {
    const std::string& ns = a.get("namespace");
    Table t({"service", "host", "programmed", "mode", "ingress-ip", "ingress-ipv6", "vrf", "endpoints", "sessions",
             "packets-out", "packets-in", "reason"});
    json rows = json::array();
    for (const auto& s : ctx.status()["services"]) {
        std::string key = jstr(s["key"]);
        if (!ns.empty() && namespace_of(key) != ns) continue;
        std::string host = jstr(s["status_host"]);
        // PROGRAMMED is the IPv4 data plane's answer; a Service that translates only its IPv6
        // endpoints (no IPv4 ingress IP) says so instead of "no".
        std::string programmed = s["programmed"].get<bool>()         ? "yes"
                                 : s.value("programmed_ipv6", false) ? "IPv6 only"
                                                                     : "no";
        t.row({key, host.empty() ? "\"\"" : host, programmed, jstr(s["mode"]), or_dash(jstr(s["ingress_ip"])),
               or_dash(jstr(s["ingress_ipv6"])), or_dash(jstr(s["vrf"])),
               jnum(s["endpoints"]) + (s.value("endpoints_ipv6", 0) ? "+" + jnum(s["endpoints_ipv6"]) + " IPv6" : ""),
               jnum(s["sessions_active"]), jnum(s["packets_out"]), jnum(s["packets_in"]), or_dash(jstr(s["reason"]))});
        rows.push_back(s);
    }
    std::string text = t.render();
    if (t.rows() == 0) text += ns.empty() ? "(no EgressService)\n" : "(no EgressService in namespace " + ns + ")\n";
    return ok(text, rows);
}

// EgressQoS as the files source gave it: one row per object, its rules below it.
Reply show_egressqos(Context& ctx, const Args& a) {
    const std::string& ns = a.get("namespace");
    Table t({"egressqos", "status", "pods", "rules"});
    json rows = json::array();
    for (const control::EgressQosView& v : ctx.host.policy.egress_qos_views()) {
        if (!ns.empty() && namespace_of(v.key) != ns) continue;
        std::string rules;
        for (size_t i = 0; i < v.rules.size(); ++i)
            rules += (i ? "; " : "") + std::to_string(i) + ": " + v.rules[i];
        t.row({v.key, v.status, std::to_string(v.pods), rules.empty() ? "-" : rules});
        rows.push_back({{"key", v.key}, {"status", v.status}, {"pods", v.pods}, {"rules", v.rules}});
    }
    if (rows.empty()) return ok(ns.empty() ? "no EgressQoS\n" : "no EgressQoS in namespace " + ns + "\n", rows);
    return ok(t.render(), rows);
}

Reply show_service(Context& ctx, const Args& a) {
    const std::string& key = a.get("SERVICE");
    const control::ServiceView* view = nullptr;
    for (const auto& v : ctx.host.policy.views())
        if (v.state.key == key) view = &v;
    if (!view) return fail("no EgressService \"" + key + "\" (show services lists them)");
    const model::ServiceState& st = view->state;
    const json* counters = status_of(ctx, key);

    const model::EgressService* es = nullptr;
    const model::Service* svc = nullptr;
    if (ctx.host.objects) {
        auto e = ctx.host.objects->egress_services.find(key);
        if (e != ctx.host.objects->egress_services.end()) es = &e->second;
        auto s = ctx.host.objects->services.find(key);
        if (s != ctx.host.objects->services.end()) svc = &s->second;
    }

    std::vector<std::string> ingress;
    if (svc) {
        for (const auto& i : svc->ingress)
            ingress.push_back(!i.ip.empty() ? i.ip : i.hostname + " (hostname)");
    } else {
        if (st.ingress_ipv4) ingress.push_back(config::format_ipv4(*st.ingress_ipv4));
        if (st.ingress_ipv6) ingress.push_back(net::to_string(*st.ingress_ipv6));
    }
    std::vector<std::string> endpoints;
    for (uint32_t ip : st.endpoint_ipv4s)
        endpoints.push_back(config::format_ipv4(ip));
    for (const auto& ip : st.endpoint_ipv6s)
        endpoints.push_back(net::to_string(ip));
    std::string families;
    for (const auto& f : st.ip_families)
        families += (families.empty() ? "" : ", ") + f;
    if (!st.ip_family_policy.empty())
        families += (families.empty() ? "" : " ") + std::string("(") + st.ip_family_policy + ")";

    std::string why;
    if (!st.serve_here)
        why = st.reason;
    else if (st.mode == model::Mode::network)
        why = "sourceIPBy Network: every gateway serves it";
    else
        why = "this gateway (" + ctx.host.config.node.name + ") is the chosen host";
    std::string programmed;
    const std::string ipv6_nat = st.ingress_ipv6 ? net::to_string(*st.ingress_ipv6) : "";
    if (view->programmed && st.mode == model::Mode::network)
        programmed = "yes: masquerade to the egress port's address, VRF " + view->vrf;
    else if (view->programmed)
        programmed = "yes: SNAT to " + config::format_ipv4(st.ingress_ipv4.value_or(0)) +
                     (view->programmed6 ? " and " + ipv6_nat : "") + ", VRF " + view->vrf;
    else if (view->programmed6)
        programmed = "IPv6 only: SNAT to " + ipv6_nat + ", VRF " + view->vrf + "; IPv4 not: " + view->problem;
    else
        programmed = "no: " + (view->problem.empty() ? st.reason : view->problem);

    auto joined = [](const std::vector<std::string>& v) {
        std::string out;
        for (const auto& s : v)
            out += (out.empty() ? "" : ", ") + s;
        return out.empty() ? std::string("(none)") : out;
    };
    std::string network = st.network.empty() ? "\"\" (default table)" : st.network;
    std::vector<std::pair<std::string, std::string>> lines = {
        {"service", key},
        {"sourceIPBy", model::to_string(st.mode)},
        {"network", network + (view->vrf.empty() ? ": no such VRF" : " -> VRF " + view->vrf)},
        {"nodeSelector", es ? selector_text(es->node_selector) : "(spec not available)"},
        {"status.host", st.status_host.empty() ? "\"\"" : st.status_host},
        {"why", why},
        {"programmed", programmed},
        {"ingress IPs", joined(ingress)},
        {"ipFamilies", families.empty() ? "(not set)" : families},
        {"IPv4", view->ipv4},
        {"IPv6", view->ipv6},
        {"ETP", st.etp_local ? "Local" : "Cluster"},
        {"endpoints", joined(endpoints)},
        {"endpoint nodes", joined(st.endpoint_nodes)},
    };
    if (counters) {
        const json& c = *counters;
        lines.push_back({"packets", "out " + jnum(c["packets_out"]) + " (" + jnum(c["bytes_out"]) + " bytes), in " +
                                        jnum(c["packets_in"]) + " (" + jnum(c["bytes_in"]) + " bytes)"});
        lines.push_back(
            {"sessions", "active " + jnum(c["sessions_active"]) + ", created " + jnum(c["sessions_created"])});
        lines.push_back({"port failures", jnum(c["port_alloc_failures"]) + " (no free NAT port)"});
    }
    size_t width = 0;
    for (const auto& [k, v] : lines)
        width = std::max(width, k.size());
    std::string text;
    for (const auto& [k, v] : lines)
        text += k + std::string(width - k.size() + 2, ' ') + v + "\n";

    json j = {{"key", key},
              {"spec",
               {{"sourceIPBy", es ? es->source_ip_by : model::to_string(st.mode)},
                {"network", st.network},
                {"nodeSelector", es ? selector_json(es->node_selector) : json(nullptr)}}},
              {"status", {{"host", st.status_host}}},
              {"reason", why},
              {"serve_here", st.serve_here},
              {"programmed", view->programmed},
              {"programmed_ipv6", view->programmed6},
              {"problem", view->problem},
              {"mode", model::to_string(st.mode)},
              {"vrf", view->vrf},
              {"ingress_ips", ingress},
              {"ingress_ipv4", st.ingress_ipv4 ? json(config::format_ipv4(*st.ingress_ipv4)) : json(nullptr)},
              {"ingress_ipv6", st.ingress_ipv6 ? json(net::to_string(*st.ingress_ipv6)) : json(nullptr)},
              {"ip_families", st.ip_families},
              {"ip_family_policy", st.ip_family_policy},
              {"families", {{"IPv4", view->ipv4}, {"IPv6", view->ipv6}}},
              {"etp_local", st.etp_local},
              {"endpoints", endpoints},
              {"endpoint_nodes", st.endpoint_nodes},
              {"counters", counters ? *counters : json(nullptr)}};
    return ok(text, j);
}

}  // namespace egw::cli
