// SPDX-License-Identifier: Apache-2.0
//
// egw-graph-bench: what it costs to move a burst through the stages, egw's way (plain functions
// over a burst with a bit mask per next step, dataplane/burst.h) against DPDK's rte_graph (nodes
// that hand each other object pointers through per-node streams). docs/architecture.md asks for
// the measured cost of each before choosing.
//
//   egw-graph-bench [EAL args --] [--bursts N]
//
// Both pipelines have the established path's shape: input, lookup, fast, output, and in the
// "mixed" traffic a slow stage that every fourth packet takes between lookup and output (as a
// burst with new flows does). Every stage does the same small piece of work on each of its
// packets (a read-modify-write of the packet's 64-byte record, standing in for what the stage
// really does); "work only" is that work in straight loops with no dispatch at all, so each
// pipeline's cycles per packet minus the work-only figure is what its dispatch costs.
//
// The plain pipeline is run twice: as egw's stages are written today (the rewrite stages set each
// packet's next step with Burst::set_next()), and with the rewrite stages setting their masks
// once for the burst, as input and lookup already do.
// The rte_graph pipeline is written as DPDK's own nodes are: a node whose packets all go one way
// moves its whole stream to the next node (rte_node_next_stream_move), the lookup node
// enqueues packet by packet (rte_node_enqueue_x1) only when the burst splits.
#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_graph.h>
#include <rte_graph_worker.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "dataplane/burst.h"

namespace {

constexpr unsigned kBurst = 32;      // a burst is one 32-bit mask per step
constexpr unsigned kRecords = 4096;  // a working set that stays in L1/L2: only dispatch differs

struct alignas(64) Record {
    uint32_t v[16];
};

Record* g_records = nullptr;
unsigned g_cursor = 0;
bool g_mixed = false;
uint64_t g_out = 0;

// The per-packet work of stage `k`.
inline void work(Record* r, uint32_t k) {
    r->v[k] = r->v[k] * 2654435761u + k;
}

inline bool takes_slow(const Record* r) {
    return g_mixed && (r->v[15] & 3) == 0;
}

// ---- work only: the same work, no dispatch ----------------------------------------------------

uint64_t run_work_only(uint64_t bursts) {
    uint64_t t0 = rte_rdtsc();
    for (uint64_t n = 0; n < bursts; ++n) {
        Record* rs[kBurst];
        for (unsigned i = 0; i < kBurst; ++i) {
            rs[i] = &g_records[g_cursor];
            g_cursor = (g_cursor + 1) % kRecords;
        }
        for (unsigned i = 0; i < kBurst; ++i)
            work(rs[i], 0);
        for (unsigned i = 0; i < kBurst; ++i)
            work(rs[i], 1);
        for (unsigned i = 0; i < kBurst; ++i)
            work(rs[i], takes_slow(rs[i]) ? 3 : 2);
        for (unsigned i = 0; i < kBurst; ++i) {
            work(rs[i], 4);
            ++g_out;
        }
    }
    return rte_rdtsc() - t0;
}

// ---- plain stages over a burst, egw's way -----------------------------------------------------

enum Step : uint8_t { kInput, kLookup, kFast, kSlow, kOutput, kSteps };

struct PlainBurst {
    uint32_t waiting[kSteps];
    uint8_t next[kBurst];
    Record* r[kBurst];

    void set_next(unsigned i, Step s) {
        waiting[next[i]] &= ~(1u << i);
        waiting[s] |= 1u << i;
        next[i] = s;
    }
};

// egw's own walk over a step's mask (dataplane/burst.h).
using egw::dp::for_each_packet;

__attribute__((noinline)) void plain_input(PlainBurst& b) {
    // As egw's input: the common packets' next step is set directly, the mask once at the end.
    uint32_t to_lookup = 0;
    for_each_packet(b.waiting[kInput], [&](unsigned i) {
        work(b.r[i], 0);
        b.next[i] = kLookup;
        to_lookup |= 1u << i;
    });
    b.waiting[kInput] = 0;
    b.waiting[kLookup] |= to_lookup;
}

__attribute__((noinline)) void plain_lookup(PlainBurst& b) {
    // As egw's nat_lookup: every packet of the step leaves it, so each packet's next step is set
    // directly and the masks once for the burst.
    uint32_t slow = 0;
    for_each_packet(b.waiting[kLookup], [&](unsigned i) {
        work(b.r[i], 1);
        bool miss = takes_slow(b.r[i]);
        b.next[i] = miss ? kSlow : kFast;
        slow |= uint32_t{miss} << i;
    });
    b.waiting[kFast] |= b.waiting[kLookup] & ~slow;
    b.waiting[kSlow] |= slow;
    b.waiting[kLookup] = 0;
}

// fast and slow as egw's nat_fast is written today (Burst::set_next() per packet: a
// read-modify-write of two mask words, each packet's depending on the last one's), or
// (Direct) with the next step stored per packet and the masks updated once, as lookup does.
template <bool Direct>
__attribute__((noinline)) void plain_rewrite(PlainBurst& b, Step step, uint32_t k) {
    if constexpr (Direct) {
        uint32_t mine = b.waiting[step];
        for_each_packet(mine, [&](unsigned i) {
            work(b.r[i], k);
            b.next[i] = kOutput;
        });
        b.waiting[step] = 0;
        b.waiting[kOutput] |= mine;
    } else {
        for_each_packet(b.waiting[step], [&](unsigned i) {
            work(b.r[i], k);
            b.set_next(i, kOutput);
        });
    }
}

__attribute__((noinline)) void plain_output(PlainBurst& b) {
    for_each_packet(b.waiting[kOutput], [&](unsigned i) {
        work(b.r[i], 4);
        ++g_out;
    });
    b.waiting[kOutput] = 0;
}

template <bool Direct>
uint64_t run_plain(uint64_t bursts) {
    uint64_t t0 = rte_rdtsc();
    for (uint64_t n = 0; n < bursts; ++n) {
        PlainBurst b;
        std::memset(b.waiting, 0, sizeof b.waiting);
        for (unsigned i = 0; i < kBurst; ++i) {
            b.r[i] = &g_records[g_cursor];
            b.next[i] = kInput;
            g_cursor = (g_cursor + 1) % kRecords;
        }
        b.waiting[kInput] = ~0u;
        // As worker_process_burst(): each stage runs when its mask is not empty.
        if (b.waiting[kInput]) plain_input(b);
        if (b.waiting[kLookup]) plain_lookup(b);
        if (b.waiting[kFast]) plain_rewrite<Direct>(b, kFast, 2);
        if (b.waiting[kSlow]) plain_rewrite<Direct>(b, kSlow, 3);
        if (b.waiting[kOutput]) plain_output(b);
    }
    return rte_rdtsc() - t0;
}

// ---- rte_graph ---------------------------------------------------------------------------------

uint16_t graph_source(rte_graph* graph, rte_node* node, void** /*objs*/, uint16_t /*n*/) {
    void* out[kBurst];
    for (unsigned i = 0; i < kBurst; ++i) {
        out[i] = &g_records[g_cursor];
        g_cursor = (g_cursor + 1) % kRecords;
    }
    rte_node_enqueue(graph, node, 0, out, kBurst);
    return kBurst;
}

// input, fast and slow: stage K's work on every packet, the whole stream on to the one next node.
template <uint32_t K>
uint16_t graph_pass(rte_graph* graph, rte_node* node, void** objs, uint16_t n) {
    for (uint16_t i = 0; i < n; ++i)
        work(static_cast<Record*>(objs[i]), K);
    rte_node_next_stream_move(graph, node, 0);
    return n;
}

uint16_t graph_lookup(rte_graph* graph, rte_node* node, void** objs, uint16_t n) {
    bool split = false;
    for (uint16_t i = 0; i < n; ++i) {
        auto* r = static_cast<Record*>(objs[i]);
        work(r, 1);
        split |= takes_slow(r);
    }
    if (!split) {
        rte_node_next_stream_move(graph, node, 0);
        return n;
    }
    for (uint16_t i = 0; i < n; ++i)
        rte_node_enqueue_x1(graph, node, takes_slow(static_cast<Record*>(objs[i])) ? 1 : 0, objs[i]);
    return n;
}

uint16_t graph_output(rte_graph*, rte_node*, void** objs, uint16_t n) {
    for (uint16_t i = 0; i < n; ++i) {
        work(static_cast<Record*>(objs[i]), 4);
        ++g_out;
    }
    return n;
}

bool register_node(const char* name, uint64_t flags, rte_node_process_t process,
                   std::initializer_list<const char*> next) {
    size_t size = sizeof(rte_node_register) + next.size() * sizeof(const char*);
    auto* reg = static_cast<rte_node_register*>(std::calloc(1, size));
    if (!reg) return false;
    std::snprintf(reg->name, sizeof reg->name, "%s", name);
    reg->flags = flags;
    reg->process = process;
    reg->nb_edges = static_cast<rte_edge_t>(next.size());
    unsigned k = 0;
    for (const char* n : next)
        reg->next_nodes[k++] = n;
    // rte_graph copies what it needs; the registration may go.
    bool ok = __rte_node_register(reg) != RTE_NODE_ID_INVALID;
    std::free(reg);
    return ok;
}

rte_graph* make_graph() {
    if (!register_node("bench_source", RTE_NODE_SOURCE_F, graph_source, {"bench_input"}) ||
        !register_node("bench_input", 0, graph_pass<0>, {"bench_lookup"}) ||
        !register_node("bench_lookup", 0, graph_lookup, {"bench_fast", "bench_slow"}) ||
        !register_node("bench_fast", 0, graph_pass<2>, {"bench_output"}) ||
        !register_node("bench_slow", 0, graph_pass<3>, {"bench_output"}) ||
        !register_node("bench_output", 0, graph_output, {}))
        return nullptr;
    const char* patterns[] = {"bench_*"};
    rte_graph_param prm{};
    prm.socket_id = static_cast<int>(rte_socket_id());
    prm.nb_node_patterns = 1;
    prm.node_patterns = patterns;
    if (rte_graph_create("bench_graph", &prm) == RTE_GRAPH_ID_INVALID) return nullptr;
    return rte_graph_lookup("bench_graph");
}

uint64_t run_graph(rte_graph* graph, uint64_t bursts) {
    uint64_t t0 = rte_rdtsc();
    for (uint64_t n = 0; n < bursts; ++n)
        rte_graph_walk(graph);
    return rte_rdtsc() - t0;
}

double per_packet(uint64_t ticks, uint64_t bursts) {
    return static_cast<double>(ticks) / static_cast<double>(bursts * kBurst);
}

}  // namespace

int main(int argc, char** argv) {
    int consumed = rte_eal_init(argc, argv);
    if (consumed < 0) {
        std::fprintf(stderr, "egw-graph-bench: EAL initialisation failed\n");
        return 1;
    }
    argc -= consumed;
    argv += consumed;
    uint64_t bursts = 2000000;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        if (k == "--bursts" && i + 1 < argc) {
            bursts = std::stoull(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: egw-graph-bench [EAL args --] [--bursts N]\n");
            return 2;
        }
    }
    std::vector<Record> records(kRecords);
    for (unsigned i = 0; i < kRecords; ++i)
        for (unsigned k = 0; k < 16; ++k)
            records[i].v[k] = i * 16 + k;
    g_records = records.data();
    rte_graph* graph = make_graph();
    if (!graph) {
        std::fprintf(stderr, "egw-graph-bench: cannot make the graph: %s\n", rte_strerror(rte_errno));
        return 1;
    }

    std::printf("egw-graph-bench: %lu bursts of %u per run, TSC %.2f GHz, cycles per packet (median of 5 runs)\n\n",
                static_cast<unsigned long>(bursts), kBurst, static_cast<double>(rte_get_tsc_hz()) / 1e9);
    std::printf(
        "| traffic | work only | plain stages (egw today) | plain, masks once per stage | rte_graph | "
        "dispatch: plain | plain, masks once | rte_graph |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (bool mixed : {false, true}) {
        g_mixed = mixed;
        // Warm up, then five interleaved runs of each; the medians are printed.
        run_work_only(bursts / 10);
        run_plain<false>(bursts / 10);
        run_plain<true>(bursts / 10);
        run_graph(graph, bursts / 10);
        std::vector<double> w, p, d, g;
        for (int rep = 0; rep < 5; ++rep) {
            w.push_back(per_packet(run_work_only(bursts), bursts));
            p.push_back(per_packet(run_plain<false>(bursts), bursts));
            d.push_back(per_packet(run_plain<true>(bursts), bursts));
            g.push_back(per_packet(run_graph(graph, bursts), bursts));
        }
        for (auto* v : {&w, &p, &d, &g})
            std::sort(v->begin(), v->end());
        double wm = w[2], pm = p[2], dm = d[2], gm = g[2];
        std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                    mixed ? "mixed (every 4th packet to the slow stage)" : "uniform (all hits)", wm, pm, dm, gm,
                    pm - wm, dm - wm, gm - wm);
    }
    // Every packet of every run reached the output stage once, whichever pipeline carried it.
    uint64_t expected = 2 * (4 * (bursts / 10) + 20 * bursts) * kBurst;
    if (g_out != expected) {
        std::fprintf(stderr, "egw-graph-bench: %lu packets output, %lu sent\n", static_cast<unsigned long>(g_out),
                     static_cast<unsigned long>(expected));
        return 1;
    }
    rte_graph_destroy(rte_graph_from_name("bench_graph"));
    rte_eal_cleanup();
    return 0;
}
