// SPDX-License-Identifier: Apache-2.0
//
// The Prometheus endpoint of egwd and the state it shares with the DPDK telemetry commands.
//
// egwd's control thread owns the Exporter. It calls published() after every policy publication
// (the only time Services, ids and NAT addresses change) and tick() from its main loop; both
// build or store values and return at once. Everything else runs on the metrics thread (the
// HTTP server) or a telemetry thread, which read:
//   - the ControlView through ViewBox (shared_ptr swapped under a mutex, see state.h),
//   - worker counters with relaxed atomic loads,
//   - port statistics and link state with rte_eth_stats_get / rte_eth_link_get_nowait.
// No reader ever blocks a worker, and no worker knows the readers exist.
//
// Lifetime: construct after Runtime::setup() (the workers and ports exist) and stop() before
// the ports are stopped and closed; the destructor stops too.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "control/metrics/arp.h"
#include "control/metrics/collect.h"
#include "control/metrics/health.h"
#include "control/metrics/http_server.h"
#include "control/metrics/state.h"

namespace egw::control {
class Runtime;
class PolicyBuilder;
class NeighborResolver;
}  // namespace egw::control

namespace egw::metrics {

class Exporter {
public:
    Exporter(const config::Config& cfg, control::Runtime& rt);
    ~Exporter();
    Exporter(const Exporter&) = delete;
    Exporter& operator=(const Exporter&) = delete;

    // --- control thread ---
    // After a publication: `seconds` is how long it took (store + RCU grace period + free).
    void published(const control::PolicyBuilder& builder, double seconds);
    // From the main loop, every ~100 ms: the control loop's heartbeat and its own counters.
    void tick(const control::NeighborResolver& resolver);
    // Serves /metrics, /livez and /readyz when the configuration enables it. A port that cannot
    // be bound is logged as an error and egwd goes on forwarding without the endpoint.
    void start();
    void stop();
    // Families of other components (the Kubernetes client, ...), written after egwd's own on every
    // scrape, on the metrics thread. Register before start().
    void add_families(std::function<void(Writer&)> write);

    // --- any thread ---
    std::shared_ptr<const ControlView> view() const { return box_.get(); }
    std::span<dp::Worker* const> workers() const { return workers_; }
    Readings read(const ControlView& v) const;
    std::vector<PortReading> read_ports(const ControlView& v) const;
    std::vector<VlanReading> read_vlans() const;
    const ProcessInfo& process() const { return process_; }
    // The whole exposition; `error` receives a writer error (then the text must not be served).
    std::string metrics_text(std::string& error) const;
    std::string readiness() const;  // "" when ready (its own checks and add_readiness()'s)
    std::string liveness() const;   // "" when live
    std::string startup() const;    // "" when every worker and the control loop have started
    // What keeps the data plane from serving, one line each ("" when it serves): a worker that has
    // not started or whose loop counter has not moved for a second, an outside port without link.
    // The kubernetes source renews its liveness Lease only while this is empty.
    std::string serving_problems() const;
    // More reasons for /readyz to fail ("" when none), asked on every probe. Register before start().
    void add_readiness(std::function<std::string()> check);
    uint16_t port() const { return server_ ? server_->port() : 0; }

private:
    HttpResponse handle(const std::string& path) const;
    void sample_health() const;
    double now() const;  // monotonic seconds

    const config::Config& cfg_;
    std::vector<dp::Worker*> workers_;
    std::vector<PortEntry> ports_;
    std::vector<VlanReading> vlans_;  // without their counters
    ProcessInfo process_;
    ViewBox box_;

    // Control thread only.
    Histogram publish_duration_;
    std::map<uint32_t, std::pair<std::string, ServiceCounters>> owners_;  // id -> key, baseline

    // Shared with the server thread.
    std::atomic<uint64_t> neighbor_held_dropped_{0};
    ArpCounters arp_;
    std::atomic<double> last_tick_{-1};
    mutable std::mutex health_mu_;
    mutable StallDetector stall_;
    mutable StallDetector serving_stall_;  // the same, judged after a second (serving_problems)
    std::vector<std::function<std::string()>> readiness_checks_;
    mutable std::mutex extra_mu_;
    std::vector<std::function<void(Writer&)>> extra_;
    // ethdev calls are not documented as safe from several threads at once for one port: the
    // metrics thread and the telemetry threads take turns.
    mutable std::mutex ethdev_mu_;

    std::unique_ptr<HttpServer> server_;
};

}  // namespace egw::metrics
