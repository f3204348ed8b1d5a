// SPDX-License-Identifier: Apache-2.0
//
// The DPDK side of the daemon: EAL, the mbuf pool, ports and queues, rings, RCU, and the worker
// lcores. Owned by the control thread; workers only see DataplaneShared and their Worker.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "control/runtime/buffers.h"
#include "control/runtime/queues.h"
#include "control/runtime/steering.h"
#include "dataplane/worker.h"

struct rte_eth_conf;
struct rte_eth_dev_info;
struct rte_mempool;

namespace egw::control {

class RuntimeError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct PortInfo {
    std::string name;  // egw's name from the config
    std::string device;
    uint16_t id = 0;  // DPDK port id
    std::array<uint8_t, 6> mac{};
    uint16_t rx_queues = 1;
    uint64_t rss_hf = 0;         // RSS hash types in use (0: none, or a single queue)
    uint16_t reta_size = 0;      // the device's RSS redirection table (0: none, or RSS not in use)
    bool rss_hash_ours = false;  // hashes with dp::kRssKey and delivers the hash (dp::FlowOwners::hardware)
    unsigned socket = 0;         // NUMA socket of the device (the main lcore's for virtual devices)
    // A VLAN (Runtime::vlan_ports()): `id` is its logical port id, `device` and `mac` its
    // parent's, `parent_id` the parent's DPDK port id; 0 for a port with a device.
    uint16_t vlan = 0;
    std::string parent;
    uint16_t parent_id = 0;
};

class Runtime {
public:
    // Why `mbufs` per pool cannot cover the fragments the workers' reassembly tables may hold
    // (workers × reassembly.max_datagrams × (max_fragments − 1): a datagram whose last fragment
    // arrives leaves the table), or "" when they can.
    static std::string reassembly_pool_shortfall(const config::Config& cfg, unsigned mbufs);
    // Builds the EAL argument list from the config unless `eal_args` is non-empty (then those are
    // passed through unchanged, as the benchmark rig requires).
    static std::vector<std::string> eal_arguments(const config::Config& cfg, const std::vector<std::string>& eal_args,
                                                  const char* argv0);

    explicit Runtime(const config::Config& cfg);
    ~Runtime();

    // EAL must be initialised. Creates the pool (`mbufs` overrides the config when non-zero), the
    // ports, rings, RCU and the workers' state. Throws RuntimeError naming what failed.
    void setup(unsigned mbufs);
    void start_ports();  // also sets up steering (no rule until the first NAT address)
    void launch_workers();
    void stop_workers();  // asks the workers to stop and waits for them
    void stop();          // stops workers, then ports

    dp::DataplaneShared& shared() { return shared_; }
    std::vector<dp::Worker*>& workers() { return workers_; }
    const std::vector<PortInfo>& ports() const { return ports_; }  // the ports with a device
    const std::vector<PortInfo>& vlan_ports() const { return vlan_ports_; }
    // The port or VLAN of that name or logical id, nullptr if none.
    const PortInfo* find_port(const std::string& name) const;
    const PortInfo* find_port(uint16_t id) const;
    rte_mempool* pool() const { return pool_; }    // the main lcore's socket's pool
    unsigned worker_socket(unsigned index) const;  // NUMA socket of worker `index`'s lcore
    std::vector<uint16_t> port_ids() const;        // the logical port id of each of the config's ports, in order
    std::vector<std::array<uint8_t, 6>> port_macs() const;  // indexed by logical port id
    uint64_t tsc_hz() const { return tsc_hz_; }
    Steering& steering() { return steering_; }
    const Steering& steering() const { return steering_; }

private:
    void program_reta(const PortInfo& p);
    BufferPlan configure_mtu(const config::PortConfig& pc, const std::string& field, const rte_eth_dev_info& info,
                             rte_eth_conf& conf) const;
    void apply_mtu(uint16_t port_id, const config::PortConfig& pc, const std::string& field) const;

    const config::Config& cfg_;
    dp::DataplaneShared shared_;
    dp::PodBudget pod_budget_;  // shared_.pod_budget when it has one
    std::vector<dp::Worker*> workers_;
    std::vector<PortInfo> ports_;
    std::vector<PortInfo> vlan_ports_;
    std::vector<uint16_t> port_ids_;        // of cfg_.ports[i]
    rte_mempool* pool_on(unsigned socket);  // the pool of a socket, made on first use

    Steering steering_;
    rte_mempool* pool_ = nullptr;
    std::vector<std::pair<unsigned, rte_mempool*>> pools_;  // one per socket with a port (and the main one)
    unsigned n_mbufs_ = 0;                                  // per pool
    rte_mempool* indirect_ = nullptr;                       // fragments' payload references
    uint64_t tsc_hz_ = 0;
    bool launched_ = false;
    bool ports_started_ = false;
};

}  // namespace egw::control
