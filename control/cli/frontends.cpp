// SPDX-License-Identifier: Apache-2.0
#include "control/cli/frontends.h"

#include <rte_eal.h>
#include <spdlog/spdlog.h>

#include "control/cli/console.h"
#include "control/cli/server.h"

namespace egw::cli {

Frontends::Frontends(CliHost host, bool interactive) : cli_(host) {
    std::string path = std::string(rte_eal_get_runtime_dir()) + "/" + std::string(kSocketName);
    try {
        server_ = std::make_unique<Server>(path, cli_);
        spdlog::info("CLI socket {} (egwctl finds it by the file prefix, or --socket)", path);
    } catch (const std::exception& e) {
        spdlog::error("{}; egwctl will not reach this egwd", e.what());
    }
    if (interactive) console_ = std::make_unique<Console>(cli_);
}

Frontends::~Frontends() = default;

bool Frontends::poll() {
    if (server_) server_->poll();
    return !console_ || console_->poll();
}

std::string Frontends::socket_path() const {
    return server_ ? server_->path() : "";
}

}  // namespace egw::cli
