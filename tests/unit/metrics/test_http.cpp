// SPDX-License-Identifier: Apache-2.0
//
// The metrics HTTP server (control/metrics/http_server.h) over a real loopback socket.
#include "control/metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

using egw::metrics::HttpResponse;
using egw::metrics::HttpServer;

constexpr uint32_t kLoopback = 0x7f000001;

// Sends `request` as is and returns everything the server answers until it closes.
std::string exchange(uint16_t port, const std::string& request) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(kLoopback);
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return "connect failed";
    }
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0)
        out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

struct Server {
    std::atomic<int> idles{0};
    HttpServer http{[](const std::string& path) {
                        if (path == "/hello")
                            return HttpResponse{200, "text/plain; version=0.0.4", "hi\n"};
                        if (path == "/throw")
                            throw std::runtime_error("boom");
                        return HttpResponse{404, "text/plain", "no\n"};
                    },
                    [this] { ++idles; }};
    Server() { EXPECT_EQ(http.start(kLoopback, 0), ""); }
};

TEST(Http, ParsesRequestLines) {
    std::string m, p;
    EXPECT_TRUE(HttpServer::parse_request_line("GET /metrics HTTP/1.1", m, p));
    EXPECT_EQ(m, "GET");
    EXPECT_EQ(p, "/metrics");
    EXPECT_TRUE(HttpServer::parse_request_line("HEAD /livez?verbose=1 HTTP/1.0", m, p));
    EXPECT_EQ(m, "HEAD");
    EXPECT_EQ(p, "/livez");
    EXPECT_FALSE(HttpServer::parse_request_line("GET /metrics", m, p));
    EXPECT_FALSE(HttpServer::parse_request_line("GET metrics HTTP/1.1", m, p));
    EXPECT_FALSE(HttpServer::parse_request_line("GET /metrics HTTP/2", m, p));
    EXPECT_FALSE(HttpServer::parse_request_line("", m, p));
    EXPECT_FALSE(HttpServer::parse_request_line(" / HTTP/1.1", m, p));
}

TEST(Http, ServesAGetWithLengthAndClose) {
    Server s;
    std::string r = exchange(s.http.port(), "GET /hello HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
    EXPECT_EQ(r,
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: 3\r\n"
              "Connection: close\r\n\r\nhi\n");
}

TEST(Http, HeadHasNoBody) {
    Server s;
    std::string r = exchange(s.http.port(), "HEAD /hello HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.find("Content-Length: 3\r\n"), r.find("Content-Length"));
    EXPECT_TRUE(r.ends_with("\r\n\r\n")) << r;
}

TEST(Http, StatusCodes) {
    Server s;
    EXPECT_TRUE(exchange(s.http.port(), "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 Not Found\r\n"));
    std::string post = exchange(s.http.port(), "POST /hello HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_TRUE(post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")) << post;
    EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos);
    EXPECT_TRUE(exchange(s.http.port(), "garbage\r\n\r\n").starts_with("HTTP/1.1 400 Bad Request\r\n"));
    std::string boom = exchange(s.http.port(), "GET /throw HTTP/1.1\r\n\r\n");
    EXPECT_TRUE(boom.starts_with("HTTP/1.1 500 Internal Server Error\r\n")) << boom;
    EXPECT_TRUE(boom.ends_with("boom\n"));
}

TEST(Http, AcceptsBareNewlines) {
    Server s;
    EXPECT_TRUE(exchange(s.http.port(), "GET /hello HTTP/1.0\n\n").starts_with("HTTP/1.1 200 OK\r\n"));
}

TEST(Http, ASilentClientDoesNotBlockTheNextOneForever) {
    Server s;
    int idle = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(kLoopback);
    a.sin_port = htons(s.http.port());
    ASSERT_EQ(::connect(idle, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    auto t0 = std::chrono::steady_clock::now();
    std::string r = exchange(s.http.port(), "GET /hello HTTP/1.1\r\n\r\n");
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::close(idle);
    EXPECT_TRUE(r.starts_with("HTTP/1.1 200 OK")) << r;
    EXPECT_LT(waited, 5.0);
}

TEST(Http, IdleRunsAndStopJoins) {
    Server s;
    exchange(s.http.port(), "GET /hello HTTP/1.1\r\n\r\n");
    EXPECT_GE(s.idles.load(), 1);
    s.http.stop();
    s.http.stop();  // idempotent
    EXPECT_EQ(exchange(s.http.port(), "GET /hello HTTP/1.1\r\n\r\n"), "connect failed");
}

TEST(Http, ABusyPortIsReported) {
    Server s;
    HttpServer other([](const std::string&) { return HttpResponse{}; }, nullptr);
    EXPECT_EQ(other.start(kLoopback, s.http.port()), "Address already in use");
}

}  // namespace
