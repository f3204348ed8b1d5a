// SPDX-License-Identifier: Apache-2.0
//
// The `files` state source: a directory of Kubernetes manifests standing in for the API server.
//
// Every regular file (or symlink to one, as in a mounted ConfigMap) whose name ends in .yaml,
// .yml or .json is read; hidden files, editor backups (`~`) and swap files (.swp) are not. A YAML
// file may hold several documents separated by `---`; a document, or a JSON file, may also be a
// list (`kind: List`, or a typed list such as `ServiceList`) whose `items` are the objects. A
// namespaced object without a namespace is in "default", as with kubectl.
//
// scan() is cheap when nothing changed: a file is re-read only when its (mtime, size, inode) moved.
// A file that fails (syntax, or an object with a bad field) keeps the objects it last gave, so a
// half-written edit never withdraws a Service. Each problem is reported once per file version.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "control/model/egress_qos.h"
#include "control/model/objects.h"

namespace egw::manifests {

class ManifestDir {
public:
    explicit ManifestDir(std::string dir);

    struct ScanResult {
        bool changed = false;             // objects() differs from what the previous scan gave
        std::vector<std::string> errors;  // new problems, each "<file>: <where>: <message>"
    };

    // Looks at the directory again and rebuilds objects(). Never throws for problems with the
    // directory or its files; they are in `errors`.
    ScanResult scan();

    // The merged objects of every file, as of the last scan().
    const model::ObjectSet& objects() const { return merged_; }
    // The EgressQoS objects of every file (k8s.ovn.org/v1, parsed by model::parse_egress_qos),
    // keyed "namespace/name", as of the last scan(); a change to them is a change of the scan.
    const std::map<std::string, model::EgressQoS>& egress_qoses() const { return merged_qos_; }

    const std::string& dir() const { return dir_; }

private:
    struct FileVersion {
        int64_t mtime_ns = 0;
        int64_t size = -1;
        uint64_t inode = 0;
        bool operator==(const FileVersion&) const = default;
    };
    struct FileState {
        FileVersion version;
        bool ok = false;                     // the current version parsed
        std::vector<model::Object> objects;  // last good objects, in file order
        std::vector<model::EgressQoS> egress_qoses;
    };

    void read_file(const std::string& name, FileState& st, std::vector<std::string>& errors);
    bool merge();  // rebuilds merged_ and duplicate_errors_; true when merged_ changed

    std::string dir_;
    std::map<std::string, FileState> files_;  // by file name, so merging goes in name order
    model::ObjectSet merged_;
    std::map<std::string, model::EgressQoS> merged_qos_;
    std::set<std::string> reported_;             // standing errors (directory, duplicates) already reported
    std::vector<std::string> duplicate_errors_;  // from the last merge
};

// Parses YAML text into one JSON value per document, in order; an empty document gives null (so
// positions stay countable). Plain scalars are resolved with the YAML 1.2 core schema (null,
// true/false, integers, floats, else string); quoted or block scalars stay strings, and explicit
// tags (!!str, !!int, ...) are honoured. Mapping keys become strings; a duplicate key is an error.
// Throws std::runtime_error whose what() reads "line L, column C: <problem>". Shared with readers
// of other YAML files (kubeconfig).
std::vector<nlohmann::json> parse_yaml(const std::string& text);

}  // namespace egw::manifests
