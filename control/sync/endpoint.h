// SPDX-License-Identifier: Apache-2.0
//
// One gateway's end of session sync: its peers (a Link each), the key ring, and the order in
// which a received datagram is checked. Structure first (decode_header), then the sender (a
// configured peer), then the tag, then freshness (the peer's replay window), and only then are
// the events decoded and the reliability state touched: a datagram that fails any step changes
// nothing but its refusal counter. Still no sockets and no clock of its own (transport.h sends).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "control/sync/auth.h"
#include "control/sync/link.h"
#include "control/sync/wire.h"

namespace egw::sync {

struct EndpointConfig {
    uint32_t self = 0;
    uint32_t boot = 0;
    uint64_t first_counter = 1;  // see LinkConfig::first_counter
    std::vector<uint32_t> peers;
    size_t resend_capacity = 1024;
    uint32_t ack_every = 32;
    std::chrono::milliseconds keepalive{1000};
    std::chrono::milliseconds nack_retry{200};
};

// An encoded, signed datagram for one peer.
struct Outgoing {
    uint32_t peer = 0;
    std::vector<uint8_t> bytes;
};

class SyncEndpoint {
public:
    SyncEndpoint(const EndpointConfig& cfg, KeyRing& keys);

    // Signed datagrams carrying `events` to every peer, split to at most `per_datagram` events
    // each (from the sync link's MTU).
    std::vector<Outgoing> send(std::span<const Event> events, size_t per_datagram, Clock::time_point now);

    struct Received {
        bool accepted = false;
        Refusal refusal = Refusal::truncated;
        uint32_t peer = 0;
        std::vector<Event> events;  // new events to apply (empty for duplicates and control)
        std::vector<Outgoing> replies;
    };
    Received receive(std::span<const uint8_t> bytes, Clock::time_point now);

    std::vector<Outgoing> tick(Clock::time_point now);

    // Bulk sync: a signed datagram without events carrying `flags` for one peer, and whether a
    // peer has asked for a dump since the last call (see Link).
    Outgoing control(uint32_t peer, uint8_t flags, Clock::time_point now);
    bool take_bulk_request(uint32_t peer);

    const std::array<uint64_t, kRefusalCount>& refusals() const { return refusals_; }
    uint64_t accepted_with_previous_key() const { return previous_key_; }
    const Link* link(uint32_t peer) const;

private:
    Outgoing seal(uint32_t peer, const Datagram& d) const;

    KeyRing& keys_;
    std::map<uint32_t, std::unique_ptr<Link>> links_;
    std::array<uint64_t, kRefusalCount> refusals_{};
    uint64_t previous_key_ = 0;
};

}  // namespace egw::sync
