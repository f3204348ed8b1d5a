// SPDX-License-Identifier: Apache-2.0
//
// Shared by the fuzz targets (tests/fuzz/fuzz_*.cpp). Each target defines
// LLVMFuzzerTestOneInput (and LLVMFuzzerInitialize when it needs set-up once). Built with clang
// and -Dfuzzing=true they link libFuzzer; otherwise replay_main.cpp runs the files of the
// target's corpus through them as a GoogleTest case.
//
// A violated invariant calls fuzz_fail(), which prints what broke and aborts: libFuzzer keeps the
// input as a crash reproducer, and the replay names the corpus file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace egw::fuzz {

// The corpus file being replayed ("" under libFuzzer), for messages.
extern std::string g_current_input;

[[noreturn]] void fail(const std::string& what);

// Reads input bytes front to back; past the end it gives zeros.
class Reader {
public:
    Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
    uint8_t byte() { return n_ ? (--n_, *p_++) : 0; }
    uint16_t u16() { return static_cast<uint16_t>(byte() << 8 | byte()); }
    bool empty() const { return n_ == 0; }
    size_t left() const { return n_; }
    // Up to `max` bytes (all that is left when max is 0).
    std::string take(size_t max = 0) {
        size_t k = max == 0 || max > n_ ? n_ : max;
        std::string s(reinterpret_cast<const char*>(p_), k);
        p_ += k;
        n_ -= k;
        return s;
    }

private:
    const uint8_t* p_;
    size_t n_;
};

}  // namespace egw::fuzz
