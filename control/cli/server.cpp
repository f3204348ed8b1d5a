// SPDX-License-Identifier: Apache-2.0
#include "control/cli/server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace egw::cli {

namespace {

std::string err(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

sockaddr_un address_of(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) throw std::runtime_error("CLI socket " + path + ": path too long");
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return a;
}

// Whether something answers on the socket at `a`.
bool alive(const sockaddr_un& a) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    return ok;
}

}  // namespace

Server::Server(std::string path, Cli& cli) : path_(std::move(path)), cli_(cli) {
    sockaddr_un a = address_of(path_);
    struct stat st {};
    if (lstat(path_.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) throw std::runtime_error("CLI socket " + path_ + ": exists and is not a socket");
        if (alive(a)) throw std::runtime_error("CLI socket " + path_ + ": another egwd answers there");
        unlink(path_.c_str());
    }
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw std::runtime_error(err("CLI socket " + path_));
    // Owner-only from the first instant: bind() creates the file with the umask applied.
    mode_t old = umask(0177);
    int rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    umask(old);
    if (rc != 0 || chmod(path_.c_str(), 0600) != 0 || listen(listen_fd_, 8) != 0) {
        std::string why = err("CLI socket " + path_);
        close(listen_fd_);
        listen_fd_ = -1;
        if (rc == 0) unlink(path_.c_str());
        throw std::runtime_error(why);
    }
}

Server::~Server() {
    for (auto& c : conns_)
        close(c.fd);
    if (listen_fd_ >= 0) {
        close(listen_fd_);
        unlink(path_.c_str());
    }
}

void Server::accept_clients() {
    for (;;) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;  // EAGAIN, or a client that gave up meanwhile
        if (conns_.size() >= kMaxClients) {
            std::string msg =
                encode_response(Status::error, "too many CLI clients (at most " + std::to_string(kMaxClients) + ")\n");
            (void)!send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            close(fd);
            continue;
        }
        conns_.push_back(Conn{fd, {}, {}, false});
    }
}

void Server::read_from(Conn& c) {
    char buf[16384];
    for (int rounds = 0; rounds < 4; ++rounds) {
        ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            c.in.append(buf, static_cast<size_t>(n));
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            c.closing = true;  // the client is done sending; answer what it asked, then close
        return;
    }
}

void Server::serve(Conn& c) {
    size_t start = 0;
    for (;;) {
        size_t nl = c.in.find('\n', start);
        if (nl == std::string::npos) break;
        std::string_view line(c.in.data() + start, nl - start);
        start = nl + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.size() > kMaxRequest) {
            c.out += encode_response(Status::error, "request longer than " + std::to_string(kMaxRequest) + " bytes\n");
            c.closing = true;
            break;
        }
        size_t sp = line.find(' ');
        std::string_view kind = line.substr(0, sp);
        std::string_view rest = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
        if (kind == "run") {
            Cli::Outcome o = cli_.run(rest, Origin::socket);
            c.out += encode_response(o.status, o.text);
            if (o.status == Status::bye) {
                c.closing = true;
                break;
            }
        } else if (kind == "complete") {
            c.out += encode_response(Status::ok, encode_completion(cli_.complete(rest)));
        } else {
            c.out += encode_response(Status::error,
                                     "unknown request \"" + std::string(kind) + "\": expected run or complete\n");
        }
        if (c.out.size() > kMaxQueued) {
            spdlog::warn("CLI client dropped: more than {} MiB of output unread", kMaxQueued >> 20);
            c.out.clear();
            c.closing = true;
            c.in.clear();
            return;
        }
    }
    c.in.erase(0, start);
    if (c.in.size() > kMaxRequest) {
        c.out += encode_response(Status::error, "request longer than " + std::to_string(kMaxRequest) + " bytes\n");
        c.in.clear();
        c.closing = true;
    }
    if (c.closing) c.in.clear();
}

void Server::write_to(Conn& c) {
    while (!c.out.empty()) {
        ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c.out.erase(0, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        c.out.clear();  // the client went away
        c.closing = true;
        return;
    }
}

void Server::poll() {
    if (listen_fd_ < 0) return;
    std::vector<pollfd> fds;
    fds.reserve(conns_.size() + 1);
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& c : conns_)
        fds.push_back({c.fd, static_cast<short>((c.closing ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)), 0});
    if (::poll(fds.data(), fds.size(), 0) <= 0) return;
    size_t n = conns_.size();
    for (size_t i = 0; i < n; ++i) {
        Conn& c = conns_[i];
        short ev = fds[i + 1].revents;
        if (ev & (POLLIN | POLLHUP | POLLERR)) {
            if (!c.closing) read_from(c);
            serve(c);
        }
        if (!c.out.empty()) write_to(c);
    }
    std::erase_if(conns_, [](const Conn& c) {
        bool done = c.closing && c.out.empty();
        if (done) close(c.fd);
        return done;
    });
    if (fds[0].revents & POLLIN) accept_clients();
}

}  // namespace egw::cli
