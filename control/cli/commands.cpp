// SPDX-License-Identifier: Apache-2.0
//
// egw's command table: every command egwd's console and egwctl accept, with its arguments, help
// and handler. Adding a command is adding a row here and a handler in the cmd_*.cpp of its
// section; completion, `help`, error messages and --json follow from the row.
#include "control/cli/handlers.h"

#include <array>
#include <charconv>

#include "config/config.h"
#include "config/ip.h"

namespace egw::cli {

namespace {

bool is_uint(std::string_view s, uint64_t max) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size() && v <= max;
}

bool check_count(std::string_view s) {
    return is_uint(s, 1000000000) && s.find_first_not_of('0') != std::string_view::npos;
}
bool check_l4port(std::string_view s) {
    return is_uint(s, 65535);
}
bool check_ip(std::string_view s) {
    return net::parse_ip(s).has_value();
}

// RFC 1123 label, as Kubernetes namespaces and names are.
bool dns_label(std::string_view s) {
    if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    return true;
}

bool check_service(std::string_view s) {
    size_t slash = s.find('/');
    return slash != std::string_view::npos && dns_label(s.substr(0, slash)) && !s.substr(slash + 1).empty() &&
           s.substr(slash + 1).size() <= 253 && s.substr(slash + 1).find('/') == std::string_view::npos;
}

const ArgKind kKinds[] = {
    {"PORTS", "a port name or DPDK port id, or all", {"all"}, NameSet::ports, true},
    {"PORT", "a port name or DPDK port id", {}, NameSet::ports, true},
    {"NS", "a Kubernetes namespace", {}, NameSet::namespaces, false, dns_label},
    {"SERVICE", "an EgressService as namespace/name", {}, NameSet::services, false, check_service},
    {"IP", "an IPv4 or IPv6 address", {}, NameSet::none, false, check_ip},
    {"L4PORT", "a TCP/UDP port or ICMP echo identifier, 0-65535", {}, NameSet::none, false, check_l4port},
    {"PROTO",
     "tcp, udp, icmp (echo of both families) or icmpv6",
     {"tcp", "udp", "icmp", "icmpv6"},
     NameSet::none,
     true},
    {"N", "a number from 1 to 1000000000", {}, NameSet::none, false, check_count},
    {"VRF", "a VRF name or routing table number", {}, NameSet::vrfs, true},
    {"LEVEL",
     "trace, debug, info, warn, error, critical or off",
     {"trace", "debug", "info", "warn", "error", "critical", "off"},
     NameSet::none,
     true},
    {"SECTION", "a help section, or all", {}, NameSet::sections, true},
};

const Section kSections[] = {
    {"ports", "port counters: statistics, extended statistics, clearing them"},
    {"services", "EgressServices: status.host and why, programming, counters"},
    {"sessions", "NAPT sessions, SNAT port pools, closing sessions"},
    {"routing", "VRFs, routes and neighbours"},
    {"trace", "packet trace: the next packets' way through the stages, with each stage's decision"},
    {"system", "lcores, drops, configuration, log level, help, quit"},
};

const Command kCommands[] = {
    {"show port stats PORTS", "ports", "packets and bytes received and sent, missed and errors, of one port or all",
     show_port_stats},
    {"show port xstats PORT", "ports", "the driver's extended statistics of one port", show_port_xstats},
    {"show port info PORTS", "ports", "driver, MAC address, link state and speed, MTU, queues of one port or all",
     show_port_info},
    {"show steering", "ports",
     "how replies reach the worker owning their session, per outside port: rte_flow rules (listed in testpmd "
     "syntax) or software hand-off, and hand-offs per worker",
     show_steering},
    {"show vlans", "ports",
     "the 802.1Q VLAN sub-ports: parent port, VLAN id, role, VRF, MTU, addresses, tagged frames received and sent",
     show_vlans},
    {"clear port stats PORTS", "ports", "reset the statistics and extended statistics of one port or all",
     clear_port_stats},
    {"clear counters", "ports",
     "reset every port's statistics (clear port stats all); the workers' counters only grow, Prometheus "
     "takes rates of them",
     clear_counters},

    {"show services [namespace NS]", "services",
     "every EgressService: status.host, whether this gateway translates it and why not, counters", show_services},
    {"show service SERVICE", "services",
     "one EgressService: spec, status.host and why, ingress IPs, VRF, endpoints, counters", show_service},
    {"show egressqos [namespace NS]", "services",
     "the EgressQoS objects (the files source): status (\"EgressQoS Rules applied\" or why ignored), the pods "
     "they mark, the rules in order",
     show_egressqos},

    {"show sessions [service SERVICE] [saddr IP] [daddr IP] [sport L4PORT] [dport L4PORT] [proto PROTO] [limit N]",
     "sessions",
     "NAPT sessions of both families, filtered: saddr/sport are the pod's side, daddr/dport the remote's "
     "(an address matches sessions of its family); at most 100 rows unless limit says otherwise",
     show_sessions},
    {"show snat pools", "sessions",
     "per NAT address (IPv4 and IPv6), protocol and worker: NAT ports in use against the worker's port block",
     show_snat_pools},
    {"clear sessions service SERVICE", "sessions",
     "close every session of one EgressService (done by the workers that own them)", clear_sessions_service},
    {"clear sessions all", "sessions", "close every session", clear_sessions_all},

    {"show egressfirewall [NS]", "services",
     "EgressFirewall rules in force per namespace, in order, with the addresses each stands for now and its hits; "
     "denied and allowed flows, objects ignored and why",
     show_egressfirewall},

    {"show vrfs", "routing", "VRFs with their table number, ports, routes and Services", show_vrfs},
    {"show routes vrf VRF", "routing", "connected and static routes of one VRF", show_routes},
    {"show neighbors", "routing", "the ARP table: static, learned and incomplete entries", show_neighbors},
    {"show arp", "routing", "ARP counters and the gratuitous ARPs still to be sent", show_arp},

    {"trace start [N] [port PORT] [saddr IP] [daddr IP] [sport L4PORT] [dport L4PORT] [proto PROTO]", "trace",
     "trace the next N packets (50 unless given, at most 1000, over all workers together) that match: received on "
     "PORT, with that source or destination address or port (an address matches its family only), of that "
     "protocol; replaces an earlier trace",
     trace_start},
    {"show trace", "trace", "the traced packets: worker, port, every stage's decision, headers on the way in and out",
     show_trace},
    {"trace stop", "trace", "stop taking packets; show trace still shows those taken", trace_stop},

    {"show lcores", "system", "the lcores and their busy and total TSC cycles", show_lcores},
    {"show k8s", "system", "the Kubernetes connection: per-kind sync state, last resourceVersion, leader", show_k8s},
    {"show egressips", "system",
     "EgressIPs: each address, the node status.items assigns it to (or why the leader cannot), and the pods and "
     "namespaces the object selects",
     show_egressips},
    {"show sync", "system",
     "session sync: peers and their links, events and bytes each way, refusals, the standby sessions per Service",
     show_sync},
    {"show drops", "system", "dropped packets by reason, summed over the workers", show_drops},
    {"show icmp", "system", "ICMP errors the gateway sent itself, by type, and those the rate limit held back",
     show_icmp},
    {"show config", "system", "the configuration egwd runs with", show_config},
    {"show version", "system", "egwd's and DPDK's versions, and how long egwd has run", show_version},
    {"set log level LEVEL", "system", "change the level of egwd's log", set_log_level},
    {"reload config", "system",
     "re-read the configuration file: apply it whole (routes, neighbours, default action, ARP, address lists) "
     "or refuse it and keep running as before",
     reload_config},
    {"help [SECTION]", "system", "the sections, or the commands of one section (all: every section)", help},
    {"quit", "system", "on egwd's console: stop egwd; in egwctl: leave", quit},
};

}  // namespace

const Grammar& egw_grammar() {
    static const Grammar g(kCommands, kKinds, kSections);
    return g;
}

}  // namespace egw::cli
