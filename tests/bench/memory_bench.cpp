// SPDX-License-Identifier: Apache-2.0
//
// egw-memory-bench: what one random cache line costs on this host, by the size of the memory it
// is drawn from. An established packet at 1,000,000 sessions reads two such lines (its bucket,
// then its session), and what they cost differs from host to host more than egw's own
// instructions do; how much of egw's wait there they explain is in docs/performance-log.md §1.
//
//   egw-memory-bench [--sizes MiB[,MiB...]] [--batch N] [--loads L] [--reps R]
//
// For each size, with the region on transparent huge pages and again on 4 KiB pages, it prints
// TSC cycles per line for:
// - dependent loads: a pointer chase through every line of the region in a random order, the
//   latency of one line when nothing else is in flight;
// - batches: N random lines (32 by default, egw's burst) prefetched, then read, batch after
//   batch, as the session lookup does; with the misses overlapped this is the host's throughput
//   for random lines.
// Each figure is the median of R runs (3 by default) of L loads (2,000,000 by default): on a
// shared guest single runs of the smaller sizes moved by 2x. No DPDK: plain anonymous memory, as
// the session table's own when hugepages do not run.
#include <sys/mman.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/bench/bench_args.h"

namespace {

constexpr size_t kLine = 64;
constexpr size_t kHuge = size_t{2} << 20;

// An anonymous region of `bytes` on 2 MiB boundaries, advised onto huge pages or kept off them,
// and written through so that no page fault lands in a measurement.
class Region {
public:
    Region(size_t bytes, bool huge) : bytes_(bytes) {
        raw_ = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw_ == MAP_FAILED) {
            raw_ = nullptr;
            return;
        }
        auto at = (reinterpret_cast<uintptr_t>(raw_) + kHuge - 1) & ~(kHuge - 1);
        base_ = reinterpret_cast<uint8_t*>(at);
        (void)madvise(base_, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        std::memset(base_, 0, bytes);
    }
    ~Region() {
        if (raw_) munmap(raw_, bytes_ + kHuge);
    }
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;
    uint8_t* base() const { return base_; }

private:
    size_t bytes_;
    void* raw_ = nullptr;
    uint8_t* base_ = nullptr;
};

// TSC cycles per line of a chase through every line in a random order (each line holds the
// offset of the next).
double dependent(uint8_t* base, size_t lines, uint64_t loads, std::mt19937_64& rng) {
    std::vector<uint32_t> order(lines);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < lines; ++i) {
        uint64_t next = uint64_t{order[(i + 1) % lines]} * kLine;
        std::memcpy(base + size_t{order[i]} * kLine, &next, sizeof next);
    }
    uint64_t at = uint64_t{order[0]} * kLine;
    uint64_t t0 = __rdtsc();
    for (uint64_t i = 0; i < loads; ++i)
        at = *reinterpret_cast<volatile const uint64_t*>(base + at);
    uint64_t spent = __rdtsc() - t0;
    return static_cast<double>(spent) / static_cast<double>(loads);
}

// TSC cycles per line of batches of `batch` random lines, each batch prefetched and then read.
double batched(const uint8_t* base, size_t lines, uint64_t loads, unsigned batch, std::mt19937_64& rng) {
    std::vector<uint32_t> pick(loads);
    std::uniform_int_distribution<uint32_t> any(0, static_cast<uint32_t>(lines - 1));
    for (auto& p : pick)
        p = any(rng);
    uint64_t done = 0;
    uint64_t t0 = __rdtsc();
    for (; done + batch <= loads; done += batch) {
        const uint32_t* b = &pick[done];
        for (unsigned k = 0; k < batch; ++k)
            __builtin_prefetch(base + size_t{b[k]} * kLine, 0, 3);
        for (unsigned k = 0; k < batch; ++k)
            (void)*reinterpret_cast<volatile const uint64_t*>(base + size_t{b[k]} * kLine);
    }
    uint64_t spent = __rdtsc() - t0;
    return static_cast<double>(spent) / static_cast<double>(done);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int usage() {
    std::fprintf(stderr, "usage: egw-memory-bench [--sizes MiB[,MiB...]] [--batch N] [--loads L] [--reps R]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<uint32_t> sizes = {1, 2, 4, 8, 16, 32, 64, 256};
    unsigned batch = 32;
    uint64_t loads = 2'000'000;
    unsigned reps = 3;
    try {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (i + 1 >= argc) return usage();
            if (a == "--sizes")
                sizes = egw::bench::parse_list(argv[++i]);
            else if (a == "--batch")
                batch = static_cast<unsigned>(std::stoul(argv[++i]));
            else if (a == "--loads")
                loads = std::stoull(argv[++i]);
            else if (a == "--reps")
                reps = static_cast<unsigned>(std::stoul(argv[++i]));
            else
                return usage();
        }
    } catch (const std::exception&) {
        return usage();
    }
    if (batch == 0 || loads < batch || reps == 0 || sizes.empty() ||
        std::any_of(sizes.begin(), sizes.end(), [](uint32_t s) { return s == 0; }))
        return usage();

    std::printf(
        "egw-memory-bench: random 64-byte lines, TSC cycles per line, median of %u runs of %lu loads, batches "
        "of %u\n\n",
        reps, static_cast<unsigned long>(loads), batch);
    std::printf(
        "| region | dependent, huge pages | dependent, 4 KiB pages | batch of %u, huge pages | batch of %u, 4 KiB "
        "pages |\n|---:|---:|---:|---:|---:|\n",
        batch, batch);
    std::mt19937_64 rng(1);
    for (uint32_t mib : sizes) {
        size_t bytes = size_t{mib} << 20;
        size_t lines = bytes / kLine;
        double dep[2], bat[2];
        for (int huge = 1; huge >= 0; --huge) {
            Region r(bytes, huge);
            if (!r.base()) {
                std::fprintf(stderr, "egw-memory-bench: cannot map %u MiB\n", mib);
                return 1;
            }
            std::vector<double> d, b;
            for (unsigned k = 0; k < reps; ++k) {
                d.push_back(dependent(r.base(), lines, loads, rng));
                b.push_back(batched(r.base(), lines, loads, batch, rng));
            }
            dep[huge] = median(d);
            bat[huge] = median(b);
        }
        std::printf("| %u MiB | %.1f | %.1f | %.1f | %.1f |\n", mib, dep[1], dep[0], bat[1], bat[0]);
    }
    return 0;
}
