// SPDX-License-Identifier: Apache-2.0
//
// The CLI socket egwctl talks to (protocol.h), served from egwd's control loop.
//
// poll() never blocks: it accepts, reads what is there, runs every complete request on the
// calling (control) thread and writes what the socket takes; the rest waits for the next call.
// A client that stops reading cannot stall the loop, only grow its own output queue up to
// kMaxQueued bytes, after which it is disconnected.
#pragma once

#include <string>
#include <vector>

#include "control/cli/cli.h"

namespace egw::cli {

class Server {
public:
    static constexpr size_t kMaxClients = 16;
    static constexpr size_t kMaxQueued = size_t{256} << 20;

    // Creates the socket at `path`, mode 0600. A socket left behind by an egwd that died is
    // replaced; one that still answers is another egwd's, and an error. Throws
    // std::runtime_error naming the path and the reason.
    Server(std::string path, Cli& cli);
    ~Server();  // closes the connections and removes the socket
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    void poll();
    const std::string& path() const { return path_; }
    size_t clients() const { return conns_.size(); }

private:
    struct Conn {
        int fd = -1;
        std::string in;
        std::string out;
        bool closing = false;  // close once `out` is written
    };
    void accept_clients();
    void read_from(Conn& c);
    void serve(Conn& c);
    void write_to(Conn& c);

    std::string path_;
    Cli& cli_;
    int listen_fd_ = -1;
    std::vector<Conn> conns_;
};

}  // namespace egw::cli
