// SPDX-License-Identifier: Apache-2.0
//
// A small HTTP/1.1 server for the metrics and probe endpoints: one event loop (epoll) on a thread
// of its own, plus one thread that builds the answers that take long (the /metrics exposition).
//
// Why not a library: see docs/metrics.md ("How it is served"). In short, the endpoints are a
// few GETs answered from memory, and what matters is that a probe is answered within
// milliseconds whatever the other clients do. A thread-per-connection pool (cpp-httplib,
// civetweb) only moves the blocking to its N-th idle connection; an event loop serves every
// open connection at once and costs one thread.
//
// Threads: start() binds and listens on the calling thread (so a busy port is reported at once),
// then serves on two std::threads, which inherit the caller's CPU affinity; egwd starts them
// from the main lcore, so they never run on a worker's core.
//   - "egw-http" runs the loop: accepts, reads request heads, answers every path not in
//     `offloaded` by calling the handler inline (so the handler for those paths must be fast:
//     the probes), writes answers, enforces the timeouts. `idle` runs on it about once a second.
//   - "egw-scrape" calls the handler for the `offloaded` paths (one request at a time, in order)
//     and compresses the answer, so a long exposition never delays a probe.
//
// Requests: GET and HEAD only; request line and headers up to 8 KiB, which must arrive within
// `head_timeout_ms` of the accept; the answer must be taken by the client within
// `send_timeout_ms`. Every answer closes the connection (Prometheus and the kubelet reconnect
// cheaply). At most `max_connections` are open: when one more arrives, the oldest connection
// still waiting for its request is closed to make room, so idle clients cannot keep a probe out.
// With `Accept-Encoding: gzip`, answers of at least `gzip_min_bytes` are sent gzip-compressed
// (zlib).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace egw::metrics {

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
};

struct HttpLimits {
    size_t max_connections = 256;
    int head_timeout_ms = 2000;
    int send_timeout_ms = 10000;
    size_t gzip_min_bytes = 1024;
    size_t max_queued = 8;  // offloaded requests waiting for the scrape thread; more get 503
};

// What the server has done since start(); read from any thread.
struct HttpCounters {
    std::atomic<uint64_t> accepted{0};
    std::atomic<uint64_t> timed_out{0};  // closed for a late request head or a client not reading
    std::atomic<uint64_t> shed{0};       // closed to make room for a newer connection
    std::atomic<uint64_t> open{0};
};

class HttpServer {
public:
    using Handler = std::function<HttpResponse(const std::string& path)>;
    using Idle = std::function<void()>;

    HttpServer(Handler handler, Idle idle, std::vector<std::string> offloaded = {}, HttpLimits limits = {});
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Listens on `host:port`: an IPv4 or IPv6 literal ("::" accepts IPv4 too, and falls back to
    // 0.0.0.0 where the kernel has no IPv6); port 0 picks a free one. Returns "" or why it failed.
    std::string start(const std::string& host, uint16_t port);
    void stop();
    uint16_t port() const { return port_; }
    const HttpCounters& counters() const { return counters_; }

    // Parses "GET /path?query HTTP/1.1"; returns false for anything else. Exposed for the tests.
    static bool parse_request_line(const std::string& line, std::string& method, std::string& path);
    // True when the head's Accept-Encoding lists gzip (without q=0).
    static bool accepts_gzip(const std::string& head);
    // gzip (RFC 1952) of `in`, or "" when zlib fails.
    static std::string gzip(const std::string& in);

private:
    struct Loop;
    void run();
    void scrape();

    Handler handler_;
    Idle idle_;
    std::vector<std::string> offloaded_;
    HttpLimits limits_;
    HttpCounters counters_;
    int listen_fd_ = -1;
    int wake_fd_ = -1;  // eventfd: stop, or an offloaded answer is ready
    uint16_t port_ = 0;
    std::thread thread_;
    std::thread scrape_thread_;
    std::atomic<bool> stopping_{false};
    Loop* loop_ = nullptr;  // shared between the two threads, guarded by its own mutex
};

}  // namespace egw::metrics
