// SPDX-License-Identifier: Apache-2.0
//
// The egwctl <-> egwd socket protocol.
//
// A Unix stream socket, `egw.sock` in egwd's DPDK runtime directory (/var/run/dpdk/<file prefix>/
// for root), mode 0600. A connection carries any number of request/response pairs, in order:
//
//   request:   "run <command line>\n"           execute, exactly as typed at the egw> prompt
//              "complete <text before cursor>\n" TAB completion of the last word
//   response:  "<status> <length>\n" followed by <length> bytes of body
//              status "ok", "error" (the body says why, naming the word and the expected form)
//              or "bye" (`quit`: the daemon closes the connection after the body)
//
// A completion body holds one line per entry: "c <candidate>" or "h <hint>". A request line is at
// most kMaxRequest bytes; a longer one gets an error and the connection is closed.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "control/cli/grammar.h"

namespace egw::cli {

inline constexpr size_t kMaxRequest = 4096;
inline constexpr std::string_view kSocketName = "egw.sock";

enum class Status : uint8_t { ok, error, bye };

struct Response {
    Status status = Status::ok;
    std::string body;
};

class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

std::string encode_response(Status status, std::string_view body);
// Takes one whole response off the front of `buf`; false when more bytes are needed. Throws
// ProtocolError on a malformed header.
bool decode_response(std::string& buf, Response& out);

std::string encode_completion(const Completion& c);
// `before_cursor` gives the partial word, which the daemon does not send back.
Completion decode_completion(std::string_view body, std::string_view before_cursor);

// The word being completed: what follows the last space or tab ("" after one).
std::string partial_word(std::string_view before_cursor);

// DPDK's runtime directory for a file prefix, computed as EAL does (root: /var/run/dpdk/PREFIX;
// others: $XDG_RUNTIME_DIR/dpdk/PREFIX, or /tmp/dpdk/PREFIX), and egwd's socket in it.
std::string runtime_dir_for(const std::string& file_prefix);
std::string socket_path_for(const std::string& file_prefix);

// A blocking client connection.
class Client {
public:
    // Throws std::runtime_error naming the path and the system error.
    explicit Client(const std::string& path);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // `kind` is "run" or "complete". Throws std::runtime_error when the daemon goes away.
    Response request(std::string_view kind, std::string_view line);

private:
    int fd_ = -1;
    std::string buf_;
};

}  // namespace egw::cli
