// SPDX-License-Identifier: Apache-2.0
//
// The packet-test rig: the real data plane on real DPDK ports.
//
// Each port is a net_ring ethdev made with rte_eth_from_rings() from one receive ring and one
// transmit ring (shared by every worker's tx queue). A test puts frames into a port's receive
// ring, runs a worker (worker_poll_once, or worker_process_burst + worker_flush with a clock it
// controls), and takes what was sent from the port's transmit ring. The policy snapshot comes
// from the real control::PolicyBuilder fed with a config::Config built in code and
// model::ServiceState values; workers are set up the way control::Runtime::setup does it.
//
// Standard rig (addresses host order, see namespace std_rig):
//   pods  inside            10.244.1.1/24    pods 10.244.1.10, .11, .20; cluster router .254
//   ext1  outside default   192.0.2.1/24     servers 192.0.2.100, .101; gateway .254 (default route)
//   ext2  outside "blue"    198.51.100.1/24  server 198.51.100.100 (VRF blue = table 100)
// Cluster: pods 10.244.0.0/16, services 10.96.0.0/12, node 172.18.0.2 (all routed back inside via
// 10.244.1.254). Static neighbours for every host above except 192.0.2.200.
// Default Service: "default/web", LoadBalancerIP 192.0.2.50, endpoints .10 and .11.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_byteorder.h>

#include "config/config.h"
#include "control/policy/policy_builder.h"
#include "control/model/rules.h"
#include "dataplane/worker.h"
#include "tests/unit/dataplane/packet.h"

struct rte_mempool;
struct rte_ring;

namespace egw::test {

// Network byte order, as sessions store addresses and ports.
inline uint32_t nbo32(uint32_t v) {
    return rte_cpu_to_be_32(v);
}
inline uint16_t nbo16(uint16_t v) {
    return rte_cpu_to_be_16(v);
}

// Set by main() once the EAL is up: the offset of the "egw_next_hop" mbuf dynfield.
void set_next_hop_field(int offset);

namespace std_rig {
inline constexpr uint32_t kPodsAddr = ip4(10, 244, 1, 1);
inline constexpr uint32_t kPod10 = ip4(10, 244, 1, 10);
inline constexpr uint32_t kPod11 = ip4(10, 244, 1, 11);
inline constexpr uint32_t kPod20 = ip4(10, 244, 1, 20);
inline constexpr uint32_t kPodsRouter = ip4(10, 244, 1, 254);
inline constexpr uint32_t kRemotePod = ip4(10, 244, 2, 10);  // pod CIDR, another node
inline constexpr uint32_t kClusterIp = ip4(10, 96, 0, 10);   // service CIDR
inline constexpr uint32_t kNodeIp = ip4(172, 18, 0, 2);
inline constexpr uint32_t kExt1Addr = ip4(192, 0, 2, 1);
inline constexpr uint32_t kIngress = ip4(192, 0, 2, 50);
inline constexpr uint32_t kServer = ip4(192, 0, 2, 100);
inline constexpr uint32_t kServerB = ip4(192, 0, 2, 101);
inline constexpr uint32_t kUnresolved = ip4(192, 0, 2, 200);  // on-link, no neighbour entry
inline constexpr uint32_t kExt1Gw = ip4(192, 0, 2, 254);
inline constexpr uint32_t kInternet = ip4(203, 0, 113, 9);  // behind ext1's gateway
inline constexpr uint32_t kExt2Addr = ip4(198, 51, 100, 1);
inline constexpr uint32_t kBlueServer = ip4(198, 51, 100, 100);
inline constexpr uint32_t kBlueGw = ip4(198, 51, 100, 254);

inline const Mac kPodsMac{0x02, 0x00, 0x00, 0x00, 0x01, 0x01};
inline const Mac kExt1Mac{0x02, 0x00, 0x00, 0x00, 0x02, 0x01};
inline const Mac kExt2Mac{0x02, 0x00, 0x00, 0x00, 0x03, 0x01};
inline const Mac kPod10Mac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x0a};
inline const Mac kPod11Mac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x0b};
inline const Mac kPod20Mac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x14};
inline const Mac kPodsRouterMac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0xfe};
inline const Mac kServerMac{0x52, 0x54, 0x00, 0x00, 0x00, 0x64};
inline const Mac kServerBMac{0x52, 0x54, 0x00, 0x00, 0x00, 0x65};
inline const Mac kExt1GwMac{0x52, 0x54, 0x00, 0x00, 0x00, 0xfe};
inline const Mac kBlueServerMac{0x52, 0x54, 0x00, 0x00, 0x01, 0x64};
inline const Mac kBlueGwMac{0x52, 0x54, 0x00, 0x00, 0x01, 0xfe};
inline const Mac kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

inline const std::string kWeb = "default/web";
}  // namespace std_rig

// EgressService states as model::evaluate_single_gateway gives them for a Service served here.
model::ServiceState lb_service(const std::string& key, uint32_t ingress, std::vector<uint32_t> endpoints,
                               const std::string& network = "");
model::ServiceState network_service(const std::string& key, std::vector<uint32_t> endpoints,
                                    const std::string& network);

// The standard configuration described above.
config::Config standard_config();

struct RigOptions {
    unsigned workers = 1;
    uint32_t sessions_per_worker = 1024;  // SessionTable capacity of each worker
    int64_t sessions6_per_worker = -1;    // SessionTable6's (sessions.max_ipv6); -1: sessions_per_worker
    bool inject = false;                  // give each worker an inject ring
    // Each port gets a receive queue per worker, worker w polling queue w of every port (as egwd
    // sets them up); otherwise each port has one, polled by worker 0.
    bool queue_per_worker = false;
    // RCU in use, as in egwd: publish() swaps the snapshot, waits for every worker's quiescent
    // state (dp::publish_policy) and frees the old one. Needed when workers run on threads of
    // their own (dp::worker_main); without it old snapshots live as long as the rig.
    bool qsbr = false;
    // The bytes each mbuf of the rig's pool holds after its headroom (0: DPDK's default, 2,048). A
    // small room makes a frame a chain of full buffers, so that a read past a segment's end meets
    // another buffer's bytes (or the pool's end) rather than the rest of the same one.
    uint16_t mbuf_data_room = 0;
    std::function<void(config::Config&)> configure;  // edits the standard config before use
    std::vector<model::ServiceState> services = {
        lb_service(std_rig::kWeb, std_rig::kIngress, {std_rig::kPod10, std_rig::kPod11})};
};

// A frame a worker gave to the control thread.
struct ToControl {
    Bytes frame;
    uint16_t port = 0;
    uint32_t next_hop = 0;       // the dynfield (host order)
    Ip6Addr next_hop6{};         // the dynfield's IPv6 next hop (an IPv6 frame held for NS)
    bool advertisement = false;  // a Neighbor Advertisement passed on (held.h)
    bool arp_answer = false;     // the local stage's answer to a moved neighbour's ARP request (held.h)
};

// An input frame for a burst.
struct In {
    uint16_t port;
    Bytes frame;
    uint64_t ol_flags = 0;  // receive offload flags, as a NIC would set them
    unsigned segment = 0;   // > 0: the frame arrives as a chain of mbufs of at most this many bytes
    uint32_t rss_hash = 0;  // m->hash.rss, as a NIC delivers it with RTE_MBUF_F_RX_RSS_HASH
    uint16_t vlan_tci = 0;  // m->vlan_tci, as a device that strips the tag delivers it (RTE_MBUF_F_RX_VLAN_STRIPPED)
};

class Rig {
public:
    explicit Rig(const RigOptions& o);
    ~Rig();
    Rig(const Rig&) = delete;
    Rig& operator=(const Rig&) = delete;

    config::Config cfg;
    uint16_t pods = 0, ext1 = 0, ext2 = 0;  // DPDK port ids
    dp::DataplaneShared shared;
    dp::PodBudget pod_budget;  // shared.pod_budget when cfg.sessions.max_per_pod and several workers give one
    std::vector<dp::Worker*> workers;

    dp::Worker& w(unsigned i = 0) { return *workers.at(i); }
    uint16_t port_id(const std::string& name) const;  // of a configured port
    control::PolicyBuilder& builder() { return *builder_; }
    const dp::PolicySnapshot& policy() const { return *snapshots_.back(); }

    // Builds a snapshot for `services` with the rig's builder and publishes it.
    void publish(const std::vector<model::ServiceState>& services);

    // Frames toward the ports: Ethernet to the port's MAC from the sender's MAC.
    Bytes from_pod(uint32_t pod, const Bytes& ip) const;  // on `pods`, sender = that pod
    Bytes from_ext1(const Bytes& ip, const Mac& src = std_rig::kServerMac) const;
    Bytes from_ext2(const Bytes& ip, const Mac& src = std_rig::kBlueServerMac) const;

    // Into a port's receive ring (m->port set as a NIC would).
    void rx(uint16_t port, const Bytes& frame);
    // The same, false (and nothing enqueued) when the ring is full.
    bool try_rx(uint16_t port, const Bytes& frame);
    // Into receive queue `queue` of a port (RigOptions::queue_per_worker), as RSS would put it.
    bool try_rx_queue(uint16_t port, unsigned queue, const Bytes& frame);
    // One poll-loop iteration of a worker (its clock becomes the TSC).
    unsigned poll(unsigned worker = 0);
    // worker_process_burst + worker_flush on one burst, with the worker's clock as it is.
    void process(unsigned worker, const std::vector<In>& burst);
    void process(uint16_t port, const Bytes& frame) { process(0, {{port, frame}}); }
    // Advances every worker's clock.
    void advance(uint64_t ticks);
    // `calls` expiry steps of a worker (0: enough to visit every session slot once).
    void sweep(unsigned worker = 0, unsigned calls = 0);

    // What left a port (drained), and what went to the control thread (drained). A frame sent
    // as a chain of mbufs is read as one.
    std::vector<Bytes> tx(uint16_t port);
    // The number of mbufs of each frame tx() has read since the last call.
    std::vector<uint16_t> tx_segments();
    std::vector<ToControl> to_control();
    // Frames waiting in the hand-off ring from worker `from` to worker `to`.
    unsigned handoff_pending(unsigned from, unsigned to) const;
    // Every flow from inside owned by `worker` from now on (its hash notwithstanding), for tests of
    // what else several workers do (replies handed to their owner by NAT port).
    void own_flows_from_inside_on(unsigned worker) {
        for (uint8_t& o : shared.flow_owners.worker)
            o = static_cast<uint8_t>(worker);
    }

    uint64_t drops(dp::DropReason r, unsigned worker = 0) const;
    uint64_t total_drops(unsigned worker = 0) const;
    uint32_t service_id(const std::string& key) const;
    const dp::ServiceCounters& svc(const std::string& key, unsigned worker = 0) const;
    const dp::ServiceCounters& default_counters(unsigned worker = 0) const;
    std::vector<dp::Session> sessions(unsigned worker = 0) const;
    std::vector<dp::Session6> sessions6(unsigned worker = 0) const;

    // Frees whatever still sits in a ring; then the pool must hold every mbuf again.
    void drain_all();
    // Negative when the data plane freed an mbuf twice.
    int64_t mbufs_in_use() const;

    rte_mempool* pool() const { return pool_; }

private:
    struct Port {
        std::string device;
        uint16_t id = 0;
        rte_ring* rx = nullptr;      // queue 0's
        std::vector<rte_ring*> rxs;  // every receive queue's
        rte_ring* tx = nullptr;
        bool started = false;
    };
    void setup(const RigOptions& o);
    void release();
    uint16_t make_port(const std::string& device);
    rte_mbuf* mbuf_of(uint16_t port, const Bytes& frame, unsigned segment = 0);
    std::string name(const std::string& what) const;

    unsigned instance_;
    bool queue_per_worker_ = false;
    rte_mempool* pool_ = nullptr;
    rte_mempool* indirect_ = nullptr;  // fragments' payload references (output)
    unsigned pool_size_ = 0;
    std::vector<uint16_t> tx_segments_;
    std::vector<Port> ports_;
    std::vector<uint16_t> ids_;     // DPDK port id of cfg.ports[i]
    std::vector<rte_ring*> rings_;  // control, inject, hand-off rings
    std::unique_ptr<control::PolicyBuilder> builder_;
    std::vector<std::unique_ptr<dp::PolicySnapshot>> snapshots_;
};

// The dual-stack rig (IPv6 tests: test_nat66.cpp, test_fragments.cpp): the standard rig with a /64
// on each port (pods fd00:10:244:1::1, ext1 2001:db8:2::1, ext2 2001:db8:3::1), the cluster's
// IPv6 ranges (pods fd00:10:244::/48, services fd00:10:96::/108, node fd00:18::2) behind the pods'
// router fd00:10:244:1::fe, the IPv6 default route via ext1's router 2001:db8:2::fe, static IPv6
// neighbours for every host below; web with the IPv6 ingress IP 2001:db8:2::50 and endpoints ::10
// and ::11 of the pods' /64.
namespace std_rig6 {
inline const Ip6Addr kPodsV6 = ip6("fd00:10:244:1::1");
inline const Ip6Addr kPodsRouterV6 = ip6("fd00:10:244:1::fe");
inline const Ip6Addr kPod10v6 = ip6("fd00:10:244:1::10");
inline const Ip6Addr kPod11v6 = ip6("fd00:10:244:1::11");
inline const Ip6Addr kPod20v6 = ip6("fd00:10:244:1::20");
inline const Ip6Addr kRemotePodV6 = ip6("fd00:10:244:2::10");
inline const Ip6Addr kClusterIpV6 = ip6("fd00:10:96::10");
inline const Ip6Addr kNodeV6 = ip6("fd00:18::2");
inline const Ip6Addr kExt1V6 = ip6("2001:db8:2::1");
inline const Ip6Addr kExt1GwV6 = ip6("2001:db8:2::fe");
inline const Ip6Addr kServerV6 = ip6("2001:db8:2::100");
inline const Ip6Addr kIngressV6 = ip6("2001:db8:2::50");
inline const Ip6Addr kInternetV6 = ip6("2001:db8:99::9");
inline const Ip6Addr kExt2V6 = ip6("2001:db8:3::1");
inline const Ip6Addr kBlueServerV6 = ip6("2001:db8:3::100");

net::IpAddr addr6(const Ip6Addr& a);
model::ServiceState web6();
// A static IPv6 route in the default VRF (`prefix`/`len` via `via` out of `port`), and a static
// IPv6 neighbour on `port`.
void add_route6(config::Config& c, const char* prefix, uint8_t len, const Ip6Addr& via, const char* port);
void add_neighbor6(config::Config& c, const char* port, const Ip6Addr& ip, const Mac& mac);
// The IPv6 side of the standard rig, on top of its IPv4 configuration: a /64 on each port, the
// default route via ext1's router, the IPv6 pod range behind the pods' router (cluster
// destinations are routed untranslated; without it they would leave by the default route), a
// static neighbour for each IPv6 host but pod ::30 (its replies wait for a Neighbor
// Solicitation's answer), and that range as the cluster's pod CIDR.
void configure_ipv6(config::Config& c);
// The dual-stack rig: configure_ipv6(), the Service range and fd00:18::/64 behind the pods'
// router as well, the node's IPv6 address, and web6().
RigOptions dual_stack();
// Frames of the dual-stack rig: from a pod (its MAC) to the pods port, from ext1's server (or
// `src`) to ext1, from the pods port to a pod.
Bytes from_pod6(const Ip6Addr& pod, const Bytes& ip);
Bytes from_ext1_6(const Bytes& ip, const Mac& src = std_rig::kServerMac);
Bytes to_pod6(const Ip6Addr& pod, const Bytes& ip);
}  // namespace std_rig6

// The one frame of `frames`, parsed; records a failure (and returns an unparsed result) when
// there is not exactly one.
Parsed single(const std::vector<Bytes>& frames);

// The fixture: a test starts its rig (after choosing options), TearDown checks that no mbuf was
// leaked or freed twice and frees everything DPDK-side.
class DataplaneTest : public ::testing::Test {
protected:
    Rig& start(const RigOptions& o = {});
    void TearDown() override;
    std::unique_ptr<Rig> rig_;
};

}  // namespace egw::test
