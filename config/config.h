// SPDX-License-Identifier: Apache-2.0
//
// egwd's configuration: one JSON file, loaded strictly (config/loader.cpp).
//
// The structs below are plain values; the loader fills them and checks every cross reference
// (a route's port and VRF, a neighbour's port, a port's VRF) so that code past the loader can
// rely on names resolving. Addresses of both families are net::IpAddr / net::IpPrefix values
// (config/ip.h). See docs/configuration.md for the file format with an example per field.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/ip.h"
#include "dataplane/tables/roles.h"

namespace egw::config {

using net::IpAddr;
using net::IpPrefix;

struct MacAddr {
    uint8_t bytes[6] = {};
    bool operator==(const MacAddr&) const = default;
};

struct EalConfig {
    std::string lcores = "0-1";           // EAL -l, or --lcores for the mapping form
    unsigned main_lcore = 0;              // EAL --main-lcore; the control thread runs here
    bool no_huge = true;                  // --no-huge
    unsigned memory_mb = 512;             // -m
    std::string file_prefix = "egw";      // --file-prefix
    std::vector<std::string> vdevs;       // --vdev=...
    std::vector<std::string> pci_allow;   // -a ...; empty with vdevs only means --no-pci
    std::vector<std::string> extra_args;  // appended verbatim
    bool operator==(const EalConfig&) const = default;
};

struct MempoolConfig {
    unsigned mbufs = 16383;  // per pool (one pool for all ports)
    unsigned cache = 256;
    unsigned data_room = 2176;  // RTE_MBUF_DEFAULT_BUF_SIZE
    bool operator==(const MempoolConfig&) const = default;
};

using PortRole = dp::PortRole;  // inside or outside (none is not configurable)

// Ports a configuration may declare, VLANs included: each is a logical port of the data plane
// (dp::kMaxPorts, which the runtime checks it against).
inline constexpr unsigned kMaxPortsWithVlans = 16;

// Addresses a port may have of each family (dp::kMaxPortAddresses: the port table holds that many
// of each, and the policy builder checks it is the same number).
inline constexpr unsigned kMaxAddressesPerFamily = 8;

struct PortConfig {
    std::string name;    // egw's name for the port, used everywhere else in the file
    std::string device;  // DPDK device name: "net_tap0", "net_pcap0", "0000:01:00.0"; "" for a VLAN
    // An 802.1Q VLAN of another port (a sub-port: docs/architecture.md#vlans): the parent port's
    // name and the VLAN id (1..4094). A VLAN has no device, MAC or queues of its own.
    std::string parent;
    unsigned vlan = 0;  // 0: not a VLAN
    PortRole role = PortRole::inside;
    std::string vrf = "default";  // name of a declared VRF
    // IPv4 and IPv6 interface addresses in the order written; the first IPv4 one is the port's
    // masquerade address.
    std::vector<IpPrefix> addresses;
    std::optional<MacAddr> mac;  // absent: use the device's MAC and enable promiscuous mode
    unsigned mtu = 1500;
    unsigned rx_desc = 1024;
    unsigned tx_desc = 1024;
    unsigned queues = 0;  // receive queues; 0: one per worker (clamped to the device's maximum)
    bool is_vlan() const { return vlan != 0; }
    bool operator==(const PortConfig&) const = default;
};

struct NeighborConfig {
    std::string port;
    IpAddr ip;
    MacAddr mac;
    bool operator==(const NeighborConfig&) const = default;
};

struct VrfConfig {
    std::string name;
    uint32_t table = 0;  // Linux-style table number; EgressService.spec.network may name either
    bool operator==(const VrfConfig&) const = default;
};

struct RouteConfig {
    std::string vrf = "default";
    IpPrefix prefix;
    std::optional<IpAddr> via;  // next hop of the prefix's family; absent means directly connected on `port`
    std::string port;
    bool operator==(const RouteConfig&) const = default;
};

struct ClusterConfig {
    std::vector<IpPrefix> pod_cidrs;  // either family, in the order written
    std::vector<IpPrefix> service_cidrs;
    std::vector<IpAddr> node_ips;
    bool operator==(const ClusterConfig&) const = default;
};

using DefaultAction = dp::DefaultAction;

struct TimeoutConfig {
    unsigned tcp_established_s = 7440;
    unsigned tcp_transitory_s = 240;
    unsigned tcp_half_closed_s = 600;
    unsigned udp_s = 300;
    unsigned icmp_s = 60;
    bool operator==(const TimeoutConfig&) const = default;
};

// Which TCP segments of a pod with no session may open one.
enum class TcpOpen {
    loose,   // a SYN, or a segment of a connection already under way (Linux conntrack's default)
    strict,  // a SYN only
};

struct SessionConfig {
    unsigned max_sessions = 1u << 20;       // IPv4 sessions, across all workers
    unsigned max_sessions_ipv6 = 1u << 20;  // IPv6 sessions, across all workers; `max` when not given
    uint16_t port_min = 1024;               // NAT port range, split into one block per worker
    uint16_t port_max = 65535;
    TimeoutConfig timeouts;
    TcpOpen tcp_open = TcpOpen::loose;
    unsigned max_per_pod = 0;  // sessions one pod may have, across all workers; 0: no limit
    bool operator==(const SessionConfig&) const = default;
};

struct ArpConfig {
    unsigned max_neighbors = 4096;
    unsigned hold_packets = 256;           // packets held for unresolved next hops, all neighbours together
    unsigned retry_ms = 1000;              // ARP request retransmission while unresolved
    unsigned reachable_s = 30;             // a learned MAC is trusted this long after its last reply
    unsigned probes = 3;                   // unanswered requests before a MAC is invalidated or a next hop given up
    unsigned unused_s = 60;                // a learned entry no packet used for this long is freed
    unsigned announce_count = 3;           // gratuitous ARPs for an address the gateway starts answering for
    unsigned announce_interval_ms = 1000;  // between two of them
    bool operator==(const ArpConfig&) const = default;
};

// The ICMP errors the gateway originates (TTL exceeded, unreachable), per worker: a token bucket
// refilled at `errors_per_second` holding at most `burst`. 0 errors per second: none are sent.
struct IcmpConfig {
    unsigned errors_per_second = 1000;
    unsigned burst = 50;
    bool operator==(const IcmpConfig&) const = default;
};

// IPv4 and IPv6 fragments put together per worker (dataplane/reassembly.h): at most
// `max_datagrams` in reassembly at once, at most `max_per_source` of them from one source address
// (0: a quarter of max_datagrams, at least 1), each in at most `max_fragments` fragments (no more
// than DPDK's build holds, kMaxReassemblyFragments), complete within `timeout_ms` of its first
// fragment.
inline constexpr unsigned kMaxReassemblyFragments = 8;  // RTE_LIBRTE_IP_FRAG_MAX_FRAG of Debian's DPDK
struct ReassemblyConfig {
    unsigned max_datagrams = 256;
    unsigned max_fragments = kMaxReassemblyFragments;
    unsigned timeout_ms = 2000;
    unsigned max_per_source = 0;
    unsigned per_source() const { return max_per_source ? max_per_source : std::max(1u, max_datagrams / 4); }
    bool operator==(const ReassemblyConfig&) const = default;
};

// Connections from outside to the ingress IPs this gateway serves (docs/architecture.md,
// "Ingress to served ingress IPs"): routed untranslated into the cluster through an inside port
// toward `via` (IPv4) and `via6` (IPv6), a node or router there that load-balances the Service
// (its proxy accepts the ingress IP). Absent (or a family's next hop absent): they are dropped
// and counted (ingress_no_next_hop).
struct IngressConfig {
    std::optional<IpAddr> via;   // IPv4, on-link on `port`
    std::optional<IpAddr> via6;  // IPv6, on-link on `port` (or link-local)
    std::string port;            // an inside port
    bool operator==(const IngressConfig&) const = default;
};

struct NodeConfig {
    std::string name;  // this gateway's Kubernetes node name
    std::map<std::string, std::string> labels;
    bool operator==(const NodeConfig&) const = default;
};

enum class StateSource { files, kubernetes };

// kubernetes: who writes EgressService status.host and the node labels.
enum class Election {
    leader,    // the egwd holding the leader Lease elects hosts; every egwd follows status.host
    external,  // another controller writes status.host; egwd only follows it
};

struct StateConfig {
    StateSource source = StateSource::files;
    std::string path;                      // files: directory of manifests, relative to the config file
    unsigned poll_ms = 200;                // files: how often the directory is re-scanned
    std::string kubeconfig;                // kubernetes: path, or empty for in-cluster / $KUBECONFIG
    Election election = Election::leader;  // kubernetes
    std::string lease_namespace;           // kubernetes: where the Leases live; "" = the credentials' namespace
    unsigned lease_duration_s = 2;         // kubernetes: leaseDurationSeconds of the liveness and leader Leases
    unsigned renew_deadline_ms = 1500;     // kubernetes: a leader that has not renewed for this long stops deciding
    unsigned retry_period_ms = 500;        // kubernetes: Lease renewal and acquisition attempts
    unsigned refusal_grace_ms = 5000;      // kubernetes: how long a refusal (401, 403) lasts before it ends serving
    bool operator==(const StateConfig&) const = default;
};

// The Prometheus endpoint (/metrics, /livez, /readyz). Without a "metrics" section there is none.
struct MetricsConfig {
    bool enabled = false;
    std::string host = "127.0.0.1";  // listen address, an IPv4 or IPv6 literal; "::" for every address of both
    uint16_t port = 9469;
    bool operator==(const MetricsConfig&) const = default;
};

// Session sync with the other gateways (docs/architecture.md, "Session sync"). Without a "sync"
// section there is none.
struct SyncPeerConfig {
    uint32_t id = 0;
    std::string host;  // an IPv4 or IPv6 literal, canonical
    uint16_t port = 0;
    bool operator==(const SyncPeerConfig&) const = default;
};
struct SyncConfig {
    bool enabled = false;
    uint32_t id = 0;   // this gateway's id on the wire, 1 or more, unique among the peers
    std::string host;  // the UDP listen address on the sync network
    uint16_t port = 0;
    std::string key_file;  // the shared HMAC key, relative to the configuration file's directory
    std::vector<SyncPeerConfig> peers;
    unsigned mtu = 1500;  // of the sync network: how many events a datagram carries
    // The peers' sessions kept in the standby table at most (docs/operations.md sizing).
    uint32_t standby_max_sessions = 1000000;
    bool operator==(const SyncConfig&) const = default;
};

// EgressIP on this gateway (docs/kubernetes.md, "EgressIP assignment"). Without an "egress_ip"
// section the node may host any number of EgressIP addresses.
inline constexpr uint32_t kMaxEgressIPCapacity = 1000000;
struct EgressIPConfig {
    std::optional<uint32_t> capacity;  // addresses the leader may assign to this node at most
    bool operator==(const EgressIPConfig&) const = default;
};

// `policy`: which other egress APIs egw enforces on its path, and what they need
// (docs/configuration.md). Without a "policy" section every member has its default.
struct PolicyConfig {
    // egress_firewall as written ("enforce": true); unset, the state source's default:
    // enforce_egress_firewall() says which.
    std::optional<bool> egress_firewall;
    bool egress_firewall_icmp = false;  // egress_firewall_reject "icmp": administratively prohibited
    // EgressFirewall enforcement: by default on with the files source (egw is the only enforcement
    // point a manifest directory has), off with kubernetes (OVN-Kubernetes enforces at the source
    // node).
    bool enforce_egress_firewall(StateSource source) const {
        return egress_firewall.value_or(source == StateSource::files);
    }
    // The DNS servers that resolve EgressFirewall's dnsName rules (control/dns), in order, each
    // "address:port" in canonical form ("10.0.0.53:53", "[fd00::53]:5353"). Empty: the
    // nameservers of /etc/resolv.conf.
    std::vector<std::string> dns_servers;
    bool operator==(const PolicyConfig&) const = default;
};

struct Config {
    std::string file;  // the path it was loaded from
    EalConfig eal;
    std::vector<unsigned> workers;  // data-plane lcores
    MempoolConfig mempool;
    std::vector<PortConfig> ports;
    std::vector<NeighborConfig> neighbors;
    std::vector<VrfConfig> vrfs;  // always contains "default" (table 254) first
    std::vector<RouteConfig> routes;
    ClusterConfig cluster;
    DefaultAction default_action = DefaultAction::masquerade;
    SessionConfig sessions;
    ArpConfig arp;
    IcmpConfig icmp;
    ReassemblyConfig reassembly;
    IngressConfig ingress;
    NodeConfig node;
    StateConfig state;
    MetricsConfig metrics;
    SyncConfig sync;
    EgressIPConfig egress_ip;
    PolicyConfig policy;

    // Every member, `file` included.
    bool operator==(const Config&) const = default;
    const PortConfig* find_port(const std::string& name) const;
    const VrfConfig* find_vrf(const std::string& name_or_table) const;
};

// Thrown by the loader. what() reads "<file>: <json path>: <what was expected>", for example
// "config/demo.json: $.ports[1].addresses[0]: expected an IPv4 prefix like 10.0.0.1/24, got \"10.0.0.300/24\"".
class ConfigError : public std::runtime_error {
public:
    ConfigError(const std::string& file, const std::string& path, const std::string& expected);
    const std::string& file() const { return file_; }
    const std::string& path() const { return path_; }

private:
    std::string file_;
    std::string path_;
};

// Reads and validates the file. Throws ConfigError on any problem; never returns a partial config.
Config load_file(const std::string& path);
// Same, from text already in memory; `file` is only used in messages and to resolve relative paths.
Config load_text(const std::string& text, const std::string& file);

// Parsing helpers shared with the manifest reader.
// parse_ipv4 takes IPv4 only and gives host order; format_ipv4 writes a host-order IPv4 address
// (as the IPv4 data plane holds them).
std::optional<uint32_t> parse_ipv4(const std::string& s);
std::optional<MacAddr> parse_mac(const std::string& s);
std::string format_ipv4(uint32_t ip);
std::string format_mac(const MacAddr& m);
// "127.0.0.1:9469", "[::]:9469": the metrics listener as the configuration writes it.
std::string format_listen(const MetricsConfig& m);
// "10.0.0.1:7470", "[fd00::1]:7470".
std::string format_host_port(const std::string& host, uint16_t port);

const char* to_string(PortRole r);
const char* to_string(DefaultAction a);
const char* to_string(TcpOpen t);      // "loose" / "strict"
const char* to_string(StateSource s);  // "files" / "kubernetes"
const char* to_string(Election e);     // "leader" / "external"

}  // namespace egw::config
