// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace egw::metrics {

namespace {

constexpr size_t kMaxRequest = 8192;
constexpr int kIoTimeoutMs = 2000;

const char* reason_phrase(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

bool send_all(int fd, const char* data, size_t n) {
    while (n > 0) {
        ssize_t k = ::send(fd, data, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        data += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

}  // namespace

HttpServer::HttpServer(Handler handler, Idle idle) : handler_(std::move(handler)), idle_(std::move(idle)) {}

HttpServer::~HttpServer() { stop(); }

bool HttpServer::parse_request_line(const std::string& line, std::string& method, std::string& path) {
    size_t a = line.find(' ');
    if (a == std::string::npos || a == 0)
        return false;
    size_t b = line.find(' ', a + 1);
    if (b == std::string::npos || b == a + 1)
        return false;
    std::string version = line.substr(b + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return false;
    method = line.substr(0, a);
    std::string target = line.substr(a + 1, b - a - 1);
    if (target.empty() || target[0] != '/')
        return false;
    path = target.substr(0, target.find('?'));
    return true;
}

std::string HttpServer::start(uint32_t ip, uint16_t port) {
    if (thread_.joinable())
        return "already started";
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0)
        return std::string("socket: ") + std::strerror(errno);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(ip);
    a.sin_port = htons(port);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 16) != 0) {
        std::string why = std::strerror(errno);
        ::close(listen_fd_);
        listen_fd_ = -1;
        return why;
    }
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (::pipe2(wake_fd_, O_CLOEXEC | O_NONBLOCK) != 0) {
        std::string why = std::strerror(errno);
        ::close(listen_fd_);
        listen_fd_ = -1;
        return "pipe: " + why;
    }
    stopping_.store(false);
    thread_ = std::thread([this] { run(); });
    return "";
}

void HttpServer::stop() {
    if (thread_.joinable()) {
        stopping_.store(true);
        char c = 0;
        [[maybe_unused]] ssize_t n = ::write(wake_fd_[1], &c, 1);
        thread_.join();
    }
    for (int* fd : {&listen_fd_, &wake_fd_[0], &wake_fd_[1]})
        if (*fd >= 0) {
            ::close(*fd);
            *fd = -1;
        }
}

void HttpServer::run() {
    pthread_setname_np(pthread_self(), "egw-metrics");
    while (!stopping_.load()) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
        int n = ::poll(fds, 2, 1000);
        if (stopping_.load())
            break;
        if (n > 0 && (fds[0].revents & POLLIN)) {
            int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0) {
                serve(fd);
                ::close(fd);
            }
        }
        if (idle_)
            idle_();
    }
}

void HttpServer::serve(int fd) {
    timeval tv{kIoTimeoutMs / 1000, (kIoTimeoutMs % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

    // Read the request head, within kIoTimeoutMs in all (a client trickling bytes does not hold
    // the thread longer); a body (none is expected) is ignored.
    std::string head;
    char buf[2048];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kIoTimeoutMs);
    while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
        if (head.size() >= kMaxRequest)
            break;
        if (std::chrono::steady_clock::now() >= deadline)
            return;
        ssize_t k = ::recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;  // closed or timed out before a complete head: nothing to answer
        head.append(buf, static_cast<size_t>(k));
    }
    std::string line = head.substr(0, head.find('\n'));
    if (!line.empty() && line.back() == '\r')
        line.pop_back();

    HttpResponse r;
    std::string method, path;
    if (!parse_request_line(line, method, path)) {
        r = HttpResponse{400, "text/plain; charset=utf-8", "bad request\n"};
    } else if (method != "GET" && method != "HEAD") {
        r = HttpResponse{405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
    } else {
        try {
            r = handler_(path);
        } catch (const std::exception& e) {
            r = HttpResponse{500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
        }
    }
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n" +
                      "Content-Type: " + r.content_type + "\r\n" +
                      "Content-Length: " + std::to_string(r.body.size()) + "\r\n" +
                      (r.status == 405 ? "Allow: GET, HEAD\r\n" : "") + "Connection: close\r\n\r\n";
    if (method != "HEAD")
        out += r.body;
    send_all(fd, out.data(), out.size());
}

}  // namespace egw::metrics
