// SPDX-License-Identifier: Apache-2.0
//
// The Daemon (daemon.h): sets up what egwd runs, runs the control loop, stops it in order.
#include "control/daemon/daemon.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <rte_cycles.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "config/reload.h"
#include "control/cli/frontends.h"
#include "control/dns/dns_name_resolver_watch.h"
#include "control/dns/resolver.h"
#include "control/firewall/firewall_state.h"
#include "control/neighbor/neighbor_resolver.h"
#include "control/policy/egress_qos_table.h"
#include "control/policy/policy_builder.h"
#include "control/policy/publisher.h"
#include "control/runtime/runtime.h"
#include "control/runtime/tx_stall.h"
#include "control/status/status_file.h"
#include "control/k8s_source/egress_ip_watch.h"
#include "control/k8s_source/source.h"
#include "control/manifests/manifest_dir.h"
#include "control/metrics/egress_firewall.h"
#include "control/metrics/exporter.h"
#include "control/metrics/kubernetes.h"
#include "control/metrics/sync.h"
#include "control/daemon/standby_ports.h"
#include "control/sync/transport.h"
#include "control/telemetry/commands.h"

namespace egw::control {
namespace {

using model::ServiceState;

// The publisher's NAT addresses as steering targets: a Service port of an ingress IP is left out
// of its block's rules, so the NIC's RSS spreads connections to it (control/runtime/steering.h).
std::map<uint32_t, ServicePorts> to_steering(const PolicyPublisher::NatAddresses& nat) {
    std::map<uint32_t, ServicePorts> out;
    for (const auto& [ip, ports] : nat) {
        ServicePorts& sp = out[ip];
        for (auto [proto, port] : ports)
            if (proto == IPPROTO_TCP || proto == IPPROTO_UDP)
                sp.push_back({proto == IPPROTO_TCP ? SteeredProto::tcp : SteeredProto::udp, port});
        std::sort(sp.begin(), sp.end());
        sp.erase(std::unique(sp.begin(), sp.end()), sp.end());
    }
    return out;
}

// Logs what changed in the evaluated Services, one line per Service and event, and records it in
// `known` (the states as last logged). Costs what changed, not what there is. The first sync
// (`first`: nothing known yet) logs those lines at debug and one summary at info, so 10,000
// Services at start make one line, not 20,000.
void log_changes(std::map<std::string, ServiceState>& known, const model::ServiceDelta& delta,
                 const PolicyBuilder& builder, bool first) {
    const auto info = first ? spdlog::level::debug : spdlog::level::info;
    const auto warn = first ? spdlog::level::debug : spdlog::level::warn;
    size_t programmed = 0, problems = 0, elsewhere = 0;
    for (const auto& s : delta.changed) {
        auto it = known.find(s.key);
        if (it != known.end() && it->second == s) continue;
        const auto* v = builder.view(s.key);
        std::string why = v && !v->problem.empty() ? v->problem : s.reason;
        if (it == known.end() || it->second.status_host != s.status_host || it->second.serve_here != s.serve_here)
            spdlog::log(info, "{}: status.host=\"{}\"{}{}", s.key, s.status_host, why.empty() ? "" : " (",
                        why.empty() ? "" : why + ")");
        if (v && v->programmed) {
            ++programmed;
            spdlog::log(info, "{}: translating {} endpoint(s) {} in VRF {}", s.key, s.endpoint_ipv4s.size(),
                        s.mode == model::Mode::network ? std::string("by masquerade")
                                                       : "to " + config::format_ipv4(s.ingress_ipv4.value_or(0)),
                        v->vrf);
        } else if (v && !v->problem.empty()) {
            ++problems;
            spdlog::log(warn, "{}: not programmed: {}", s.key, v->problem);
        } else {
            ++elsewhere;
        }
        known.insert_or_assign(s.key, s);
    }
    for (const auto& k : delta.removed)
        if (known.erase(k)) spdlog::info("{}: EgressService removed, its state is gone", k);
    if (first)
        spdlog::info(
            "first sync: {} EgressService(s): {} programmed here, {} not programmed for a problem{}, {} "
            "served elsewhere or not at all (each one at --log-level debug; `egwctl show services`)",
            programmed + problems + elsewhere, programmed, problems, problems ? " (warnings at debug)" : "", elsewhere);
}

}  // namespace

Daemon::Daemon(config::Config cfg, DaemonOptions opt)
    : cfg_(std::move(cfg)), opt_(std::move(opt)), self_{cfg_.node.name, cfg_.node.labels} {}

Daemon::~Daemon() {
    // The exporter goes before the source: unhook it first.
    if (k8s_) k8s_->set_serving_check(nullptr);
}

int Daemon::run(DaemonSignals signals) {
    try {
        setup();
        loop(signals);
        shutdown();
        return 0;
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return 1;
    }
}

void Daemon::setup() {
    rt_ = std::make_unique<Runtime>(cfg_);
    rt_->setup(opt_.mbufs);
    if (cfg_.state.source == config::StateSource::kubernetes)
        k8s_ = k8s_source::make_source(cfg_, opt_.kubeconfig, opt_.election);
    builder_ = std::make_unique<PolicyBuilder>(cfg_, rt_->port_ids(), rt_->port_macs());
    resolver_ = std::make_unique<NeighborResolver>(cfg_, *rt_);
    tx_stalls_ = std::make_unique<TxStallLog>();
    firewall_ = std::make_unique<firewall::EgressFirewallState>(static_cast<unsigned>(rt_->workers().size()));
    resolver_->install_static();
    exporter_ = std::make_unique<metrics::Exporter>(cfg_, *rt_);
    telemetry_ = std::make_unique<telemetry::Commands>(*exporter_);
    if (k8s_) {
        // k8s_ outlives the exporter (made first), and both status() and stats() copy under the
        // client's and controller's own locks: safe from the metrics thread.
        k8s_source::Controller* source = k8s_.get();
        exporter_->add_families(
            [source](metrics::Writer& w) { metrics::write_kubernetes(w, source->client().status(), source->stats()); });
        // Liveness means serving: the liveness Lease and /readyz follow the API and the data plane.
        metrics::Exporter* exporter = exporter_.get();
        source->set_serving_check([exporter] { return exporter->serving_problems(); });
        exporter_->add_readiness([source] { return source->serving_problems(); });
    }
    // The firewall state outlives the exporter (made first) and copies its counts under its lock.
    exporter_->add_families([fw = firewall_.get()](metrics::Writer& w) {
        std::vector<metrics::FirewallNamespaceCounts> counts;
        for (const auto& v : fw->views())
            counts.push_back({v.namespace_, v.denied, v.allowed, v.rules.size()});
        metrics::write_egress_firewall(w, counts);
    });
    // Before the exporter starts: its families are registered with it.
    start_sync();
    exporter_->start();
    // Replies to the NAT addresses are steered to their owners where the NIC can (the rules of a
    // new address go in before the first session can use it; software hand-off covers the rest).
    publisher_ = std::make_unique<PolicyPublisher>(
        rt_->shared(), PolicyPublisher::Hooks{[this](const PolicyPublisher::NatAddresses& nat) {
                                                  rt_->steering().update(to_steering(nat));
                                              },
                                              [this](double seconds) { exporter_->published(*builder_, seconds); }});
    manifests_ = std::make_unique<manifests::ManifestDir>(k8s_ ? std::string() : cfg_.state.path);

    if (k8s_) k8s_->start();
    reconcile(true);
    rt_->start_ports();
    rt_->launch_workers();
    spdlog::info("egwd running: node {}, {} port(s), {}", cfg_.node.name, rt_->ports().size(),
                 k8s_ ? "Kubernetes API " + k8s_->client().transport().credentials().server + ", election " +
                            k8s_source::to_string(k8s_->options().election)
                      : "manifests from " + cfg_.state.path);

    std::function<nlohmann::json()> k8s_view;
    if (k8s_) k8s_view = [this] { return k8s_source::describe(*k8s_); };
    std::function<nlohmann::json()> sync_view;
    if (sync_) sync_view = [this] { return sync_json(sync_->stats()); };
    cli::CliHost host{cfg_,
                      *rt_,
                      *builder_,
                      *resolver_,
                      k8s_ ? &k8s_->objects() : &manifests_->objects(),
                      k8s_view,
                      sync_view,
                      [this] { return reload(); }};
    host.egress_firewall = [this] { return firewall::to_json(*firewall_, cfg_.policy.egress_firewall_icmp); };
    cli_ = std::make_unique<cli::Frontends>(std::move(host), opt_.interactive);
}

// Only what changed goes to the builder and the log: with 10,000 EgressServices, copying or
// comparing all of them would cost more than the change itself (docs/performance.md).
void Daemon::reconcile(bool force) {
    model::ServiceDelta delta;
    if (k8s_) {
        const bool firewall_changed = refresh_firewall();
        // Nothing but the ports and routes until every kind has been listed once.
        if (k8s_->poll(delta)) force = true;
        if (!force && !firewall_changed) return;
    } else {
        auto scan = manifests_->scan();
        for (const auto& e : scan.errors)
            spdlog::error("manifest {}", e);
        // A dnsName's addresses moving is a change of the firewall's rules as much as a file's.
        if (!scan.changed && !force && !firewall_dns_moved()) return;
        delta = model::diff(last_states_,
                            model::evaluate_single_gateway(manifests_->objects(), self_, cfg_.cluster.pod_cidrs));
        // EgressQoS: the table follows the objects and the pods' labels and addresses; each
        // object is logged when it changes.
        const auto& qos = manifests_->egress_qoses();
        const model::EgressQosSelection sel = model::select_egress_qos(qos);
        if (qos != last_egress_qos_) {
            for (const auto& [ns, q] : sel.by_namespace)
                spdlog::info("EgressQoS {}/{}: {} rule(s) applied", ns, q->meta.name, q->rules.size());
            for (const auto& line : sel.ignored)
                spdlog::warn("EgressQoS {}", line);
            last_egress_qos_ = qos;
        }
        builder_->set_egress_qos(build_egress_qos_table(sel, manifests_->objects().pods));
        builder_->set_egress_qos_views(egress_qos_views(qos, manifests_->objects().pods));
        refresh_firewall();
    }
    publisher_->publish(builder_->apply(delta));
    firewall_->collect();
    // The first delta with Services in it is the first sync (before it, with the kubernetes
    // source, only ports and routes are published).
    bool first = !first_sync_logged_ && !delta.changed.empty();
    log_changes(last_states_, delta, *builder_, first);
    first_sync_logged_ = first_sync_logged_ || first;
}

// All of the file or nothing, see config/reload.h for what may change while egwd runs.
cli::Reply Daemon::reload() {
    nlohmann::json detail = {
        {"file", cfg_.file}, {"applied", nlohmann::json::array()}, {"restart_needed", nlohmann::json::array()}};
    config::Config next;
    try {
        next = config::load_file(cfg_.file);
    } catch (const std::exception& e) {
        spdlog::error("reload refused: {}; egwd keeps running on the configuration it has", e.what());
        detail["error"] = e.what();
        return {false, std::string("reload refused: ") + e.what() + "\negwd keeps running on the configuration it has.",
                detail};
    }
    auto changes = config::compare_for_reload(cfg_, next);
    detail["restart_needed"] = changes.restart;
    if (!changes.restart.empty()) {
        std::string why = fmt::format("only read when egwd starts: {}", fmt::join(changes.restart, ", "));
        spdlog::error("reload refused: {} changes settings {}; nothing was applied", cfg_.file, why);
        detail["error"] = why;
        return {false,
                "reload refused: " + cfg_.file + " changes settings " + why +
                    ".\nNothing was applied; restart egwd to change them.",
                detail};
    }
    if (changes.live.empty()) {
        spdlog::info("reload: {} has no change", cfg_.file);
        return cli::ok("reload: " + cfg_.file + " has no change.", detail);
    }
    if (std::string err = resolver_->reload_static(next.neighbors); !err.empty()) {
        spdlog::error("reload refused: {}; nothing was applied", err);
        detail["error"] = err;
        return {false, "reload refused: " + err + ".\nNothing was applied.", detail};
    }
    config::apply_live(cfg_, next);
    self_.labels = cfg_.node.labels;
    if (k8s_) {
        next_firewall_look_ = {};  // policy.egress_firewall may have changed: compile again
        refresh_firewall();
        publisher_->publish(builder_->apply(model::ServiceDelta{}));  // the Services stay; routes and actions move
        firewall_->collect();
    } else
        reconcile(true);  // node labels and pod CIDRs feed the files source's rules
    detail["applied"] = changes.live;
    detail["generation"] = builder_->generation();
    const std::string applied = fmt::format("{}", fmt::join(changes.live, ", "));
    spdlog::info("configuration reloaded from {}: {} (policy generation {})", cfg_.file, applied,
                 builder_->generation());
    return cli::ok(fmt::format("reload: applied {} (policy generation {}).", applied, builder_->generation()), detail);
}

bool Daemon::refresh_firewall() {
    model::ObjectSet from_api;
    const model::ObjectSet* source = &from_api;
    if (k8s_) {
        k8s_source::EgressIPWatch* watch = k8s_->egress_ips();
        if (!watch) return false;
        // EgressFirewalls and pods move the counter; nodes (nodeSelector rules) are looked at again
        // every few seconds.
        const auto now = std::chrono::steady_clock::now();
        const uint64_t changes = watch->firewall_changes();
        if (changes == firewall_changes_seen_ && now < next_firewall_look_ && !firewall_dns_moved()) return false;
        firewall_changes_seen_ = changes;
        next_firewall_look_ = now + std::chrono::seconds(5);
        watch->copy_firewall_objects(from_api);
        if (from_api.egress_firewalls.empty() && !firewall_->policy() && firewall_->views().empty()) return false;
        k8s_->client().cache().read([&](const model::ObjectSet& objs) { from_api.nodes = objs.nodes; });
    } else {
        source = &manifests_->objects();
    }
    const model::ObjectSet& objects = *source;
    const firewall::DnsAnswers answers = firewall_dns_answers(objects);
    if (!firewall_->update(objects, answers, cfg_.policy.enforce_egress_firewall(cfg_.state.source),
                           cfg_.policy.egress_firewall_icmp)) {
        if (std::string err = firewall_->last_error(); !err.empty() && err != firewall_error_logged_)
            spdlog::error("EgressFirewall not applied, the rules in force stay: {}", err);
        firewall_error_logged_ = firewall_->last_error();
        return false;
    }
    builder_->set_egress_firewall(firewall_->policy());
    firewall_error_logged_.clear();
    std::map<std::string, std::string> said;
    for (const auto& v : firewall_->views()) {
        // What is said of an object, without the build time (which differs every time): a line is
        // logged when this changed.
        std::string what = fmt::format(
            "EgressFirewall {}/default: {} rule(s) {} to {} pod address(es)", v.namespace_, v.rules.size(),
            cfg_.policy.enforce_egress_firewall(cfg_.state.source) ? "applied"
                                                                   : "read, not enforced (policy.egress_firewall off)",
            v.pod_ips);
        for (const std::string& p : v.problems) {
            what += "; not applied: ";
            what += p;
        }
        auto it = firewall_logged_.find(v.namespace_);
        if (it == firewall_logged_.end() || it->second != what)
            spdlog::info("{} (build {:.1f} ms)", what, firewall_->last_build_seconds() * 1e3);
        said[v.namespace_] = std::move(what);
    }
    for (const auto& [ns, what] : firewall_logged_)
        if (!said.count(ns))
            spdlog::info("EgressFirewall {}/default: removed, its namespace's flows are not filtered", ns);
    firewall_logged_ = std::move(said);
    for (const std::string& line : firewall_->ignored())
        if (firewall_ignored_logged_.insert(line).second) spdlog::warn("EgressFirewall {}", line);
    return true;
}

bool Daemon::firewall_dns_moved() const {
    return (dns_ && dns_->generation() != dns_generation_seen_) ||
           (dns_watch_ && dns_watch_->generation() != dns_watch_generation_seen_);
}

std::map<std::string, std::vector<net::IpAddr>> Daemon::firewall_dns_answers(const model::ObjectSet& objects) {
    std::set<std::string> exact;
    bool wildcard = false;
    for (const auto& [key, fw] : objects.egress_firewalls)
        for (const auto& rule : fw.rules)
            if (const auto* name = std::get_if<model::FirewallDnsName>(&rule.to)) {
                if (name->wildcard)
                    wildcard = true;
                else
                    exact.insert(name->name);
            }
    std::map<std::string, std::vector<net::IpAddr>> answers;
    // The resolver starts with the first name and keeps running after the last one goes: a name
    // that comes back is then asked at once, and an idle resolver costs a sleeping thread.
    if (!exact.empty() && !dns_ && dns_error_logged_.empty()) {
        try {
            dns::ResolverOptions o;
            o.servers = cfg_.policy.dns_servers;
            dns_ = std::make_unique<dns::Resolver>(std::move(o));
            spdlog::info("EgressFirewall: DNS resolver started ({})",
                         cfg_.policy.dns_servers.empty() ? std::string("servers of /etc/resolv.conf")
                                                         : fmt::format("{}", fmt::join(cfg_.policy.dns_servers, ", ")));
        } catch (const std::exception& e) {
            // Said once: until egwd restarts, dnsName rules match nothing (and say so per rule).
            dns_error_logged_ = e.what();
            spdlog::error("EgressFirewall: cannot start the DNS resolver, dnsName rules match nothing: {}", e.what());
        }
    }
    if (dns_) {
        std::vector<std::string> names(exact.begin(), exact.end());
        if (names != dns_names_) {
            dns_->set_names(names);
            dns_names_ = std::move(names);
        }
        // The generation first: a change after it is seen by the next look, never lost.
        dns_generation_seen_ = dns_->generation();
        for (auto& [name, status] : dns_->snapshot()) {
            std::vector<net::IpAddr>& addrs = answers[name];
            for (const auto& a : status.addresses)
                addrs.push_back(a.address);
        }
    }
    // Wildcards: only the cluster's DNSNameResolver objects know what they matched.
    if (wildcard && !dns_watch_ && k8s_) {
        dns_watch_ = std::make_unique<dns::DnsNameResolverWatch>(k8s_->client().shared_transport());
        dns_watch_->start();
        spdlog::info("EgressFirewall: watching DNSNameResolver objects for wildcard dnsName rules");
    }
    if (dns_watch_) {
        dns_watch_generation_seen_ = dns_watch_->generation();
        for (auto& [name, addrs] : dns_watch_->addresses()) {
            std::vector<net::IpAddr>& into = answers[name];
            into.insert(into.end(), addrs.begin(), addrs.end());
        }
    }
    return answers;
}

void Daemon::write_status(bool running, bool final_write) {
    StatusInputs in{*rt_, *builder_, *resolver_, running, final_write};
    nlohmann::json doc = collect_status(in);
    // What `show egressips` shows: the addresses assigned to this gateway, and on the leader the
    // ones it cannot assign (docs/kubernetes.md, "EgressIP assignment").
    if (k8s_) doc["egress_ips"] = k8s_source::describe(*k8s_)["egress_ips"];
    // Where egw owns policy (the files source), this is where an EgressFirewall's status is told.
    doc["egress_firewall"] = firewall::to_json(*firewall_, cfg_.policy.egress_firewall_icmp);
    if (!write_status_file(opt_.status_file, doc) && !final_write)
        spdlog::warn("cannot write status file {}", opt_.status_file);
}

void Daemon::loop(DaemonSignals signals) {
    using clock = std::chrono::steady_clock;
    auto start = clock::now();
    auto next_scan = start, next_tick = start, next_status = start;
    while (!*signals.stop) {
        auto now = clock::now();
        const auto* snap = publisher_->current();
        resolver_->poll(*snap);
        if (now >= next_tick) {
            resolver_->tick(*snap);
            exporter_->tick(*resolver_);
            tx_stalls_->check(rt_->workers(), rt_->ports());
            next_tick = now + std::chrono::milliseconds(100);
        }
        if (standby_ports_) standby_ports_->poll(now);
        if (sync_ && sync_->take_bulk_request()) {
            // A peer that started or came back asks for this gateway's sessions.
            std::string error;
            auto dump = session_dump(rt_->workers(), rt_->shared(), rte_rdtsc(), rt_->tsc_hz(), error);
            if (!error.empty()) spdlog::warn("session sync: bulk dump incomplete: {}", error);
            spdlog::info("session sync: a peer asked for a dump: sending {} session(s)", dump.size());
            sync_->queue_bulk(std::move(dump));
        }
        if (*signals.reload) {
            *signals.reload = 0;
            reload();  // it logs its outcome
        }
        if (now >= next_scan) {
            reconcile(false);
            // The kubernetes source is event driven: look at it on every pass.
            next_scan = now + std::chrono::milliseconds(k8s_ ? 0 : cfg_.state.poll_ms);
        }
        if (!opt_.status_file.empty() && now >= next_status) {
            write_status(true, false);
            next_status = now + std::chrono::milliseconds(500);
        }
        if (!cli_->poll()) break;  // `quit` on the console
        if (opt_.duration > 0 && std::chrono::duration<double>(now - start).count() >= opt_.duration) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

// Session sync (docs/architecture.md, "Session sync"): a ring per worker, the sync thread that
// drains them to the peers and keeps what the peers send in its standby table, and the standby
// sessions' NAT ports reserved in the workers.
void Daemon::start_sync() {
    const config::SyncConfig& sc = cfg_.sync;
    if (!sc.enabled) return;
    sync::SyncServiceConfig c;
    c.self = sc.id;
    c.listen_host = sc.host;
    c.listen_port = sc.port;
    c.key_file = sc.key_file;
    c.mtu = sc.mtu;
    for (const config::SyncPeerConfig& p : sc.peers)
        c.peers.push_back({p.id, p.host, p.port});
    c.tsc = [] { return rte_rdtsc(); };
    c.tsc_hz = rt_->tsc_hz();
    c.standby_max_sessions = sc.standby_max_sessions;
    std::vector<dp::SyncEventRing*> rings;
    for (size_t i = 0; i < rt_->workers().size(); ++i) {
        sync_rings_.push_back(std::make_unique<dp::SyncEventRing>(kSyncRingEvents));
        rings.push_back(sync_rings_.back().get());
    }
    try {
        sync_ = std::make_unique<sync::SyncService>(std::move(c), rings);
    } catch (const std::exception& e) {
        throw std::runtime_error(cfg_.file + ": " + e.what());
    }
    for (size_t i = 0; i < rings.size(); ++i)
        rt_->workers()[i]->sync_events = rings[i];
    standby_ports_ = std::make_unique<StandbyPorts>(rt_->shared(), *sync_, rt_->workers());
    sync::SyncService* service = sync_.get();
    exporter_->add_families([service](metrics::Writer& w) { metrics::write_sync(w, service->stats()); });
    sync_->start();
    spdlog::info("session sync: gateway {} on {}, {} peer(s), events of {} worker(s)", sc.id,
                 config::format_host_port(sc.host, sc.port), sc.peers.size(), rings.size());
}

void Daemon::shutdown() {
    spdlog::info("stopping");
    if (k8s_) k8s_->stop();  // the liveness and leader Leases are given up first: Services move at once
    exporter_->stop();
    standby_ports_.reset();  // while the workers still pass quiescent states
    rt_->stop_workers();
    if (sync_) sync_->stop();
    if (!opt_.status_file.empty()) write_status(false, true);
    rt_->stop();
    publisher_->retire();
}

}  // namespace egw::control
