// SPDX-License-Identifier: Apache-2.0
//
// Reloading the configuration file while egwd runs (SIGHUP, or `reload config` on the CLI).
//
// Some settings are only read when egwd starts: the EAL, lcores and workers, the mbuf pool, the
// ports and their queues, the VRFs (their indices are in sessions), the session table and NAT
// port range, the node name, the state source and the metrics listener. A reload that changes any
// of them is refused as a whole, and nothing is applied: half a configuration is worse than the
// old one. What the policy build, the neighbour resolver and the files-source rules read on every
// pass can change live: routes, static neighbours, the default action, the ARP timers and hold
// queue, the service and node address lists, and with the files source also the pod CIDRs, the
// node's labels and the directory poll interval (with the kubernetes source the election copied
// those at start).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace egw::config {

struct ConfigChanges {
    std::vector<std::string> live;     // settings that differ and can be applied, like "routes[2].via"
    std::vector<std::string> restart;  // settings that differ and are only read at start
    bool empty() const { return live.empty() && restart.empty(); }
};

// The settings that differ between the two, by their path in the file (config::to_json's keys;
// a list that grew or shrank is named as a whole, like "routes"), sorted.
ConfigChanges compare_for_reload(const Config& running, const Config& next);

// Copies into `running` every live-reloadable setting of `next`. Call only when
// compare_for_reload(running, next).restart is empty.
void apply_live(Config& running, const Config& next);

}  // namespace egw::config
