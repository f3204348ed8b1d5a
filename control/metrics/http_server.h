// SPDX-License-Identifier: Apache-2.0
//
// A minimal HTTP/1.1 server for the metrics and probe endpoints, on one thread of its own.
//
// Why not a library: the endpoints are three GETs answered from memory, scraped every few
// seconds by one Prometheus and probed by the kubelet. One thread serving one connection at a
// time, with short socket timeouts, is all that takes; it adds no dependency to the image and no
// thread pool next to the workers. See docs/metrics.md.
//
// Threads: start() binds and listens on the calling thread (so a busy port is reported at once),
// then serves on a std::thread. That thread inherits the caller's CPU affinity; egwd starts it
// from the main lcore, so it never runs on a worker's core. The handler runs on the server
// thread. `idle` runs about once a second and after every request, also on the server thread.
//
// Requests: GET and HEAD only, request line and headers up to 8 KiB, read within 2 s; every
// answer closes the connection (Prometheus and the kubelet reconnect cheaply).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace egw::metrics {

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
};

class HttpServer {
public:
    using Handler = std::function<HttpResponse(const std::string& path)>;
    using Idle = std::function<void()>;

    HttpServer(Handler handler, Idle idle);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Listens on `ip:port` (host order; port 0 picks a free one). Returns "" or why it failed.
    std::string start(uint32_t ip, uint16_t port);
    void stop();
    uint16_t port() const { return port_; }

    // Parses "GET /path?query HTTP/1.1"; returns false for anything else. Exposed for the tests.
    static bool parse_request_line(const std::string& line, std::string& method, std::string& path);

private:
    void run();
    void serve(int fd);

    Handler handler_;
    Idle idle_;
    int listen_fd_ = -1;
    int wake_fd_[2] = {-1, -1};
    uint16_t port_ = 0;
    std::thread thread_;
    std::atomic<bool> stopping_{false};
};

}  // namespace egw::metrics
