// SPDX-License-Identifier: Apache-2.0
//
// egwd: the egress gateway daemon. The main lcore runs this control loop; worker lcores run the
// data plane (dataplane/, stages.h).
//
//   egwd -c FILE [-i] [--status-file PATH] [--log-level LEVEL] [--log-format text|json] [--mbufs N]
//        [--duration S] [--kubeconfig FILE] [--election leader|external]
//   egwd --check-config FILE | --version | --help
//   egwd EAL-ARGS... -- -c FILE ...          (EAL arguments passed through unchanged)
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_version.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "config/config.h"
#include "config/reload.h"
#include "control/cli/frontends.h"
#include "control/daemon/neighbor_resolver.h"
#include "control/daemon/policy_builder.h"
#include "control/daemon/runtime.h"
#include "control/daemon/status_file.h"
#include "control/election/source.h"
#include "control/manifests/manifest_dir.h"
#include "control/metrics/exporter.h"
#include "control/metrics/kubernetes.h"
#include "control/model/rules.h"
#include "control/telemetry/commands.h"
#include "dataplane/publish.h"

#ifndef EGW_VERSION
#define EGW_VERSION "unknown"
#endif

namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_reload = 0;

void on_signal(int) { g_stop = 1; }
void on_reload_signal(int) { g_reload = 1; }

struct Options {
    std::string config;
    std::string check_config;
    std::string status_file;
    std::string log_level = "info";
    std::string log_format = "text";
    unsigned mbufs = 0;
    double duration = 0;
    bool interactive = false;
    std::string kubeconfig;                         // kubernetes source: overrides state.kubeconfig
    std::optional<egw::config::Election> election;  // kubernetes source: overrides state.election
    std::vector<std::string> eal_args;
};

std::string version_text() {
    return std::string("egwd ") + EGW_VERSION + " (" + rte_version() + ")";
}

// The command line, with CLI11: `--flag value` and `--flag=value`, typed values, and errors that
// name the flag. Everything before a "--" is EAL's and is passed through unchanged. Returns
// nullopt after --help or --version (printed); throws CLI::ParseError for the caller to report.
std::optional<Options> parse_args(int argc, char** argv) {
    Options o;
    int first = 1;
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--") == 0) {
            for (int j = 1; j < i; ++j)
                o.eal_args.emplace_back(argv[j]);
            first = i + 1;
            break;
        }
    CLI::App app{"egwd: the egress gateway daemon (docs/operations.md)", "egwd"};
    app.footer("EAL arguments before \"--\" replace the configuration's eal section entirely:\n"
               "  egwd [EAL-ARGS... --] -c FILE [OPTIONS]\n");
    app.set_version_flag("--version", version_text(), "print the version and exit");
    auto* config = app.add_option("-c,--config", o.config, "configuration (JSON), see docs/configuration.md")
                       ->type_name("FILE");
    app.add_option("--check-config", o.check_config, "load and validate FILE, print what is wrong, and exit")
        ->type_name("FILE")
        ->excludes(config);
    app.add_option("--status-file", o.status_file, "rewrite PATH with the daemon's state as JSON every 500 ms")
        ->type_name("PATH");
    app.add_option("--log-level", o.log_level, "trace, debug, info (default), warn, error")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->type_name("LEVEL");
    app.add_option("--log-format", o.log_format, "text (default) or json: one JSON object per line")
        ->check(CLI::IsMember({"text", "json"}))
        ->type_name("FORMAT");
    app.add_option("--mbufs", o.mbufs, "mbuf pool size, overriding mempool.mbufs")->type_name("N");
    app.add_option("--duration", o.duration, "stop by itself after S seconds")
        ->check(CLI::NonNegativeNumber)
        ->type_name("S");
    app.add_flag("-i,--interactive", o.interactive, "the egw> command prompt on this terminal (docs/cli.md)");
    app.add_option("--kubeconfig", o.kubeconfig, "kubernetes source: credentials, overriding state.kubeconfig")
        ->type_name("FILE");
    std::string election;
    app.add_option("--election", election, "kubernetes source: leader (default) or external, overriding state.election")
        ->check(CLI::IsMember({"leader", "external"}))
        ->type_name("MODE");
    std::vector<std::string> args(argv + first, argv + argc);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    try {
        app.parse(args);
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return std::nullopt;
    } catch (const CLI::CallForVersion&) {
        std::cout << version_text() << "\n";
        return std::nullopt;
    }
    if (!election.empty())
        o.election = egw::election::parse_election(election);
    if (o.config.empty() && o.check_config.empty())
        throw CLI::RequiredError("-c,--config (or --check-config)");
    return o;
}

// A payload written as the inside of a JSON string: the `%*` flag of the json log format.
class JsonMessage : public spdlog::custom_flag_formatter {
public:
    void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
        for (char c : msg.payload) {
            switch (c) {
            case '"': dest.append(std::string_view("\\\"")); break;
            case '\\': dest.append(std::string_view("\\\\")); break;
            case '\n': dest.append(std::string_view("\\n")); break;
            case '\r': dest.append(std::string_view("\\r")); break;
            case '\t': dest.append(std::string_view("\\t")); break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                    dest.append(std::string_view(buf));
                } else {
                    dest.push_back(c);
                }
            }
        }
    }
    std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessage>(); }
};

// DPDK's own log lines (EAL, PMDs) go through spdlog too, so they share egwd's format (JSON
// included) and level. DPDK writes each message with one or more fprintf calls ending in "\n".
ssize_t dpdk_log_write(void*, const char* buf, size_t size) {
    static std::string pending;  // DPDK serialises its log writes
    pending.append(buf, size);
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        if (line.empty())
            continue;
        int level = rte_log_cur_msg_loglevel();
        auto l = level <= static_cast<int>(RTE_LOG_ERR)       ? spdlog::level::err
                 : level == static_cast<int>(RTE_LOG_WARNING) ? spdlog::level::warn
                 : level <= static_cast<int>(RTE_LOG_INFO)    ? spdlog::level::info
                                                              : spdlog::level::debug;
        spdlog::log(l, "dpdk: {}", line);
    }
    return static_cast<ssize_t>(size);
}

void route_dpdk_log() {
    cookie_io_functions_t io{};
    io.write = dpdk_log_write;
    if (FILE* f = fopencookie(nullptr, "w", io)) {
        setvbuf(f, nullptr, _IONBF, 0);
        rte_openlog_stream(f);
    }
}

// ISO 8601 with the zone (local time; "+00:00" in a container), text or one JSON object a line.
void set_log_format(const std::string& format) {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    if (format == "json")
        f->add_flag<JsonMessage>('*').set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%*"})");
    else
        f->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
    spdlog::set_formatter(std::move(f));
}

using egw::model::ServiceState;

// Logs what changed in the evaluated Services, one line per Service and event, and records it in
// `known` (the states as last logged). Costs what changed, not what there is. The first sync
// (`first`: nothing known yet) logs those lines at debug and one summary at info, so 10,000
// Services at start make one line, not 20,000.
void log_changes(std::map<std::string, ServiceState>& known, const egw::model::ServiceDelta& delta,
                 const egw::control::PolicyBuilder& builder, bool first) {
    const auto info = first ? spdlog::level::debug : spdlog::level::info;
    const auto warn = first ? spdlog::level::debug : spdlog::level::warn;
    size_t programmed = 0, problems = 0, elsewhere = 0;
    for (const auto& s : delta.changed) {
        auto it = known.find(s.key);
        if (it != known.end() && it->second == s)
            continue;
        const auto* v = builder.view(s.key);
        std::string why = v && !v->problem.empty() ? v->problem : s.reason;
        if (it == known.end() || it->second.status_host != s.status_host || it->second.serve_here != s.serve_here)
            spdlog::log(info, "{}: status.host=\"{}\"{}{}", s.key, s.status_host, why.empty() ? "" : " (",
                        why.empty() ? "" : why + ")");
        if (v && v->programmed) {
            ++programmed;
            spdlog::log(info, "{}: translating {} endpoint(s) {} in VRF {}", s.key, s.endpoint_ipv4s.size(),
                        s.mode == egw::model::Mode::network
                            ? std::string("by masquerade")
                            : "to " + egw::config::format_ipv4(s.ingress_ipv4.value_or(0)),
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
        if (known.erase(k))
            spdlog::info("{}: EgressService removed, its state is gone", k);
    if (first)
        spdlog::info("first sync: {} EgressService(s): {} programmed here, {} not programmed for a problem{}, {} "
                     "served elsewhere or not at all (each one at --log-level debug; `egwctl show services`)",
                     programmed + problems + elsewhere, programmed, problems,
                     problems ? " (warnings at debug)" : "", elsewhere);
}

}  // namespace

int main(int argc, char** argv) {
    auto logger = spdlog::stderr_color_mt("egwd");
    spdlog::set_default_logger(logger);
    set_log_format("text");

    Options opt;
    try {
        auto o = parse_args(argc, argv);
        if (!o)
            return 0;
        opt = *o;
    } catch (const CLI::ParseError& e) {
        std::cerr << "egwd: " << e.what() << "\n(egwd --help lists the options)\n";
        return 2;
    }
    set_log_format(opt.log_format);
    spdlog::set_level(spdlog::level::from_str(opt.log_level));
    route_dpdk_log();

    if (!opt.check_config.empty()) {
        try {
            egw::config::Config checked = egw::config::load_file(opt.check_config);
            std::cout << opt.check_config << ": ok (" << checked.ports.size() << " port(s), " << checked.workers.size()
                      << " worker(s), state from " << egw::config::to_string(checked.state.source) << ")\n";
            return 0;
        } catch (const std::exception& e) {
            std::cerr << "egwd: " << e.what() << "\n";
            return 2;
        }
    }

    egw::config::Config cfg;
    try {
        cfg = egw::config::load_file(opt.config);
    } catch (const std::exception& e) {
        std::cerr << "egwd: " << e.what() << "\n";
        return 2;
    }
    const bool kubernetes = cfg.state.source == egw::config::StateSource::kubernetes;
    if (!kubernetes && (!opt.kubeconfig.empty() || opt.election)) {
        std::cerr << "egwd: --kubeconfig and --election need state.source \"kubernetes\" in " << opt.config << "\n";
        return 2;
    }

    auto eal = egw::control::Runtime::eal_arguments(cfg, opt.eal_args, argv[0]);
    std::vector<char*> eal_argv;
    for (auto& s : eal)
        eal_argv.push_back(s.data());
    eal_argv.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(eal.size()), eal_argv.data()) < 0) {
        // EAL prints its own usage; say where its arguments came from, so the field can be fixed.
        std::vector<std::string> shown(eal.begin() + 1, eal.end());
        spdlog::error("EAL initialisation failed: {}; its arguments came from {}: {}", rte_strerror(rte_errno),
                      opt.eal_args.empty() ? "$.eal of " + opt.config : std::string("the command line before --"),
                      fmt::join(shown, " "));
        return 1;
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGHUP, on_reload_signal);

    int rc = 0;
    {
        egw::control::Runtime rt(cfg);
        std::unique_ptr<egw::election::Controller> k8s;  // the kubernetes source
        try {
            rt.setup(opt.mbufs);
            if (kubernetes)
                k8s = egw::election::make_source(cfg, opt.kubeconfig, opt.election);
            egw::control::PolicyBuilder builder(cfg, rt.port_ids(), rt.port_macs());
            egw::control::NeighborResolver resolver(cfg, rt);
            resolver.install_static();
            egw::metrics::Exporter exporter(cfg, rt);
            egw::telemetry::Commands telemetry(exporter);
            if (k8s) {
                // k8s outlives the exporter (declared first), and both status() and stats() copy
                // under the client's and controller's own locks: safe from the metrics thread.
                egw::election::Controller* source = k8s.get();
                exporter.add_families([source](egw::metrics::Writer& w) {
                    egw::metrics::write_kubernetes(w, source->client().status(), source->stats());
                });
                // Liveness means serving: the liveness Lease and /readyz follow the API and the data plane.
                source->set_serving_check([&exporter] { return exporter.serving_problems(); });
                exporter.add_readiness([source] { return source->serving_problems(); });
            }
            // The exporter goes before k8s: unhook it first.
            struct Unhook {
                egw::election::Controller* c;
                ~Unhook() {
                    if (c)
                        c->set_serving_check(nullptr);
                }
            } unhook{k8s.get()};
            exporter.start();

            egw::manifests::ManifestDir manifests(k8s ? std::string() : cfg.state.path);
            egw::model::GatewayIdentity self{cfg.node.name, cfg.node.labels};
            std::map<std::string, ServiceState> last_states;
            bool first_sync_logged = false;

            auto& handle = rt.shared().policy;
            auto publish = [&](std::unique_ptr<egw::dp::PolicySnapshot> next) {
                uint64_t t0 = rte_rdtsc();
                // Returns once no worker can still be reading the old version: then it is freed.
                delete egw::dp::publish_policy(rt.shared(), next.release());
                uint64_t spent = rte_rdtsc() - t0;
                exporter.published(builder, static_cast<double>(spent) / static_cast<double>(rte_get_tsc_hz()));
                spdlog::debug("published policy generation {} in {} us", builder.generation(),
                              spent * 1000000 / rte_get_tsc_hz());
            };
            // Only what changed goes to the builder and the log: with 10,000 EgressServices, copying
            // or comparing all of them would cost more than the change itself (docs/performance.md).
            auto reconcile = [&](bool force) {
                egw::model::ServiceDelta delta;
                if (k8s) {
                    // Nothing but the ports and routes until every kind has been listed once.
                    if (k8s->poll(delta))
                        force = true;
                    if (!force)
                        return;
                } else {
                    auto scan = manifests.scan();
                    for (const auto& e : scan.errors)
                        spdlog::error("manifest {}", e);
                    if (!scan.changed && !force)
                        return;
                    delta = egw::model::diff(
                        last_states, egw::model::evaluate_single_gateway(manifests.objects(), self, cfg.cluster.pod_cidrs));
                }
                publish(builder.apply(delta));
                // The first delta with Services in it is the first sync (before it, with the
                // kubernetes source, only ports and routes are published).
                bool first = !first_sync_logged && !delta.changed.empty();
                log_changes(last_states, delta, builder, first);
                first_sync_logged = first_sync_logged || first;
            };

            if (k8s)
                k8s->start();
            reconcile(true);
            rt.start_ports();
            rt.launch_workers();
            spdlog::info("egwd running: node {}, {} port(s), {}", cfg.node.name, rt.ports().size(),
                         k8s ? "Kubernetes API " + k8s->client().transport().credentials().server + ", election " +
                                   egw::election::to_string(k8s->options().election)
                             : "manifests from " + cfg.state.path);
            // The configuration file again (SIGHUP, `reload config`): all of it or nothing, see
            // config/reload.h for what may change while egwd runs.
            auto reload = [&]() -> egw::cli::Reply {
                nlohmann::json detail = {{"file", cfg.file}, {"applied", nlohmann::json::array()},
                                         {"restart_needed", nlohmann::json::array()}};
                egw::config::Config next;
                try {
                    next = egw::config::load_file(cfg.file);
                } catch (const std::exception& e) {
                    spdlog::error("reload refused: {}; egwd keeps running on the configuration it has", e.what());
                    detail["error"] = e.what();
                    return {false, std::string("reload refused: ") + e.what() +
                                       "\negwd keeps running on the configuration it has.",
                            detail};
                }
                auto changes = egw::config::compare_for_reload(cfg, next);
                detail["restart_needed"] = changes.restart;
                if (!changes.restart.empty()) {
                    std::string why = fmt::format("only read when egwd starts: {}", fmt::join(changes.restart, ", "));
                    spdlog::error("reload refused: {} changes settings {}; nothing was applied", cfg.file, why);
                    detail["error"] = why;
                    return {false, "reload refused: " + cfg.file + " changes settings " + why +
                                       ".\nNothing was applied; restart egwd to change them.",
                            detail};
                }
                if (changes.live.empty()) {
                    spdlog::info("reload: {} has no change", cfg.file);
                    return egw::cli::ok("reload: " + cfg.file + " has no change.", detail);
                }
                if (std::string err = resolver.reload_static(next.neighbors); !err.empty()) {
                    spdlog::error("reload refused: {}; nothing was applied", err);
                    detail["error"] = err;
                    return {false, "reload refused: " + err + ".\nNothing was applied.", detail};
                }
                egw::config::apply_live(cfg, next);
                self.labels = cfg.node.labels;
                if (k8s)
                    publish(builder.apply(egw::model::ServiceDelta{}));  // the Services stay; routes and actions move
                else
                    reconcile(true);  // node labels and pod CIDRs feed the files source's rules
                detail["applied"] = changes.live;
                detail["generation"] = builder.generation();
                const std::string applied = fmt::format("{}", fmt::join(changes.live, ", "));
                spdlog::info("configuration reloaded from {}: {} (policy generation {})", cfg.file, applied,
                             builder.generation());
                return egw::cli::ok(
                    fmt::format("reload: applied {} (policy generation {}).", applied, builder.generation()), detail);
            };

            std::function<nlohmann::json()> k8s_view;
            if (k8s)
                k8s_view = [&k8s] { return egw::election::describe(*k8s); };
            egw::cli::Frontends cli({cfg, rt, builder, resolver, k8s ? &k8s->objects() : &manifests.objects(), k8s_view,
                                     reload},
                                    opt.interactive);

            using clock = std::chrono::steady_clock;
            auto start = clock::now();
            auto next_scan = start, next_tick = start, next_status = start;
            while (!g_stop) {
                auto now = clock::now();
                const auto* snap = handle.current.load(std::memory_order_acquire);
                resolver.poll(*snap);
                if (now >= next_tick) {
                    resolver.tick(*snap);
                    exporter.tick(resolver);
                    next_tick = now + std::chrono::milliseconds(100);
                }
                if (g_reload) {
                    g_reload = 0;
                    reload();  // it logs its outcome
                }
                if (now >= next_scan) {
                    reconcile(false);
                    // The kubernetes source is event driven: look at it on every pass.
                    next_scan = now + std::chrono::milliseconds(k8s ? 0 : cfg.state.poll_ms);
                }
                if (!opt.status_file.empty() && now >= next_status) {
                    egw::control::StatusInputs in{rt, builder, resolver, true};
                    if (!egw::control::write_status_file(opt.status_file, egw::control::collect_status(in)))
                        spdlog::warn("cannot write status file {}", opt.status_file);
                    next_status = now + std::chrono::milliseconds(500);
                }
                if (!cli.poll())
                    break;  // `quit` on the console
                if (opt.duration > 0 && std::chrono::duration<double>(now - start).count() >= opt.duration)
                    break;
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
            spdlog::info("stopping");
            if (k8s)
                k8s->stop();  // the liveness and leader Leases are given up first: Services move at once
            exporter.stop();
            rt.stop_workers();
            if (!opt.status_file.empty()) {
                egw::control::StatusInputs in{rt, builder, resolver, false, true};
                egw::control::write_status_file(opt.status_file, egw::control::collect_status(in));
            }
            rt.stop();
            delete handle.current.exchange(nullptr);
        } catch (const std::exception& e) {
            spdlog::error("{}", e.what());
            rc = 1;
        }
    }
    rte_eal_cleanup();
    return rc;
}
