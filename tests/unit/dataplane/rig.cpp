// SPDX-License-Identifier: Apache-2.0
#include "tests/unit/dataplane/rig.h"

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

#include "control/runtime/pod_limit.h"
#include "control/runtime/vlans.h"
#include "dataplane/held.h"
#include "dataplane/publish.h"
#include "dataplane/reassembly.h"

namespace egw::test {

namespace {

int g_next_hop_field = -1;
unsigned g_instances = 0;

constexpr unsigned kPoolSize = 4095;
constexpr unsigned kRingSize = 1024;

net::IpPrefix prefix(uint32_t addr, uint8_t len) {
    return net::IpPrefix::from_v4(addr, len);
}

config::MacAddr cmac(const Mac& m) {
    config::MacAddr a;
    std::copy(m.begin(), m.end(), a.bytes);
    return a;
}

config::PortConfig port_config(const std::string& name, config::PortRole role, const std::string& vrf,
                               net::IpPrefix addr, const Mac& mac) {
    config::PortConfig p;
    p.name = name;
    p.device = "net_ring_" + name;
    p.role = role;
    p.vrf = vrf;
    p.addresses = {addr};
    p.mac = cmac(mac);
    return p;
}

uint16_t port_id_of_name(const config::Config& cfg, const std::vector<uint16_t>& ids, const std::string& port) {
    const config::PortConfig* pc = cfg.find_port(port);
    if (!pc) throw std::runtime_error("test rig: no port " + port);
    return ids.at(static_cast<size_t>(pc - cfg.ports.data()));
}

void fail(const std::string& what) {
    throw std::runtime_error("test rig: " + what + ": " + rte_strerror(rte_errno));
}

// The rig's ports are net_ring ethdevs: the worker's rte_eth_rx_burst and rte_eth_tx_burst move
// mbufs through the port's rings inside librte_net_ring, which ThreadSanitizer does not see
// (Debian's DPDK is not instrumented). So it sees no order between this thread writing a frame
// and a worker thread reading it after receiving it, or between a worker writing a frame and this
// thread reading it after it was transmitted, and reports races in packet bytes and mbuf fields
// that the rings order. In a ThreadSanitizer build the rig states that order on each ring: this
// thread releases a port's receive ring before enqueueing and acquires its transmit ring after
// dequeueing, and ethdev callbacks (which run inside rte_eth_rx_burst/rte_eth_tx_burst, in the
// worker's instrumented code) acquire the receive ring after a receive and release the transmit
// ring before a transmit. That is what the rings' own release/acquire do; nothing else is
// ordered by it (policy, neighbours, sessions, counters and the workers' hand-off rings stay
// checked).
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline void tsan_acquire(void* ring) {
    __tsan_acquire(ring);
}
inline void tsan_release(void* ring) {
    __tsan_release(ring);
}

uint16_t tsan_after_rx(uint16_t, uint16_t, rte_mbuf**, uint16_t n, uint16_t, void* ring) {
    if (n > 0) __tsan_acquire(ring);
    return n;
}

uint16_t tsan_before_tx(uint16_t, uint16_t, rte_mbuf**, uint16_t n, void* ring) {
    __tsan_release(ring);
    return n;
}
#else
inline void tsan_acquire(void*) {}
inline void tsan_release(void*) {}
#endif

}  // namespace

void set_next_hop_field(int offset) {
    g_next_hop_field = offset;
}

model::ServiceState lb_service(const std::string& key, uint32_t ingress, std::vector<uint32_t> endpoints,
                               const std::string& network) {
    model::ServiceState s;
    s.key = key;
    s.mode = model::Mode::load_balancer_ip;
    s.status_host = "gw-1";
    s.serve_here = true;
    s.network = network;
    s.ingress_ipv4 = ingress;
    std::sort(endpoints.begin(), endpoints.end());
    s.endpoint_ipv4s = std::move(endpoints);
    s.endpoint_nodes = {"worker-1"};
    return s;
}

model::ServiceState network_service(const std::string& key, std::vector<uint32_t> endpoints,
                                    const std::string& network) {
    model::ServiceState s;
    s.key = key;
    s.mode = model::Mode::network;
    s.status_host = model::kHostAll;
    s.serve_here = true;
    s.network = network;
    s.ingress_ipv4 = ip4(192, 0, 2, 60);  // informational only in Network mode
    std::sort(endpoints.begin(), endpoints.end());
    s.endpoint_ipv4s = std::move(endpoints);
    s.endpoint_nodes = {"worker-1"};
    return s;
}

namespace std_rig6 {

net::IpAddr addr6(const Ip6Addr& a) {
    return net::IpAddr::from_v6(a.data());
}

model::ServiceState web6() {
    using namespace std_rig;
    model::ServiceState web = lb_service(kWeb, kIngress, {kPod10, kPod11});
    web.ingress_ipv6 = addr6(kIngressV6);
    web.endpoint_ipv6s = {addr6(kPod10v6), addr6(kPod11v6)};
    std::sort(web.endpoint_ipv6s.begin(), web.endpoint_ipv6s.end());
    return web;
}

void add_route6(config::Config& c, const char* prefix, uint8_t len, const Ip6Addr& via, const char* port) {
    config::RouteConfig r;
    r.vrf = "default";
    r.prefix = net::IpPrefix{addr6(ip6(prefix)), len};
    r.via = addr6(via);
    r.port = port;
    c.routes.push_back(r);
}

void add_neighbor6(config::Config& c, const char* port, const Ip6Addr& ip, const Mac& mac) {
    config::MacAddr m;
    std::copy(mac.begin(), mac.end(), m.bytes);
    c.neighbors.push_back(config::NeighborConfig{port, addr6(ip), m});
}

void configure_ipv6(config::Config& c) {
    using namespace std_rig;
    c.ports[0].addresses.push_back(net::IpPrefix{addr6(kPodsV6), 64});
    c.ports[1].addresses.push_back(net::IpPrefix{addr6(kExt1V6), 64});
    c.ports[2].addresses.push_back(net::IpPrefix{addr6(kExt2V6), 64});
    add_route6(c, "::", 0, kExt1GwV6, "ext1");
    add_route6(c, "fd00:10:244::", 48, kPodsRouterV6, "pods");
    add_neighbor6(c, "pods", kPod10v6, kPod10Mac);
    add_neighbor6(c, "pods", kPod11v6, kPod11Mac);
    add_neighbor6(c, "pods", kPod20v6, kPod20Mac);
    add_neighbor6(c, "pods", kPodsRouterV6, kPodsRouterMac);
    add_neighbor6(c, "ext1", kServerV6, kServerMac);
    add_neighbor6(c, "ext1", kExt1GwV6, kExt1GwMac);
    add_neighbor6(c, "ext2", kBlueServerV6, kBlueServerMac);
    c.cluster.pod_cidrs.push_back(net::IpPrefix{addr6(ip6("fd00:10:244::")), 48});
}

RigOptions dual_stack() {
    using namespace std_rig;
    RigOptions o;
    o.configure = [](config::Config& c) {
        configure_ipv6(c);
        add_route6(c, "fd00:10:96::", 108, kPodsRouterV6, "pods");
        add_route6(c, "fd00:18::", 64, kPodsRouterV6, "pods");
        c.cluster.service_cidrs.push_back(net::IpPrefix{addr6(ip6("fd00:10:96::")), 108});
        c.cluster.node_ips.push_back(addr6(kNodeV6));
    };
    o.services = {web6()};
    return o;
}

namespace {
Mac pod_mac(const Ip6Addr& pod) {
    using namespace std_rig;
    return pod == kPod11v6 ? kPod11Mac : pod == kPod20v6 ? kPod20Mac : kPod10Mac;
}
}  // namespace

Bytes from_pod6(const Ip6Addr& pod, const Bytes& ip) {
    return ethernet(std_rig::kPodsMac, pod_mac(pod), kEtherIpv6, ip);
}
Bytes from_ext1_6(const Bytes& ip, const Mac& src) {
    return ethernet(std_rig::kExt1Mac, src, kEtherIpv6, ip);
}
Bytes to_pod6(const Ip6Addr& pod, const Bytes& ip) {
    return ethernet(pod_mac(pod), std_rig::kPodsMac, kEtherIpv6, ip);
}

}  // namespace std_rig6

config::Config standard_config() {
    using namespace std_rig;
    using config::PortRole;
    config::Config c;
    c.file = "dataplane-test-rig";
    c.workers = {1};
    c.vrfs = {config::VrfConfig{"default", 254}, config::VrfConfig{"blue", 100}};
    c.ports = {
        port_config("pods", PortRole::inside, "default", prefix(kPodsAddr, 24), kPodsMac),
        port_config("ext1", PortRole::outside, "default", prefix(kExt1Addr, 24), kExt1Mac),
        port_config("ext2", PortRole::outside, "blue", prefix(kExt2Addr, 24), kExt2Mac),
    };
    auto route = [](const std::string& vrf, net::IpPrefix p, std::optional<uint32_t> via, const std::string& port) {
        config::RouteConfig r;
        r.vrf = vrf;
        r.prefix = p;
        if (via) r.via = net::IpAddr::from_v4(*via);
        r.port = port;
        return r;
    };
    c.routes = {
        route("default", prefix(ip4(10, 244, 0, 0), 16), kPodsRouter, "pods"),
        route("default", prefix(ip4(10, 96, 0, 0), 12), kPodsRouter, "pods"),
        route("default", prefix(ip4(172, 18, 0, 0), 16), kPodsRouter, "pods"),
        route("default", prefix(0, 0), kExt1Gw, "ext1"),
    };
    auto neigh = [](const std::string& port, uint32_t ip, const Mac& m) {
        return config::NeighborConfig{port, net::IpAddr::from_v4(ip), cmac(m)};
    };
    c.neighbors = {
        neigh("pods", kPod10, kPod10Mac),   neigh("pods", kPod11, kPod11Mac),
        neigh("pods", kPod20, kPod20Mac),   neigh("pods", kPodsRouter, kPodsRouterMac),
        neigh("ext1", kServer, kServerMac), neigh("ext1", kServerB, kServerBMac),
        neigh("ext1", kExt1Gw, kExt1GwMac), neigh("ext2", kBlueServer, kBlueServerMac),
        neigh("ext2", kBlueGw, kBlueGwMac),
    };
    c.cluster.pod_cidrs = {prefix(ip4(10, 244, 0, 0), 16)};
    c.cluster.service_cidrs = {prefix(ip4(10, 96, 0, 0), 12)};
    c.cluster.node_ips = {net::IpAddr::from_v4(kNodeIp)};
    c.default_action = config::DefaultAction::masquerade;
    c.sessions.port_min = 1024;
    c.sessions.port_max = 65535;
    c.node.name = "gw-1";
    return c;
}

std::string Rig::name(const std::string& what) const {
    return "u" + std::to_string(instance_) + what;
}

Rig::Rig(const RigOptions& o) : instance_(g_instances++) {
    if (g_next_hop_field < 0)
        throw std::runtime_error("test rig: the next-hop dynfield is not registered (main() does it)");
    try {
        setup(o);
    } catch (...) {
        // No destructor runs for a constructor that throws: give back what was made so far, so
        // the next test starts from a clean EAL (port ids, ring names).
        release();
        throw;
    }
}

void Rig::setup(const RigOptions& o) {
    queue_per_worker_ = o.queue_per_worker;
    cfg = standard_config();
    if (o.configure) o.configure(cfg);
    int socket = static_cast<int>(rte_socket_id());

    pool_size_ = kPoolSize;
    // No per-lcore cache, so the pool's count is exact and leaks show.
    const uint16_t room = o.mbuf_data_room ? o.mbuf_data_room : RTE_MBUF_DEFAULT_DATAROOM;
    pool_ = rte_pktmbuf_pool_create(name("_pool").c_str(), pool_size_, 0, 0,
                                    static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + room), socket);
    if (!pool_) fail("mbuf pool");
    indirect_ = rte_pktmbuf_pool_create(name("_ind").c_str(), pool_size_, 0, 0, 0, socket);
    if (!indirect_) fail("indirect mbuf pool");
    shared.frag_direct = pool_;
    shared.frag_indirect = indirect_;

    unsigned n_workers = o.workers;
    shared.n_workers = n_workers;
    shared.nat_port_min = cfg.sessions.port_min;
    shared.nat_port_max = cfg.sessions.port_max;
    uint64_t hz = rte_get_tsc_hz();
    const auto& t = cfg.sessions.timeouts;
    shared.timeouts = dp::Timeouts{t.tcp_established_s * hz, t.tcp_transitory_s * hz, t.udp_s * hz, t.icmp_s * hz,
                                   t.tcp_half_closed_s * hz};
    shared.icmp_limit = dp::make_icmp_limit(cfg.icmp.errors_per_second, cfg.icmp.burst, hz);
    shared.tx_stall_ticks = hz * dp::kTxStallMs / 1000;
    // No virtual device hashes: every flow's owner is worked out in software (flow_owner.h).
    dp::flow_owners_init(shared.flow_owners, n_workers, dp::kMaxRetaEntries);
    control::PodLimitPlan pod_limit = control::plan_pod_limit(cfg.sessions, n_workers);
    shared.pod_session_limit = pod_limit.limit;
    if (pod_limit.budget_row) {
        pod_budget.mask = pod_limit.budget_row - 1;
        pod_budget.counts = static_cast<std::atomic<uint32_t>*>(rte_zmalloc(
            name("_pods").c_str(), sizeof(std::atomic<uint32_t>) * 2 * pod_limit.budget_row, RTE_CACHE_LINE_SIZE));
        if (!pod_budget.counts) fail("pod budget");
        shared.pod_budget = &pod_budget;
    }
    shared.neighbors = new dp::NeighborTable(cfg.arp.max_neighbors);
    shared.neighbors6 = new dp::NeighborTable6(cfg.arp.max_neighbors);
    shared.next_hop_field = g_next_hop_field;
    shared.qsbr = nullptr;
    if (o.qsbr) {
        size_t size = rte_rcu_qsbr_get_memsize(n_workers);
        shared.qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc(name("_qsbr").c_str(), size, RTE_CACHE_LINE_SIZE));
        if (!shared.qsbr || rte_rcu_qsbr_init(shared.qsbr, n_workers) != 0) fail("qsbr");
    }
    shared.to_control = rte_ring_create(name("_ctl").c_str(), kRingSize, socket, RING_F_SC_DEQ);
    if (!shared.to_control) fail("control ring");
    rings_.push_back(shared.to_control);

    // One net_ring port per configured port, in order.
    std::vector<uint16_t> ids;
    std::vector<std::array<uint8_t, 6>> macs(dp::kMaxPorts);
    for (auto& pc : cfg.ports) {
        if (pc.is_vlan()) {  // no device: an id of its own next, its parent's MAC
            ids.push_back(0);
            continue;
        }
        uint16_t id = make_port(name("_" + pc.name));
        pc.device = ports_.back().device;
        ids.push_back(id);
        std::copy(std::begin(pc.mac->bytes), std::end(pc.mac->bytes), macs[id].begin());
    }
    if (std::string why = control::assign_vlan_ports(cfg, ids, shared.vlans); !why.empty())
        throw std::runtime_error("test rig: " + why);
    for (size_t i = 0; i < cfg.ports.size(); ++i)
        if (cfg.ports[i].is_vlan()) macs[ids[i]] = macs[port_id_of_name(cfg, ids, cfg.ports[i].parent)];
    ids_ = ids;
    auto id_of = [&](const std::string& port) { return port_id(port); };
    pods = id_of("pods");
    ext1 = id_of("ext1");
    ext2 = id_of("ext2");
    for (const auto& n : cfg.neighbors) {
        if (!n.ip.is_v4()) {
            uint32_t slot = shared.neighbors6->insert(id_of(n.port), n.ip.bytes().data());
            if (slot == dp::NeighborTable6::kNone) throw std::runtime_error("test rig: IPv6 neighbour table full");
            shared.neighbors6->set_mac(slot, n.mac.bytes);
            continue;
        }
        uint32_t slot = shared.neighbors->insert(id_of(n.port), n.ip.v4());
        if (slot == dp::NeighborTable::kNone) throw std::runtime_error("test rig: neighbour table full");
        shared.neighbors->set_mac(slot, n.mac.bytes);
    }

    // Workers, as control::Runtime::setup makes them.
    uint16_t n_ports = 0;
    for (uint16_t id : ids)
        n_ports = std::max<uint16_t>(n_ports, static_cast<uint16_t>(id + 1));
    for (unsigned i = 0; i < n_workers; ++i) {
        void* mem = rte_zmalloc(name("_worker").c_str(), sizeof(dp::Worker), RTE_CACHE_LINE_SIZE);
        if (!mem) fail("worker");
        auto* w = new (mem) dp::Worker();
        workers.push_back(w);
        w->index = i;
        w->shared = &shared;
        w->n_ports = n_ports;
        dp::worker_assign_port_block(*w);
        w->service_counters = static_cast<dp::ServiceCounters*>(
            rte_zmalloc(name("_svc").c_str(), sizeof(dp::ServiceCounters) * dp::kMaxServices, RTE_CACHE_LINE_SIZE));
        w->dump_capacity = 256;
        w->dump_buffer = static_cast<dp::SessionRecord*>(
            rte_zmalloc(name("_dump").c_str(), sizeof(dp::SessionRecord) * w->dump_capacity, RTE_CACHE_LINE_SIZE));
        if (!w->service_counters || !w->dump_buffer) fail("worker counters");
        if (!w->sessions.init(name("s" + std::to_string(i)).c_str(), o.sessions_per_worker, socket) ||
            !w->sessions6.init(
                name("s6_" + std::to_string(i)).c_str(),
                o.sessions6_per_worker < 0 ? o.sessions_per_worker : static_cast<uint32_t>(o.sessions6_per_worker),
                socket))
            fail("session table");
        w->sessions.share_pod_budget(shared.pod_budget);
        w->sessions6.share_pod_budget(shared.pod_budget);
        if (o.inject) {
            w->inject = rte_ring_create(name("_inj" + std::to_string(i)).c_str(), kRingSize, socket,
                                        RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (!w->inject) fail("inject ring");
            rings_.push_back(w->inject);
        }
        w->reassembly =
            dp::reassembly_create(cfg.reassembly.max_datagrams, cfg.reassembly.max_fragments,
                                  cfg.reassembly.per_source(), uint64_t{cfg.reassembly.timeout_ms} * hz / 1000, socket);
        if (!w->reassembly) fail("reassembly table");
        w->now = rte_rdtsc();
    }
    for (unsigned a = 0; a < n_workers && n_workers > 1; ++a)
        for (unsigned b = 0; b < n_workers; ++b) {
            if (a == b) continue;
            rte_ring* r = rte_ring_create(name("_ho" + std::to_string(a) + "_" + std::to_string(b)).c_str(), 2048,
                                          socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (!r) fail("hand-off ring");
            rings_.push_back(r);
            workers[a]->handoff_out[b] = r;
            workers[b]->handoff_in[a] = r;
        }
    // Every port's single receive queue is polled by worker 0; with a queue per worker, worker w
    // polls queue w of every port, as in egwd.
    for (const auto& p : ports_)
        for (unsigned q = 0; q < p.rxs.size(); ++q)
            workers[q]->rxq[workers[q]->n_rxq++] = dp::RxQueue{p.id, static_cast<uint16_t>(q)};

    builder_ = std::make_unique<control::PolicyBuilder>(cfg, ids, macs);
    publish(o.services);
}

uint16_t Rig::port_id(const std::string& port) const {
    const config::PortConfig* pc = cfg.find_port(port);
    if (!pc) throw std::runtime_error("test rig: no port " + port);
    return ids_.at(static_cast<size_t>(pc - cfg.ports.data()));
}

uint16_t Rig::make_port(const std::string& device) {
    int socket = static_cast<int>(rte_socket_id());
    Port p;
    p.device = "net_ring_" + device;
    // One receive ring per queue: one, or one per worker (RigOptions::queue_per_worker).
    unsigned n_rxq = queue_per_worker_ ? std::max(1u, shared.n_workers) : 1;
    bool ok = true;
    for (unsigned q = 0; q < n_rxq; ++q) {
        std::string rn = device + "_r" + (q ? std::to_string(q) : "");
        p.rxs.push_back(rte_ring_create(rn.c_str(), kRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ));
        ok = ok && p.rxs.back();
    }
    p.rx = p.rxs[0];
    p.tx = rte_ring_create((device + "_t").c_str(), kRingSize, socket, 0);
    if (!ok || !p.tx) {
        for (auto* r : p.rxs)
            rte_ring_free(r);
        rte_ring_free(p.tx);
        fail("port rings of " + device);
    }
    // A tx queue per worker (at least two), all feeding the one transmit ring.
    unsigned n_txq = std::max<unsigned>(2, static_cast<unsigned>(shared.n_workers));
    std::vector<rte_ring*> txs(n_txq, p.tx);
    int id = rte_eth_from_rings(device.c_str(), p.rxs.data(), n_rxq, txs.data(), n_txq, static_cast<unsigned>(socket));
    if (id < 0) {
        for (auto* r : p.rxs)
            rte_ring_free(r);
        rte_ring_free(p.tx);
        fail("rte_eth_from_rings " + device);
    }
    p.id = static_cast<uint16_t>(id);
    ports_.push_back(p);
    if (p.id >= dp::kMaxPorts)
        throw std::runtime_error("test rig: port id too large (ports leaked by an earlier test?)");
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(p.id, static_cast<uint16_t>(n_rxq), static_cast<uint16_t>(n_txq), &conf) != 0)
        fail("configure " + device);
    for (unsigned q = 0; q < n_rxq; ++q)
        if (rte_eth_rx_queue_setup(p.id, static_cast<uint16_t>(q), 512, static_cast<unsigned>(socket), nullptr,
                                   pool_) != 0)
            fail("rx queue " + device);
    for (unsigned q = 0; q < n_txq; ++q)
        if (rte_eth_tx_queue_setup(p.id, static_cast<uint16_t>(q), 512, static_cast<unsigned>(socket), nullptr) != 0)
            fail("tx queue " + device);
    if (rte_eth_dev_start(p.id) != 0) fail("start " + device);
#if defined(__SANITIZE_THREAD__)
    for (unsigned q = 0; q < n_rxq; ++q)
        if (!rte_eth_add_rx_callback(p.id, static_cast<uint16_t>(q), tsan_after_rx, p.rxs[q]))
            fail("rx callback " + device);
    for (unsigned q = 0; q < n_txq; ++q)
        if (!rte_eth_add_tx_callback(p.id, static_cast<uint16_t>(q), tsan_before_tx, p.tx))
            fail("tx callback " + device);
#endif
    ports_.back().started = true;
    return p.id;
}

Rig::~Rig() {
    release();
}

void Rig::release() {
    drain_all();
    shared.policy.current.store(nullptr);
    for (auto& p : ports_) {
        if (p.started) rte_eth_dev_stop(p.id);
        rte_vdev_uninit(p.device.c_str());
        for (auto* r : p.rxs)
            rte_ring_free(r);
        rte_ring_free(p.tx);
    }
    ports_.clear();
    for (auto* w : workers) {
        rte_free(w->service_counters);
        rte_free(w->dump_buffer);
        dp::reassembly_free(w->reassembly);
        w->~Worker();
        rte_free(w);
    }
    workers.clear();
    for (auto* r : rings_)
        rte_ring_free(r);
    rings_.clear();
    delete shared.neighbors;
    shared.neighbors = nullptr;
    delete shared.neighbors6;
    shared.neighbors6 = nullptr;
    rte_free(shared.qsbr);
    shared.qsbr = nullptr;
    rte_free(pod_budget.counts);
    pod_budget.counts = nullptr;
    shared.pod_budget = nullptr;
    rte_mempool_free(pool_);
    pool_ = nullptr;
    rte_mempool_free(indirect_);
    indirect_ = nullptr;
}

void Rig::publish(const std::vector<model::ServiceState>& services) {
    std::unique_ptr<dp::PolicySnapshot> snap = builder_->build(services);
    if (!shared.qsbr) {
        shared.policy.current.store(snap.get(), std::memory_order_release);
        // Old versions stay alive until the rig goes: no worker runs concurrently, no RCU needed.
        snapshots_.push_back(std::move(snap));
        return;
    }
    // With RCU the rig keeps only the current version: the one replaced is freed as soon as
    // publish_policy says no worker reads it, so a worker that still did would read freed memory.
    const dp::PolicySnapshot* old = dp::publish_policy(shared, snap.get());
    if (snapshots_.empty()) {
        snapshots_.push_back(std::move(snap));
        return;
    }
    if (old != snapshots_.back().get()) throw std::runtime_error("test rig: the published snapshot was not the rig's");
    snapshots_.back() = std::move(snap);
}

Bytes Rig::from_pod(uint32_t pod, const Bytes& ip) const {
    using namespace std_rig;
    Mac src = pod == kPod10 ? kPod10Mac : pod == kPod11 ? kPod11Mac : pod == kPod20 ? kPod20Mac : kPodsRouterMac;
    return ethernet(kPodsMac, src, kEtherIpv4, ip);
}

Bytes Rig::from_ext1(const Bytes& ip, const Mac& src) const {
    return ethernet(std_rig::kExt1Mac, src, kEtherIpv4, ip);
}
Bytes Rig::from_ext2(const Bytes& ip, const Mac& src) const {
    return ethernet(std_rig::kExt2Mac, src, kEtherIpv4, ip);
}

rte_mbuf* Rig::mbuf_of(uint16_t port, const Bytes& frame, unsigned segment) {
    // A frame longer than one mbuf (or than `segment`) arrives as a chain, as from a NIC that
    // scatters.
    size_t room = rte_pktmbuf_data_room_size(pool_) - RTE_PKTMBUF_HEADROOM;
    if (segment && segment < room) room = segment;
    rte_mbuf* head = nullptr;
    size_t off = 0;
    do {
        rte_mbuf* m = rte_pktmbuf_alloc(pool_);
        if (!m) {
            rte_pktmbuf_free(head);
            throw std::runtime_error("test rig: mbuf pool empty");
        }
        size_t len = std::min(room, frame.size() - off);
        char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
        if (len) std::memcpy(d, frame.data() + off, len);
        off += len;
        if (!head)
            head = m;
        else if (rte_pktmbuf_chain(head, m) != 0)
            throw std::runtime_error("test rig: chain too long");
    } while (off < frame.size());
    head->port = port;
    return head;
}

static Bytes frame_of(const rte_mbuf* m) {
    Bytes out(m->pkt_len);
    const void* d = rte_pktmbuf_read(m, 0, m->pkt_len, out.data());
    if (d != out.data()) std::memcpy(out.data(), d, m->pkt_len);
    return out;
}

void Rig::rx(uint16_t port, const Bytes& frame) {
    for (auto& p : ports_)
        if (p.id == port) {
            rte_mbuf* m = mbuf_of(port, frame);
            tsan_release(p.rx);
            if (rte_ring_enqueue(p.rx, m) != 0) throw std::runtime_error("test rig: rx ring full");
            return;
        }
    throw std::runtime_error("test rig: no port " + std::to_string(port));
}

bool Rig::try_rx(uint16_t port, const Bytes& frame) {
    return try_rx_queue(port, 0, frame);
}

bool Rig::try_rx_queue(uint16_t port, unsigned queue, const Bytes& frame) {
    for (auto& p : ports_)
        if (p.id == port) {
            rte_ring* r = p.rxs.at(queue);
            if (rte_ring_free_count(r) == 0) return false;
            // Only this thread enqueues (single producer): the room seen is still there.
            rte_mbuf* m = mbuf_of(port, frame);
            tsan_release(r);
            if (rte_ring_enqueue(r, m) != 0) throw std::runtime_error("test rig: rx ring full");
            return true;
        }
    throw std::runtime_error("test rig: no port " + std::to_string(port));
}

unsigned Rig::poll(unsigned worker) {
    return dp::worker_poll_once(w(worker));
}

void Rig::process(unsigned worker, const std::vector<In>& burst) {
    std::vector<rte_mbuf*> pkts;
    for (const auto& in : burst) {
        pkts.push_back(mbuf_of(in.port, in.frame, in.segment));
        pkts.back()->ol_flags |= in.ol_flags;
        pkts.back()->hash.rss = in.rss_hash;
        pkts.back()->vlan_tci = in.vlan_tci;
    }
    const dp::PolicySnapshot* p = shared.policy.current.load(std::memory_order_acquire);
    dp::worker_process_burst(w(worker), *p, pkts.data(), static_cast<uint16_t>(pkts.size()));
    dp::worker_flush(w(worker));
}

void Rig::advance(uint64_t ticks) {
    for (auto* w : workers)
        w->now += ticks;
}

void Rig::sweep(unsigned worker, unsigned calls) {
    dp::Worker& wk = w(worker);
    if (calls == 0) calls = (wk.sessions.capacity() + dp::kSweepPerIteration - 1) / dp::kSweepPerIteration;
    for (unsigned i = 0; i < calls; ++i)
        dp::worker_expire_step(wk, policy());
}

std::vector<Bytes> Rig::tx(uint16_t port) {
    std::vector<Bytes> out;
    for (auto& p : ports_) {
        if (p.id != port) continue;
        void* obj;
        while (rte_ring_dequeue(p.tx, &obj) == 0) {
            tsan_acquire(p.tx);
            auto* m = static_cast<rte_mbuf*>(obj);
            EXPECT_EQ(rte_mbuf_check(m, 1, nullptr), 0) << "a malformed mbuf chain was sent";
            tx_segments_.push_back(m->nb_segs);
            out.push_back(frame_of(m));
            rte_pktmbuf_free(m);
        }
    }
    return out;
}

std::vector<ToControl> Rig::to_control() {
    std::vector<ToControl> out;
    void* obj;
    while (rte_ring_dequeue(shared.to_control, &obj) == 0) {
        auto* m = static_cast<rte_mbuf*>(obj);
        auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
        ToControl t;
        t.frame.assign(d, d + m->data_len);
        t.port = m->port;
        const dp::HeldNextHop& h = dp::held_of(m, shared.next_hop_field);
        t.next_hop = h.v4;
        t.advertisement = h.what == dp::kHeldAdvertisement;
        t.arp_answer = h.what == dp::kHeldArpAnswer;
        std::copy(std::begin(h.v6), std::end(h.v6), t.next_hop6.begin());
        out.push_back(std::move(t));
        rte_pktmbuf_free(m);
    }
    return out;
}

unsigned Rig::handoff_pending(unsigned from, unsigned to) const {
    return rte_ring_count(workers.at(from)->handoff_out[to]);
}

uint64_t Rig::drops(dp::DropReason r, unsigned worker) const {
    return workers.at(worker)->counters.drops[static_cast<unsigned>(r)];
}

uint64_t Rig::total_drops(unsigned worker) const {
    uint64_t n = 0;
    for (unsigned i = 0; i < dp::kDropReasonCount; ++i)
        n += workers.at(worker)->counters.drops[i];
    return n;
}

uint32_t Rig::service_id(const std::string& key) const {
    auto it = builder_->ids().find(key);
    if (it == builder_->ids().end()) throw std::runtime_error("test rig: no Service id for " + key);
    return it->second;
}

const dp::ServiceCounters& Rig::svc(const std::string& key, unsigned worker) const {
    return workers.at(worker)->service_counters[service_id(key)];
}

const dp::ServiceCounters& Rig::default_counters(unsigned worker) const {
    return workers.at(worker)->service_counters[dp::kDefaultPolicyId];
}

std::vector<dp::Session> Rig::sessions(unsigned worker) const {
    std::vector<dp::Session> out;
    const dp::SessionTable& st = workers.at(worker)->sessions;
    for (uint32_t i = 0; i < st.capacity(); ++i)
        if (st.at(i).in_use & dp::kSessionInUse) out.push_back(st.at(i));
    return out;
}

std::vector<dp::Session6> Rig::sessions6(unsigned worker) const {
    std::vector<dp::Session6> out;
    const dp::SessionTable6& st = workers.at(worker)->sessions6;
    for (uint32_t i = 0; i < st.capacity(); ++i)
        if (st.at(i).in_use & dp::kSessionInUse) out.push_back(st.at(i));
    return out;
}

void Rig::drain_all() {
    // Fragments held for reassembly, counted as timed out.
    for (auto* w : workers)
        dp::reassembly_clear(*w);
    auto drain = [](rte_ring* r) {
        void* obj;
        while (r && rte_ring_dequeue(r, &obj) == 0)
            rte_pktmbuf_free(static_cast<rte_mbuf*>(obj));
    };
    for (auto& p : ports_) {
        for (auto* r : p.rxs)
            drain(r);
        drain(p.tx);
    }
    for (auto* r : rings_)
        drain(r);
    for (auto* w : workers)
        for (auto& b : w->tx) {
            for (uint16_t i = 0; i < b.n; ++i)
                rte_pktmbuf_free(b.pkts[i]);
            b.n = 0;
        }
}

int64_t Rig::mbufs_in_use() const {
    return static_cast<int64_t>(pool_size_) - static_cast<int64_t>(rte_mempool_avail_count(pool_)) +
           static_cast<int64_t>(pool_size_) - static_cast<int64_t>(rte_mempool_avail_count(indirect_));
}

std::vector<uint16_t> Rig::tx_segments() {
    std::vector<uint16_t> out;
    out.swap(tx_segments_);
    return out;
}

Parsed single(const std::vector<Bytes>& frames) {
    EXPECT_EQ(frames.size(), 1u) << "expected exactly one frame";
    if (frames.size() != 1) return Parsed{};
    return parse_frame(frames[0]);
}

Rig& DataplaneTest::start(const RigOptions& o) {
    rig_ = std::make_unique<Rig>(o);
    return *rig_;
}

void DataplaneTest::TearDown() {
    if (!rig_) return;
    rig_->drain_all();
    EXPECT_EQ(rig_->mbufs_in_use(), 0) << "the data plane leaked mbufs (or freed some twice)";
    rig_.reset();
}

}  // namespace egw::test
