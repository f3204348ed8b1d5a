// SPDX-License-Identifier: Apache-2.0
#include "control/sync/endpoint.h"

#include <algorithm>
#include <stdexcept>

namespace egw::sync {

SyncEndpoint::SyncEndpoint(const EndpointConfig& cfg, KeyRing& keys) : keys_(keys) {
    for (uint32_t peer : cfg.peers) {
        if (peer == cfg.self) throw std::invalid_argument("sync: a gateway cannot be its own peer");
        LinkConfig lc;
        lc.self = cfg.self;
        lc.peer = peer;
        lc.boot = cfg.boot;
        lc.first_counter = cfg.first_counter;
        lc.resend_capacity = cfg.resend_capacity;
        lc.ack_every = cfg.ack_every;
        lc.keepalive = cfg.keepalive;
        lc.nack_retry = cfg.nack_retry;
        links_.emplace(peer, std::make_unique<Link>(lc));
    }
}

const Link* SyncEndpoint::link(uint32_t peer) const {
    auto it = links_.find(peer);
    return it == links_.end() ? nullptr : it->second.get();
}

Outgoing SyncEndpoint::seal(uint32_t peer, const Datagram& d) const {
    Outgoing out{peer, encode(d)};
    keys_.sign(out.bytes);
    return out;
}

std::vector<Outgoing> SyncEndpoint::send(std::span<const Event> events, size_t per_datagram, Clock::time_point now) {
    per_datagram = std::clamp<size_t>(per_datagram, 1, kMaxEventsPerDatagram);
    std::vector<Outgoing> out;
    for (size_t at = 0; at < events.size(); at += per_datagram) {
        auto chunk = events.subspan(at, std::min(per_datagram, events.size() - at));
        for (auto& [peer, link] : links_)
            out.push_back(seal(peer, link->send(std::vector<Event>(chunk.begin(), chunk.end()), now)));
    }
    return out;
}

SyncEndpoint::Received SyncEndpoint::receive(std::span<const uint8_t> bytes, Clock::time_point now) {
    Received res;
    auto refuse = [&](Refusal r) {
        res.refusal = r;
        ++refusals_[static_cast<size_t>(r)];
        return res;
    };
    HeaderResult h = decode_header(bytes);
    if (!h.ok) return refuse(h.refusal);
    auto it = links_.find(h.header.sender);
    if (it == links_.end()) return refuse(Refusal::unknown_peer);
    KeyRing::Verdict verdict = keys_.verify(bytes, now);
    if (verdict == KeyRing::Verdict::bad) return refuse(Refusal::bad_tag);
    Datagram d;
    DecodeResult dr = decode(bytes, d);
    if (!dr.ok) return refuse(dr.refusal);
    Link::Received lr = it->second->receive(d, now);
    if (lr.replayed) return refuse(Refusal::replayed);
    if (verdict == KeyRing::Verdict::previous) ++previous_key_;
    res.accepted = true;
    res.peer = h.header.sender;
    if (lr.deliver) res.events = std::move(d.events);
    for (const Datagram& r : lr.replies)
        res.replies.push_back(seal(res.peer, r));
    return res;
}

Outgoing SyncEndpoint::control(uint32_t peer, uint8_t flags, Clock::time_point now) {
    return seal(peer, links_.at(peer)->control(flags, now));
}

bool SyncEndpoint::take_bulk_request(uint32_t peer) {
    auto it = links_.find(peer);
    return it != links_.end() && it->second->take_bulk_request();
}

std::vector<Outgoing> SyncEndpoint::tick(Clock::time_point now) {
    std::vector<Outgoing> out;
    for (auto& [peer, link] : links_)
        for (const Datagram& d : link->tick(now))
            out.push_back(seal(peer, d));
    return out;
}

}  // namespace egw::sync
