// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: session sync datagrams (control/sync) as a gateway receives them from the sync
// network, one after another, into a SyncEndpoint whose only peer is gateway 1.
//
// Input: byte 0's low bit asks for every datagram to be signed with the peers' key before it is
// delivered (so the fuzzer reaches the reliability state behind the tag; without it, everything
// but a lucky forgery is refused), its other bits the milliseconds the clock moves between
// datagrams. Then datagrams, each a 16-bit big-endian length and that many bytes.
//
// Invariants:
// - decode() accepts a datagram exactly when re-encoding what it decoded gives back the same
//   bytes (before the tag): the encoding is canonical, so no two byte strings mean one datagram;
// - the endpoint accepts nothing that decode() refuses, nor anything unsigned, and a refused
//   datagram changes no link state;
// - every reply the endpoint makes decodes, carries its tag under the key, and is addressed to
//   the peer; the resend buffer stays within its bound.
#include <algorithm>
#include <vector>

#include "control/sync/endpoint.h"
#include "control/sync/wire.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace egw::sync;

constexpr size_t kResendCapacity = 16;

std::vector<uint8_t> shared_key() {
    return std::vector<uint8_t>(32, 0x5a);
}

EndpointConfig receiver_config() {
    EndpointConfig c;
    c.self = 2;
    c.boot = 1;
    c.first_counter = 1;
    c.peers = {1};
    c.resend_capacity = kResendCapacity;
    c.ack_every = 4;
    return c;
}

Event local_event() {
    Event e;
    e.inside.addr = ipv4_address(0x0a800005);
    e.outside.addr = ipv4_address(0xc0a80a0a);
    e.remote.addr = ipv4_address(0x08080808);
    return e;
}

void check_canonical(const std::vector<uint8_t>& bytes) {
    Datagram d;
    DecodeResult r = decode(bytes, d);
    if (!r.ok) return;
    std::vector<uint8_t> again = encode(d);
    if (again.size() != bytes.size() || !std::equal(again.begin(), again.end() - kTagSize, bytes.begin()))
        egw::fuzz::fail("a decoded datagram encodes to other bytes");
}

void check_replies(const SyncEndpoint::Received& r, const KeyRing& keys, Clock::time_point now) {
    for (const Outgoing& o : r.replies) {
        if (o.peer != 1) egw::fuzz::fail("a reply to a gateway that is not the peer");
        Datagram d;
        if (!decode(o.bytes, d).ok) egw::fuzz::fail("a reply that does not decode");
        if (keys.verify(o.bytes, now) != KeyRing::Verdict::current) egw::fuzz::fail("a reply with a bad tag");
        if (d.header.sender != 2) egw::fuzz::fail("a reply in another gateway's name");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    egw::fuzz::Reader in(data, size);
    const uint8_t opts = in.byte();
    const bool sign = opts & 1;
    const auto step = std::chrono::milliseconds(opts >> 1);

    KeyRing keys(shared_key());
    SyncEndpoint endpoint(receiver_config(), keys);
    Clock::time_point now = Clock::time_point{} + std::chrono::hours(1);
    while (!in.empty()) {
        size_t len = in.u16();
        std::string s = in.take(len == 0 ? 1 : len);
        std::vector<uint8_t> bytes(s.begin(), s.end());
        if (sign && bytes.size() >= kTagSize) keys.sign(bytes);
        check_canonical(bytes);

        LinkStats before = endpoint.link(1)->stats();
        size_t unacked_before = endpoint.link(1)->unacknowledged();
        SyncEndpoint::Received r = endpoint.receive(bytes, now);
        Datagram d;
        bool decodes = decode(bytes, d).ok;
        if (r.accepted && !decodes) egw::fuzz::fail("accepted a datagram decode() refuses");
        if (r.accepted && keys.verify(bytes, now) == KeyRing::Verdict::bad)
            egw::fuzz::fail("accepted a datagram whose tag fails");
        const LinkStats& after = endpoint.link(1)->stats();
        if (!r.accepted && (after.datagrams_received != before.datagrams_received ||
                            endpoint.link(1)->unacknowledged() != unacked_before))
            egw::fuzz::fail("a refused datagram changed the link");
        if (!r.accepted && (!r.events.empty() || !r.replies.empty()))
            egw::fuzz::fail("a refused datagram delivered events or made replies");
        check_replies(r, keys, now);

        now += step;
        SyncEndpoint::Received ticked;
        for (Outgoing& o : endpoint.tick(now))
            ticked.replies.push_back(std::move(o));
        check_replies(ticked, keys, now);
        // Sending too: what the peer acknowledges or asks for must match what was kept.
        endpoint.send(std::vector<Event>(1, local_event()), 1, now);
        if (endpoint.link(1)->unacknowledged() > kResendCapacity)
            egw::fuzz::fail("the resend buffer outgrew its bound");
    }
    return 0;
}
