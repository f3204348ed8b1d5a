// SPDX-License-Identifier: Apache-2.0
//
// A private directory for targets whose code under test reads files (the kubeconfig reader, the
// manifest directory), made once per process and removed at exit.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace egw::fuzz {

inline const std::string& temp_dir() {
    // Never destroyed: the exit handler that removes the directory runs after static destructors.
    static const std::string* dir = [] {
        auto* d = new std::string((std::filesystem::temp_directory_path() / "egw-fuzz-XXXXXX").string());
        if (!mkdtemp(d->data())) std::abort();
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(temp_dir(), ec);
        });
        return d;
    }();
    return *dir;
}

// Writes `text` to `path` whole; aborts when it cannot (the harness is broken, not egw).
inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) std::abort();
}

}  // namespace egw::fuzz
