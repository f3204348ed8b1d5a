// SPDX-License-Identifier: Apache-2.0
#include "control/metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace egw::metrics {

namespace {

constexpr size_t kMaxRequest = 8192;
constexpr int kIdleEveryMs = 1000;

using Clock = std::chrono::steady_clock;

const char* reason_phrase(int status) {
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

char lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowered(std::string s) {
    for (char& c : s)
        c = lower(c);
    return s;
}

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    size_t b = s.find_last_not_of(" \t\r");
    return s.substr(a, b - a + 1);
}

}  // namespace

// State of the two threads. The connections belong to the loop thread alone; the queues are
// shared under `mu`.
struct HttpServer::Loop {
    enum class State { reading, waiting, writing };
    struct Conn {
        uint64_t serial = 0;
        State state = State::reading;
        Clock::time_point accepted;
        Clock::time_point deadline;
        std::string in;
        std::string out;
        size_t sent = 0;
    };
    struct Job {
        int fd;
        uint64_t serial;
        std::string path;
        bool head;
        bool gzip;
    };
    struct Done {
        int fd;
        uint64_t serial;
        std::string bytes;
    };

    int epoll_fd = -1;
    uint64_t next_serial = 1;
    std::unordered_map<int, Conn> conns;

    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job> jobs;
    std::deque<Done> done;
};

HttpServer::HttpServer(Handler handler, Idle idle, std::vector<std::string> offloaded, HttpLimits limits)
    : handler_(std::move(handler)), idle_(std::move(idle)), offloaded_(std::move(offloaded)), limits_(limits) {}

HttpServer::~HttpServer() {
    stop();
}

bool HttpServer::parse_request_line(const std::string& line, std::string& method, std::string& path) {
    size_t a = line.find(' ');
    if (a == std::string::npos || a == 0) return false;
    size_t b = line.find(' ', a + 1);
    if (b == std::string::npos || b == a + 1) return false;
    std::string version = line.substr(b + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
    method = line.substr(0, a);
    std::string target = line.substr(a + 1, b - a - 1);
    if (target.empty() || target[0] != '/') return false;
    path = target.substr(0, target.find('?'));
    return true;
}

bool HttpServer::accepts_gzip(const std::string& head) {
    size_t pos = 0;
    while (pos < head.size()) {
        size_t end = head.find('\n', pos);
        if (end == std::string::npos) end = head.size();
        std::string line = head.substr(pos, end - pos);
        pos = end + 1;
        size_t colon = line.find(':');
        if (colon == std::string::npos || lowered(trim(line.substr(0, colon))) != "accept-encoding") continue;
        // A comma-separated list of codings, each with optional parameters: "gzip;q=0" refuses.
        std::string list = lowered(line.substr(colon + 1));
        size_t p = 0;
        while (p <= list.size()) {
            size_t comma = list.find(',', p);
            if (comma == std::string::npos) comma = list.size();
            std::string item = list.substr(p, comma - p);
            p = comma + 1;
            size_t semi = item.find(';');
            std::string coding = trim(item.substr(0, semi));
            if (coding != "gzip" && coding != "*") continue;
            if (semi != std::string::npos) {
                std::string params = item.substr(semi + 1);
                size_t q = params.find("q=");
                if (q != std::string::npos && std::strtod(params.c_str() + q + 2, nullptr) <= 0) continue;
            }
            return true;
        }
    }
    return false;
}

std::string HttpServer::gzip(const std::string& in) {
    z_stream zs{};
    // windowBits 15 + 16: a gzip wrapper rather than zlib's. Level 1: the exposition is highly
    // repetitive text, so the fastest level already shrinks it about tenfold.
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
    std::string out;
    out.resize(deflateBound(&zs, static_cast<uLong>(in.size())));
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    int rc = deflate(&zs, Z_FINISH);
    size_t n = zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) return "";
    out.resize(n);
    return out;
}

namespace {

// The bytes of a whole answer: status line, headers and (unless HEAD) the body.
std::string render(const HttpResponse& r, bool head, bool gzip_ok, size_t gzip_min) {
    std::string body;
    bool gzipped = false;
    if (gzip_ok && r.body.size() >= gzip_min) {
        body = HttpServer::gzip(r.body);
        gzipped = !body.empty();
    }
    const std::string& b = gzipped ? body : r.body;
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n" +
                      "Content-Type: " + r.content_type + "\r\n" + "Content-Length: " + std::to_string(b.size()) +
                      "\r\n" + (gzipped ? "Content-Encoding: gzip\r\n" : "") +
                      (r.body.size() >= gzip_min ? "Vary: Accept-Encoding\r\n" : "") +
                      (r.status == 405 ? "Allow: GET, HEAD\r\n" : "") + "Connection: close\r\n\r\n";
    if (!head) out += b;
    return out;
}

int listen_on(const std::string& host, uint16_t port, std::string& why) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    int family = AF_INET;
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        len = sizeof *a4;
    } else if (::inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
        family = AF_INET6;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        len = sizeof *a6;
    } else {
        why = "not an IP address: " + host;
        return -1;
    }
    int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 && family == AF_INET6 && errno == EAFNOSUPPORT && host == "::")
        return listen_on("0.0.0.0", port, why);  // a kernel without IPv6: every IPv4 address
    if (fd < 0) {
        why = std::string("socket: ") + std::strerror(errno);
        return -1;
    }
    int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // "::" takes IPv4 too
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
        why = std::strerror(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

uint16_t bound_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

std::string HttpServer::start(const std::string& host, uint16_t port) {
    if (thread_.joinable()) return "already started";
    std::string why;
    listen_fd_ = listen_on(host, port, why);
    if (listen_fd_ < 0) return why;
    port_ = bound_port(listen_fd_);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (wake_fd_ < 0 || ep < 0) {
        why = std::string("eventfd/epoll: ") + std::strerror(errno);
        for (int fd : {listen_fd_, wake_fd_, ep})
            if (fd >= 0) ::close(fd);
        listen_fd_ = wake_fd_ = -1;
        return why;
    }
    loop_ = new Loop;
    loop_->epoll_fd = ep;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd_;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd_, &ev);
    ev.data.fd = wake_fd_;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd_, &ev);
    stopping_.store(false);
    thread_ = std::thread([this] { run(); });
    scrape_thread_ = std::thread([this] { scrape(); });
    return "";
}

void HttpServer::stop() {
    if (thread_.joinable()) {
        stopping_.store(true);
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
        {
            std::lock_guard lock(loop_->mu);
            loop_->cv.notify_all();
        }
        thread_.join();
        scrape_thread_.join();
    }
    if (loop_) {
        for (auto& [fd, c] : loop_->conns)
            ::close(fd);
        ::close(loop_->epoll_fd);
        delete loop_;
        loop_ = nullptr;
        counters_.open.store(0);
    }
    for (int* fd : {&listen_fd_, &wake_fd_})
        if (*fd >= 0) {
            ::close(*fd);
            *fd = -1;
        }
}

void HttpServer::scrape() {
    pthread_setname_np(pthread_self(), "egw-scrape");
    Loop& L = *loop_;
    for (;;) {
        Loop::Job job;
        {
            std::unique_lock lock(L.mu);
            L.cv.wait(lock, [&] { return stopping_.load() || !L.jobs.empty(); });
            if (stopping_.load()) return;
            job = std::move(L.jobs.front());
            L.jobs.pop_front();
        }
        HttpResponse r;
        try {
            r = handler_(job.path);
        } catch (const std::exception& e) {
            r = HttpResponse{500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
        }
        std::string bytes = render(r, job.head, job.gzip, limits_.gzip_min_bytes);
        {
            std::lock_guard lock(L.mu);
            L.done.push_back(Loop::Done{job.fd, job.serial, std::move(bytes)});
        }
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    }
}

void HttpServer::run() {
    pthread_setname_np(pthread_self(), "egw-http");
    Loop& L = *loop_;
    auto set_events = [&](int fd, uint32_t events) {
        epoll_event ev{};
        ev.events = events;
        ev.data.fd = fd;
        ::epoll_ctl(L.epoll_fd, EPOLL_CTL_MOD, fd, &ev);
    };
    auto close_conn = [&](int fd) {
        ::epoll_ctl(L.epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
        ::close(fd);
        L.conns.erase(fd);
        counters_.open.store(L.conns.size(), std::memory_order_relaxed);
    };
    // Writes what the socket takes; closes the connection once everything is sent.
    auto flush = [&](int fd, Loop::Conn& c) {
        while (c.sent < c.out.size()) {
            ssize_t k = ::send(fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                set_events(fd, EPOLLOUT);
                return;
            }
            if (k <= 0) {
                close_conn(fd);
                return;
            }
            c.sent += static_cast<size_t>(k);
        }
        ::shutdown(fd, SHUT_WR);
        close_conn(fd);
    };
    auto respond = [&](int fd, Loop::Conn& c, std::string bytes) {
        c.state = Loop::State::writing;
        c.out = std::move(bytes);
        c.sent = 0;
        c.deadline = Clock::now() + std::chrono::milliseconds(limits_.send_timeout_ms);
        flush(fd, c);
    };
    // A complete head: answer it inline, or queue it for the scrape thread.
    auto handle = [&](int fd, Loop::Conn& c) {
        std::string line = c.in.substr(0, c.in.find('\n'));
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::string method, path;
        bool gzip_ok = accepts_gzip(c.in);
        if (!parse_request_line(line, method, path))
            return respond(fd, c, render({400, "text/plain; charset=utf-8", "bad request\n"}, false, false, 0));
        if (method != "GET" && method != "HEAD")
            return respond(fd, c, render({405, "text/plain; charset=utf-8", "only GET and HEAD\n"}, false, false, 0));
        bool head = method == "HEAD";
        if (std::find(offloaded_.begin(), offloaded_.end(), path) != offloaded_.end()) {
            std::lock_guard lock(L.mu);
            if (L.jobs.size() >= limits_.max_queued)
                return respond(fd, c,
                               render({503, "text/plain; charset=utf-8", "too many scrapes queued\n"}, head, false, 0));
            L.jobs.push_back(Loop::Job{fd, c.serial, path, head, gzip_ok});
            L.cv.notify_one();
            c.state = Loop::State::waiting;
            set_events(fd, 0);  // nothing to read or write until the answer is ready
            return;
        }
        HttpResponse r;
        try {
            r = handler_(path);
        } catch (const std::exception& e) {
            r = HttpResponse{500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
        }
        respond(fd, c, render(r, head, gzip_ok, limits_.gzip_min_bytes));
    };
    auto accept_all = [&] {
        for (;;) {
            int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) return;  // EAGAIN, or a transient error (EMFILE, ...): try again on the next event
            if (L.conns.size() >= limits_.max_connections) {
                // Make room: the oldest connection that has not sent its request yet.
                int victim = -1;
                Clock::time_point oldest = Clock::time_point::max();
                for (auto& [cfd, c] : L.conns)
                    if (c.state == Loop::State::reading && c.accepted < oldest) {
                        oldest = c.accepted;
                        victim = cfd;
                    }
                if (victim < 0) {
                    ::close(fd);
                    counters_.shed.fetch_add(1, std::memory_order_relaxed);
                    continue;
                }
                close_conn(victim);
                counters_.shed.fetch_add(1, std::memory_order_relaxed);
            }
            epoll_event ev{};
            ev.events = EPOLLIN | EPOLLRDHUP;
            ev.data.fd = fd;
            if (::epoll_ctl(L.epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
                ::close(fd);
                continue;
            }
            Loop::Conn& c = L.conns[fd];
            c = Loop::Conn{};
            c.serial = L.next_serial++;
            c.accepted = Clock::now();
            c.deadline = c.accepted + std::chrono::milliseconds(limits_.head_timeout_ms);
            counters_.accepted.fetch_add(1, std::memory_order_relaxed);
            counters_.open.store(L.conns.size(), std::memory_order_relaxed);
        }
    };
    auto readable = [&](int fd, Loop::Conn& c) {
        char buf[4096];
        for (;;) {
            ssize_t k = ::recv(fd, buf, sizeof buf, 0);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (k <= 0) return close_conn(fd);  // closed before a complete head: nothing to answer
            c.in.append(buf, static_cast<size_t>(k));
            if (c.in.find("\r\n\r\n") != std::string::npos || c.in.find("\n\n") != std::string::npos)
                return handle(fd, c);
            if (c.in.size() >= kMaxRequest)
                return respond(fd, c,
                               render({400, "text/plain; charset=utf-8", "request head too long\n"}, false, false, 0));
        }
    };

    auto next_idle = Clock::now() + std::chrono::milliseconds(kIdleEveryMs);
    std::vector<epoll_event> events(64);
    while (!stopping_.load()) {
        // Sleep until the next deadline (a connection's, or the idle callback's).
        auto now = Clock::now();
        auto wake = next_idle;
        for (auto& [fd, c] : L.conns)
            if (c.state != Loop::State::waiting) wake = std::min(wake, c.deadline);
        int timeout = static_cast<int>(
            std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1));
        int n = ::epoll_wait(L.epoll_fd, events.data(), static_cast<int>(events.size()), timeout);
        if (stopping_.load()) break;
        for (int i = 0; i < n; ++i) {
            int fd = events[static_cast<size_t>(i)].data.fd;
            if (fd == listen_fd_) {
                accept_all();
                continue;
            }
            if (fd == wake_fd_) {
                uint64_t v;
                [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
                std::deque<Loop::Done> done;
                {
                    std::lock_guard lock(L.mu);
                    done.swap(L.done);
                }
                for (auto& d : done) {
                    auto it = L.conns.find(d.fd);
                    if (it != L.conns.end() && it->second.serial == d.serial)
                        respond(d.fd, it->second, std::move(d.bytes));
                }
                continue;
            }
            auto it = L.conns.find(fd);
            if (it == L.conns.end()) continue;
            Loop::Conn& c = it->second;
            if (c.state == Loop::State::waiting) {
                // Only errors and hang-ups are reported while waiting: the client gave up.
                if (events[static_cast<size_t>(i)].events & (EPOLLHUP | EPOLLERR)) close_conn(fd);
                continue;
            }
            if (c.state == Loop::State::reading)
                readable(fd, c);
            else if (c.state == Loop::State::writing)
                flush(fd, c);
        }
        now = Clock::now();
        std::vector<int> late;
        for (auto& [fd, c] : L.conns)
            if (c.state != Loop::State::waiting && c.deadline <= now) late.push_back(fd);
        for (int fd : late) {
            // Counted before the close, so whoever sees the connection end sees it counted.
            counters_.timed_out.fetch_add(1, std::memory_order_relaxed);
            close_conn(fd);
        }
        if (now >= next_idle) {
            if (idle_) idle_();
            next_idle = Clock::now() + std::chrono::milliseconds(kIdleEveryMs);
        }
    }
}

}  // namespace egw::metrics
