// SPDX-License-Identifier: Apache-2.0
//
// The packet trace: the next packets that match a filter, each with every stage it passed and
// that stage's decision, and its headers on the way in and on the way out (`trace start`, `show
// trace`, `trace stop`: control/cli/cmd_trace.cpp).
//
// Off, it costs one load and one predictable branch per burst: worker_process_burst() reads the
// worker's `trace` pointer and, while it is null, runs the stages exactly as it always did. On,
// that burst goes through the same stages with a BurstTracer (worker.cpp), which picks the
// packets to trace before input, and after each stage reads the decisions the stage left in the
// traced packets' metadata (next step, drop reason, session, port, next hop, ICMP error): the
// stages themselves are not touched. Everything it writes goes to the worker's TraceBuffer, which
// the control thread allocated when tracing started: no allocation, lock or system call on the
// packet path, and memory bounded by `capacity` packets of fixed size per worker.
//
// Publication: the worker fills a packet's record whole within its burst and then publishes the
// count of finished records with a release store; the control thread reads that count with an
// acquire load and only the records below it, which no one writes again. The budget of packets
// (`TraceShared::taken`) is shared by the workers, so N is the total; each worker's buffer holds
// all N, since any one of them may take every packet.
#pragma once

#include <atomic>
#include <cstdint>

#include "dataplane/burst.h"
#include "dataplane/frame_summary.h"
#include "dataplane/worker.h"

namespace egw::dp {

inline constexpr unsigned kTraceHeadBytes = 128;  // of a frame, kept on the way in and out
inline constexpr uint32_t kTraceMaxPackets = 1000;
inline constexpr unsigned kTraceMaxSteps = 12;  // every stage once, input to output, and room

// Which packets to trace, on what they are on arrival (FrameSummary). Addresses and ports are the
// packet's own source and destination; an address matches packets of its family only.
struct TraceMatch {
    bool by_port = false;
    uint16_t port = 0;
    uint8_t proto = 0;  // 0: any; 1: ICMP or ICMPv6; 58: ICMPv6 only; 6, 17
    bool by_saddr = false, by_daddr = false;
    bool saddr_v6 = false, daddr_v6 = false;
    uint8_t saddr[16] = {};  // IPv4: the first 4 bytes, network order
    uint8_t daddr[16] = {};
    bool by_sport = false, by_dport = false;
    uint16_t sport = 0, dport = 0;  // host order; for ICMP echo, its identifier

    bool l3_needed() const { return proto || by_saddr || by_daddr || by_sport || by_dport; }
};

// Whether a packet received on `rx_port` whose first bytes say `f` is one to trace.
bool trace_matches(const TraceMatch& m, uint16_t rx_port, const FrameSummary& f);

// The packet as one stage left it.
enum class TraceSession : uint8_t { none, found, created, closed };

struct TraceStep {
    uint8_t stage;           // ProfiledStage
    uint8_t next;            // Next: the step it chose
    uint8_t reason;          // DropReason: for drop, and for icmp_reply (why the packet is not forwarded)
    uint8_t icmp;            // IcmpError: for icmp_reply
    uint8_t session_change;  // TraceSession
    uint8_t owner;           // handoff: the owning worker
    uint8_t vrf;             // ip_forward: the table it is routed in
    bool v6;
    bool via_ingress;      // ip_forward: toward the ingress next hop
    bool has_tuple;        // the fields below: the packet's headers after the stage
    uint16_t out_port;     // output, transmit
    uint32_t session;      // the session index, or SessionTable::kNone
    uint8_t next_hop[16];  // output: IPv4 in the first 4 bytes, network order
    uint8_t src[16];
    uint8_t dst[16];
    uint16_t sport, dport;  // host order (ICMP: the echo identifier in both)
    uint8_t ttl;
    uint8_t proto;
};

// How the packet left the worker, seen after output.
enum class TraceOutcome : uint8_t {
    dropped,     // freed by output, counted under the last step's reason
    queued,      // in the port's transmit buffer, headers after as it will leave
    not_queued,  // left output otherwise: cut into fragments, or sent already with a full transmit
                 // buffer (headers after: as it reached output)
    handed_off,  // given to the owning worker (its own trace shows the rest when it matches)
    gone,        // given away before output (a fragment held for reassembly, the control thread)
    held,        // to the control thread until the next hop answers ARP or NS (or dropped as
                 // neighbor_unresolved when that queue is full); headers as it reached output
};

struct TracePacket {
    uint64_t tsc;  // the worker's clock at the burst
    uint16_t rx_port;
    uint8_t n_steps;
    uint8_t outcome;  // TraceOutcome
    uint16_t before_len;
    uint16_t after_len;
    uint32_t frame_len;  // pkt_len on arrival
    uint8_t before[kTraceHeadBytes];
    uint8_t after[kTraceHeadBytes];
    TraceStep steps[kTraceMaxSteps];
};

// The budget shared by the workers of one trace.
struct TraceShared {
    TraceMatch match;
    uint32_t limit = 0;  // packets in total
    uint64_t start_tsc = 0;
    std::atomic<uint32_t> taken{0};
};

// One worker's records, allocated by the control thread with room for `capacity` packets.
struct TraceBuffer {
    TraceShared* shared = nullptr;
    uint32_t capacity = 0;
    uint32_t used = 0;                   // the worker's: records begun
    std::atomic<uint32_t> published{0};  // records finished, for the control thread
    TracePacket* packets = nullptr;      // [capacity]
};

// Whether a worker with this buffer may still take packets: once it is full, or the workers
// have taken N together, its bursts take the ordinary path again.
inline bool trace_taking(const TraceBuffer& t) {
    return t.used < t.capacity && t.shared->taken.load(std::memory_order_relaxed) < t.shared->limit;
}

// One burst's traced packets (worker.cpp runs the stages with it while the worker's trace pointer
// is set). Worker only.
class BurstTracer {
public:
    BurstTracer(Worker& w, TraceBuffer& t) : w_(w), t_(t) {}

    // Before input: picks the packets to trace and keeps their headers on the way in.
    void select(rte_mbuf* const* pkts, unsigned n);
    // The traced packets of `pending` (a stage's mask before it runs).
    uint32_t traced(uint32_t pending) const { return pending & mask_; }
    // After stage `stage` ran over the traced packets `which`: their decisions.
    void after(ProfiledStage stage, uint32_t which, const Burst& b);
    // Around output: the traced packets' headers on the way out, and how they left.
    void before_output(const Burst& b);
    void after_output(const Burst& b);
    // The end of the burst: the finished records are published.
    void finish();

private:
    Worker& w_;
    TraceBuffer& t_;
    uint32_t mask_ = 0;
    uint32_t slot_[kBurst];
};

// A burst run without tracing: every hook does nothing and folds away.
struct NoTracer {
    static void select(rte_mbuf* const*, unsigned) {}
    static constexpr uint32_t traced(uint32_t) { return 0; }
    static void after(ProfiledStage, uint32_t, const Burst&) {}
    static void before_output(const Burst&) {}
    static void after_output(const Burst&) {}
    static void finish() {}
};

}  // namespace egw::dp
