// SPDX-License-Identifier: Apache-2.0
//
// The worker lcore: polls its receive queues, translates and routes bursts, transmits.
//
// Everything a worker writes per packet lives in its own cache-aligned Worker struct (sessions,
// transmit buffers, counters). What it reads and does not own is in DataplaneShared: the
// published policy snapshot, the neighbour table, and rings to the control thread and to the
// other workers. Nothing here allocates, locks, logs, throws or makes a system call on the
// packet path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "dataplane/counter.h"
#include "dataplane/drop_reason.h"
#include "dataplane/flow_owner.h"
#include "dataplane/gateway_icmp_error_kinds.h"
#include "dataplane/service_counters.h"
#include "dataplane/sync_events.h"
#include "dataplane/tables/neighbor_table.h"
#include "dataplane/tables/neighbor_table6.h"
#include "dataplane/tables/policy.h"
#include "dataplane/tables/port_reservations.h"
#include "dataplane/tables/session_table.h"
#include "dataplane/vlan.h"
#include "dataplane/worker_counters.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;
struct rte_rcu_qsbr;

namespace egw::dp {

inline constexpr unsigned kBurst = 32;
inline constexpr unsigned kTxBufferSize = 2 * kBurst;  // a burst plus a burst of hand-offs/injects
inline constexpr unsigned kSweepPerIteration = 8;
// The poll loop paces the expiry sweep by time, not by iterations: a pass over the slots a table
// has handed out takes about kSweepPassMs (so an idle session closes at most that long after its
// timeout, which is at least a second), and its steps of kSweepPerIteration slots are at most
// kSweepStepMaxMs apart however few slots there are. Under load a step every iteration would
// cost each burst eight slot checks whether the table holds ten thousand sessions or a million.
inline constexpr uint64_t kSweepPassMs = 1000;
inline constexpr uint64_t kSweepStepMaxMs = 10;
// A port's transmit queue is taken for stalled once every burst handed to it over this long was
// refused whole (DataplaneShared::tx_stall_ticks; output.cpp).
inline constexpr uint32_t kTxStallMs = 200;
// A create that finds the table full first looks at this many slots ahead of the expiry sweep
// for expired sessions to reclaim (once per poll iteration at most when it finds none).
inline constexpr unsigned kReclaimScan = 64;

struct Timeouts {
    uint64_t tcp_established = 0;  // in TSC ticks
    uint64_t tcp_transitory = 0;
    uint64_t udp = 0;
    uint64_t icmp = 0;
    uint64_t tcp_half_closed = 0;  // one side sent a FIN, the other did not yet
};

// The rate of the ICMP errors a worker originates (gateway_icmp_error.cpp): a token bucket of `burst`
// tokens refilled one per `interval`, kept in its GCRA form (one timestamp per worker).
struct IcmpLimit {
    uint64_t interval = 0;   // TSC ticks per token; 0: the gateway sends no ICMP errors
    uint64_t tolerance = 0;  // (burst - 1) * interval
};

// `per_second` errors per second with bursts of `burst` (at least 1), on a TSC of `hz`.
inline IcmpLimit make_icmp_limit(uint32_t per_second, uint32_t burst, uint64_t hz) {
    if (per_second == 0) return {};
    uint64_t interval = hz / per_second ? hz / per_second : 1;
    return {interval, (burst ? burst - 1 : 0) * interval};
}

// When the poll loop next runs an expiry step on one table, and the step interval worked out
// for the number of slots it had handed out then.
struct SweepPace {
    uint64_t next = 0;      // `now` from which the next step is due
    uint64_t interval = 0;  // TSC ticks between steps
    uint32_t slots = 0;     // slots_handed_out() when `interval` was worked out
};

// Shared by all workers and the control thread; written by the control thread only.
struct DataplaneShared {
    PolicyHandle policy;
    NeighborTable* neighbors = nullptr;
    NeighborTable6* neighbors6 = nullptr;  // IPv6 next hops; none: every IPv6 packet waits for the control thread
    rte_rcu_qsbr* qsbr = nullptr;          // workers are RCU threads 0..n_workers-1
    rte_ring* to_control = nullptr;  // multi-producer: ARP replies, Neighbor Advertisements, packets awaiting ARP or NS
    unsigned n_workers = 1;
    uint16_t nat_port_min = 1024;
    uint16_t nat_port_max = 65535;
    Timeouts timeouts;
    bool tcp_strict = false;         // only a SYN opens a TCP session (else also mid-stream segments)
    uint32_t pod_session_limit = 0;  // sessions.max_per_pod: sessions one pod may have; 0: no limit
    // With several workers, the pod budget they share for that limit (pod_budget.h); none: each
    // worker counts against the limit alone (one worker, or a test of one).
    const PodBudget* pod_budget = nullptr;
    int next_hop_field = -1;  // mbuf dynfield offset: a held packet's next hop (held.h)
    IcmpLimit icmp_limit;     // set before the workers start
    // Fragmentation for the egress MTU (output.cpp): a fragment is a direct mbuf holding its
    // headers, chained to an indirect one that points into the original datagram.
    rte_mempool* frag_direct = nullptr;
    rte_mempool* frag_indirect = nullptr;
    uint64_t tx_stall_ticks = 0;  // kTxStallMs in TSC ticks; 0: a queue is never taken for stalled
    // Ports (bit = port id) whose device cannot transmit chained mbufs (no
    // RTE_ETH_TX_OFFLOAD_MULTI_SEGS): output copies a chained frame into one mbuf of frag_direct
    // before it leaves there (the runtime made sure a frame of the port's MTU fits one), or drops
    // it as tx_chain_not_copied (output.cpp). Set before the workers start.
    uint32_t single_segment_tx = 0;
    // kSweepPassMs and kSweepStepMaxMs in TSC ticks; 0: a sweep step every poll iteration.
    uint64_t sweep_pass_ticks = 0;
    uint64_t sweep_step_max_ticks = 0;
    FlowOwners flow_owners;  // which worker owns a flow from inside (flow_owner.h)
    // The peers' NAT ports (session sync's standby sessions), published like the policy
    // (publish.h); none while there is no standby session. Read only to allocate a port.
    std::atomic<const PortReservations*> reservations{nullptr};
    VlanPorts vlans;  // 802.1Q sub-ports (vlan.h); set before the workers start
    std::atomic<bool> stop{false};
};

// A worker's counters: the scalar ones from EGW_WORKER_COUNTERS (worker_counters.h, where each is
// described), then the arrays.
struct WorkerCounters {
    uint64_t drops[kDropReasonCount];
#define EGW_X(name, scope, group, key, metric, direction, help) uint64_t name;
    EGW_WORKER_COUNTERS(EGW_X)
#undef EGW_X
    uint64_t icmp_sent[kIcmpErrorCount];  // ICMP errors originated, by kind (each replaced the packet it answers)
    // Per DPDK port, for this worker's transmit queue: frames it refused (each also a tx_full
    // drop), the times it was taken for stalled (it accepted nothing for tx_stall_ticks), and
    // whether it is stalled now (1 from then until it accepts a frame again; 0 otherwise).
    uint64_t tx_refused[kMaxPorts];
    uint64_t tx_stalls[kMaxPorts];
    uint64_t tx_stalled[kMaxPorts];
    // Per VLAN sub-port (by logical port id, vlan.h): tagged frames input took to it, and frames
    // output tagged for it (the tx counters above count what the device then refused).
    uint64_t vlan_rx_packets[kMaxPorts];
    uint64_t vlan_tx_packets[kMaxPorts];
};

// The field of each WorkerCounter, for readers that go through the list.
inline constexpr uint64_t WorkerCounters::*kWorkerCounterField[kWorkerCounterCount] = {
#define EGW_X(name, scope, group, key, metric, direction, help) &WorkerCounters::name,
    EGW_WORKER_COUNTERS(EGW_X)
#undef EGW_X
};

inline const uint64_t& counter_of(const WorkerCounters& c, WorkerCounter which) {
    return c.*kWorkerCounterField[static_cast<unsigned>(which)];
}

// Per Service id (0 = traffic of no EgressService), two cache lines each. The first holds what a
// translated packet and a session's creation or close bump, so those touch one line whatever the
// family; the second only the allocation failures, counted on a path that drops the packet.
// sessions_created/closed count both families, sessions6_created/closed the IPv6 ones of them
// (as the worker's own counters do), so that each NAT address's sessions can be told per family.
// The fields are the list's (service_counters.h), in its order.
struct alignas(64) ServiceCounters {
#define EGW_X(name, part, status, telemetry, metric, direction, help, default_metric, default_help) uint64_t name;
    EGW_SERVICE_COUNTERS(EGW_X)
#undef EGW_X
};
static_assert(offsetof(ServiceCounters, sessions6_closed) < 64, "a session's counters share the packets' line");
static_assert(sizeof(ServiceCounters) == 128);

// Cycles per stage of the packet path, filled only by a build configured with
// -Dstage_profile=true (EGW_STAGE_PROFILE): worker_process_burst() reads the TSC before and after
// every stage it runs and worker_flush() around its transmits. A stage run longer than
// kProfilePreempted ticks is taken for a preemption or a page fault and counted in `preempted`
// instead (the machines this is run on are shared). Read by the thread that runs the worker,
// or after it stopped.
enum class ProfiledStage : uint8_t {
    input,
    handoff,
    nat_lookup,
    nat_fast,
    nat_slow,
    icmp_error,
    local,
    ip_forward,
    icmp_reply,
    output,
    flush,
    count
};
inline constexpr unsigned kProfiledStages = static_cast<unsigned>(ProfiledStage::count);
inline constexpr const char* kProfiledStageNames[kProfiledStages] = {
    "input", "handoff",    "nat_lookup", "nat_fast", "nat_slow", "icmp_error",
    "local", "ip_forward", "icmp_reply", "output",   "flush"};
inline constexpr uint64_t kProfilePreempted = 1'000'000;
struct StageProfile {
    uint64_t cycles[kProfiledStages];
    uint64_t runs[kProfiledStages];     // stage calls (one per burst that had packets for it)
    uint64_t packets[kProfiledStages];  // packets the stage was called for
    uint64_t preempted;
};

// One row of a session listing, filled by the worker on request: an IPv4 session (`session`)
// or, when `v6` is set, an IPv6 one (`session6`).
struct SessionRecord {
    Session session;
    uint64_t idle_ticks;
    bool v6;
    Session6 session6;
};

struct RxQueue {
    uint16_t port;
    uint16_t queue;
};

struct TxBuffer {
    uint16_t n;
    rte_mbuf* pkts[kTxBufferSize];
};

struct Reassembly;
struct TraceBuffer;

struct alignas(64) Worker {
    unsigned index = 0;  // 0..n_workers-1; also the RCU thread id and tx queue
    DataplaneShared* shared = nullptr;
    RxQueue rxq[kMaxPorts * 2]{};
    unsigned n_rxq = 0;
    uint16_t n_ports = 0;      // logical ports 0..n_ports-1 are egw's (DPDK port ids and VLAN sub-ports, vlan.h)
    uint16_t nat_port_lo = 0;  // this worker's block of the NAT port range, inclusive
    uint16_t nat_port_hi = 0;
    uint32_t port_block = 0;               // size of every worker's block
    rte_ring* handoff_in[kMaxWorkers]{};   // [w]: packets from worker w (single producer/consumer)
    rte_ring* handoff_out[kMaxWorkers]{};  // [w]: packets for worker w
    rte_ring* inject = nullptr;            // from the control thread: finished frames to transmit
    // The packet trace (trace.h): set by the control thread while tracing; read once per burst.
    std::atomic<TraceBuffer*> trace{nullptr};
    uint64_t now = 0;
    uint32_t sweep_cursor = 0;
    SweepPace sweep_pace;
    SweepPace sweep_pace6;
    uint64_t reclaim_failed_at = ~uint64_t{0};   // `now` of the last reclaim that found nothing
    uint64_t reclaim_failed_at6 = ~uint64_t{0};  // the same for the IPv6 table
    SessionTable sessions;
    SessionTable6 sessions6;  // IPv6 sessions; capacity 0 (not set up): IPv6 makes none
    uint32_t sweep_cursor6 = 0;
    TxBuffer tx[kMaxPorts]{};
    // Per port: transmit bursts refused whole in a row (0: the last one was taken, at least in
    // part), and when the first of them was refused (`now`).
    uint32_t tx_refused_bursts[kMaxPorts]{};
    uint64_t tx_refused_since[kMaxPorts]{};
    WorkerCounters counters{};
    uint64_t icmp_tat = 0;                        // the ICMP error bucket's theoretical arrival time (TSC)
    ServiceCounters* service_counters = nullptr;  // [kMaxServices]
    Reassembly* reassembly = nullptr;             // IPv4 fragments being put together (reassembly.h); none: dropped
    SyncEventRing* sync_events = nullptr;         // session sync's events (sync_events.h); none: sync off
    StageProfile profile{};                       // only a -Dstage_profile=true build fills it

    // Session listing requested by the control thread: it sets dump_capacity and bumps
    // dump_request; the worker copies up to that many sessions and publishes dump_done. The
    // worker looks at kDumpScanPerIteration table slots per poll iteration at most, however few
    // of them hold sessions, so a listing of a large table takes many iterations and never
    // stalls the packets. Slots never handed out (first_slot_handed_out) are stepped over, so
    // a listing costs what the most sessions ever open at once fill, not sessions.max.
    // dump_count and dump_next are the control thread's to read only once dump_done has
    // reached its request.
    std::atomic<uint32_t> dump_request{0};
    std::atomic<uint32_t> dump_done{0};
    SessionRecord* dump_buffer = nullptr;
    uint32_t dump_capacity = 0;
    uint32_t dump_count = 0;
    // Paging of the listing (the CLI walks the whole table this way): the scan starts at table
    // slot dump_start and looks at dump_scan slots at most (0: to the end); dump_next is where the
    // next page would start (dump_slots() once no slot handed out is left). The slots are the
    // IPv4 table's, then the IPv6 table's (slot sessions.capacity() + i is IPv6 slot i). Set
    // before bumping dump_request, and only while no request is pending.
    uint32_t dump_start = 0;
    uint32_t dump_scan = 0;
    uint32_t dump_next = 0;
    // The worker's own progress through the request it is serving.
    uint32_t dump_serving = 0;
    uint32_t dump_cursor = 0;
    uint32_t dump_end = 0;

    // Closing a Service's sessions, requested by the control thread, which never touches the
    // table itself: with no request pending it sets flush_service (a Service id, or kFlushAll)
    // and bumps flush_request; the worker closes the matching sessions kFlushPerIteration slots
    // per poll iteration, stepping over the slots never handed out as a listing does, and
    // publishes flush_done, with flush_closed sessions closed.
    std::atomic<uint32_t> flush_request{0};
    std::atomic<uint32_t> flush_done{0};
    uint32_t flush_service = 0;
    uint32_t flush_cursor = 0;
    uint32_t flush_closed = 0;
    // EgressFirewall sweep (maintenance.cpp): the policy version last seen, and while `sweeping`
    // the next slot (in the listing's numbering) whose session is classified again.
    uint32_t firewall_version = 0;
    uint32_t firewall_cursor = 0;
    bool firewall_sweeping = false;
};

inline constexpr uint32_t kDumpScanPerIteration = 1024;

// The slots a session listing walks: both tables' (Worker::dump_start).
inline uint32_t dump_slots(const Worker& w) {
    return w.sessions.capacity() + w.sessions6.capacity();
}

// The first slot from `slot` on, in a listing's numbering, that may hold a session: a table's
// slots from its slots_handed_out() on have never been handed out, so a listing or a clear steps
// over them (dump_slots() when none is left). Worker only: slots_handed_out() is the worker's.
inline uint32_t first_slot_handed_out(const Worker& w, uint32_t slot) {
    uint32_t cap4 = w.sessions.capacity();
    if (slot < cap4 && slot >= w.sessions.slots_handed_out()) slot = cap4;
    if (slot >= cap4 && slot - cap4 >= w.sessions6.slots_handed_out()) slot = dump_slots(w);
    return slot;
}
inline constexpr uint32_t kFlushAll = ~uint32_t{0};
inline constexpr uint32_t kFlushPerIteration = 4096;
// Sessions the EgressFirewall sweep classifies again per poll-loop iteration: a pass over
// 1,000,000 sessions takes some 250 iterations, well within one publication's interval.
inline constexpr uint32_t kFirewallSweepPerIteration = 4096;

// Sets up the worker's NAT port block for worker `index` of `shared.n_workers`.
void worker_assign_port_block(Worker& w);

// The worker owning a NAT port (host order) of the configured range.
unsigned owner_of_port(const DataplaneShared& shared, uint16_t port_host);

// Handles a burst of received packets (any mix of ports). Outputs go to the tx buffers, the
// hand-off rings or the control ring; call worker_flush() afterwards.
void worker_process_burst(Worker& w, const PolicySnapshot& p, rte_mbuf** pkts, uint16_t n);

// Transmits what the tx buffers hold.
void worker_flush(Worker& w);

// Frees up to kSweepPerIteration expired sessions' worth of scanning, in each table.
void worker_expire_step(Worker& w, const PolicySnapshot& p);

// The poll loop's sweep: an expiry step on each table whose step is due (SweepPace).
void worker_expire_paced(Worker& w, const PolicySnapshot& p);

// One slice of a doubling of the session tables' bucket arrays, when one is under way
// (dataplane/tables/session_table.h).
inline void worker_grow_step(Worker& w) {
    w.sessions.grow_step();
    w.sessions6.grow_step();
}

// For a create that found the table full: runs the expiry sweep on over up to kReclaimScan slots,
// stopping at the first session it frees. Returns whether one was freed.
bool worker_reclaim_expired(Worker& w, const PolicySnapshot& p);

// The same for the IPv6 table.
bool worker_reclaim_expired6(Worker& w, const PolicySnapshot& p);

// Serves a pending session-listing request for up to kDumpScanPerIteration table slots; it is
// answered (dump_done) once the scan reached its end or the buffer is full. Called by the worker
// between bursts.
void worker_serve_dump(Worker& w);

// Serves a pending session-listing request to the end. Only for a worker that has stopped
// (called by the control thread then).
void worker_finish_dump(Worker& w);

// Serves a pending flush request for one slice of the table. Called by the worker between
// bursts.
void worker_serve_flush(Worker& w);

// After the EgressFirewall policy changes version, classifies the sessions again, a slice per
// call, and closes those of pods its rules now deny (a rule change cuts established flows).
// Nothing per packet: the slow path classifies new flows only. Called by the worker between
// bursts.
void worker_sweep_firewall(Worker& w, const PolicySnapshot& p);

// One poll-loop iteration: receive, hand-offs, injected frames, transmit, expiry, listing and
// flush requests, quiescent state. Returns the number of packets received.
unsigned worker_poll_once(Worker& w);

// rte_eal_remote_launch entry point: loops until shared->stop.
int worker_main(void* worker);

}  // namespace egw::dp
