// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/exporter.h"

#include <rte_ethdev.h>
#include <rte_version.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "control/neighbor/neighbor_resolver.h"
#include "control/policy/policy_builder.h"
#include "control/runtime/runtime.h"
#include "control/runtime/tx_stall.h"

#ifndef EGW_VERSION
#define EGW_VERSION "unknown"
#endif

namespace egw::metrics {

namespace {

// Publication takes microseconds with idle workers and up to a few milliseconds when a worker is
// in a long burst; seconds would mean something is badly wrong.
std::vector<double> publish_buckets() {
    return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

constexpr double kStallSeconds = 5.0;
// A worker that has not advanced for this long does not serve: its gateway gives its Services up.
constexpr double kServingStallSeconds = 1.0;

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string dpdk_version() {
    std::string v = rte_version();
    const std::string prefix = "DPDK ";
    return v.rfind(prefix, 0) == 0 ? v.substr(prefix.size()) : v;
}

}  // namespace

Exporter::Exporter(const config::Config& cfg, control::Runtime& rt)
    : cfg_(cfg),
      workers_(rt.workers()),
      publish_duration_(publish_buckets()),
      stall_(kStallSeconds),
      serving_stall_(kServingStallSeconds) {
    for (const auto& p : rt.ports()) {
        const config::PortConfig* pc = cfg.find_port(p.name);
        ports_.push_back(PortEntry{p.name, p.device, pc ? config::to_string(pc->role) : "", pc ? pc->vrf : "", p.id});
    }
    for (const auto& p : rt.vlan_ports()) {
        const config::PortConfig* pc = cfg.find_port(p.name);
        VlanReading v;
        v.name = p.name;
        v.parent = p.parent;
        v.vlan = p.vlan;
        v.id = p.id;
        v.role = pc ? config::to_string(pc->role) : "";
        v.vrf = pc ? pc->vrf : "";
        vlans_.push_back(std::move(v));
    }
    process_ = ProcessInfo{EGW_VERSION, dpdk_version(), unix_now(), rt.tsc_hz()};

    // Before the first publication the endpoints still answer, with generation 0.
    auto v = std::make_shared<ControlView>();
    v->publish_duration = publish_duration_;
    v->ports = ports_;
    for (size_t i = 0; i < workers_.size(); ++i)
        v->workers.push_back(WorkerEntry{static_cast<unsigned>(i), cfg.workers[i]});
    v->nat_ports = uint32_t{cfg.sessions.port_max} - cfg.sessions.port_min + 1;
    v->max_sessions = cfg.sessions.max_sessions;
    v->max_sessions_ipv6 = cfg.sessions.max_sessions_ipv6;
    v->node = cfg.node.name;
    v->default_action = config::to_string(cfg.default_action);
    box_.publish(std::move(v));
}

Exporter::~Exporter() {
    stop();
}

void Exporter::published(const control::PolicyBuilder& builder, double seconds) {
    publish_duration_.observe(seconds);
    auto base = view();
    auto v = std::make_shared<ControlView>();
    v->generation = builder.generation();
    v->last_publish_seconds = seconds;
    v->last_publish_unix = unix_now();
    v->publish_duration = publish_duration_;
    v->ports = base->ports;
    v->workers = base->workers;
    v->nat_ports = base->nat_ports;
    v->max_sessions = base->max_sessions;
    v->max_sessions_ipv6 = base->max_sessions_ipv6;
    v->node = base->node;
    v->default_action = config::to_string(cfg_.default_action);  // a reload may have changed it
    for (const control::EgressQosView& q : builder.egress_qos_views()) {
        const size_t slash = q.key.find('/');
        v->egress_qos.push_back(
            {q.key.substr(0, slash), q.status == control::kEgressQosApplied, q.rules.size(), q.pods});
    }

    // Services, with baselines for ids that changed hands (see state.h).
    std::set<uint32_t> live;
    for (const control::ServiceView& sv : builder.views()) {
        const auto& s = sv.state;
        ServiceEntry e;
        e.id = sv.id;
        e.key = s.key;
        size_t slash = s.key.find('/');
        e.ns = slash == std::string::npos ? "" : s.key.substr(0, slash);
        e.name = slash == std::string::npos ? s.key : s.key.substr(slash + 1);
        e.source_ip_by = model::to_string(s.mode);
        e.status_host = s.status_host;
        e.reason = sv.problem.empty() ? s.reason : sv.problem;
        e.network = s.network;
        e.vrf = sv.vrf;
        e.ingress_ip = s.ingress_ipv4 ? format_ipv4(*s.ingress_ipv4) : "";
        e.ingress_ipv6 = s.ingress_ipv6 ? net::to_string(*s.ingress_ipv6) : "";
        e.endpoints = s.endpoint_ipv4s.size();
        e.endpoints_ipv6 = s.endpoint_ipv6s.size();
        e.ipv6_translated = sv.programmed6;
        e.serve_here = s.serve_here;
        e.programmed = sv.programmed;
        if (sv.programmed && s.mode == model::Mode::load_balancer_ip && s.ingress_ipv4) e.nat_address = *s.ingress_ipv4;
        // As the policy's nat_ip6: the IPv6 ingress IP, when its IPv6 endpoints translate to it.
        if (sv.programmed6 && s.mode == model::Mode::load_balancer_ip && s.ingress_ipv6)
            e.nat_address6 = *s.ingress_ipv6;
        if (e.id != 0) {
            live.insert(e.id);
            auto it = owners_.find(e.id);
            if (it == owners_.end())
                it = owners_.emplace(e.id, std::make_pair(e.key, ServiceCounters{})).first;
            else if (it->second.first != e.key)
                it->second = {e.key, sum_service(workers_, e.id)};
            e.baseline = it->second.second;
        }
        v->services.push_back(std::move(e));
    }
    std::sort(v->services.begin(), v->services.end(),
              [](const ServiceEntry& a, const ServiceEntry& b) { return a.key < b.key; });
    // A released id keeps its owner's key until reused: the next owner then gets a baseline.

    // NAT addresses: every programmed ingress IP and every outside port's masquerade address, of
    // each family; a Service's sessions of one family count on that family's addresses only.
    std::map<net::IpAddr, NatAddressEntry> nat;
    auto ingress = [&](const net::IpAddr& ip, uint32_t id) {
        auto& a = nat[ip];
        a.ip = ip;
        if (a.kind.empty()) a.kind = "ingress_ip";
        a.service_ids.push_back(id);
    };
    for (const ServiceEntry& e : v->services) {
        if (e.nat_address) ingress(net::IpAddr::from_v4(e.nat_address), e.id);
        if (e.nat_address6) ingress(*e.nat_address6, e.id);
    }
    // A port's first address of the family, as the data plane masquerades to (addrs[0], addrs6[0]).
    auto masquerade_address = [&](const config::PortConfig& p, net::Family f) -> std::optional<net::IpAddr> {
        for (const auto& a : p.addresses)
            if (a.addr.family() == f) return a.addr;
        return std::nullopt;
    };
    for (const auto& p : cfg_.ports)
        if (p.role == config::PortRole::outside)
            for (net::Family f : {net::Family::v4, net::Family::v6})
                if (auto ip = masquerade_address(p, f)) {
                    auto& a = nat[*ip];
                    a.ip = *ip;
                    a.kind = "port";
                }
    // Masquerading traffic leaves through whichever outside port routes its destination: in its
    // VRF, falling through to the default table when the VRF has no default route of the family.
    // Attribute its sessions only when that can be a single port.
    auto candidates = [&](const std::string& vrf, net::Family f) {
        std::set<net::IpAddr> out;
        auto add = [&](const std::string& name) {
            for (const auto& p : cfg_.ports)
                if (p.role == config::PortRole::outside && p.vrf == name)
                    if (auto ip = masquerade_address(p, f)) out.insert(*ip);
        };
        add(vrf);
        bool has_default_route = std::any_of(cfg_.routes.begin(), cfg_.routes.end(), [&](const config::RouteConfig& r) {
            return r.vrf == vrf && r.prefix.family() == f && r.prefix.len == 0;
        });
        if (vrf != cfg_.vrfs.front().name && !has_default_route) add(cfg_.vrfs.front().name);
        return out;
    };
    auto attribute = [&](uint32_t id, const std::string& vrf, net::Family f) {
        auto c = candidates(vrf, f);
        if (c.size() == 1)
            nat[*c.begin()].service_ids.push_back(id);
        else
            for (const net::IpAddr& ip : c)
                nat[ip].exact = false;
    };
    for (net::Family f : {net::Family::v4, net::Family::v6}) {
        if (cfg_.default_action == config::DefaultAction::masquerade)
            attribute(dp::kDefaultPolicyId, cfg_.vrfs.front().name, f);
        for (const ServiceEntry& e : v->services) {
            if (e.id == 0) continue;
            const bool masquerading =
                f == net::Family::v4 ? e.programmed && !e.nat_address : e.ipv6_translated && !e.nat_address6;
            if (masquerading) attribute(e.id, e.vrf, f);
        }
    }
    for (auto& [ip, a] : nat)
        v->nat_addresses.push_back(std::move(a));

    box_.publish(std::move(v));
}

void Exporter::tick(const control::NeighborResolver& resolver) {
    neighbor_held_dropped_.store(resolver.held_dropped(), std::memory_order_relaxed);
    arp_.store(resolver);
    last_tick_.store(now(), std::memory_order_relaxed);
}

double Exporter::now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Exporter::add_families(std::function<void(Writer&)> write) {
    std::lock_guard lock(extra_mu_);
    extra_.push_back(std::move(write));
}

Readings Exporter::read(const ControlView& v) const {
    return read_counters(v, workers_, neighbor_held_dropped_.load(std::memory_order_relaxed));
}

std::vector<PortReading> Exporter::read_ports(const ControlView& v) const {
    std::lock_guard lock(ethdev_mu_);
    std::vector<PortReading> out;
    for (const PortEntry& p : v.ports) {
        PortReading r;
        rte_eth_stats st{};
        if (rte_eth_stats_get(p.id, &st) == 0) {
            r.ok = true;
            r.rx_packets = st.ipackets;
            r.tx_packets = st.opackets;
            r.rx_bytes = st.ibytes;
            r.tx_bytes = st.obytes;
            r.rx_missed = st.imissed;
            r.rx_errors = st.ierrors;
            r.tx_errors = st.oerrors;
            r.rx_nombuf = st.rx_nombuf;
        }
        rte_eth_link link{};
        if (rte_eth_link_get_nowait(p.id, &link) == 0) r.link_up = link.link_status == RTE_ETH_LINK_UP;
        control::PortTx tx = control::read_port_tx(workers_, p.id);
        r.tx_refused = tx.refused;
        r.tx_stalls = tx.stalls;
        r.tx_stalled_queues = tx.stalled_queues;
        out.push_back(r);
    }
    return out;
}

std::string Exporter::metrics_text(std::string& error) const {
    auto v = view();
    Readings r = read(*v);
    std::string out;
    out.reserve(16384);
    Writer w(out);
    write_metrics(w, *v, r, read_ports(*v), process_);
    write_arp(w, arp_.load());
    write_vlans(w, read_vlans());
    write_egress_qos(w, v->egress_qos);
    {
        std::lock_guard lock(extra_mu_);
        for (const auto& f : extra_)
            f(w);
    }
    error = w.error();
    return out;
}

std::vector<VlanReading> Exporter::read_vlans() const {
    std::vector<VlanReading> out = vlans_;
    for (VlanReading& v : out) {
        for (const dp::Worker* w : workers_) {
            v.rx_packets += load_counter(w->counters.vlan_rx_packets[v.id]);
            v.tx_packets += load_counter(w->counters.vlan_tx_packets[v.id]);
        }
        v.tx_refused = control::read_port_tx(workers_, v.id).refused;
    }
    return out;
}

std::string Exporter::readiness() const {
    auto v = view();
    ReadinessInputs in;
    in.generation = v->generation;
    auto ports = read_ports(*v);
    for (size_t i = 0; i < v->ports.size(); ++i)
        in.ports.emplace_back(v->ports[i].name, ports[i].link_up);
    for (const dp::Worker* w : workers_)
        in.worker_iterations.push_back(load_counter(w->counters.iterations));
    std::string out = readiness_problems(in);
    std::vector<std::function<std::string()>> checks;
    {
        std::lock_guard lock(extra_mu_);
        checks = readiness_checks_;
    }
    for (const auto& check : checks) {
        // One line per reason, each once (a port without link may be reported twice).
        std::string more = check();
        size_t start = 0;
        while (start < more.size()) {
            size_t end = more.find('\n', start);
            if (end == std::string::npos) end = more.size();
            std::string line = more.substr(start, end - start) + "\n";
            if (end > start && out.find(line) == std::string::npos) out += line;
            start = end + 1;
        }
    }
    return out;
}

void Exporter::add_readiness(std::function<std::string()> check) {
    std::lock_guard lock(extra_mu_);
    readiness_checks_.push_back(std::move(check));
}

std::string Exporter::serving_problems() const {
    std::vector<uint64_t> iterations;
    for (const dp::Worker* w : workers_)
        iterations.push_back(load_counter(w->counters.iterations));
    std::string out;
    for (size_t i = 0; i < iterations.size(); ++i)
        if (iterations[i] == 0) out += "worker " + std::to_string(i) + " has not started\n";
    {
        const double t = now();
        std::lock_guard lock(health_mu_);
        serving_stall_.sample_workers(t, iterations);
        out += serving_stall_.problems(t);
    }
    std::lock_guard lock(ethdev_mu_);
    for (const PortEntry& p : ports_) {
        if (p.role != "outside") continue;
        rte_eth_link link{};
        if (rte_eth_link_get_nowait(p.id, &link) != 0 || link.link_status != RTE_ETH_LINK_UP)
            out += "port " + p.name + ": link down\n";
    }
    return out;
}

void Exporter::sample_health() const {
    std::vector<uint64_t> iterations;
    for (const dp::Worker* w : workers_)
        iterations.push_back(load_counter(w->counters.iterations));
    double t = now();
    std::lock_guard lock(health_mu_);
    stall_.sample_workers(t, iterations);
    double tick = last_tick_.load(std::memory_order_relaxed);
    if (tick >= 0) stall_.control_tick(tick);
}

std::string Exporter::startup() const {
    std::vector<uint64_t> iterations;
    for (const dp::Worker* w : workers_)
        iterations.push_back(load_counter(w->counters.iterations));
    return startup_problems(iterations, last_tick_.load(std::memory_order_relaxed) >= 0);
}

std::string Exporter::liveness() const {
    sample_health();  // a fresh sample, so a probe never judges stale data
    std::lock_guard lock(health_mu_);
    return stall_.problems(now());
}

HttpResponse Exporter::handle(const std::string& path) const {
    if (path == "/metrics") {
        std::string error;
        std::string text = metrics_text(error);
        if (!error.empty()) {
            spdlog::error("metrics: exposition error: {}", error);
            return HttpResponse{500, "text/plain; charset=utf-8", "exposition error: " + error + "\n"};
        }
        return HttpResponse{200, std::string(kContentType), std::move(text)};
    }
    if (path == "/livez" || path == "/readyz" || path == "/startz") {
        std::string problems = path == "/livez" ? liveness() : path == "/readyz" ? readiness() : startup();
        if (problems.empty()) return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
        return HttpResponse{503, "text/plain; charset=utf-8", problems};
    }
    if (path == "/")
        return HttpResponse{200, "text/plain; charset=utf-8",
                            "egwd " + process_.version + ": /metrics (Prometheus), /startz, /livez, /readyz\n"};
    return HttpResponse{404, "text/plain; charset=utf-8", "not found; try /metrics, /startz, /livez or /readyz\n"};
}

void Exporter::start() {
    if (!cfg_.metrics.enabled || server_) return;
    // The probes are answered on the server's event loop; /metrics, which takes long with many
    // Services, on its scrape thread, so a scrape never delays a probe.
    server_ = std::make_unique<HttpServer>([this](const std::string& path) { return handle(path); },
                                           [this] { sample_health(); }, std::vector<std::string>{"/metrics"});
    std::string where = config::format_listen(cfg_.metrics);
    std::string err = server_->start(cfg_.metrics.host, cfg_.metrics.port);
    if (!err.empty()) {
        spdlog::error("metrics: cannot listen on {}: {}; going on without /metrics, /livez and /readyz", where, err);
        server_.reset();
        return;
    }
    spdlog::info("metrics: /metrics, /startz, /livez and /readyz on http://{}", where);
}

void Exporter::stop() {
    if (server_) {
        server_->stop();
        server_.reset();
    }
}

}  // namespace egw::metrics
