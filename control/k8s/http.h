// SPDX-License-Identifier: Apache-2.0
//
// HTTP(S) to the API server over libcurl: one easy handle per request (connections, DNS and TLS
// sessions shared between them), TLS from the Credentials, a bearer token re-read from its file
// periodically and on 401, a timeout on every request, and streaming for watches. Thread-safe:
// any number of threads may call request() and stream() at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/k8s/credentials.h"

namespace egw::k8s {

struct HttpOptions {
    std::chrono::milliseconds connect_timeout{10000};
    std::chrono::milliseconds request_timeout{30000};  // whole request, unless the call gives one
    std::chrono::seconds token_reload_period{60};      // re-read token_file this often
    std::string user_agent = "egwd";
};

struct Response {
    long status = 0;         // HTTP status; 0 when no response came (see error)
    std::string body;        // the body (for a stream: only when the status is not 2xx)
    std::string error;       // transport failure ("Connection refused", "transfer closed with
                             // outstanding read data remaining"), "" when the transfer completed
    bool cancelled = false;  // stopped by a Cancel or by the stream's data callback

    bool ok() const { return error.empty() && !cancelled && status >= 200 && status < 300; }
};

// The fields of a metav1.Status error body (best effort: code falls back to the HTTP status).
struct ApiStatus {
    long code = 0;
    std::string reason;  // "NotFound", "Conflict", "Expired", "Unauthorized", ...
    std::string message;
};
ApiStatus api_status(const Response& r);
ApiStatus api_status(const nlohmann::json& status_object, long http_status = 0);
// One line for a log: "HTTP 409 Conflict: <message>" or "transport: <error>".
std::string describe(const Response& r);
// describe() with a hint for the two errors an operator fixes: a 401 names where the credentials
// came from, a 403 points to egwd's RBAC.
std::string explain(const Response& r, const std::string& credentials_source);

// Percent-encodes a query value.
std::string url_encode(std::string_view s);

// Stops requests in progress from another thread. One Cancel may serve many requests.
class Cancel {
public:
    void cancel();
    bool cancelled() const { return cancelled_.load(); }
    void reset() { cancelled_ = false; }

private:
    friend class Transport;
    void attach(void* multi);
    void detach(void* multi);

    std::atomic<bool> cancelled_{false};
    std::mutex mu_;
    std::set<void*> active_;
};

class Transport {
public:
    // Throws CredentialError when a file named by the credentials cannot be read.
    explicit Transport(Credentials creds, HttpOptions opts = {});
    ~Transport();
    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

    // One request. `path` is the part after the server URL ("/api/v1/nodes?limit=500").
    // A 401 re-reads the token file and, when the token changed, retries once.
    Response request(std::string_view method, const std::string& path, const std::string& body = "",
                     const std::string& content_type = "", Cancel* cancel = nullptr,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

    // A streaming GET (a watch). on_response runs once the status line and headers are in;
    // on_data gets the body bytes of a 2xx response as they arrive (return false to stop).
    // Returns when the server ends the body, the connection breaks, on_data says stop, the
    // Cancel fires or `timeout` passes.
    Response stream(const std::string& path, const std::function<void(long status)>& on_response,
                    const std::function<bool(std::string_view)>& on_data, std::chrono::milliseconds timeout,
                    Cancel* cancel = nullptr);

    const Credentials& credentials() const { return creds_; }
    const HttpOptions& options() const { return opts_; }
    // The bearer token now in use ("" without one), re-read from the file when it is due.
    std::string token();
    // Re-reads the token file now; true when the token changed.
    bool reload_token();

    struct Stats {
        uint64_t requests = 0;
        uint64_t unauthorized = 0;
        uint64_t token_reloads = 0;
    };
    Stats stats() const;
    // Requests the server answered with a 2xx so far (a watch counts once its stream opens).
    // Reflectors in a backoff after an outage retry at once when this moves (docs/kubernetes.md).
    uint64_t answers() const { return answers_.load(std::memory_order_relaxed); }

    struct Call;  // one transfer (defined in http.cpp)

private:
    Response perform(Call& call, Cancel* cancel);

    Credentials creds_;
    HttpOptions opts_;
    void* share_ = nullptr;   // CURLSH*
    std::mutex share_mu_[8];  // one per curl_lock_data
    std::mutex pool_mu_;
    std::vector<void*> pool_;  // idle CURL* handles; each keeps its connections
    std::mutex token_mu_;
    std::string token_;
    std::chrono::steady_clock::time_point token_read_{};
    std::atomic<uint64_t> requests_{0}, unauthorized_{0}, token_reloads_{0}, answers_{0};
};

}  // namespace egw::k8s
