// SPDX-License-Identifier: Apache-2.0
#include "config/reload.h"

#include <algorithm>
#include <string_view>

#include "config/dump.h"

namespace egw::config {

namespace {

using nlohmann::json;

void differences(const json& a, const json& b, const std::string& path, std::vector<std::string>& out) {
    if (a == b) return;
    if (a.is_object() && b.is_object()) {
        for (auto it = a.begin(); it != a.end(); ++it)
            differences(it.value(), b.contains(it.key()) ? b.at(it.key()) : json(),
                        path.empty() ? it.key() : path + "." + it.key(), out);
        for (auto it = b.begin(); it != b.end(); ++it)
            if (!a.contains(it.key())) out.push_back(path.empty() ? it.key() : path + "." + it.key());
        return;
    }
    if (a.is_array() && b.is_array() && a.size() == b.size()) {
        for (size_t i = 0; i < a.size(); ++i)
            differences(a[i], b[i], path + "[" + std::to_string(i) + "]", out);
        return;
    }
    out.push_back(path);
}

// `path` is `prefix` or lies below it.
bool under(std::string_view path, std::string_view prefix) {
    return path.starts_with(prefix) &&
           (path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[');
}

bool live_reloadable(std::string_view path, StateSource source) {
    for (std::string_view p :
         {"routes", "neighbors", "default_action", "arp.hold_packets", "arp.retry_ms", "arp.reachable_s", "arp.probes",
          "arp.unused_s", "arp.announce_count", "arp.announce_interval_ms", "ingress", "cluster.service_cidrs",
          "cluster.node_ips", "policy.egress_firewall", "policy.egress_firewall_reject"})
        if (under(path, p)) return true;
    if (source == StateSource::files)
        for (std::string_view p : {"cluster.pod_cidrs", "node.labels", "state.poll_ms"})
            if (under(path, p)) return true;
    return false;
}

}  // namespace

ConfigChanges compare_for_reload(const Config& running, const Config& next) {
    std::vector<std::string> paths;
    differences(to_json(running), to_json(next), "", paths);
    std::sort(paths.begin(), paths.end());
    ConfigChanges c;
    for (auto& p : paths)
        (live_reloadable(p, running.state.source) ? c.live : c.restart).push_back(std::move(p));
    return c;
}

void apply_live(Config& running, const Config& next) {
    running.routes = next.routes;
    running.neighbors = next.neighbors;
    running.default_action = next.default_action;
    running.arp.hold_packets = next.arp.hold_packets;
    running.arp.retry_ms = next.arp.retry_ms;
    running.arp.reachable_s = next.arp.reachable_s;
    running.arp.probes = next.arp.probes;
    running.arp.unused_s = next.arp.unused_s;
    running.arp.announce_count = next.arp.announce_count;
    running.arp.announce_interval_ms = next.arp.announce_interval_ms;
    running.ingress = next.ingress;
    running.cluster.service_cidrs = next.cluster.service_cidrs;
    running.cluster.node_ips = next.cluster.node_ips;
    running.policy.egress_firewall = next.policy.egress_firewall;
    running.policy.egress_firewall_icmp = next.policy.egress_firewall_icmp;
    if (running.state.source == StateSource::files) {
        running.cluster.pod_cidrs = next.cluster.pod_cidrs;
        running.node.labels = next.node.labels;
        running.state.poll_ms = next.state.poll_ms;
    }
}

}  // namespace egw::config
