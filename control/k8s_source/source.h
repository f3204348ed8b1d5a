// SPDX-License-Identifier: Apache-2.0
//
// egwd's `kubernetes` state source, built from the configuration and the command line: the
// credentials (--kubeconfig, else state.kubeconfig, else $KUBECONFIG, in-cluster, ~/.kube/config),
// the node, the Lease namespace and timings, and the election mode (--election, else
// state.election). egwd then calls start(), poll() from its control loop (the same ServiceState
// vectors the files source produces go to PolicyBuilder), and stop() on the way out.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "config/config.h"
#include "control/k8s_source/controller.h"

namespace egw::k8s_source {

// Throws k8s::CredentialError when the credentials cannot be read, std::invalid_argument when the
// configuration lacks what the source needs (node.name).
std::unique_ptr<Controller> make_source(const config::Config& cfg, const std::string& kubeconfig_flag = "",
                                        std::optional<config::Election> election_flag = std::nullopt);

// "leader" / "external" -> the mode; nullopt for anything else.
std::optional<config::Election> parse_election(const std::string& s);

// The connection and election state for people and scripts (`egwctl show k8s`): per-kind
// reflector state from the clients, the controller's counters, and (key "egress_ips") what the
// EgressIP sources hold and select.
nlohmann::json describe(Controller& c);

}  // namespace egw::k8s_source
