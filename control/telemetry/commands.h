// SPDX-License-Identifier: Apache-2.0
//
// DPDK telemetry commands under /egw/, answered from the same state as /metrics.
//
//   /egw/info                  version, node, generation, readiness, counts
//   /egw/services              "namespace/name" of every EgressService egwd knows
//   /egw/service,NS/NAME       one Service: mode, host, NAT address, VRF, counters
//   /egw/drops                 packets dropped, by reason
//   /egw/sessions/count        NAT sessions open, created, expired, per worker lcore
//   /egw/snat/ports[,ADDRESS]  per NAT address (keyed 192_0_2_50: keys may not hold dots): ports
//                              in use (when attributable) and capacity
//   /egw/lcores                per worker lcore: its counters (EGW_WORKER_COUNTERS of scope lcore)
//
// Read them with usertools' client, e.g. `dpdk-telemetry.py -f <eal file prefix>`, or any
// SOCK_SEQPACKET client of /var/run/dpdk/<file prefix>/dpdk_telemetry.v2.
//
// DPDK runs the callbacks on its telemetry threads (one per client connection), concurrently
// with the workers and the control thread; they only use the Exporter's thread-safe readers.
// DPDK 22.11 has no way to unregister a command (nor to pass a context pointer), so the commands
// are registered once per process and find their source through a pointer guarded by a mutex;
// after ~Commands they answer with an error.
#pragma once

namespace egw::metrics {
class Exporter;
}

namespace egw::telemetry {

class Commands {
public:
    explicit Commands(const metrics::Exporter& source);
    ~Commands();
    Commands(const Commands&) = delete;
    Commands& operator=(const Commands&) = delete;
};

}  // namespace egw::telemetry
