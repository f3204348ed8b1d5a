// SPDX-License-Identifier: Apache-2.0
//
// egw's CLI: the command table (commands.cpp) run against the daemon's state.
//
// Every command executes on egwd's control thread, the owner of that state: the console and the
// socket server only hand it lines (see console.h, server.h). Commands that need the workers'
// private state (sessions) ask the workers through their request words (cli/worker_requests.h)
// instead of touching it. `show` commands change nothing; `set` and `clear` do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "control/cli/grammar.h"
#include "control/cli/protocol.h"

namespace egw::config {
struct Config;
}
namespace egw::model {
struct ObjectSet;
}
namespace egw::control {
class Runtime;
class PolicyBuilder;
class NeighborResolver;
struct PortInfo;
}  // namespace egw::control

namespace egw::cli {

class PacketTrace;

struct Reply {
    bool ok = true;
    std::string text;     // for people
    nlohmann::json json;  // for --json; null: {"message": text}
    bool quit = false;
};

Reply ok(std::string text, nlohmann::json json = nullptr);
Reply fail(std::string text);

// What commands may touch, all owned by egwd's control thread.
struct CliHost {
    const config::Config& config;
    control::Runtime& runtime;
    const control::PolicyBuilder& policy;
    const control::NeighborResolver& neighbors;
    const model::ObjectSet* objects = nullptr;  // the state source's objects (specs for `show service`)
    // The kubernetes source's connection state (per-kind reflectors, election); empty with files.
    std::function<nlohmann::json()> kubernetes;
    // Session sync's peers, counters and standby table (docs/cli.md, `show sync`); empty without
    // a `sync` section.
    std::function<nlohmann::json()> sync;
    // Re-reads the configuration file and applies it or refuses it whole (egwd's, like SIGHUP).
    std::function<Reply()> reload;
    // The packet trace the trace commands run (made by the first `trace start`).
    std::shared_ptr<PacketTrace> trace = nullptr;
    // The EgressFirewalls applied, with hits (firewall::to_json()); empty when egwd gives none.
    std::function<nlohmann::json()> egress_firewall = nullptr;
};

enum class Origin : uint8_t { console, socket };

// Handed to every handler.
class Context {
public:
    Context(CliHost& host, Origin origin, const Grammar& grammar) : host(host), origin(origin), grammar(grammar) {}

    // control::collect_status() without the session listing, computed once per command.
    const nlohmann::json& status();
    // A port by name or DPDK id; nullptr when there is none.
    const control::PortInfo* find_port(std::string_view name_or_id) const;

    CliHost& host;
    const Origin origin;
    const Grammar& grammar;

private:
    std::optional<nlohmann::json> status_;
};

// The command table, compiled once.
const Grammar& egw_grammar();

// Live names for completion and validation, read from the host.
class HostNames : public NameSource {
public:
    explicit HostNames(const CliHost& host) : host_(host) {}
    std::vector<std::string> names(NameSet set) const override;

private:
    const CliHost& host_;
};

class Cli {
public:
    explicit Cli(CliHost host) : host_(host), names_(host_) {}
    Cli(const Cli&) = delete;
    Cli& operator=(const Cli&) = delete;

    struct Outcome {
        Status status = Status::ok;  // bye: `quit`
        std::string text;            // ends with a newline unless empty
    };
    // Parses and runs one line. Never throws: an exception inside a command becomes an error
    // naming the command.
    Outcome run(std::string_view line, Origin origin);
    Completion complete(std::string_view before_cursor) const;

private:
    CliHost host_;
    HostNames names_;
};

}  // namespace egw::cli
