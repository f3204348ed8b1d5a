// SPDX-License-Identifier: Apache-2.0
//
// egwd: the egress gateway daemon. main() reads the command line, sets up the logs and EAL, and
// hands over to the Daemon (daemon.h), whose control loop runs on the main lcore; worker lcores
// run the data plane (dataplane/, stages.h).
//
//   egwd -c FILE [-i] [--status-file PATH] [--log-level LEVEL] [--log-format text|json] [--mbufs N]
//        [--duration S] [--kubeconfig FILE] [--election leader|external]
//   egwd --check-config FILE | --version | --help
//   egwd EAL-ARGS... -- -c FILE ...          (EAL arguments passed through unchanged)
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
#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>

#include "config/config.h"
#include "control/daemon/daemon.h"
#include "control/runtime/runtime.h"
#include "control/k8s_source/source.h"

#ifndef EGW_VERSION
#define EGW_VERSION "unknown"
#endif

namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_reload = 0;

void on_signal(int) {
    g_stop = 1;
}
void on_reload_signal(int) {
    g_reload = 1;
}

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
    app.footer(
        "EAL arguments before \"--\" replace the configuration's eal section entirely:\n"
        "  egwd [EAL-ARGS... --] -c FILE [OPTIONS]\n");
    app.set_version_flag("--version", version_text(), "print the version and exit");
    auto* config =
        app.add_option("-c,--config", o.config, "configuration (JSON), see docs/configuration.md")->type_name("FILE");
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
    if (!election.empty()) o.election = egw::k8s_source::parse_election(election);
    if (o.config.empty() && o.check_config.empty()) throw CLI::RequiredError("-c,--config (or --check-config)");
    return o;
}

// A payload written as the inside of a JSON string: the `%*` flag of the json log format.
class JsonMessage : public spdlog::custom_flag_formatter {
public:
    void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
        for (char c : msg.payload) {
            switch (c) {
            case '"':
                dest.append(std::string_view("\\\""));
                break;
            case '\\':
                dest.append(std::string_view("\\\\"));
                break;
            case '\n':
                dest.append(std::string_view("\\n"));
                break;
            case '\r':
                dest.append(std::string_view("\\r"));
                break;
            case '\t':
                dest.append(std::string_view("\\t"));
                break;
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
        if (line.empty()) continue;
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

}  // namespace

int main(int argc, char** argv) {
    auto logger = spdlog::stderr_color_mt("egwd");
    spdlog::set_default_logger(logger);
    set_log_format("text");

    Options opt;
    try {
        auto o = parse_args(argc, argv);
        if (!o) return 0;
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
        egw::control::DaemonOptions dopt;
        dopt.status_file = opt.status_file;
        dopt.mbufs = opt.mbufs;
        dopt.duration = opt.duration;
        dopt.interactive = opt.interactive;
        dopt.kubeconfig = opt.kubeconfig;
        dopt.election = opt.election;
        egw::control::Daemon daemon(std::move(cfg), std::move(dopt));
        rc = daemon.run({&g_stop, &g_reload});
    }
    rte_eal_cleanup();
    return rc;
}
