// SPDX-License-Identifier: Apache-2.0
//
// The worker's poll loop: receive, run the stages over each burst (stages.h lists them in
// order), transmit, then the maintenance between bursts and the quiescent state.
#include "dataplane/worker.h"

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "dataplane/reassembly.h"
#include "dataplane/stages.h"
#include "dataplane/trace.h"

namespace egw::dp {

// The stage of step `s`, when the burst has packets for it; with a tracer, what it decided for
// the traced ones (NoTracer's hooks fold away).
#define EGW_STAGE(s, call)                                                                                      \
    do {                                                                                                        \
        if (uint32_t pending_ = b.pending(Next::s)) {                                                           \
            uint32_t traced_ = tracer.traced(pending_);                                                         \
            run_stage(w, ProfiledStage::s, static_cast<unsigned>(__builtin_popcount(pending_)), [&] { call; }); \
            if (traced_) tracer.after(ProfiledStage::s, traced_, b);                                            \
        }                                                                                                       \
    } while (0)

namespace {

template <class Tracer>
__attribute__((always_inline)) inline void process_chunk(Worker& w, const PolicySnapshot& p, Burst& b, rte_mbuf** pkts,
                                                         unsigned chunk, Tracer& tracer) {
    tracer.select(pkts, chunk);
    run_stage(w, ProfiledStage::input, chunk, [&] { stage_input(w, p, b, pkts, chunk); });
    if (uint32_t traced = tracer.traced(~0u)) tracer.after(ProfiledStage::input, traced, b);
    EGW_STAGE(handoff, stage_handoff(w, b));
    EGW_STAGE(nat_lookup, stage_nat_lookup(w, b));
    EGW_STAGE(nat_fast, stage_nat_fast(w, p, b));
    EGW_STAGE(nat_slow, stage_nat_slow(w, p, b));
    EGW_STAGE(icmp_error, stage_icmp_error(w, p, b));
    EGW_STAGE(local, stage_local(w, p, b));
    EGW_STAGE(ip_forward, stage_ip_forward(w, p, b));
    EGW_STAGE(icmp_reply, stage_icmp_reply(w, p, b));
    unsigned out = static_cast<unsigned>(
        __builtin_popcount(b.pending(Next::output) | b.pending(Next::transmit) | b.pending(Next::drop)));
    tracer.before_output(b);
    run_stage(w, ProfiledStage::output, out, [&] { stage_output(w, p, b); });
    tracer.after_output(b);
    tracer.finish();
}

// A burst of a worker that is tracing (trace.h): kept out of line, so that the burst loop that
// runs while it is not stays as it was.
__attribute__((noinline)) void process_traced(Worker& w, const PolicySnapshot& p, TraceBuffer& t, rte_mbuf** pkts,
                                              uint16_t n) {
    Burst b;
    while (n > 0) {
        unsigned chunk = n > kBurst ? kBurst : n;
        BurstTracer tracer(w, t);
        process_chunk(w, p, b, pkts, chunk, tracer);
        pkts += chunk;
        n = static_cast<uint16_t>(n - chunk);
    }
}

}  // namespace

void worker_process_burst(Worker& w, const PolicySnapshot& p, rte_mbuf** pkts, uint16_t n) {
    // The one test tracing costs while it is off.
    if (TraceBuffer* t = w.trace.load(std::memory_order_acquire); unlikely(t != nullptr) && trace_taking(*t)) {
        process_traced(w, p, *t, pkts, n);
        return;
    }
    Burst b;
    NoTracer none;
    while (n > 0) {
        unsigned chunk = n > kBurst ? kBurst : n;
        process_chunk(w, p, b, pkts, chunk, none);
        pkts += chunk;
        n = static_cast<uint16_t>(n - chunk);
    }
}
#undef EGW_STAGE

unsigned worker_poll_once(Worker& w) {
    const PolicySnapshot* p = w.shared->policy.current.load(std::memory_order_acquire);
    uint64_t start = rte_rdtsc();
    w.now = start;
    unsigned total = 0;
    rte_mbuf* pkts[kBurst];
    if (p) {
        for (unsigned q = 0; q < w.n_rxq; ++q) {
            uint16_t n = rte_eth_rx_burst(w.rxq[q].port, w.rxq[q].queue, pkts, kBurst);
            if (!n) continue;
            count(w.counters.rx_packets, n);
            total += n;
            worker_process_burst(w, *p, pkts, n);
        }
        for (unsigned o = 0; o < w.shared->n_workers; ++o) {
            if (!w.handoff_in[o]) continue;
            unsigned n = rte_ring_sc_dequeue_burst(w.handoff_in[o], reinterpret_cast<void**>(pkts), kBurst, nullptr);
            if (n) {
                total += n;
                worker_process_burst(w, *p, pkts, static_cast<uint16_t>(n));
            }
        }
        if (w.inject) {
            unsigned n = rte_ring_sc_dequeue_burst(w.inject, reinterpret_cast<void**>(pkts), kBurst, nullptr);
            output_frames(w, *p, pkts, n);
            total += n;
        }
        worker_flush(w);
        worker_expire_paced(w, *p);
        worker_grow_step(w);
        reassembly_expire(w);
    }
    worker_serve_dump(w);
    worker_serve_flush(w);
    worker_sweep_firewall(w, *p);
    if (w.shared->qsbr) rte_rcu_qsbr_quiescent(w.shared->qsbr, w.index);
    uint64_t spent = rte_rdtsc() - start;
    count(w.counters.total_cycles, spent);
    if (total) count(w.counters.busy_cycles, spent);
    count(w.counters.iterations);
    return total;
}

int worker_main(void* arg) {
    auto& w = *static_cast<Worker*>(arg);
    if (w.shared->qsbr) {
        rte_rcu_qsbr_thread_register(w.shared->qsbr, w.index);
        rte_rcu_qsbr_thread_online(w.shared->qsbr, w.index);
    }
    while (!w.shared->stop.load(std::memory_order_relaxed))
        worker_poll_once(w);
    worker_flush(w);
    if (w.shared->qsbr) {
        rte_rcu_qsbr_thread_offline(w.shared->qsbr, w.index);
        rte_rcu_qsbr_thread_unregister(w.shared->qsbr, w.index);
    }
    return 0;
}

}  // namespace egw::dp
