// SPDX-License-Identifier: Apache-2.0
#include "control/cli/protocol.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace egw::cli {

namespace {

const char* status_word(Status s) {
    switch (s) {
    case Status::ok:
        return "ok";
    case Status::error:
        return "error";
    case Status::bye:
        return "bye";
    }
    return "error";
}

// A header is short; anything longer without a newline is not egwd talking.
constexpr size_t kMaxHeader = 64;

}  // namespace

std::string encode_response(Status status, std::string_view body) {
    std::string out = status_word(status);
    out += ' ';
    out += std::to_string(body.size());
    out += '\n';
    out += body;
    return out;
}

bool decode_response(std::string& buf, Response& out) {
    size_t nl = buf.find('\n');
    if (nl == std::string::npos) {
        if (buf.size() > kMaxHeader) throw ProtocolError("malformed response header");
        return false;
    }
    std::string header = buf.substr(0, nl);
    size_t sp = header.find(' ');
    if (sp == std::string::npos) throw ProtocolError("malformed response header \"" + header + "\"");
    std::string word = header.substr(0, sp);
    if (word == "ok")
        out.status = Status::ok;
    else if (word == "error")
        out.status = Status::error;
    else if (word == "bye")
        out.status = Status::bye;
    else
        throw ProtocolError("unknown response status \"" + word + "\"");
    std::string len_text = header.substr(sp + 1);
    if (len_text.empty() || len_text.find_first_not_of("0123456789") != std::string::npos || len_text.size() > 12)
        throw ProtocolError("malformed response length \"" + len_text + "\"");
    size_t len = std::stoull(len_text);
    if (buf.size() - nl - 1 < len) return false;
    out.body = buf.substr(nl + 1, len);
    buf.erase(0, nl + 1 + len);
    return true;
}

std::string encode_completion(const Completion& c) {
    std::string out;
    for (const auto& w : c.candidates)
        out += "c " + w + "\n";
    for (const auto& h : c.hints)
        out += "h " + h + "\n";
    return out;
}

Completion decode_completion(std::string_view body, std::string_view before_cursor) {
    Completion c;
    c.partial = partial_word(before_cursor);
    size_t pos = 0;
    while (pos < body.size()) {
        size_t nl = body.find('\n', pos);
        std::string_view line = body.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? body.size() : nl + 1;
        if (line.size() < 2 || line[1] != ' ') continue;
        if (line[0] == 'c')
            c.candidates.emplace_back(line.substr(2));
        else if (line[0] == 'h')
            c.hints.emplace_back(line.substr(2));
    }
    return c;
}

std::string partial_word(std::string_view before_cursor) {
    size_t sp = before_cursor.find_last_of(" \t");
    return std::string(sp == std::string_view::npos ? before_cursor : before_cursor.substr(sp + 1));
}

std::string runtime_dir_for(const std::string& file_prefix) {
    std::string base = "/var/run";
    if (getuid() != 0) {
        const char* xdg = std::getenv("XDG_RUNTIME_DIR");
        base = xdg ? xdg : "/tmp";
    }
    return base + "/dpdk/" + file_prefix;
}

std::string socket_path_for(const std::string& file_prefix) {
    return runtime_dir_for(file_prefix) + "/" + std::string(kSocketName);
}

Client::Client(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) throw std::runtime_error(path + ": socket path too long");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        int e = errno;
        close(fd_);
        fd_ = -1;
        std::string hint =
            e == ENOENT || e == ECONNREFUSED ? " (is egwd running with this file prefix? see --socket)" : "";
        throw std::runtime_error(path + ": " + std::strerror(e) + hint);
    }
}

Client::~Client() {
    if (fd_ >= 0) close(fd_);
}

Response Client::request(std::string_view kind, std::string_view line) {
    std::string req(kind);
    req += ' ';
    for (char c : line)
        if (c != '\n' && c != '\r') req += c;
    req += '\n';
    size_t off = 0;
    while (off < req.size()) {
        ssize_t n = send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error(std::string("egwd connection lost: ") + std::strerror(errno));
        off += static_cast<size_t>(n);
    }
    Response r;
    char chunk[65536];
    while (!decode_response(buf_, r)) {
        ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error(std::string("egwd connection lost: ") + std::strerror(errno));
        if (n == 0) throw std::runtime_error("egwd closed the connection");
        buf_.append(chunk, static_cast<size_t>(n));
    }
    return r;
}

}  // namespace egw::cli
