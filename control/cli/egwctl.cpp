// SPDX-License-Identifier: Apache-2.0
//
// egwctl: egw's command line, talking to a running egwd over its Unix socket (protocol.h). The
// grammar lives in egwd; egwctl sends lines and completion requests, so it always speaks the
// daemon's own version of the commands.
//
//   egwctl [options] COMMAND...        one command, then exit (egwctl show services)
//   egwctl [options] -f FILE           every line of FILE ("-": stdin)
//   egwctl [options]                   the egw> prompt (commands from stdin when it is no terminal)
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "config/config.h"
#include "control/cli/line_editor.h"
#include "control/cli/protocol.h"

#ifndef EGW_VERSION
#define EGW_VERSION "unknown"
#endif

namespace {

using namespace egw::cli;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // a command failed
constexpr int kExitUsage = 2;
constexpr int kExitNoDaemon = 3;

struct Options {
    std::string socket;
    std::string config;
    std::string file_prefix;
    std::string file;
    bool json = false;
    bool stop_on_error = false;
    bool echo = false;
    std::vector<std::string> command;
};

// The command line, with CLI11 (`--flag value`, `--flag=value`, errors naming the flag). Options
// come before the COMMAND; -j/--json may also appear anywhere in it. Returns nullopt after --help
// or --version (printed); throws CLI::ParseError or std::invalid_argument.
std::optional<Options> parse_args(int argc, char** argv) {
    Options o;
    CLI::App app{"egwctl: egw's command line, talking to a running egwd (docs/cli.md)", "egwctl"};
    app.set_version_flag("--version", std::string("egwctl ") + EGW_VERSION, "print the version and exit");
    app.add_option("-s,--socket", o.socket, "egwd's CLI socket (default: from -c or -p)")->type_name("PATH");
    app.add_option("-c,--config", o.config, "egwd's configuration: the socket of its eal.file_prefix")
        ->type_name("FILE");
    app.add_option("-p,--file-prefix", o.file_prefix, "DPDK file prefix of the egwd to reach (default egw)")
        ->type_name("NAME");
    app.add_flag("-j,--json", o.json, "JSON output (show commands); also anywhere in the COMMAND");
    app.add_option("-f,--file", o.file, "run the commands in FILE, one per line (\"-\": stdin)")->type_name("FILE");
    app.add_flag("-e,--stop-on-error", o.stop_on_error, "with -f: stop at the first command that fails");
    app.add_flag("-x,--echo", o.echo, "with -f: print each command before its output");
    app.prefix_command();  // the first word that is no option starts the COMMAND
    app.footer(
        "With a COMMAND, runs it and exits (egwctl show services). With neither a COMMAND nor -f,\n"
        "opens the egw> prompt, or reads commands from stdin when it is not a terminal.\n"
        "`egwctl help` lists the commands. Exit status: 0 ok, 1 a command failed, 2 usage,\n"
        "3 egwd unreachable.\n");
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return std::nullopt;
    } catch (const CLI::CallForVersion&) {
        std::cout << "egwctl " << EGW_VERSION << "\n";
        return std::nullopt;
    }
    for (auto& w : app.remaining()) {
        if (w == "-j" || w == "--json")
            o.json = true;
        else if (!(o.command.empty() && w == "--"))
            o.command.push_back(w);
    }
    if (!o.file.empty() && !o.command.empty())
        throw std::invalid_argument("give either a COMMAND or -f FILE, not both");
    if ((o.stop_on_error || o.echo) && o.file.empty() && !o.command.empty())
        throw std::invalid_argument("-e and -x go with -f");
    return o;
}

std::string socket_path(const Options& o) {
    if (!o.socket.empty()) return o.socket;
    if (!o.file_prefix.empty()) return socket_path_for(o.file_prefix);
    if (!o.config.empty()) return socket_path_for(egw::config::load_file(o.config).eal.file_prefix);
    return socket_path_for(egw::config::EalConfig{}.file_prefix);
}

class Session {
public:
    Session(Client& client, bool json) : client_(client), json_(json) {}

    // Runs one line; prints its output. Returns the response status.
    Status run(const std::string& line, const std::string& where = "") {
        std::string l = line;
        if (json_ && l.find("--json") == std::string::npos) l += " --json";
        Response r = client_.request("run", l);
        if (r.status == Status::error) {
            std::cout.flush();
            std::cerr << where << r.body;
            std::cerr.flush();
        } else {
            std::cout << r.body;
            std::cout.flush();
        }
        return r.status;
    }

    Completion complete(const std::string& before_cursor) {
        Response r = client_.request("complete", before_cursor);
        return decode_completion(r.body, before_cursor);
    }

private:
    Client& client_;
    bool json_;
};

bool blank_or_comment(const std::string& line) {
    size_t p = line.find_first_not_of(" \t\r");
    return p == std::string::npos || line[p] == '#';
}

int run_stream(Session& s, std::istream& in, const std::string& name, const Options& o) {
    std::string line;
    unsigned lineno = 0;
    int rc = kExitOk;
    while (std::getline(in, line)) {
        ++lineno;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (blank_or_comment(line)) continue;
        if (o.echo) std::cout << "egw> " << line << "\n";
        Status st = s.run(line, name + ":" + std::to_string(lineno) + ": ");
        if (st == Status::bye) break;
        if (st == Status::error) {
            rc = kExitFailed;
            if (o.stop_on_error) break;
        }
    }
    return rc;
}

std::string history_file() {
    const char* home = std::getenv("HOME");
    return home && *home ? std::string(home) + "/.egwctl_history" : "";
}

int interactive(Session& s) {
    RawTerminal raw(STDIN_FILENO, false);
    auto write_out = [](std::string_view text) {
        while (!text.empty()) {
            ssize_t n = write(STDOUT_FILENO, text.data(), text.size());
            if (n <= 0) return;
            text.remove_prefix(static_cast<size_t>(n));
        }
    };
    LineEditor editor("egw> ", write_out, [&](const std::string& before) { return s.complete(before); });
    editor.set_columns(terminal_columns(STDOUT_FILENO));
    std::string hist = history_file();
    if (!hist.empty()) editor.history().load(hist);
    editor.begin();
    int rc = kExitOk;
    for (;;) {
        char c;
        ssize_t n = read(STDIN_FILENO, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        LineEditor::Event ev = editor.feed(c);
        if (ev == LineEditor::Event::eof) break;
        if (ev != LineEditor::Event::line) continue;
        Status st = s.run(editor.take_line());
        if (st == Status::bye) break;
        editor.begin();
    }
    if (!hist.empty()) editor.history().save(hist);
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    try {
        auto parsed = parse_args(argc, argv);
        if (!parsed) return kExitOk;
        o = *parsed;
    } catch (const std::exception& e) {
        std::cerr << "egwctl: " << e.what() << "\n(egwctl --help lists the options)\n";
        return kExitUsage;
    }
    std::string path;
    try {
        path = socket_path(o);
    } catch (const std::exception& e) {
        std::cerr << "egwctl: " << e.what() << "\n";
        return kExitUsage;
    }
    std::unique_ptr<Client> client;
    try {
        client = std::make_unique<Client>(path);
    } catch (const std::exception& e) {
        std::cerr << "egwctl: " << e.what() << "\n";
        return kExitNoDaemon;
    }
    Session s(*client, o.json);
    try {
        if (!o.command.empty()) {
            std::string line;
            for (const auto& w : o.command)
                line += (line.empty() ? "" : " ") + w;
            return s.run(line) == Status::error ? kExitFailed : kExitOk;
        }
        if (!o.file.empty() && o.file != "-") {
            std::ifstream f(o.file);
            if (!f) {
                std::cerr << "egwctl: " << o.file << ": " << std::strerror(errno) << "\n";
                return kExitUsage;
            }
            return run_stream(s, f, o.file, o);
        }
        if (!o.file.empty() || !isatty(STDIN_FILENO)) return run_stream(s, std::cin, "stdin", o);
        return interactive(s);
    } catch (const std::exception& e) {
        std::cerr << "egwctl: " << e.what() << "\n";
        return kExitNoDaemon;
    }
}
