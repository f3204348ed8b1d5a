// SPDX-License-Identifier: Apache-2.0
#include "control/runtime/runtime.h"

#include "control/runtime/buffers.h"
#include "control/runtime/mbuf_pool.h"
#include "control/runtime/pod_limit.h"
#include "control/runtime/vlans.h"

#include "dataplane/held.h"
#include "dataplane/reassembly.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ip_frag.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <spdlog/spdlog.h>

#include <new>

namespace egw::control {

static_assert(config::kMaxReassemblyFragments == RTE_LIBRTE_IP_FRAG_MAX_FRAG,
              "reassembly.max_fragments is bounded by the fragments DPDK's build holds per datagram");

namespace {

std::string errstr(int e) {
    return rte_strerror(e < 0 ? -e : e);
}

unsigned main_socket() {
    unsigned s = rte_socket_id();
    return s == static_cast<unsigned>(SOCKET_ID_ANY) ? 0 : s;
}

}  // namespace

// The port's MTU against the device's limits and the pool's buffers (control/runtime/buffers.h):
// refused here, before the device is configured, when a frame of the MTU could not be received or
// sent.
BufferPlan Runtime::configure_mtu(const config::PortConfig& pc, const std::string& field, const rte_eth_dev_info& info,
                                  rte_eth_conf& conf) const {
    std::string where = cfg_.file + ": " + field;
    if (pc.mtu > info.max_mtu || pc.mtu < info.min_mtu)
        throw RuntimeError(where + ": port " + pc.name + " (" + pc.device + ") takes an MTU from " +
                           std::to_string(info.min_mtu) + " to " + std::to_string(info.max_mtu) + ", got " +
                           std::to_string(pc.mtu));
    conf.rxmode.mtu = pc.mtu;
    BufferPlan plan = plan_buffers(where, pc.name, pc.device, pc.mtu, cfg_.mempool.data_room, info.rx_offload_capa,
                                   info.tx_offload_capa);
    if (!plan.error.empty()) throw RuntimeError(plan.error);
    if (plan.rx_scatter) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
    if (plan.tx_multi_segs) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    return plan;
}

// The device's own MTU (net_af_packet sets it on the kernel interface). A device without an MTU
// setting (net_ring, net_null) keeps its own; egw holds frames to the configured one anyway.
void Runtime::apply_mtu(uint16_t port_id, const config::PortConfig& pc, const std::string& field) const {
    int rc = rte_eth_dev_set_mtu(port_id, static_cast<uint16_t>(pc.mtu));
    if (rc == -ENOTSUP) {
        spdlog::info("port {}: the device has no MTU setting; frames are held to {} bytes on output", pc.name, pc.mtu);
        return;
    }
    if (rc != 0)
        throw RuntimeError(cfg_.file + ": " + field + ": port " + pc.name + " (" + pc.device + ") refused an MTU of " +
                           std::to_string(pc.mtu) + ": " + errstr(rc));
}

std::vector<std::string> Runtime::eal_arguments(const config::Config& cfg, const std::vector<std::string>& eal_args,
                                                const char* argv0) {
    std::vector<std::string> a{argv0};
    if (!eal_args.empty()) {
        a.insert(a.end(), eal_args.begin(), eal_args.end());
        return a;
    }
    const auto& e = cfg.eal;
    // A plain list goes to -l; EAL's mapping form ("(0-2)@(0-1)", "1@0") only parses as --lcores.
    a.push_back(e.lcores.find_first_of("@()") == std::string::npos ? "-l" : "--lcores");
    a.push_back(e.lcores);
    a.push_back("--main-lcore");
    a.push_back(std::to_string(e.main_lcore));
    if (e.no_huge) a.push_back("--no-huge");
    a.push_back("-m");
    a.push_back(std::to_string(e.memory_mb));
    a.push_back("--file-prefix");
    a.push_back(e.file_prefix);
    if (e.pci_allow.empty()) {
        a.push_back("--no-pci");
    } else {
        for (const auto& p : e.pci_allow) {
            a.push_back("-a");
            a.push_back(p);
        }
    }
    for (const auto& v : e.vdevs)
        a.push_back("--vdev=" + v);
    a.insert(a.end(), e.extra_args.begin(), e.extra_args.end());
    return a;
}

std::string Runtime::reassembly_pool_shortfall(const config::Config& cfg, unsigned mbufs) {
    const config::ReassemblyConfig& ra = cfg.reassembly;
    const uint64_t held = uint64_t{cfg.workers.size()} * ra.max_datagrams * (ra.max_fragments - 1);
    if (held <= mbufs) return "";
    return cfg.file + ": reassembly: the reassembly tables of " + std::to_string(cfg.workers.size()) +
           " worker(s) may hold " + std::to_string(held) + " fragments (reassembly.max_datagrams " +
           std::to_string(ra.max_datagrams) + " x (reassembly.max_fragments " + std::to_string(ra.max_fragments) +
           " - 1) each), more than the " + std::to_string(mbufs) +
           " mbufs of mempool.mbufs, which must also fill the receive rings and carry the traffic: raise "
           "mempool.mbufs or lower reassembly.max_datagrams or reassembly.max_fragments";
}

Runtime::Runtime(const config::Config& cfg) : cfg_(cfg) {}

Runtime::~Runtime() {
    stop();
    for (auto* w : workers_) {
        rte_free(w->service_counters);
        rte_free(w->dump_buffer);
        dp::reassembly_free(w->reassembly);
        w->~Worker();
        rte_free(w);
    }
    rte_free(shared_.qsbr);
    rte_free(pod_budget_.counts);
    delete shared_.neighbors;
    delete shared_.neighbors6;
}

std::vector<uint16_t> Runtime::port_ids() const {
    return port_ids_;
}

std::vector<std::array<uint8_t, 6>> Runtime::port_macs() const {
    std::vector<std::array<uint8_t, 6>> macs(dp::kMaxPorts);
    for (const auto* list : {&ports_, &vlan_ports_})
        for (const auto& p : *list)
            macs[p.id] = p.mac;
    return macs;
}

const PortInfo* Runtime::find_port(const std::string& name) const {
    for (const auto* list : {&ports_, &vlan_ports_})
        for (const auto& p : *list)
            if (p.name == name) return &p;
    return nullptr;
}

const PortInfo* Runtime::find_port(uint16_t id) const {
    for (const auto* list : {&ports_, &vlan_ports_})
        for (const auto& p : *list)
            if (p.id == id) return &p;
    return nullptr;
}

unsigned Runtime::worker_socket(unsigned index) const {
    unsigned s = rte_lcore_to_socket_id(cfg_.workers.at(index));
    return s == static_cast<unsigned>(SOCKET_ID_ANY) ? main_socket() : s;
}

rte_mempool* Runtime::pool_on(unsigned socket) {
    for (const auto& [s, p] : pools_)
        if (s == socket) return p;
    // The first pool keeps the plain name; one per further socket that has a port.
    std::string name = pools_.empty() ? "egw_mbufs" : "egw_mbufs_s" + std::to_string(socket);
    rte_mempool* p = create_mbuf_pool(name.c_str(), n_mbufs_, cfg_.mempool.cache,
                                      static_cast<uint16_t>(cfg_.mempool.data_room), static_cast<int>(socket));
    if (!p)
        throw RuntimeError("cannot create a pool of " + std::to_string(n_mbufs_) + " mbufs on socket " +
                           std::to_string(socket) + ": " + errstr(rte_errno) +
                           " (raise eal.memory_mb or lower mempool.mbufs)");
    pools_.emplace_back(socket, p);
    return p;
}

void Runtime::setup(unsigned mbufs) {
    tsc_hz_ = rte_get_tsc_hz();
    unsigned n_workers = static_cast<unsigned>(cfg_.workers.size());
    if (n_workers > dp::kMaxWorkers)
        throw RuntimeError("at most " + std::to_string(dp::kMaxWorkers) + " workers are supported");
    for (unsigned lc : cfg_.workers)
        if (!rte_lcore_is_enabled(lc) || lc == rte_get_main_lcore())
            throw RuntimeError("worker lcore " + std::to_string(lc) +
                               " is not an enabled non-main EAL lcore (check eal.lcores)");

    shared_.next_hop_field = rte_mbuf_dynfield_register(&dp::next_hop_dynfield());
    if (shared_.next_hop_field < 0) throw RuntimeError("cannot register the mbuf next-hop field: " + errstr(rte_errno));

    n_mbufs_ = mbufs ? mbufs : cfg_.mempool.mbufs;
    if (std::string why = reassembly_pool_shortfall(cfg_, n_mbufs_); !why.empty()) throw RuntimeError(why);
    pool_ = pool_on(main_socket());
    // Fragments for the egress MTU: their headers come from the main pool, their payload stays
    // where it is, referred to by mbufs without data of their own.
    indirect_ =
        rte_pktmbuf_pool_create("egw_indirect", n_mbufs_, cfg_.mempool.cache, 0, 0, static_cast<int>(main_socket()));
    if (!indirect_)
        throw RuntimeError("cannot create a pool of " + std::to_string(n_mbufs_) +
                           " indirect mbufs: " + errstr(rte_errno) + " (raise eal.memory_mb or lower mempool.mbufs)");
    shared_.frag_direct = pool_;
    shared_.frag_indirect = indirect_;

    shared_.n_workers = n_workers;
    shared_.nat_port_min = cfg_.sessions.port_min;
    shared_.nat_port_max = cfg_.sessions.port_max;
    if (uint32_t{cfg_.sessions.port_max} - cfg_.sessions.port_min + 1 < n_workers)
        throw RuntimeError("sessions.port_min..port_max is smaller than the number of workers");
    const auto& t = cfg_.sessions.timeouts;
    shared_.timeouts = dp::Timeouts{t.tcp_established_s * tsc_hz_, t.tcp_transitory_s * tsc_hz_, t.udp_s * tsc_hz_,
                                    t.icmp_s * tsc_hz_, t.tcp_half_closed_s * tsc_hz_};
    shared_.icmp_limit = dp::make_icmp_limit(cfg_.icmp.errors_per_second, cfg_.icmp.burst, tsc_hz_);
    shared_.tx_stall_ticks = tsc_hz_ * dp::kTxStallMs / 1000;
    shared_.sweep_pass_ticks = tsc_hz_ * dp::kSweepPassMs / 1000;
    shared_.sweep_step_max_ticks = tsc_hz_ * dp::kSweepStepMaxMs / 1000;
    shared_.tcp_strict = cfg_.sessions.tcp_open == config::TcpOpen::strict;
    // The whole limit on every worker, several of them sharing one budget per pod (pod_limit.h).
    PodLimitPlan pod_limit = plan_pod_limit(cfg_.sessions, n_workers);
    shared_.pod_session_limit = pod_limit.limit;
    if (uint32_t row = pod_limit.budget_row) {
        pod_budget_.mask = row - 1;
        pod_budget_.counts = static_cast<std::atomic<uint32_t>*>(
            rte_zmalloc_socket("egw_pod_budget", sizeof(std::atomic<uint32_t>) * 2 * row, RTE_CACHE_LINE_SIZE,
                               static_cast<int>(main_socket())));
        if (!pod_budget_.counts)
            throw RuntimeError("cannot allocate the pod session budget of " + std::to_string(2 * row) +
                               " counters (raise eal.memory_mb)");
        shared_.pod_budget = &pod_budget_;
    }
    shared_.neighbors = new dp::NeighborTable(cfg_.arp.max_neighbors);
    shared_.neighbors6 = new dp::NeighborTable6(cfg_.arp.max_neighbors);
    shared_.to_control = rte_ring_create("egw_to_ctrl", 4096, static_cast<int>(rte_socket_id()), RING_F_SC_DEQ);
    if (!shared_.to_control) throw RuntimeError("cannot create the control ring: " + errstr(rte_errno));
    size_t qsz = rte_rcu_qsbr_get_memsize(n_workers);
    shared_.qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("egw_qsbr", qsz, RTE_CACHE_LINE_SIZE));
    if (!shared_.qsbr || rte_rcu_qsbr_init(shared_.qsbr, n_workers) != 0) throw RuntimeError("cannot set up RCU");

    // Ports. The redirection entries the flow owners use: the fewest any RSS port has, so that
    // every port's table maps each hash to the same worker (flow_owner.h).
    unsigned reta_entries = dp::kMaxRetaEntries;
    if (cfg_.ports.size() > dp::kMaxPorts)
        throw RuntimeError("at most " + std::to_string(dp::kMaxPorts) + " ports are supported");
    port_ids_.assign(cfg_.ports.size(), 0);
    for (size_t port_index = 0; port_index < cfg_.ports.size(); ++port_index) {
        const config::PortConfig& pc = cfg_.ports[port_index];
        if (pc.is_vlan()) continue;  // below, once every device has its id
        PortInfo pi;
        pi.name = pc.name;
        pi.device = pc.device;
        if (rte_eth_dev_get_port_by_name(pc.device.c_str(), &pi.id) != 0)
            throw RuntimeError("port " + pc.name + ": no DPDK device named \"" + pc.device +
                               "\" (check eal.vdevs / eal.pci_allow)");
        if (pi.id >= dp::kMaxPorts)
            throw RuntimeError("port " + pc.name + ": DPDK port id " + std::to_string(pi.id) + " is too large");
        rte_eth_dev_info info{};
        if (int rc = rte_eth_dev_info_get(pi.id, &info); rc != 0)
            throw RuntimeError("port " + pc.name + ": " + errstr(rc));
        // A transmit queue per worker: a worker never shares one (that would need a lock).
        if (info.max_tx_queues < n_workers)
            throw RuntimeError("port " + pc.name + ": device supports " + std::to_string(info.max_tx_queues) +
                               " tx queues, " + std::to_string(n_workers) + " workers need one each");
        QueuePlan plan = plan_queues(pc.queues, n_workers, info.max_rx_queues, info.flow_type_rss_offloads);
        pi.rx_queues = plan.rx_queues;
        pi.rss_hf = plan.rss_hf;
        if (plan.rx_queues < plan.wanted)
            spdlog::info("port {}: {} receive queue(s) instead of {}: the device offers {}, there are {} worker(s)",
                         pc.name, plan.rx_queues, plan.wanted, info.max_rx_queues, n_workers);
        rte_eth_conf conf{};
        std::vector<uint8_t> rss_key;
        if (plan.rx_queues > 1) {
            if (plan.rss_hf) {
                conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
                conf.rx_adv_conf.rss_conf.rss_hf = plan.rss_hf;
                // egw's own key (dp::kRssKey), so that the data plane computes the NIC's hash of a
                // flow where the NIC did not (fragments, ICMP errors: dataplane/flow_owner.h); a
                // longer key is the same key repeated (only its first 40 bytes reach any hash).
                unsigned key_len = info.hash_key_size ? info.hash_key_size : dp::kRssKeyBytes;
                if (key_len >= dp::kRssKeyBytes) {
                    for (unsigned k = 0; k < key_len; ++k)
                        rss_key.push_back(dp::kRssKey[k % dp::kRssKeyBytes]);
                    conf.rx_adv_conf.rss_conf.rss_key = rss_key.data();
                    conf.rx_adv_conf.rss_conf.rss_key_len = static_cast<uint8_t>(key_len);
                    uint64_t l4 = RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP |
                                  RTE_ETH_RSS_NONFRAG_IPV6_TCP | RTE_ETH_RSS_NONFRAG_IPV6_UDP;
                    if ((info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_RSS_HASH) && (plan.rss_hf & l4) == l4) {
                        conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_RSS_HASH;
                        pi.rss_hash_ours = true;
                    }
                }
                pi.reta_size = info.reta_size;
                if (info.reta_size >= 2) {
                    unsigned entries = 1u << (31 - __builtin_clz(info.reta_size));
                    reta_entries = std::min(reta_entries, entries);
                }
            }
            spdlog::info("port {}: RSS over {} across {} queues", pc.name, describe_rss(plan.rss_hf), plan.rx_queues);
        }
        if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
        BufferPlan buffers = configure_mtu(pc, "$.ports[" + std::to_string(port_index) + "].mtu", info, conf);
        if (int rc = rte_eth_dev_configure(pi.id, pi.rx_queues, static_cast<uint16_t>(n_workers), &conf); rc != 0)
            throw RuntimeError("port " + pc.name + ": configure: " + errstr(rc));
        apply_mtu(pi.id, pc, "$.ports[" + std::to_string(port_index) + "].mtu");
        uint16_t rxd = static_cast<uint16_t>(pc.rx_desc), txd = static_cast<uint16_t>(pc.tx_desc);
        rte_eth_dev_adjust_nb_rx_tx_desc(pi.id, &rxd, &txd);
        // Descriptor rings and the mbufs they fill live on the port's socket (SOCKET_ID_ANY for
        // virtual devices: the main lcore's).
        int socket = rte_eth_dev_socket_id(pi.id);
        pi.socket = socket < 0 ? main_socket() : static_cast<unsigned>(socket);
        rte_mempool* pool = pool_on(pi.socket);
        for (uint16_t q = 0; q < pi.rx_queues; ++q)
            if (int rc = rte_eth_rx_queue_setup(pi.id, q, rxd, pi.socket, nullptr, pool); rc != 0)
                throw RuntimeError("port " + pc.name + ": rx queue " + std::to_string(q) + ": " + errstr(rc));
        for (uint16_t q = 0; q < n_workers; ++q)
            if (int rc = rte_eth_tx_queue_setup(pi.id, q, txd, pi.socket, nullptr); rc != 0)
                throw RuntimeError("port " + pc.name + ": tx queue " + std::to_string(q) + ": " + errstr(rc));
        if (buffers.single_segment_tx) {
            // Fragments, reassembled datagrams and jumbo frames received in pieces leave as chains.
            shared_.single_segment_tx |= 1u << pi.id;
            spdlog::info(
                "port {}: the device cannot transmit chained mbufs; chained frames leave copied into one "
                "buffer",
                pc.name);
        }
        if (pc.mac) {
            rte_ether_addr a;
            std::copy(std::begin(pc.mac->bytes), std::end(pc.mac->bytes), a.addr_bytes);
            if (rte_eth_dev_default_mac_addr_set(pi.id, &a) != 0) {
                // Keep the configured MAC in software and see every frame instead.
                spdlog::warn("port {}: device refused MAC {}, using promiscuous mode", pc.name,
                             config::format_mac(*pc.mac));
                rte_eth_promiscuous_enable(pi.id);
            }
            std::copy(std::begin(pc.mac->bytes), std::end(pc.mac->bytes), pi.mac.begin());
        } else {
            rte_ether_addr a;
            rte_eth_macaddr_get(pi.id, &a);
            std::copy(std::begin(a.addr_bytes), std::end(a.addr_bytes), pi.mac.begin());
            rte_eth_promiscuous_enable(pi.id);
        }
        port_ids_[port_index] = pi.id;
        ports_.push_back(pi);
    }
    // VLANs: logical ports of their own on their parents' devices (dataplane/vlan.h). The
    // parent's MTU already leaves room for the tag (configure_mtu()); nothing is set on the
    // device, which passes tagged frames to egw as it passes any other.
    if (std::string why = assign_vlan_ports(cfg_, port_ids_, shared_.vlans); !why.empty()) throw RuntimeError(why);
    for (size_t port_index = 0; port_index < cfg_.ports.size(); ++port_index) {
        const config::PortConfig& pc = cfg_.ports[port_index];
        if (!pc.is_vlan()) continue;
        const PortInfo* parent = find_port(pc.parent);
        PortInfo pi = *parent;
        pi.name = pc.name;
        pi.id = port_ids_[port_index];
        pi.vlan = static_cast<uint16_t>(pc.vlan);
        pi.parent = pc.parent;
        pi.parent_id = parent->id;
        if (shared_.single_segment_tx >> parent->id & 1) shared_.single_segment_tx |= 1u << pi.id;
        spdlog::info("port {}: VLAN {} of port {} (logical port {})", pi.name, pi.vlan, pi.parent, pi.id);
        vlan_ports_.push_back(pi);
    }

    dp::flow_owners_init(shared_.flow_owners, n_workers, reta_entries);
    for (const auto& p : ports_)
        if (p.rss_hash_ours) shared_.flow_owners.hardware |= 1u << p.id;

    // Workers, their rings and receive queues.
    uint16_t n_ports = 0;
    for (uint16_t id : port_ids_)
        n_ports = std::max<uint16_t>(n_ports, static_cast<uint16_t>(id + 1));
    uint32_t per_worker = (cfg_.sessions.max_sessions + n_workers - 1) / n_workers;
    uint32_t per_worker6 = (cfg_.sessions.max_sessions_ipv6 + n_workers - 1) / n_workers;
    for (unsigned i = 0; i < n_workers; ++i) {
        // Everything the worker writes per packet lives on its lcore's socket.
        int wsocket = static_cast<int>(worker_socket(i));
        void* mem = rte_zmalloc_socket("egw_worker", sizeof(dp::Worker), RTE_CACHE_LINE_SIZE, wsocket);
        if (!mem) throw RuntimeError("out of memory for worker state");
        auto* w = new (mem) dp::Worker();
        w->index = i;
        w->shared = &shared_;
        w->n_ports = n_ports;
        dp::worker_assign_port_block(*w);
        w->service_counters = static_cast<dp::ServiceCounters*>(rte_zmalloc_socket(
            "egw_svc_counters", sizeof(dp::ServiceCounters) * dp::kMaxServices, RTE_CACHE_LINE_SIZE, wsocket));
        w->dump_capacity = 1024;
        w->dump_buffer = static_cast<dp::SessionRecord*>(
            rte_zmalloc_socket("egw_dump", sizeof(dp::SessionRecord) * w->dump_capacity, RTE_CACHE_LINE_SIZE, wsocket));
        std::string name = "egw_s" + std::to_string(i);
        std::string name6 = "egw_s6_" + std::to_string(i);
        // Each family has a table of its own (sessions.max, sessions.max_ipv6). One of capacity 0
        // is still set up, empty, so lookups need no test: its creates fail as a full table's.
        if (!w->service_counters || !w->dump_buffer || !w->sessions.init(name.c_str(), per_worker, wsocket) ||
            !w->sessions6.init(name6.c_str(), per_worker6, wsocket))
            throw RuntimeError("cannot allocate " + std::to_string(per_worker) + " IPv4 and " +
                               std::to_string(per_worker6) + " IPv6 sessions for worker " + std::to_string(i) +
                               " (raise eal.memory_mb, or lower sessions.max or sessions.max_ipv6)");
        w->sessions.share_pod_budget(shared_.pod_budget);
        w->sessions6.share_pod_budget(shared_.pod_budget);
        const config::ReassemblyConfig& ra = cfg_.reassembly;
        w->reassembly = dp::reassembly_create(ra.max_datagrams, ra.max_fragments, ra.per_source(),
                                              ra.timeout_ms * tsc_hz_ / 1000, wsocket);
        if (!w->reassembly)
            throw RuntimeError("cannot allocate the fragment reassembly table of worker " + std::to_string(i) +
                               " for " + std::to_string(ra.max_datagrams) +
                               " datagrams (raise eal.memory_mb or lower reassembly.max_datagrams)");
        std::string rn = "egw_inj" + std::to_string(i);
        w->inject = rte_ring_create(rn.c_str(), 1024, wsocket, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (!w->inject) throw RuntimeError("cannot create ring " + rn + ": " + errstr(rte_errno));
        workers_.push_back(w);
    }
    for (unsigned a = 0; a < n_workers && n_workers > 1; ++a)
        for (unsigned b = 0; b < n_workers; ++b) {
            if (a == b) continue;
            std::string rn = "egw_ho" + std::to_string(a) + "_" + std::to_string(b);
            // A hand-off ring is read by its consumer in every iteration: on the consumer's socket.
            rte_ring* r =
                rte_ring_create(rn.c_str(), 2048, static_cast<int>(worker_socket(b)), RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (!r) throw RuntimeError("cannot create ring " + rn + ": " + errstr(rte_errno));
            workers_[a]->handoff_out[b] = r;
            workers_[b]->handoff_in[a] = r;
        }
    // Receive queues: a port with a queue per worker gives queue q to worker q (rte_flow steering
    // relies on it); fewer queues are spread over the workers, each polled by exactly one.
    unsigned next = 0;
    for (const auto& p : ports_) {
        for (uint16_t q = 0; q < p.rx_queues; ++q) {
            unsigned wi = p.rx_queues == n_workers ? q : next++ % n_workers;
            dp::Worker* w = workers_[wi];
            w->rxq[w->n_rxq++] = dp::RxQueue{p.id, q};
            if (p.socket != worker_socket(wi))
                spdlog::warn(
                    "port {}: queue {} is polled by worker {} (lcore {}) on socket {}, the port is on socket {}: "
                    "every packet crosses sockets",
                    p.name, q, wi, cfg_.workers[wi], worker_socket(wi), p.socket);
        }
    }
    size_t session_bytes = 0;
    for (auto* w : workers_)
        session_bytes += w->sessions.memory_bytes() + w->sessions6.memory_bytes();
    spdlog::info(
        "data plane: {} worker(s), {} port(s), {} mbufs, {} IPv4 and {} IPv6 sessions ({:.1f} MiB of session tables)",
        n_workers, ports_.size(), n_mbufs_ * pools_.size(), per_worker * n_workers, per_worker6 * n_workers,
        session_bytes / 1048576.0);
}

void Runtime::start_ports() {
    for (const auto& p : ports_) {
        if (int rc = rte_eth_dev_start(p.id); rc != 0) throw RuntimeError("port " + p.name + ": start: " + errstr(rc));
        ports_started_ = true;
        program_reta(p);
    }
    std::vector<Steering::OutsidePort> outside;
    for (const auto& p : ports_)
        if (cfg_.find_port(p.name)->role == config::PortRole::outside) outside.push_back({p.id, p.name, p.rx_queues});
    std::vector<PortBlock> blocks;
    for (const auto* w : workers_)
        blocks.push_back({w->nat_port_lo, w->nat_port_hi});
    steering_.init(outside, blocks);
}

// A port with RSS and a queue per worker: every redirection entry j names queue
// flow_owners.worker[j], which that worker polls, so that a flow from inside arrives on the worker
// that owns it (flow_owner.h). Where the device keeps its own table (it has none, refuses it, or has
// fewer queues than workers) flows still reach their owners, through the hand-off.
void Runtime::program_reta(const PortInfo& p) {
    if (!p.rss_hf || !p.reta_size) return;
    if (p.rx_queues != workers_.size()) {
        spdlog::info("port {}: {} receive queues for {} workers: flows from inside may be handed to their owner",
                     p.name, p.rx_queues, workers_.size());
        return;
    }
    std::vector<rte_eth_rss_reta_entry64> reta(std::max<unsigned>(1, p.reta_size / RTE_ETH_RETA_GROUP_SIZE));
    for (unsigned j = 0; j < p.reta_size; ++j) {
        auto& group = reta[j / RTE_ETH_RETA_GROUP_SIZE];
        group.mask |= uint64_t{1} << (j % RTE_ETH_RETA_GROUP_SIZE);
        group.reta[j % RTE_ETH_RETA_GROUP_SIZE] = shared_.flow_owners.worker[j & shared_.flow_owners.mask];
    }
    if (int rc = rte_eth_dev_rss_reta_update(p.id, reta.data(), p.reta_size); rc != 0)
        spdlog::warn(
            "port {}: the device refused egw's RSS redirection table ({}): flows from inside may be handed "
            "to their owner",
            p.name, errstr(rc));
}

void Runtime::launch_workers() {
    for (size_t i = 0; i < workers_.size(); ++i) {
        if (int rc = rte_eal_remote_launch(dp::worker_main, workers_[i], cfg_.workers[i]); rc != 0)
            throw RuntimeError("cannot launch worker on lcore " + std::to_string(cfg_.workers[i]) + ": " + errstr(rc));
    }
    launched_ = true;
}

void Runtime::stop_workers() {
    shared_.stop.store(true);
    if (launched_) {
        rte_eal_mp_wait_lcore();
        launched_ = false;
    }
}

void Runtime::stop() {
    stop_workers();
    steering_.clear();
    if (ports_started_) {
        for (const auto& p : ports_) {
            rte_eth_dev_stop(p.id);
            rte_eth_dev_close(p.id);
        }
        ports_started_ = false;
    }
}

}  // namespace egw::control
