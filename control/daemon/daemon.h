// SPDX-License-Identifier: Apache-2.0
//
// The Daemon owns everything egwd runs once EAL is up, and runs the control loop: the runtime
// (ports, mempool, workers), the state source (a manifest directory or the Kubernetes API with
// the election), the policy builder and its publisher to the workers, the neighbour resolver,
// the metrics exporter and telemetry commands, the status file and the CLI. egwd's main() only
// parses the command line, sets up the logs and EAL, and hands over to it.
#pragma once

#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/ip.h"
#include "control/model/egress_qos.h"
#include "control/model/rules.h"

namespace egw::k8s_source {
class Controller;
}
namespace egw::firewall {
class EgressFirewallState;
}  // namespace egw::firewall
namespace egw::dns {
class Resolver;
class DnsNameResolverWatch;
}  // namespace egw::dns
namespace egw::manifests {
class ManifestDir;
}
namespace egw::metrics {
class Exporter;
}
namespace egw::telemetry {
class Commands;
}
namespace egw::cli {
class Frontends;
struct Reply;
}  // namespace egw::cli
namespace egw::sync {
class SyncService;
}
namespace egw::dp {
template <typename T>
class SpscRing;
struct SyncEvent;
}  // namespace egw::dp
namespace egw::control {

class Runtime;
class TxStallLog;
class PolicyBuilder;
class PolicyPublisher;
class NeighborResolver;
class StandbyPorts;

// What the command line adds to the configuration.
struct DaemonOptions {
    std::string status_file;                   // rewritten every 500 ms when set
    unsigned mbufs = 0;                        // overrides mempool.mbufs when not 0
    double duration = 0;                       // stop by itself after this many seconds (0: never)
    bool interactive = false;                  // the egw> prompt on this terminal
    std::string kubeconfig;                    // kubernetes source: overrides state.kubeconfig
    std::optional<config::Election> election;  // kubernetes source: overrides state.election
};

// Signals, as the handlers set them: `stop` ends the loop, `reload` (cleared here) rereads the
// configuration file.
struct DaemonSignals {
    volatile std::sig_atomic_t* stop;
    volatile std::sig_atomic_t* reload;
};

class Daemon {
public:
    // Needs EAL initialised. Nothing is started before run().
    Daemon(config::Config cfg, DaemonOptions opt);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Sets everything up, runs the control loop until a stop signal, `quit` on the console or
    // the duration, then stops in order (Leases given up first, workers, last status). Returns
    // egwd's exit status; an exception on the way is logged and gives 1.
    int run(DaemonSignals signals);

private:
    void setup();
    void loop(DaemonSignals signals);
    void shutdown();
    // Feeds what changed in the state source to the builder and publishes; `force` publishes
    // even when nothing changed (start, reload).
    void reconcile(bool force);
    // The configuration file again (SIGHUP, `reload config`): all of it or nothing.
    cli::Reply reload();
    void start_sync();
    // Events a worker's sync ring holds: 65,536 of 72 bytes, 4.5 MB per worker; at 100,000 new
    // sessions a second it covers 0.6 s of a stalled sync thread.
    static constexpr size_t kSyncRingEvents = 65536;
    void write_status(bool running, bool final_write);
    // Compiles the EgressFirewalls of the state source's objects when they, the pods or the nodes
    // changed; true when the builder was given a new policy to publish. Logs each applied object.
    bool refresh_firewall();
    // The addresses of the EgressFirewalls' dnsName rules now: exact names from the resolver
    // (started when the first such name appears), wildcards from the DNSNameResolver objects
    // (kubernetes source, watched from the first wildcard rule on). Never waits for DNS.
    std::map<std::string, std::vector<net::IpAddr>> firewall_dns_answers(const model::ObjectSet& objects);
    // A name's addresses moved since firewall_dns_answers() last read them.
    bool firewall_dns_moved() const;

    config::Config cfg_;
    DaemonOptions opt_;
    // Declared in the order they are made; destroyed in reverse, so the exporter and the CLI go
    // before the source, the builder and the runtime they read.
    // The workers' session sync rings (sync off: none): before rt_, so that they outlive the
    // workers however setup ends.
    std::vector<std::unique_ptr<dp::SpscRing<dp::SyncEvent>>> sync_rings_;
    std::unique_ptr<Runtime> rt_;
    std::unique_ptr<sync::SyncService> sync_;      // session sync (docs/architecture.md), or null
    std::unique_ptr<StandbyPorts> standby_ports_;  // with sync: the peers' NAT ports in the workers
    std::unique_ptr<k8s_source::Controller> k8s_;  // the kubernetes source, or null
    std::unique_ptr<PolicyBuilder> builder_;
    std::unique_ptr<firewall::EgressFirewallState> firewall_;  // read by the CLI and the metrics
    std::unique_ptr<NeighborResolver> resolver_;
    std::unique_ptr<metrics::Exporter> exporter_;
    std::unique_ptr<telemetry::Commands> telemetry_;
    std::unique_ptr<PolicyPublisher> publisher_;         // hands the builder's snapshots to the workers
    std::unique_ptr<manifests::ManifestDir> manifests_;  // the files source (empty path with kubernetes)
    std::unique_ptr<cli::Frontends> cli_;
    std::unique_ptr<TxStallLog> tx_stalls_;
    std::map<std::string, std::string> firewall_logged_;  // namespace -> what was last logged
    std::set<std::string> firewall_ignored_logged_;       // "ns/name: ignored: ..." said once
    std::string firewall_error_logged_;                   // the build error last logged
    uint64_t firewall_changes_seen_ = ~uint64_t{0};       // kubernetes: EgressIPWatch::firewall_changes()
    std::chrono::steady_clock::time_point next_firewall_look_{};
    std::unique_ptr<dns::Resolver> dns_;                    // exact dnsName rules, or null
    std::unique_ptr<dns::DnsNameResolverWatch> dns_watch_;  // wildcard dnsName rules, or null
    std::vector<std::string> dns_names_;                    // what dns_ was last asked for
    uint64_t dns_generation_seen_ = 0;
    uint64_t dns_watch_generation_seen_ = 0;
    std::string dns_error_logged_;  // why the resolver could not start, said once
    model::GatewayIdentity self_;
    std::map<std::string, model::ServiceState> last_states_;   // as last logged
    std::map<std::string, model::EgressQoS> last_egress_qos_;  // the files source's, as last applied
    bool first_sync_logged_ = false;
};

}  // namespace egw::control
