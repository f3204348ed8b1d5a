// SPDX-License-Identifier: Apache-2.0
//
// egw-egressip-bench: what the EgressIP sources keep and what selection costs, without an API
// server (docs/kubernetes.md, "EgressIP").
//
// It parses P pods (default 100,000) in P/100 namespaces as the cache does (model::parse_object
// on each object's JSON, then into an ObjectSet), with the labels a Deployment's pods carry (app,
// pod-template-hash, one more) and one IPv4 address each, and prints:
//
//   memory      the heap the ObjectSet holds per pod and per namespace (malloc's own count:
//               mallinfo2, before and after, the JSON freed in between);
//   selection   E EgressIPs (default 1,000), each selecting the pods of its namespaces by a
//               matchLabels namespace selector and, for every other one, a podSelector: the time
//               of a full rebuild, the heap the selection holds per selected pod, and the time
//               of one pod's label change applied incrementally (p50, p99, max of C changes).
//
//   egw-egressip-bench [--pods P] [--egress-ips E] [--changes C]
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "control/model/egress_ip_selection.h"
#include "control/model/objects.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

size_t heap_in_use() {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

double us_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

std::string ns_name(size_t i) {
    return "team-" + std::to_string(i);
}

json pod_json(size_t i, size_t pods_per_ns, const std::string& app) {
    const size_t ns = i / pods_per_ns;
    char suffix[8];
    std::snprintf(suffix, sizeof suffix, "%05zx", i & 0xfffff);
    const std::string name = app + "-7d9f8c6b5d-" + suffix;
    const std::string ip = "10." + std::to_string(128 + (i >> 16)) + "." + std::to_string((i >> 8) & 0xff) + "." +
                           std::to_string(i & 0xff);
    return {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"namespace", ns_name(ns)},
          {"name", name},
          {"uid", "0b0e6a0c-2bb4-4e61-a0a2-7d1f0f9b" + std::string(suffix).substr(0, 4)},
          {"resourceVersion", std::to_string(100000 + i)},
          {"labels", {{"app", app}, {"pod-template-hash", "7d9f8c6b5d"}, {"tier", i % 2 ? "backend" : "frontend"}}},
          {"annotations", {{"kubectl.kubernetes.io/restartedAt", "2026-12-01T10:00:00Z"}}}}},
        {"spec", {{"nodeName", "worker-" + std::to_string(i % 50)}, {"containers", json::array({{{"name", "c"}}})}}},
        {"status", {{"phase", "Running"}, {"podIP", ip}, {"podIPs", json::array({{{"ip", ip}}})}}}};
}

size_t arg(int argc, char** argv, const char* name, size_t def) {
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], name) == 0) return std::strtoull(argv[i + 1], nullptr, 10);
    return def;
}

}  // namespace

int main(int argc, char** argv) {
    const size_t pods = std::max<size_t>(arg(argc, argv, "--pods", 100000), 100);
    const size_t eips = std::max<size_t>(arg(argc, argv, "--egress-ips", 1000), 1);
    const size_t changes = std::max<size_t>(arg(argc, argv, "--changes", 1000), 1);
    const size_t pods_per_ns = 100;
    const size_t namespaces = (pods + pods_per_ns - 1) / pods_per_ns;

    egw::model::ObjectSet objs;
    size_t heap0 = heap_in_use();
    for (size_t n = 0; n < namespaces; ++n) {
        objs.upsert(egw::model::parse_object(json{
            {"apiVersion", "v1"},
            {"kind", "Namespace"},
            {"metadata",
             {{"name", ns_name(n)},
              {"uid", "6f1c0b9e-2d0e-4c43-9a55-1d2f3c4b5a69"},
              {"labels",
               {{"kubernetes.io/metadata.name", ns_name(n)}, {"egress", "group-" + std::to_string(n % eips)}}}}}}));
    }
    const size_t heap_ns = heap_in_use();
    for (size_t i = 0; i < pods; ++i)
        objs.upsert(egw::model::parse_object(pod_json(i, pods_per_ns, "app" + std::to_string(i % 7))));
    const size_t heap_pods = heap_in_use();
    std::printf("pods kept             %8zu in %zu namespaces\n", objs.pods.size(), objs.namespaces.size());
    std::printf("memory per pod        %8.0f bytes (ObjectSet: key, name, labels, addresses, node)\n",
                static_cast<double>(heap_pods - heap_ns) / static_cast<double>(pods));
    std::printf("memory per namespace  %8.0f bytes\n",
                static_cast<double>(heap_ns - heap0) / static_cast<double>(namespaces));

    for (size_t e = 0; e < eips; ++e) {
        json spec = {{"egressIPs", {"192.0.2." + std::to_string(e % 250 + 1)}},
                     {"namespaceSelector", {{"matchLabels", {{"egress", "group-" + std::to_string(e)}}}}}};
        if (e % 2)
            spec["podSelector"] = {
                {"matchExpressions", {{{"key", "tier"}, {"operator", "In"}, {"values", {"backend"}}}}}};
        objs.upsert(egw::model::parse_object(json{{"apiVersion", "k8s.ovn.org/v1"},
                                                  {"kind", "EgressIP"},
                                                  {"metadata", {{"name", "eip-" + std::to_string(e)}}},
                                                  {"spec", spec}}));
    }
    egw::model::EgressIPSelection sel;
    heap0 = heap_in_use();
    auto t0 = Clock::now();
    sel.rebuild(objs);
    const double rebuild_us = us_since(t0);
    const size_t heap_sel = heap_in_use();
    size_t selected = 0;
    for (const auto& [name, s] : sel.all())
        selected += s.pods.size();
    std::printf("selection rebuild     %8.1f ms for %zu EgressIPs selecting %zu pods\n", rebuild_us / 1000, eips,
                selected);
    std::printf("memory per selection  %8.0f bytes per selected pod\n",
                selected ? static_cast<double>(heap_sel - heap0) / static_cast<double>(selected) : 0.0);

    // One pod relabelled at a time (tier flipped), applied as a watch event would be.
    std::mt19937 rng(37);
    std::vector<double> times;
    times.reserve(changes);
    for (size_t c = 0; c < changes; ++c) {
        auto it = std::next(objs.pods.begin(), static_cast<long>(rng() % objs.pods.size()));
        auto& labels = it->second.meta.labels;
        labels["tier"] = labels["tier"] == "backend" ? "frontend" : "backend";
        t0 = Clock::now();
        sel.apply(objs, egw::model::Kind::pod, it->first);
        times.push_back(us_since(t0));
    }
    std::sort(times.begin(), times.end());
    std::printf("pod label change      p50 %.1f us   p99 %.1f us   max %.1f us (%zu changes)\n",
                times[times.size() / 2], times[times.size() * 99 / 100], times.back(), changes);
    return 0;
}
