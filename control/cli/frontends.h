// SPDX-License-Identifier: Apache-2.0
//
// What egwd sets up for its CLI: the command runner, the socket egwctl connects to (egw.sock in
// the DPDK runtime directory) and, with `egwd -i`, the console. egwd calls poll() from its
// control loop; every command runs there.
#pragma once

#include <memory>
#include <string>

#include "control/cli/cli.h"

namespace egw::cli {

class Server;
class Console;

class Frontends {
public:
    // Never throws for the socket: a socket that cannot be created is logged, and egwd goes on
    // without it (forwarding matters more than the CLI).
    Frontends(CliHost host, bool interactive);
    ~Frontends();

    // False when the console asked egwd to stop.
    bool poll();

    // "" when there is no socket.
    std::string socket_path() const;

private:
    Cli cli_;
    std::unique_ptr<Server> server_;
    std::unique_ptr<Console> console_;
};

}  // namespace egw::cli
