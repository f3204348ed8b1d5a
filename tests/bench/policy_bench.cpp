// SPDX-License-Identifier: Apache-2.0
//
// egw-policy-bench: the PolicyBuilder alone, at the scale of the control-plane target
// (docs/performance.md, "Targets": 10,000 EgressServices, 100,000 endpoints), without the API
// server. N Services with E endpoints each (LoadBalancerIP, served here) are built once, then C
// times one endpoint of a random Service is replaced and the next snapshot is built. It prints
// the first build and p50/p99/max of one change, given to the builder both ways: build() with
// every state (what the manifest directory and the tests do) and apply() with only the change
// (what egwd does with the kubernetes source), to tell the builder's share of egw-k8s-bench's
// change latency from the watch path's. `--family 6` makes the Services IPv6-only (an IPv6
// ingress IP and IPv6 endpoints, one of which each change replaces), so that the cost of a change
// can be compared between the families.
//
//   egw-policy-bench [--services N] [--endpoints E] [--changes C] [--family 4|6]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "control/policy/policy_builder.h"

using namespace egw;

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
    unsigned services = 10000;
    unsigned endpoints = 10;
    unsigned changes = 200;
    unsigned family = 4;
};

[[noreturn]] void usage() {
    std::fprintf(stderr, "usage: egw-policy-bench [--services N] [--endpoints E] [--changes C] [--family 4|6]\n");
    std::exit(2);
}

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        if (i + 1 >= argc) usage();
        unsigned v = static_cast<unsigned>(std::stoul(argv[++i]));
        if (k == "--services")
            a.services = v;
        else if (k == "--endpoints")
            a.endpoints = v;
        else if (k == "--changes")
            a.changes = v;
        else if (k == "--family")
            a.family = v;
        else
            usage();
    }
    if (a.services == 0 || a.services >= dp::kMaxServices || a.endpoints == 0 || a.endpoints > 16 ||
        (a.family != 4 && a.family != 6))
        usage();
    return a;
}

double ms(Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t idx = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(idx, v.size() - 1)];
}

// The addresses egw-k8s-bench uses: 32 per Service in 10.0.0.0/9, the upper half for replacements.
uint32_t endpoint_ip(unsigned i, unsigned j) {
    return 0x0a000000u + i * 32 + j;
}

// The same numbering in fd00:10::/96 for IPv6, and ingress IPs in 2001:db8:64::/96.
net::IpAddr v6(uint8_t prefix_byte, uint32_t low) {
    uint8_t b[16] = {0xfd, 0x00, 0x00, 0x10};
    if (prefix_byte) b[0] = 0x20, b[1] = 0x01, b[2] = 0x0d, b[3] = 0xb8, b[5] = prefix_byte;
    for (int k = 0; k < 4; ++k)
        b[12 + k] = static_cast<uint8_t>(low >> (24 - 8 * k));
    return net::IpAddr::from_v6(b);
}

// Replaces the Service's first endpoint of the bench's family with the next spare address.
void replace_endpoint(model::ServiceState& s, unsigned family, unsigned svc, unsigned spare) {
    if (family == 4) {
        auto& eps = s.endpoint_ipv4s;
        eps.erase(eps.begin());
        eps.push_back(endpoint_ip(svc, 16 + spare % 16));
        std::sort(eps.begin(), eps.end());
        return;
    }
    auto& eps = s.endpoint_ipv6s;
    eps.erase(eps.begin());
    eps.push_back(v6(0, endpoint_ip(svc, 16 + spare % 16)));
    std::sort(eps.begin(), eps.end());
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parse(argc, argv);
    config::Config cfg = config::load_text(R"({
      "eal": {"vdevs": ["net_null0", "net_null1"]}, "workers": [1],
      "ports": [{"name": "pods", "device": "net_null0", "role": "inside", "addresses": ["10.255.255.1/24"]},
                {"name": "ext", "device": "net_null1", "role": "outside", "addresses": ["192.0.2.1/24"]}],
      "cluster": {"pod_cidrs": ["10.0.0.0/9"]}, "node": {"name": "gw-1"},
      "state": {"source": "kubernetes"}})",
                                           "bench.json");
    control::PolicyBuilder builder(cfg, {0, 1}, {{0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2}});

    std::vector<model::ServiceState> states;
    for (unsigned i = 0; i < a.services; ++i) {
        model::ServiceState s;
        s.key = "bench/svc-" + std::to_string(i);
        s.status_host = "gw-1";
        s.serve_here = true;
        for (unsigned j = 0; j < a.endpoints; ++j) {
            if (a.family == 4)
                s.endpoint_ipv4s.push_back(endpoint_ip(i, j));
            else
                s.endpoint_ipv6s.push_back(v6(0, endpoint_ip(i, j)));
        }
        if (a.family == 4)
            s.ingress_ipv4 = 0x64400000u + i;
        else
            s.ingress_ipv6 = v6(0x64, i);
        s.endpoint_nodes = {"worker-0", "worker-1"};
        states.push_back(std::move(s));
    }
    std::sort(states.begin(), states.end(), [](const auto& x, const auto& y) { return x.key < y.key; });

    auto t0 = Clock::now();
    auto snap = builder.build(states);
    const double first = ms(Clock::now() - t0);
    std::printf("first build: %u IPv%u Services, %zu endpoints   %8.1f ms\n", a.services, a.family,
                snap->endpoints.size() + snap->endpoints6.size(), first);

    std::mt19937 rng(42);
    std::vector<unsigned> replaced(states.size());
    std::vector<double> full, delta;
    for (unsigned c = 0; c < 2 * a.changes; ++c) {
        size_t i = rng() % states.size();
        unsigned svc = static_cast<unsigned>(std::stoul(states[i].key.substr(states[i].key.find('-') + 1)));
        replace_endpoint(states[i], a.family, svc, replaced[i]++);
        if (c % 2 == 0) {
            auto b0 = Clock::now();
            snap = builder.build(states);
            full.push_back(ms(Clock::now() - b0));
        } else {
            model::ServiceDelta d;
            d.changed.push_back(states[i]);
            auto b0 = Clock::now();
            snap = builder.apply(d);
            delta.push_back(ms(Clock::now() - b0));
        }
    }
    std::printf("one change, build(every state)  (%u changes)  p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", a.changes,
                percentile(full, 0.5), percentile(full, 0.99), *std::max_element(full.begin(), full.end()));
    std::printf("one change, apply(the change)   (%u changes)  p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", a.changes,
                percentile(delta, 0.5), percentile(delta, 0.99), *std::max_element(delta.begin(), delta.end()));
    return 0;
}
