// SPDX-License-Identifier: Apache-2.0
//
// Turns the configuration and the evaluated EgressServices into the next PolicySnapshot.
//
// Runs on the control thread. It keeps what must survive from one snapshot to the next: the
// dense id of every Service (ids index the workers' counters, so they are stable while the
// Service exists and are only reused after it is gone) and each Service's translation version
// (bumped only when the translation really changes, so a no-op reconcile keeps every session).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "control/model/rules.h"
#include "dataplane/tables/policy.h"

namespace egw::control {

// What the control plane knows about a Service beyond the snapshot, for the status file, logs,
// the CLI and the metrics.
struct ServiceView {
    model::ServiceState state;
    uint32_t id = 0;
    bool programmed = false;       // translating on this gateway now
    std::string vrf;               // resolved VRF name ("" when the network is unknown)
    std::string problem;           // why it is not programmed although served here (unknown network, ...)
};

class PolicyBuilder {
public:
    // `port_macs[port id]` are the MACs the ports actually use. `port_ids[i]` is the DPDK port id
    // of config.ports[i].
    PolicyBuilder(const config::Config& cfg, std::vector<uint16_t> port_ids, std::vector<std::array<uint8_t, 6>> port_macs);

    // Builds the snapshot for these services. Never fails: what cannot be programmed is left out
    // and said in the returned views.
    std::unique_ptr<dp::PolicySnapshot> build(const std::vector<model::ServiceState>& services);

    const std::vector<ServiceView>& views() const { return views_; }
    const std::map<std::string, uint32_t>& ids() const { return ids_; }
    // VRF index of a network name or table number ("" = default); -1 when unknown.
    int resolve_vrf(const std::string& network) const;
    uint64_t generation() const { return generation_; }
    std::string vrf_name(uint8_t index) const { return index < cfg_.vrfs.size() ? cfg_.vrfs[index].name : ""; }

private:
    uint32_t id_for(const std::string& key);

    const config::Config& cfg_;
    std::vector<uint16_t> port_ids_;
    std::vector<std::array<uint8_t, 6>> port_macs_;
    std::map<std::string, uint32_t> ids_;
    std::vector<uint32_t> free_ids_;
    uint32_t next_id_ = 1;
    uint32_t next_version_ = 1;
    struct Programmed {
        dp::ServicePolicy policy;
        std::vector<uint32_t> endpoints;
    };
    std::map<uint32_t, Programmed> last_;  // by id
    std::vector<ServiceView> views_;
    std::vector<uint32_t> served_endpoints_;  // sorted: pods some Service translates
    uint32_t default_version_ = 1;
    uint64_t generation_ = 0;
};

}  // namespace egw::control
