// SPDX-License-Identifier: Apache-2.0
//
// config::to_json (config/dump.h): what config/loader.cpp reads, written back. Each section below
// mirrors the loader's read_* function of the same name, key for key.
#include "config/dump.h"

namespace egw::config {

namespace {

using json = nlohmann::json;

json prefixes(const std::vector<IpPrefix>& ps) {
    json out = json::array();
    for (const auto& p : ps)
        out.push_back(net::to_string(p));
    return out;
}

json eal(const EalConfig& e) {
    return {{"lcores", e.lcores},       {"main_lcore", e.main_lcore},   {"no_huge", e.no_huge},
            {"memory_mb", e.memory_mb}, {"file_prefix", e.file_prefix}, {"vdevs", e.vdevs},
            {"pci_allow", e.pci_allow}, {"extra_args", e.extra_args}};
}

json ports(const std::vector<PortConfig>& ps) {
    json out = json::array();
    for (const auto& p : ps) {
        json j = {{"name", p.name},
                  {"role", to_string(p.role)},
                  {"vrf", p.vrf},
                  {"addresses", prefixes(p.addresses)},
                  {"mtu", p.mtu}};
        if (p.is_vlan()) {  // the device, MAC and queues are the parent's
            j["parent"] = p.parent;
            j["vlan"] = p.vlan;
            out.push_back(std::move(j));
            continue;
        }
        j["device"] = p.device;
        j["rx_desc"] = p.rx_desc;
        j["tx_desc"] = p.tx_desc;
        if (p.mac) j["mac"] = format_mac(*p.mac);  // absent: the device's own MAC
        if (p.queues) j["queues"] = p.queues;      // absent: one per worker
        out.push_back(std::move(j));
    }
    return out;
}

json neighbors(const std::vector<NeighborConfig>& ns) {
    json out = json::array();
    for (const auto& n : ns)
        out.push_back({{"port", n.port}, {"ip", net::to_string(n.ip)}, {"mac", format_mac(n.mac)}});
    return out;
}

// "default" included: the loader accepts it (with table 254) anywhere in the list.
json vrfs(const std::vector<VrfConfig>& vs) {
    json out = json::array();
    for (const auto& v : vs)
        out.push_back({{"name", v.name}, {"table", v.table}});
    return out;
}

json routes(const std::vector<RouteConfig>& rs) {
    json out = json::array();
    for (const auto& r : rs) {
        json j = {{"vrf", r.vrf}, {"prefix", net::to_string(r.prefix)}, {"port", r.port}};
        if (r.via) j["via"] = net::to_string(*r.via);  // absent: directly connected
        out.push_back(std::move(j));
    }
    return out;
}

json cluster(const ClusterConfig& c) {
    json node_ips = json::array();
    for (const IpAddr& ip : c.node_ips)
        node_ips.push_back(net::to_string(ip));
    return {{"pod_cidrs", prefixes(c.pod_cidrs)}, {"service_cidrs", prefixes(c.service_cidrs)}, {"node_ips", node_ips}};
}

json sessions(const SessionConfig& s) {
    const TimeoutConfig& t = s.timeouts;
    return {{"max", s.max_sessions},
            {"max_ipv6", s.max_sessions_ipv6},
            {"port_min", s.port_min},
            {"port_max", s.port_max},
            {"timeouts",
             {{"tcp_established", t.tcp_established_s},
              {"tcp_transitory", t.tcp_transitory_s},
              {"tcp_half_closed", t.tcp_half_closed_s},
              {"udp", t.udp_s},
              {"icmp", t.icmp_s}}},
            {"tcp_open", to_string(s.tcp_open)},
            {"max_per_pod", s.max_per_pod}};
}

json arp(const ArpConfig& a) {
    return {{"max_neighbors", a.max_neighbors},
            {"hold_packets", a.hold_packets},
            {"retry_ms", a.retry_ms},
            {"reachable_s", a.reachable_s},
            {"probes", a.probes},
            {"unused_s", a.unused_s},
            {"announce_count", a.announce_count},
            {"announce_interval_ms", a.announce_interval_ms}};
}

json icmp(const IcmpConfig& i) {
    return {{"errors_per_second", i.errors_per_second}, {"burst", i.burst}};
}

json reassembly(const ReassemblyConfig& r) {
    json j = {{"max_datagrams", r.max_datagrams}, {"max_fragments", r.max_fragments}, {"timeout_ms", r.timeout_ms}};
    if (r.max_per_source) j["max_per_source"] = r.max_per_source;  // else the default, a quarter
    return j;
}

json node(const NodeConfig& n) {
    json labels = json::object();
    for (const auto& [k, v] : n.labels)
        labels[k] = v;
    return {{"name", n.name}, {"labels", labels}};
}

// Only the keys the source accepts: the loader refuses "path" with kubernetes, and a kubeconfig
// or an election key with files. "poll_ms" is accepted (and kept) with either, so it is written
// with either.
json state(const StateConfig& s) {
    json j = {{"source", to_string(s.source)}, {"poll_ms", s.poll_ms}};
    switch (s.source) {
    case StateSource::files:
        j["path"] = s.path;
        break;
    case StateSource::kubernetes:
        j["kubeconfig"] = s.kubeconfig;
        j["election"] = to_string(s.election);
        j["lease_namespace"] = s.lease_namespace;
        j["lease_duration_s"] = s.lease_duration_s;
        j["renew_deadline_ms"] = s.renew_deadline_ms;
        j["retry_period_ms"] = s.retry_period_ms;
        j["refusal_grace_ms"] = s.refusal_grace_ms;
        break;
    }
    return j;
}

// Written even without an endpoint: {"enabled": false, "listen": <default>} loads back to the
// same MetricsConfig as an absent section, and says so explicitly.
json metrics(const MetricsConfig& m) {
    return {{"enabled", m.enabled}, {"listen", format_listen(m)}};
}

json sync(const SyncConfig& c) {
    json peers = json::array();
    for (const SyncPeerConfig& p : c.peers)
        peers.push_back({{"id", p.id}, {"address", format_host_port(p.host, p.port)}});
    return {{"id", c.id},   {"listen", format_host_port(c.host, c.port)},    {"key_file", c.key_file}, {"peers", peers},
            {"mtu", c.mtu}, {"standby_max_sessions", c.standby_max_sessions}};
}

}  // namespace

json to_json(const Config& c) {
    json j = {{"eal", eal(c.eal)},
              {"workers", c.workers},
              {"mempool", {{"mbufs", c.mempool.mbufs}, {"cache", c.mempool.cache}, {"data_room", c.mempool.data_room}}},
              {"ports", ports(c.ports)},
              {"neighbors", neighbors(c.neighbors)},
              {"vrfs", vrfs(c.vrfs)},
              {"routes", routes(c.routes)},
              {"cluster", cluster(c.cluster)},
              {"default_action", to_string(c.default_action)},
              {"sessions", sessions(c.sessions)},
              {"arp", arp(c.arp)},
              {"icmp", icmp(c.icmp)},
              {"reassembly", reassembly(c.reassembly)},
              {"node", node(c.node)},
              {"state", state(c.state)},
              {"metrics", metrics(c.metrics)}};
    // Only what is set: an absent egress_firewall is the state source's default, which a reload
    // changing the source must not see as a change of its own.
    json policy = json::object();
    if (c.policy.egress_firewall) policy["egress_firewall"] = *c.policy.egress_firewall ? "enforce" : "off";
    if (c.policy.egress_firewall_icmp) policy["egress_firewall_reject"] = "icmp";
    if (!c.policy.dns_servers.empty()) policy["dns_servers"] = c.policy.dns_servers;
    if (!policy.empty()) j["policy"] = policy;
    // Only when set: an absent section is how the loader takes "no ingress next hop".
    if (c.ingress.via || c.ingress.via6) {
        json in = {{"port", c.ingress.port}};
        if (c.ingress.via) in["via"] = net::to_string(*c.ingress.via);
        if (c.ingress.via6) in["via6"] = net::to_string(*c.ingress.via6);
        j["ingress"] = in;
    }
    // Only when on: an absent section is how the loader takes "no session sync".
    if (c.sync.enabled) j["sync"] = sync(c.sync);
    // Only when set: an absent capacity is how the loader takes "unlimited".
    if (c.egress_ip.capacity) j["egress_ip"] = {{"capacity", *c.egress_ip.capacity}};
    return j;
}

}  // namespace egw::config
