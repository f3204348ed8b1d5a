// SPDX-License-Identifier: Apache-2.0
//
// How a worker bumps its counters. Each counter has one writer, its worker, and readers on other
// threads (the control thread's status file, the metrics thread) that load it with
// __atomic_load_n(..., __ATOMIC_RELAXED) (control/metrics/state.h). The worker's read of its own
// counter needs no atomicity (no other thread writes it), but its store does: a plain store
// concurrent with another thread's load is a data race in the C++ memory model (undefined, and
// what ThreadSanitizer reports), even where the hardware makes it harmless. On x86-64 the relaxed
// store is a plain mov, with no lock prefix and no fence (gcc 12 -O3): count(c) is a load, an add
// and that mov where `++c` is one `add` to memory (the same micro-operations), and the compiler
// may no longer fold several bumps of one counter in a loop into a single store.
#pragma once

#include <cstdint>

namespace egw::dp {

inline void count(uint64_t& counter, uint64_t n = 1) {
    __atomic_store_n(&counter, counter + n, __ATOMIC_RELAXED);
}

// A state other threads read the same way (a flag, a level), set by its one writer.
inline void store(uint64_t& state, uint64_t value) {
    __atomic_store_n(&state, value, __ATOMIC_RELAXED);
}

}  // namespace egw::dp
