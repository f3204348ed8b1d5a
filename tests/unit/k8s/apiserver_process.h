// SPDX-License-Identifier: Apache-2.0
//
// Test helpers: runs tests/apiserver/apiserver.py as a child process on a free port of 127.0.0.1
// (stopped by the destructor), talks to its /_test/ control API, captures egw::k8s log lines.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/types.h>

namespace egw::k8s::testing {

// $EGW_SOURCE_ROOT (set by `meson test`), or "" when unknown.
std::string source_root();

// A fresh directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
public:
    TempDir();
    ~TempDir();
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    void write(const std::string& name, const std::string& content) const;

private:
    std::string path_;
};

class ApiServerProcess {
public:
    // Starts the server with --port 0 --port-file and the extra arguments; throws on failure.
    explicit ApiServerProcess(std::vector<std::string> args = {});
    ~ApiServerProcess();

    int port() const { return port_; }
    // "http://127.0.0.1:PORT" (https with --tls-cert).
    std::string url() const;

    struct Reply {
        long status = 0;
        nlohmann::json body;
    };
    // A request to the server, TLS unverified; token "" sends none.
    Reply call(const std::string& method, const std::string& path, const std::string& body = "",
               const std::string& content_type = "application/json", const std::string& token = "") const;
    // POST (or GET) on /_test/<what>; throws unless it answers 200.
    nlohmann::json control(const std::string& what, const nlohmann::json& body = nlohmann::json::object()) const;
    nlohmann::json control_get(const std::string& what) const;
    // Requests of the log with this verb (and whose path contains `path`).
    std::vector<nlohmann::json> requests(const std::string& verb, const std::string& path = "") const;

private:
    TempDir dir_;
    pid_t pid_ = -1;
    int port_ = 0;
    bool tls_ = false;
};

// Records what egw::k8s logs.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
public:
    // Lines at `level` or above that contain `needle`.
    size_t count(spdlog::level::level_enum level, const std::string& needle = "");
    std::vector<std::string> lines(spdlog::level::level_enum level);

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override;
    void flush_() override {}

private:
    std::vector<std::pair<spdlog::level::level_enum, std::string>> lines_;
};

// Installs a capturing logger for egw::k8s for the lifetime of the object (and echoes warnings
// and errors to stderr).
class LogCapture {
public:
    LogCapture();
    ~LogCapture();
    CaptureSink& sink() { return *sink_; }

private:
    std::shared_ptr<CaptureSink> sink_;
};

// Polls `cond` every 10 ms until it holds or the timeout passes. The default bounds a wait for
// something that must happen, not how soon: it returns as soon as `cond` holds, so only a broken
// run waits it out, and a sanitized build on a loaded machine can take many seconds.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Objects that model::parse_object accepts.
nlohmann::json node(const std::string& name, const nlohmann::json& labels = nlohmann::json::object(),
                    bool ready = true);
nlohmann::json service(const std::string& ns, const std::string& name, const std::string& ingress_ip);
nlohmann::json endpoint_slice(const std::string& ns, const std::string& name, const std::string& service,
                              const std::string& ip, const std::string& node);
nlohmann::json egress_service(const std::string& ns, const std::string& name, const std::string& network = "");
nlohmann::json lease(const std::string& ns, const std::string& name, const std::string& holder);

std::string base64_encode(const std::string& in);

}  // namespace egw::k8s::testing
