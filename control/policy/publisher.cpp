// SPDX-License-Identifier: Apache-2.0
#include "control/policy/publisher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "dataplane/publish.h"

namespace egw::control {

PolicyPublisher::PolicyPublisher(dp::DataplaneShared& shared, Hooks hooks)
    : shared_(shared), hooks_(std::move(hooks)) {}

void PolicyPublisher::publish(std::unique_ptr<dp::PolicySnapshot> next) {
    NatAddresses nat_addresses;
    next->nat_addresses.for_each([&](uint64_t ip, uint32_t) { nat_addresses[static_cast<uint32_t>(ip)]; });
    // ingress_key(ip, proto, port): the Service ports of the NAT addresses that are ingress IPs.
    next->ingress_ports.for_each([&](uint64_t key, uint32_t) {
        auto it = nat_addresses.find(static_cast<uint32_t>(key >> 32));
        if (it != nat_addresses.end())
            it->second.emplace_back(static_cast<uint8_t>(key >> 16), static_cast<uint16_t>(key));
    });
    for (auto& [ip, ports] : nat_addresses)
        std::sort(ports.begin(), ports.end());
    if (nat_addresses != nat_addresses_) {
        if (hooks_.nat_addresses_changed) hooks_.nat_addresses_changed(nat_addresses);
        nat_addresses_ = std::move(nat_addresses);
    }
    const uint64_t generation = next->generation;
    const auto t0 = std::chrono::steady_clock::now();
    // Returns once no worker can still be reading the old version: then it is freed.
    delete dp::publish_policy(shared_, next.release());
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - t0;
    ++publications_;
    if (hooks_.published) hooks_.published(spent.count());
    spdlog::debug("published policy generation {} in {} us", generation, static_cast<uint64_t>(spent.count() * 1e6));
}

void PolicyPublisher::retire() {
    delete shared_.policy.current.exchange(nullptr);
}

const dp::PolicySnapshot* PolicyPublisher::current() const {
    return shared_.policy.current.load(std::memory_order_acquire);
}

}  // namespace egw::control
