// SPDX-License-Identifier: Apache-2.0
//
// egw-table-bench: what one session table for both families would cost IPv4 (issue 11: "a second
// table with a 36-byte key, or one table with a family-tagged key — measure which").
//
// It fills two tables with the same N random IPv4 UDP sessions: (a) the IPv4 SessionTable as the
// data plane has it (16-byte keys, 64-byte sessions); (b) the wide table a single table for both
// families would be, SessionTable6, holding each session with its addresses IPv4-mapped
// (::ffff:a.b.c.d), so the family is part of the 40-byte key and the session takes 128 bytes.
// Then it looks every session up again, keys in shuffled order and in bursts of 32, the way
// nat_fast does for IPv4: begin_inside()/begin_outside() per key (input's hash and bucket
// prefetch), then lookup_*_begun() for the burst. Every lookup must hit.
//
//   egw-table-bench [--sessions N[,N...]] [--reps R] [--lookups L]
//
// Per layout, size and direction it prints the TSC cycles per lookup (median, min and max of R
// repetitions, the layouts interleaved so that a load change hits both) and the table's bytes per
// session (memory_bytes() / capacity). A repetition is L lookups (default 262,144), the keys
// taken in turn from the shuffled order, each repetition going on where the last stopped.
// Instruction counts come from callgrind: lookup_pass() is not inlined, one instantiation per
// layout and direction, so callgrind_annotate --inclusive=yes gives each one's total; divide it by
// the lookups the run prints for it.
// It needs the EAL only because the table asks it whether hugepages run (without them it maps its
// own memory); it starts one on lcore 0 without hugepages or PCI.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_memory.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "dataplane/tables/session_table.h"
#include "tests/bench/bench_args.h"

namespace {

using egw::dp::FlowKey;
using egw::dp::FlowKey6;
using egw::dp::Session;
using egw::dp::Session6;
using egw::dp::SessionTable;
using egw::dp::SessionTable6;

constexpr unsigned kBurst = SessionTable::kBulk;

void map4(uint8_t* out, uint32_t a) {
    std::memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    std::memcpy(out + 12, &a, 4);
}

// The same session in the wide layout: every address IPv4-mapped, ports and protocol as they are.
Session6 widen(const Session& s) {
    Session6 w{};
    map4(w.pod_ip.b, s.pod_ip);
    map4(w.remote_ip.b, s.remote_ip);
    map4(w.nat_ip.b, s.nat_ip);
    w.pod_port = s.pod_port;
    w.remote_port = s.remote_port;
    w.nat_port = s.nat_port;
    w.proto = s.proto;
    return w;
}

// One repetition: `count` lookups of the keys from `start` on (wrapping), in bursts of kBurst.
// Returns the lookups that missed (there must be none). Not inlined: callgrind counts each
// layout's instantiation apart.
template <class Table, bool Inside>
__attribute__((noinline)) unsigned lookup_pass(const Table& t, const std::vector<typename Table::Key>& keys,
                                               size_t start, size_t count) {
    using Key = typename Table::Key;
    const Key* ptrs[kBurst];
    uint32_t hashes[kBurst];
    typename Table::Home homes[kBurst];
    uint32_t idx[kBurst];
    unsigned missed = 0;
    size_t at = start % keys.size();
    for (size_t done = 0; done < count; done += kBurst) {
        unsigned n = static_cast<unsigned>(std::min<size_t>(kBurst, count - done));
        for (unsigned i = 0; i < n; ++i) {
            ptrs[i] = &keys[at];
            hashes[i] = Inside ? t.begin_inside(keys[at], homes[i]) : t.begin_outside(keys[at], homes[i]);
            if (++at == keys.size()) at = 0;
        }
        if constexpr (Inside)
            t.lookup_inside_begun(ptrs, n, idx, hashes, homes);
        else
            t.lookup_outside_begun(ptrs, n, idx, hashes, homes);
        for (unsigned i = 0; i < n; ++i)
            missed += idx[i] == Table::kNone;
    }
    return missed;
}

struct Samples {
    std::vector<double> v;
    double at(double q) {
        std::sort(v.begin(), v.end());
        return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
    }
};

template <class Table, bool Inside>
double timed(const Table& t, const std::vector<typename Table::Key>& keys, size_t start, size_t count,
             unsigned& missed) {
    uint64_t t0 = rte_rdtsc_precise();
    missed += lookup_pass<Table, Inside>(t, keys, start, count);
    uint64_t t1 = rte_rdtsc_precise();
    return static_cast<double>(t1 - t0) / static_cast<double>(count);
}

bool run(uint32_t n, unsigned reps, size_t lookups) {
    std::mt19937_64 g(n);
    SessionTable t4;
    SessionTable6 t6;
    if (!t4.init("tb4", n, SOCKET_ID_ANY, 1) || !t6.init("tb6", n, SOCKET_ID_ANY, 1)) {
        std::fprintf(stderr, "table-bench: no memory for %u sessions\n", n);
        return false;
    }
    std::vector<FlowKey> in4, out4;
    std::vector<FlowKey6> in6, out6;
    in4.reserve(n);
    out4.reserve(n);
    in6.reserve(n);
    out6.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        Session s{};
        s.pod_ip = static_cast<uint32_t>(0x0a000000u | (g() & 0xffffu));  // 10.0/16, in host order
        s.remote_ip = static_cast<uint32_t>(g());
        s.nat_ip = static_cast<uint32_t>(0xc6336400u | (g() & 0xfu));  // 198.51.100.0/28
        s.pod_port = static_cast<uint16_t>(g());
        s.remote_port = static_cast<uint16_t>(g());
        s.nat_port = static_cast<uint16_t>(1024 + g() % 64512);
        s.proto = 17;
        Session6 w = widen(s);
        if (t4.create(s) == SessionTable::kNone || t6.create(w) == SessionTable6::kNone) {
            std::fprintf(stderr, "table-bench: a table took fewer than %u sessions\n", n);
            return false;
        }
        in4.push_back(SessionTable::inside_key(s));
        out4.push_back(SessionTable::outside_key(s));
        in6.push_back(SessionTable6::inside_key(w));
        out6.push_back(SessionTable6::outside_key(w));
    }
    // One shuffle for both layouts: the same sessions in the same order.
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i)
        order[i] = i;
    std::shuffle(order.begin(), order.end(), g);
    auto permute = [&order](auto& v) {
        auto copy = v;
        for (size_t i = 0; i < order.size(); ++i)
            v[i] = copy[order[i]];
    };
    permute(in4);
    permute(out4);
    permute(in6);
    permute(out6);

    Samples c4in, c4out, c6in, c6out;
    unsigned missed = 0;
    // One untimed pass of each first: page faults and the first touch stay out of the figures.
    missed += lookup_pass<SessionTable, true>(t4, in4, 0, n);
    missed += lookup_pass<SessionTable6, true>(t6, in6, 0, n);
    missed += lookup_pass<SessionTable, false>(t4, out4, 0, n);
    missed += lookup_pass<SessionTable6, false>(t6, out6, 0, n);
    size_t start = 0;
    for (unsigned r = 0; r < reps; ++r) {
        // Alternate which layout goes first, so neither always follows the other's cache state.
        if (r % 2 == 0) {
            c4in.v.push_back(timed<SessionTable, true>(t4, in4, start, lookups, missed));
            c6in.v.push_back(timed<SessionTable6, true>(t6, in6, start, lookups, missed));
            c4out.v.push_back(timed<SessionTable, false>(t4, out4, start, lookups, missed));
            c6out.v.push_back(timed<SessionTable6, false>(t6, out6, start, lookups, missed));
        } else {
            c6in.v.push_back(timed<SessionTable6, true>(t6, in6, start, lookups, missed));
            c4in.v.push_back(timed<SessionTable, true>(t4, in4, start, lookups, missed));
            c6out.v.push_back(timed<SessionTable6, false>(t6, out6, start, lookups, missed));
            c4out.v.push_back(timed<SessionTable, false>(t4, out4, start, lookups, missed));
        }
        start += lookups;
    }
    if (missed) {
        std::fprintf(stderr, "table-bench: %u lookups missed a session that is in the table\n", missed);
        return false;
    }
    auto row = [&](const char* layout, const char* dir, Samples& s, size_t bytes) {
        std::printf("%-12s %9u  %-7s %8.1f %8.1f %8.1f  %6.1f\n", layout, n, dir, s.at(0.5), s.at(0), s.at(1),
                    static_cast<double>(bytes) / n);
    };
    std::printf("(%u sessions: each layout and lookup ran %zu lookups in all, the untimed pass included)\n", n,
                n + reps * lookups);
    row("ipv4", "inside", c4in, t4.memory_bytes());
    row("family-tag", "inside", c6in, t6.memory_bytes());
    row("ipv4", "outside", c4out, t4.memory_bytes());
    row("family-tag", "outside", c6out, t6.memory_bytes());
    return true;
}

using egw::bench::parse_list;

}  // namespace

int main(int argc, char** argv) {
    std::vector<uint32_t> sizes = {10000, 1000000};
    unsigned reps = 9;
    size_t lookups = size_t{1} << 18;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--sessions")
            sizes = parse_list(argv[i + 1]);
        else if (a == "--reps")
            reps = static_cast<unsigned>(std::stoul(argv[i + 1]));
        else if (a == "--lookups")
            lookups = std::stoul(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--sessions N[,N...]] [--reps R] [--lookups L]\n", argv[0]);
            return 2;
        }
    }
    if (reps == 0 || lookups == 0) return 2;
    std::string prefix = "--file-prefix=egw-table-bench-" + std::to_string(getpid());
    std::vector<std::string> args = {argv[0], "--no-huge", "--no-pci",         "-m", "64", "-l",
                                     "0",     prefix,      "--log-level=error"};
    std::vector<char*> eal_argv;
    for (auto& a : args)
        eal_argv.push_back(a.data());
    eal_argv.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(args.size()), eal_argv.data()) < 0) {
        std::fprintf(stderr, "table-bench: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    std::printf("TSC %.3f GHz; %u repetitions of %zu lookups, bursts of %u, keys shuffled\n",
                static_cast<double>(rte_get_tsc_hz()) / 1e9, reps, lookups, kBurst);
    std::printf("%-12s %9s  %-7s %8s %8s %8s  %6s\n", "layout", "sessions", "lookup", "median", "min", "max", "B/sess");
    int rc = 0;
    for (uint32_t n : sizes)
        if (n == 0 || !run(n, reps, lookups)) rc = 1;
    std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ec;
    std::filesystem::remove_all(runtime_dir, ec);
    return rc;
}
