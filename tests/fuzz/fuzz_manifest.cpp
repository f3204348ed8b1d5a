// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the manifest reader (control/manifests), as the `files` source uses it: the input
// is written as one file of a fresh directory, .yaml or .json by the first byte, and scanned.
// Whatever the objects, the EgressService rules evaluate them and the policy builder builds a
// snapshot from the result, as egwd does on every change. Problems must come back as errors from
// scan(), never as exceptions; parse_yaml may only throw std::runtime_error.
#include <filesystem>
#include <string>

#include "config/config.h"
#include "control/policy/policy_builder.h"
#include "control/manifests/manifest_dir.h"
#include "control/model/rules.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/temp_dir.h"

namespace {

// The demo's shape: pods inside, two outside ports in two VRFs, masquerade by default.
const char* const kConfig = R"({
  "eal": {"vdevs": ["net_null0", "net_null1", "net_null2"]},
  "workers": [1],
  "ports": [
    {"name": "pods", "device": "net_null0", "role": "inside", "addresses": ["10.244.1.1/24"], "mac": "02:e9:00:00:00:01"},
    {"name": "ext1", "device": "net_null1", "role": "outside", "addresses": ["192.0.2.1/24"], "mac": "02:e9:00:00:00:03"},
    {"name": "ext2", "device": "net_null2", "role": "outside", "vrf": "blue", "addresses": ["198.51.100.1/24"], "mac": "02:e9:00:00:00:04"}
  ],
  "vrfs": [{"name": "blue", "table": 100}],
  "routes": [{"vrf": "default", "prefix": "0.0.0.0/0", "via": "192.0.2.254", "port": "ext1"}],
  "cluster": {"pod_cidrs": ["10.244.0.0/16"], "service_cidrs": ["10.96.0.0/12"], "node_ips": ["172.18.0.2"]},
  "default_action": "masquerade",
  "node": {"name": "gw-1", "labels": {"egw.example.com/gateway": "true"}},
  "state": {"source": "files", "path": "."}
})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace egw;
    namespace fs = std::filesystem;
    static const config::Config cfg = config::load_text(kConfig, "fuzz-manifest.json");
    static unsigned serial = 0;

    fuzz::Reader in(data, size);
    const bool json = in.byte() & 1;
    const std::string text = in.take();

    try {
        (void)manifests::parse_yaml(text);
    } catch (const std::runtime_error&) {
    }

    // A fresh directory each time, so that scan() reads the file whatever its mtime.
    const std::string dir = fuzz::temp_dir() + "/m" + std::to_string(serial++);
    fs::create_directory(dir);
    fuzz::write_file(dir + (json ? "/objects.json" : "/objects.yaml"), text);
    manifests::ManifestDir md(dir);
    manifests::ManifestDir::ScanResult r = md.scan();
    std::error_code ec;
    fs::remove_all(dir, ec);
    (void)r;

    model::GatewayIdentity self{cfg.node.name, cfg.node.labels};
    std::vector<model::ServiceState> states = model::evaluate_single_gateway(md.objects(), self, cfg.cluster.pod_cidrs);
    for (const auto& s : states) {
        if (s.serve_here != s.reason.empty())
            fuzz::fail("Service " + s.key + ": serve_here and an empty reason disagree (reason \"" + s.reason + "\")");
    }
    std::vector<uint16_t> ids = {0, 1, 2};
    std::vector<std::array<uint8_t, 6>> macs(3);
    control::PolicyBuilder builder(cfg, ids, macs);
    std::unique_ptr<dp::PolicySnapshot> snap = builder.build(states);
    if (!snap) fuzz::fail("the policy builder gave no snapshot");
    return 0;
}
