// SPDX-License-Identifier: Apache-2.0
//
// egw-k8s-bench: the kubernetes state source at scale, against the test API server.
//
// It seeds tests/apiserver/apiserver.py with N EgressServices, their LoadBalancer Services and one
// EndpointSlice each (E endpoints per Service), three gateway Nodes and this gateway's liveness
// Lease, then runs what egwd runs on its control thread: an k8s_source::Controller (list+watch of
// the five kinds, the leader's decisions and write-backs) whose serving states go through the
// real PolicyBuilder into a PolicySnapshot. It prints:
//
//   start -> programmed   from Controller::start() to the first snapshot holding every Service
//                         this gateway hosts (with the time to sync and to build);
//   endpoint change       for C changes, each one endpoint of a random Service replaced through
//                         the API server: from sending the change to a snapshot holding it built
//                         (p50, p99, max).
//
// --statuses restart (default): status.host and the node labels already name this gateway, as
// after a restart; the leader confirms them and writes nothing. --statuses cold: nothing is
// decided yet; the leader writes every status.host first (one PATCH each).
//
// --gateways 3: three control planes (gw-1..gw-3, each its own Controller and PolicyBuilder, as
// three egwd would run them) against the same server, the Services spread over them by status.host
// (restart) or by the leader (cold). It prints, instead:
//
//   lists -> programmed   from the moment every gateway has every kind listed to every Service
//                         programmed on its host;
//   create -> programmed  for K new EgressServices (their Service and slice created before): from
//                         the EgressService's create to its host's snapshot holding it (the
//                         leader's decision, its status PATCH, the host's watch event and build);
//   change -> programmed  one endpoint of a Service replaced, to its host's snapshot holding it;
//   node failure          one gateway stopped without giving its Lease up: from then to the leader
//                         seeing it dead (the Lease duration), and from that to every one of its
//                         Services programmed on another gateway (the leader's decisions and
//                         writes, the hosts' builds);
//   memory                the heap in use by the three control planes after the first programming,
//                         per gateway and per object listed.
//
//   egw-k8s-bench [--services N] [--endpoints E] [--changes C] [--statuses restart|cold]
//                 [--election leader|external] [--gateways 1|3] [--creates K] [--apiserver PATH]
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "control/policy/policy_builder.h"
#include "control/k8s_source/controller.h"
#include "control/k8s/log.h"

using namespace egw;

namespace {

using namespace std::chrono;
using nlohmann::json;
using Clock = steady_clock;

constexpr const char* kToken = "bench";
constexpr const char* kNode = "gw-1";
constexpr const char* kLeaseNs = "egw";

struct Args {
    unsigned services = 10000;
    unsigned endpoints = 10;
    unsigned changes = 200;
    bool cold = false;
    bool external = false;
    unsigned gateways = 1;
    unsigned creates = 100;
    std::string apiserver;
};

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: egw-k8s-bench [--services N] [--endpoints E] [--changes C] "
                 "[--statuses restart|cold] [--election leader|external] [--gateways 1|3] [--creates K] "
                 "[--apiserver PATH]\n");
    std::exit(2);
}

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        if (i + 1 >= argc) usage();
        std::string v = argv[++i];
        if (k == "--services")
            a.services = static_cast<unsigned>(std::stoul(v));
        else if (k == "--endpoints")
            a.endpoints = static_cast<unsigned>(std::stoul(v));
        else if (k == "--changes")
            a.changes = static_cast<unsigned>(std::stoul(v));
        else if (k == "--statuses" && (v == "restart" || v == "cold"))
            a.cold = v == "cold";
        else if (k == "--election" && (v == "leader" || v == "external"))
            a.external = v == "external";
        else if (k == "--gateways" && (v == "1" || v == "3"))
            a.gateways = static_cast<unsigned>(std::stoul(v));
        else if (k == "--creates")
            a.creates = static_cast<unsigned>(std::stoul(v));
        else if (k == "--apiserver")
            a.apiserver = v;
        else
            usage();
    }
    if (a.services == 0 || a.endpoints == 0 || a.endpoints > 16 || (a.gateways == 3 && a.external)) usage();
    return a;
}

std::string ip(uint32_t v) {
    return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." + std::to_string((v >> 8) & 255) +
           "." + std::to_string(v & 255);
}

// Endpoint j of Service i: 10.0.0.0/8, 16 addresses per Service. Replacements use the upper half.
uint32_t endpoint_ip(unsigned i, unsigned j) {
    return 0x0a000000u + i * 32 + j;
}

std::string name(unsigned i) {
    return "svc-" + std::to_string(i);
}

json slice(unsigned i, const std::vector<uint32_t>& ips) {
    json eps = json::array();
    for (size_t j = 0; j < ips.size(); ++j)
        eps.push_back({{"addresses", {ip(ips[j])}}, {"nodeName", "worker-" + std::to_string(j % 50)}});
    return {{"apiVersion", "discovery.k8s.io/v1"},
            {"kind", "EndpointSlice"},
            {"metadata",
             {{"name", name(i) + "-1"}, {"namespace", "bench"}, {"labels", {{"kubernetes.io/service-name", name(i)}}}}},
            {"addressType", "IPv4"},
            {"endpoints", eps}};
}

const char* const kGateways[] = {"gw-1", "gw-2", "gw-3"};

// The host Service i has after a restart: gw-1 alone, or the three gateways in turn.
const char* host_of(const Args& a, unsigned i) {
    return a.gateways == 3 ? kGateways[i % 3] : kNode;
}

json service(unsigned i) {
    return {{"apiVersion", "v1"},
            {"kind", "Service"},
            {"metadata", {{"name", name(i)}, {"namespace", "bench"}}},
            {"spec", {{"type", "LoadBalancer"}, {"externalTrafficPolicy", "Cluster"}}},
            {"status", {{"loadBalancer", {{"ingress", json::array({{{"ip", ip(0x64400000u + i)}}})}}}}}};
}

json egress_service(unsigned i) {
    return {{"apiVersion", "k8s.ovn.org/v1"},
            {"kind", "EgressService"},
            {"metadata", {{"name", name(i)}, {"namespace", "bench"}}},
            {"spec",
             {{"sourceIPBy", "LoadBalancerIP"},
              {"nodeSelector", {{"matchLabels", {{"egw.example.com/gateway", "true"}}}}}}}};
}

std::vector<uint32_t> endpoints_of(const Args& a, unsigned i) {
    std::vector<uint32_t> ips;
    for (unsigned j = 0; j < a.endpoints; ++j)
        ips.push_back(endpoint_ip(i, j));
    return ips;
}

json seed(const Args& a) {
    json items = json::array();
    const bool three = a.gateways == 3;
    std::map<std::string, json> labels;
    for (const char* n : kGateways) {
        labels[n] = {{"kubernetes.io/hostname", n}};
        if (three || std::string(n) == kNode) labels[n]["egw.example.com/gateway"] = "true";
    }
    for (unsigned i = 0; i < a.services && !a.cold; ++i)
        labels[host_of(a, i)]["egress-service.k8s.ovn.org/bench-" + name(i)] = "";
    for (const char* n : kGateways) {
        json node = {{"apiVersion", "v1"},
                     {"kind", "Node"},
                     {"metadata", {{"name", n}, {"labels", labels[n]}}},
                     {"status", {{"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
        items.push_back(node);
        if (!three && std::string(n) != kNode) continue;
        // Live from the start, so that a leader's first decisions keep every host.
        items.push_back(
            {{"apiVersion", "coordination.k8s.io/v1"},
             {"kind", "Lease"},
             {"metadata", {{"name", std::string("egw-node-") + n}, {"namespace", kLeaseNs}}},
             {"spec",
              {{"holderIdentity", n}, {"leaseDurationSeconds", 60}, {"renewTime", k8s_source::now_micro_time()}}}});
    }
    for (unsigned i = 0; i < a.services; ++i) {
        items.push_back(service(i));
        items.push_back(slice(i, endpoints_of(a, i)));
        json es = egress_service(i);
        if (!a.cold) es["status"] = {{"host", host_of(a, i)}};
        items.push_back(es);
    }
    return items;
}

class Server {
public:
    Server(const Args& a, const std::string& dir) {
        const std::string seed_file = dir + "/seed.json";
        std::ofstream(seed_file) << seed(a).dump();
        port_file_ = dir + "/port";
        pid_ = fork();
        if (pid_ == 0) {
            // TCP_NODELAY on the server's connections, as kube-apiserver (Go's net/http) has: the
            // stand-in's http.server leaves Nagle on, and a response then waits for the client's
            // delayed ACK (40 ms) whenever a keep-alive connection is reused.
            const std::string dir_of = std::filesystem::path(a.apiserver).parent_path().string();
            const std::string boot =
                "import sys; sys.path.insert(0, sys.argv[1]); import apiserver; "
                "apiserver.Handler.disable_nagle_algorithm = True; "
                "sys.exit(apiserver.main(sys.argv[2:]))";
            execlp("python3", "python3", "-c", boot.c_str(), dir_of.c_str(), "--port", "0", "--port-file",
                   port_file_.c_str(), "--token", kToken, "--seed", seed_file.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        auto deadline = Clock::now() + seconds(120);
        while (Clock::now() < deadline) {
            std::ifstream f(port_file_);
            if (f >> port_) return;
            int st = 0;
            if (waitpid(pid_, &st, WNOHANG) == pid_) break;
            std::this_thread::sleep_for(milliseconds(50));
        }
        throw std::runtime_error("the test API server did not start");
    }
    ~Server() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);
            int st = 0;
            waitpid(pid_, &st, 0);
        }
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
    pid_t pid_ = -1;
    int port_ = 0;
    std::string port_file_;
};

double ms(Clock::duration d) {
    return duration<double, std::milli>(d).count();
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t idx = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(idx, v.size() - 1)];
}

// One gateway's control plane, as its egwd runs it: the Controller, and the PolicyBuilder its
// states go through.
struct Gateway {
    std::string node;
    std::unique_ptr<k8s_source::Controller> ctl;
    std::unique_ptr<control::PolicyBuilder> builder;
    model::ServiceDelta delta;
    std::unique_ptr<dp::PolicySnapshot> snap;
    bool running = true;

    size_t programmed() const {
        size_t n = 0;
        for (const auto& v : builder->views())
            n += v.programmed;
        return n;
    }
    bool holds(const std::string& key) const {
        const auto* v = builder->view(key);
        return v && v->programmed;
    }
    bool holds_endpoint(const std::string& key, uint32_t ep) const {
        const auto* v = builder->view(key);
        return v && v->programmed &&
               std::binary_search(v->state.endpoint_ipv4s.begin(), v->state.endpoint_ipv4s.end(), ep);
    }
};

// The heap the process has in use (malloc's arenas and its mmapped blocks).
size_t heap_in_use() {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

// Polls every running gateway once, building a snapshot where its states changed; waits up to
// 1 ms on the first for a change.
void pump(std::vector<Gateway>& gws) {
    bool waited = false;
    for (auto& g : gws) {
        if (!g.running) continue;
        if (!waited) {
            g.ctl->wait(milliseconds(1));
            waited = true;
        }
        if (g.ctl->poll(g.delta)) g.snap = g.builder->apply(g.delta);
    }
}

// Pumps until `done` holds or `limit` passes; the time it held, or nullopt.
std::optional<Clock::time_point> pump_until(std::vector<Gateway>& gws, const std::function<bool()>& done,
                                            Clock::duration limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
        pump(gws);
        if (done()) return Clock::now();
    }
    return std::nullopt;
}

void print_latencies(const char* what, const std::vector<double>& lat) {
    if (lat.empty()) return;
    std::printf("%-28s (%zu)  p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n", what, lat.size(), percentile(lat, 0.5),
                percentile(lat, 0.99), *std::max_element(lat.begin(), lat.end()));
}

// Sends `body` to the server's /_test/upsert on its own thread (the data plane may hold the change
// before the server's answer is back); join() before reading the answer.
struct Upsert {
    k8s::Response r;
    std::thread t;
    Upsert(k8s::Transport& tr, std::string body)
        : t([this, &tr, body = std::move(body)] {
              r = tr.request("POST", "/_test/upsert", body, "application/json");
          }) {}
    void join() {
        t.join();
        if (r.status != 200) throw std::runtime_error("upsert failed: " + k8s::describe(r));
    }
};

void three_gateways(const Args& a, const std::string& url, const config::Config& cfg) {
    k8s::Credentials creds;
    creds.server = url;
    creds.token = kToken;
    creds.source = "bench";
    const size_t heap0 = heap_in_use();
    std::vector<Gateway> gws(3);
    for (unsigned g = 0; g < 3; ++g) {
        gws[g].node = kGateways[g];
        k8s_source::ControllerOptions o;
        o.node_name = gws[g].node;
        o.lease_namespace = kLeaseNs;
        o.pod_cidrs = cfg.cluster.pod_cidrs;
        k8s::ClientOptions co;
        co.http.user_agent = "egwd/" + gws[g].node;
        gws[g].ctl = std::make_unique<k8s_source::Controller>(creds, o, co);
        gws[g].builder = std::make_unique<control::PolicyBuilder>(
            cfg, std::vector<uint16_t>{0, 1},
            std::vector<std::array<uint8_t, 6>>{{0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2}});
    }
    auto total = [&] {
        size_t n = 0;
        for (const auto& g : gws)
            if (g.running) n += g.programmed();
        return n;
    };
    const auto t0 = Clock::now();
    for (auto& g : gws)
        g.ctl->start();
    // Each gateway's lists complete when its Controller says synced, seen before the poll that builds
    // from them; the slowest build of each gateway is kept.
    std::vector<std::optional<Clock::time_point>> synced(3);
    std::vector<double> slowest_build(3, 0);
    std::optional<Clock::time_point> p;
    while (!p && Clock::now() - t0 < minutes(10)) {
        gws[0].ctl->wait(milliseconds(1));
        for (unsigned g = 0; g < 3; ++g) {
            if (!synced[g] && gws[g].ctl->stats().synced) synced[g] = Clock::now();
            if (!gws[g].ctl->poll(gws[g].delta)) continue;
            const auto b0 = Clock::now();
            gws[g].snap = gws[g].builder->apply(gws[g].delta);
            slowest_build[g] = std::max(slowest_build[g], ms(Clock::now() - b0));
        }
        if (total() >= a.services) p = Clock::now();
    }
    if (!p) throw std::runtime_error("not every Service was programmed within 10 minutes");
    const Clock::time_point listed = std::max({*synced[0], *synced[1], *synced[2]});
    const size_t heap1 = heap_in_use();
    k8s_source::Controller* leader = nullptr;
    for (auto& g : gws)
        if (g.ctl->leader()) leader = g.ctl.get();
    std::printf("start -> every gateway listed every kind  %8.1f ms\n", ms(listed - t0));
    std::printf("slowest snapshot build per gateway        %.1f / %.1f / %.1f ms\n", slowest_build[0], slowest_build[1],
                slowest_build[2]);
    std::printf("lists -> %zu Services programmed       %8.1f ms  (gw-1 %zu, gw-2 %zu, gw-3 %zu; status writes %llu)\n",
                total(), ms(*p - listed), gws[0].programmed(), gws[1].programmed(), gws[2].programmed(),
                static_cast<unsigned long long>(leader ? leader->stats().status_writes : 0));
    const size_t objects = 3 + 3 + size_t{a.services} * 3;  // nodes, Leases, Services + slices + EgressServices
    std::printf(
        "heap in use by the three control planes  %8.1f MiB: %.0f bytes per gateway per object listed "
        "(%zu objects, %u endpoints per slice)\n",
        static_cast<double>(heap1 - heap0) / (1 << 20),
        static_cast<double>(heap1 - heap0) / 3.0 / static_cast<double>(objects), objects, a.endpoints);

    k8s::Transport tr(creds);
    // create -> programmed: the Service and its slice first, then the EgressService alone is timed.
    std::vector<double> created;
    for (unsigned c = 0; c < a.creates; ++c) {
        const unsigned i = a.services + c;
        Upsert(tr, service(i).dump()).join();
        Upsert(tr, slice(i, endpoints_of(a, i)).dump()).join();
        pump_until(
            gws, [] { return false; }, milliseconds(20));
        const std::string key = "bench/" + name(i);
        const auto s0 = Clock::now();
        Upsert u(tr, egress_service(i).dump());
        auto done = pump_until(
            gws,
            [&] {
                for (const auto& g : gws)
                    if (g.holds(key)) return true;
                return false;
            },
            seconds(10));
        u.join();
        if (!done) throw std::runtime_error("a created EgressService was not programmed within 10 s");
        created.push_back(ms(*done - s0));
    }
    print_latencies("create -> programmed", created);

    // change -> programmed: one endpoint of a random Service replaced.
    std::mt19937 rng(42);
    std::vector<double> changed_lat;
    std::map<unsigned, unsigned> changed;
    for (unsigned c = 0; c < a.changes; ++c) {
        const unsigned i = rng() % a.services;
        std::vector<uint32_t> ips = endpoints_of(a, i);
        const uint32_t fresh = endpoint_ip(i, 16 + changed[i]++ % 16);
        ips[0] = fresh;
        const std::string key = "bench/" + name(i);
        const auto s0 = Clock::now();
        Upsert u(tr, slice(i, ips).dump());
        auto done = pump_until(
            gws,
            [&] {
                for (const auto& g : gws)
                    if (g.holds_endpoint(key, fresh)) return true;
                return false;
            },
            seconds(10));
        u.join();
        if (!done) throw std::runtime_error("an endpoint change was not programmed within 10 s");
        changed_lat.push_back(ms(*done - s0));
        pump_until(
            gws, [] { return false; }, milliseconds(20));
    }
    print_latencies("change -> programmed", changed_lat);

    // Node failure: a gateway that is not the leader stops without giving its Lease up.
    Gateway* victim = nullptr;
    Gateway* lead = nullptr;
    for (auto& g : gws)
        (g.ctl->leader() ? lead : victim) = &g;
    if (!lead || !victim) throw std::runtime_error("no leader among the three gateways");
    const size_t moving = victim->programmed();
    const size_t all = total();
    const uint64_t writes0 = lead->ctl->stats().status_writes;
    // A change of the live gateways makes the leader decide every EgressService again, in one batch
    // counted before its writes go out: the decisions alone, without the API server's answers.
    const uint64_t decided0 = lead->ctl->stats().decisions;
    const uint64_t every = a.services + a.creates;
    const auto k0 = Clock::now();
    victim->ctl->abandon();
    victim->running = false;
    std::optional<Clock::time_point> dead, decided, moved;
    while (!moved && Clock::now() - k0 < minutes(5)) {
        pump(gws);
        const auto now = Clock::now();
        const auto st = lead->ctl->stats();
        if (!dead && st.live_nodes == 2) dead = now;
        if (!decided && st.decisions >= decided0 + every) decided = now;
        if (dead && total() >= all) moved = now;
    }
    if (!dead) throw std::runtime_error("the leader did not see the stopped gateway dead within 5 minutes");
    if (!moved) throw std::runtime_error("the stopped gateway's Services were not all moved within 5 minutes");
    std::printf("node failure: stop -> leader sees it dead  %8.1f ms\n", ms(*dead - k0));
    if (decided)
        std::printf("node failure: dead -> all %llu EgressServices decided again  %8.1f ms\n",
                    static_cast<unsigned long long>(every), ms(*decided - *dead));
    std::printf("node failure: dead -> its %zu Services programmed elsewhere  %8.1f ms  (%llu status writes)\n", moving,
                ms(*moved - *dead), static_cast<unsigned long long>(lead->ctl->stats().status_writes - writes0));
    for (auto& g : gws)
        if (g.running) g.ctl->stop();
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parse(argc, argv);
    if (a.apiserver.empty()) {
        const char* root = std::getenv("EGW_SOURCE_ROOT");
        a.apiserver = std::string(root ? root : ".") + "/tests/apiserver/apiserver.py";
    }
    spdlog::set_level(spdlog::level::warn);
    auto quiet = spdlog::default_logger()->clone("k8s-bench");
    quiet->set_level(spdlog::level::warn);
    k8s::set_logger(quiet);

    char tmpl[] = "/tmp/egw-k8s-bench-XXXXXX";
    const char* dir = mkdtemp(tmpl);
    if (!dir) return 1;
    std::printf("seeding the test API server: %u EgressServices, %u Services, %u EndpointSlices, %u endpoints\n",
                a.services, a.services, a.services, a.services * a.endpoints);
    std::fflush(stdout);
    int rc = 0;
    try {
        Server server(a, dir);

        // What egwd's PolicyBuilder needs: two ports and the pod network.
        config::Config cfg = config::load_text(R"({
          "eal": {"vdevs": ["net_null0", "net_null1"]}, "workers": [1],
          "ports": [{"name": "pods", "device": "net_null0", "role": "inside", "addresses": ["10.255.255.1/24"]},
                    {"name": "ext", "device": "net_null1", "role": "outside", "addresses": ["192.0.2.1/24"]}],
          "cluster": {"pod_cidrs": ["10.0.0.0/9"]}, "node": {"name": "gw-1"},
          "state": {"source": "kubernetes"}})",
                                               "bench.json");
        if (a.gateways == 3) {
            three_gateways(a, server.url(), cfg);
            std::filesystem::remove_all(dir);
            return 0;
        }
        control::PolicyBuilder builder(cfg, {0, 1}, {{0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2}});

        k8s::Credentials creds;
        creds.server = server.url();
        creds.token = kToken;
        creds.source = "bench";
        k8s_source::ControllerOptions o;
        o.node_name = kNode;
        o.lease_namespace = kLeaseNs;
        o.election = a.external ? k8s_source::ElectionMode::external : k8s_source::ElectionMode::leader;
        o.pod_cidrs = cfg.cluster.pod_cidrs;
        o.retry_period = milliseconds(500);
        k8s_source::Controller ctl(creds, o);

        model::ServiceDelta delta;
        std::unique_ptr<dp::PolicySnapshot> snap;
        auto served = [&] {
            size_t n = 0;
            for (const auto& v : builder.views())
                n += v.programmed;
            return n;
        };

        auto cpu = [] {
            rusage u{};
            getrusage(RUSAGE_SELF, &u);
            return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
                   static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
        };
        const double cpu0 = cpu();
        const auto t0 = Clock::now();
        ctl.start();
        Clock::time_point synced{}, first_build{};
        double build_ms = 0;
        const size_t want = a.external && a.cold ? 0 : a.services;
        while (Clock::now() - t0 < minutes(10)) {
            ctl.wait(milliseconds(100));
            if (synced == Clock::time_point{} && ctl.stats().synced) synced = Clock::now();
            if (!ctl.poll(delta)) continue;
            auto b0 = Clock::now();
            snap = builder.apply(delta);
            build_ms = ms(Clock::now() - b0);
            if (first_build == Clock::time_point{}) first_build = Clock::now();
            if (served() >= want) break;
        }
        const auto programmed = Clock::now();
        const double cpu_ms = cpu() - cpu0;
        std::printf("start -> every kind listed (synced)   %8.1f ms\n", ms(synced - t0));
        std::printf("start -> first snapshot built         %8.1f ms\n", ms(first_build - t0));
        std::printf("start -> %zu Services programmed   %8.1f ms  (last build %.1f ms, %zu endpoints)\n", served(),
                    ms(programmed - t0), build_ms, [&] {
                        size_t n = 0;
                        for (const auto& v : builder.views())
                            n += v.state.endpoint_ipv4s.size();
                        return n;
                    }());
        std::printf("  egw's own CPU time until then        %8.1f ms (the rest is the test API server, in Python)\n",
                    cpu_ms);
        if (served() < want) throw std::runtime_error("not every Service was programmed within 10 minutes");
        auto st = ctl.stats();
        std::printf("leader: %s, status writes %llu, label writes %llu\n", st.leader ? "yes" : "no",
                    static_cast<unsigned long long>(st.status_writes),
                    static_cast<unsigned long long>(st.label_writes));

        // Endpoint changes: replace endpoint 0 of a random Service, wait for the snapshot.
        std::mt19937 rng(42);
        std::vector<double> lat, builds, polls;
        std::map<unsigned, unsigned> changed;
        k8s::Transport tr(creds);
        for (unsigned c = 0; c < a.changes; ++c) {
            unsigned i = rng() % a.services;
            std::vector<uint32_t> ips;
            // A different address from the one the previous change of this Service put there.
            const uint32_t fresh = endpoint_ip(i, 16 + changed[i]++ % 16);
            ips.push_back(fresh);
            for (unsigned j = 1; j < a.endpoints; ++j)
                ips.push_back(endpoint_ip(i, j));
            const std::string key = "bench/" + name(i);
            const std::string body = slice(i, ips).dump();
            const auto s0 = Clock::now();
            // The change is sent on its own thread: the data plane may hold it before the
            // server's answer to the write is back.
            k8s::Response r;
            Clock::time_point write_done{};
            std::thread writer([&] {
                r = tr.request("POST", "/_test/upsert", body, "application/json");
                write_done = Clock::now();
            });
            bool done = false;
            while (!done && Clock::now() - s0 < seconds(10)) {
                ctl.wait(milliseconds(50));
                const auto p0 = Clock::now();
                if (!ctl.poll(delta)) continue;
                const auto b0 = Clock::now();
                snap = builder.apply(delta);
                builds.push_back(ms(Clock::now() - b0));
                polls.push_back(ms(b0 - p0));
                if (const auto* v = builder.view(key))
                    done = std::binary_search(v->state.endpoint_ipv4s.begin(), v->state.endpoint_ipv4s.end(), fresh);
            }
            const auto seen = Clock::now();
            writer.join();
            if (r.status != 200) throw std::runtime_error("upsert failed: " + k8s::describe(r));
            if (!done) {
                for (const auto& rs : ctl.client().status())
                    std::fprintf(stderr, "  %s: watching %d events %llu rv %s failures %llu %s\n", rs.name.c_str(),
                                 rs.watching, static_cast<unsigned long long>(rs.events), rs.resource_version.c_str(),
                                 static_cast<unsigned long long>(rs.failures), rs.last_error.c_str());
                std::fprintf(stderr, "  change %u: write answered HTTP %ld after %.1f ms\n", c, r.status,
                             ms(write_done - s0));
                throw std::runtime_error("endpoint change not seen within 10 s");
            }
            lat.push_back(ms(seen - s0));
            std::this_thread::sleep_for(milliseconds(20));
        }
        if (!lat.empty())
            std::printf(
                "endpoint change -> snapshot (%zu changes)  p50 %.1f ms  p99 %.1f ms  max %.1f ms  "
                "(of which poll: p50 %.2f ms, p99 %.2f ms; building the snapshot: p50 %.2f ms, p99 %.2f ms)\n",
                lat.size(), percentile(lat, 0.5), percentile(lat, 0.99), *std::max_element(lat.begin(), lat.end()),
                percentile(polls, 0.5), percentile(polls, 0.99), percentile(builds, 0.5), percentile(builds, 0.99));
        ctl.stop();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "egw-k8s-bench: %s\n", e.what());
        rc = 1;
    }
    std::filesystem::remove_all(dir);
    return rc;
}
