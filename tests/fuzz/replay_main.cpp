// SPDX-License-Identifier: Apache-2.0
//
// The regression build of a fuzz target (any compiler, no libFuzzer): one GoogleTest case that
// feeds every file of the target's corpus directory (the first argument after GoogleTest's own
// flags) to LLVMFuzzerTestOneInput, in name order. A crash, a sanitizer report or a violated
// invariant aborts the run with the file's name on stderr. An empty or missing corpus fails:
// a replay of nothing proves nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz.h"

extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

std::string g_corpus;

TEST(FuzzCorpus, ReplaysEveryFile) {
    namespace fs = std::filesystem;
    ASSERT_TRUE(fs::is_directory(g_corpus)) << "no corpus directory " << g_corpus;
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(g_corpus))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty()) << "the corpus " << g_corpus << " is empty";
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_TRUE(in.eof() || in.good()) << "cannot read " << f;
        egw::fuzz::g_current_input = f.string();
        // Under libFuzzer an exception escaping the target is a crash; here it fails the case
        // with the file's name.
        try {
            LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        } catch (const std::exception& e) {
            ADD_FAILURE() << f.string() << ": exception escaped: " << e.what();
        }
    }
    egw::fuzz::g_current_input.clear();
    std::printf("replayed %zu files of %s\n", files.size(), g_corpus.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s [gtest flags] CORPUS_DIR\n", argv[0]);
        return 2;
    }
    g_corpus = argv[1];
    if (LLVMFuzzerInitialize && LLVMFuzzerInitialize(&argc, &argv) != 0) return 1;
    return RUN_ALL_TESTS();
}
