// SPDX-License-Identifier: Apache-2.0
//
// The PolicyPublisher hands each PolicySnapshot the builder makes to the workers, and owns the
// snapshot they read from then on. Publishing swaps the pointer in DataplaneShared::policy and
// waits, with RCU (dataplane/publish.h), until no worker can still be reading the snapshot it
// replaced; then it frees that one. Control thread only.
//
// Around the swap it tells the rest of egwd what it needs to know, through hooks the Daemon
// gives it (so this library needs neither the ports nor the metrics): before the swap, the NAT
// addresses of the new snapshot when they differ from the last ones (the NIC's steering rules
// for a new address go in before the first session can use it); after it, how long the
// publication took, from the swap until the old snapshot was freed (the RCU grace period).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace egw::dp {
struct DataplaneShared;
struct PolicySnapshot;
}  // namespace egw::dp

namespace egw::control {

class PolicyPublisher {
public:
    using NatAddresses = std::map<uint32_t, std::vector<std::pair<uint8_t, uint16_t>>>;

    struct Hooks {
        // The new snapshot's NAT addresses (host order), each with the (IP protocol, port) pairs
        // its Services take ingress on, sorted, when they are not what the last call was given
        // (none before the first).
        std::function<void(const NatAddresses& nat_addresses)> nat_addresses_changed;
        // After each publication, with the seconds it took.
        std::function<void(double seconds)> published;
    };

    // `shared` outlives the publisher; its qsbr (or none: no worker reads yet) is the one the
    // workers report their quiescent states to.
    PolicyPublisher(dp::DataplaneShared& shared, Hooks hooks);
    // Leaves the snapshot in use where it is: the workers may still read it (see retire()).
    ~PolicyPublisher() = default;
    PolicyPublisher(const PolicyPublisher&) = delete;
    PolicyPublisher& operator=(const PolicyPublisher&) = delete;

    // Publishes `next` and returns once the snapshot it replaced is freed.
    void publish(std::unique_ptr<dp::PolicySnapshot> next);

    // Frees the snapshot in use and leaves none; only once no worker runs any more.
    void retire();

    const dp::PolicySnapshot* current() const;
    uint64_t publications() const { return publications_; }

private:
    dp::DataplaneShared& shared_;
    Hooks hooks_;
    NatAddresses nat_addresses_;  // as last given to nat_addresses_changed
    uint64_t publications_ = 0;
};

}  // namespace egw::control
