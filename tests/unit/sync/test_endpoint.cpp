// SPDX-License-Identifier: Apache-2.0
//
// Two SyncEndpoints exchanging signed bytes (control/sync/endpoint.*): what a peer accepts, and
// that forged, altered, replayed and strangers' datagrams are refused, counted, and change
// nothing.
#include "control/sync/endpoint.h"

#include <gtest/gtest.h>

namespace {

using namespace egw::sync;
using namespace std::chrono_literals;

std::vector<uint8_t> key_of(char c) {
    return std::vector<uint8_t>(32, static_cast<uint8_t>(c));
}

EndpointConfig config(uint32_t self, std::vector<uint32_t> peers) {
    EndpointConfig c;
    c.self = self;
    c.boot = 7 * self;
    c.first_counter = 1'000'000ull * self;
    c.peers = std::move(peers);
    return c;
}

std::vector<Event> session_events(size_t n) {
    std::vector<Event> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i].protocol = 6;
        v[i].tcp_state = kTcpSeenInside;
        v[i].inside = {ipv4_address(0x0a800000 + static_cast<uint32_t>(i)), static_cast<uint16_t>(1000 + i)};
        v[i].outside = {ipv4_address(0xc0a80a0a), static_cast<uint16_t>(20000 + i)};
        v[i].remote = {ipv4_address(0x08080808), 443};
        v[i].time_left_ms = 7'440'000;
        v[i].service_epoch = 3;
    }
    return v;
}

struct Gateways {
    KeyRing key_a{key_of('k')}, key_b{key_of('k')};
    SyncEndpoint a{config(1, {2}), key_a};
    SyncEndpoint b{config(2, {1}), key_b};
    Clock::time_point now = Clock::time_point{} + 1h;
};

size_t accepted_total(const SyncEndpoint& e, uint32_t peer) {
    return e.link(peer)->stats().datagrams_received;
}

TEST(SyncEndpoint, EventsArriveSplitByTheDatagramLimit) {
    Gateways g;
    auto out = g.a.send(session_events(45), 19, g.now);
    ASSERT_EQ(out.size(), 3u);  // 19 + 19 + 7
    EXPECT_EQ(out[0].bytes.size(), datagram_size(19));
    EXPECT_EQ(out[2].bytes.size(), datagram_size(7));
    std::vector<Event> got;
    for (const Outgoing& o : out) {
        EXPECT_EQ(o.peer, 2u);
        auto r = g.b.receive(o.bytes, g.now);
        ASSERT_TRUE(r.accepted) << refusal_name(r.refusal);
        EXPECT_EQ(r.peer, 1u);
        got.insert(got.end(), r.events.begin(), r.events.end());
    }
    EXPECT_EQ(got, session_events(45));
}

TEST(SyncEndpoint, ForgedAlteredReplayedAndStrangersDatagramsChangeNothing) {
    Gateways g;
    auto good = g.a.send(session_events(2), 19, g.now)[0].bytes;

    // Signed with another key.
    KeyRing wrong(key_of('x'));
    SyncEndpoint forger(config(1, {2}), wrong);
    auto forged = forger.send(session_events(2), 19, g.now)[0].bytes;
    auto r = g.b.receive(forged, g.now);
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(r.refusal, Refusal::bad_tag);

    // A bit flipped in an event (the outside port).
    auto altered = good;
    altered[kHeaderSize + 19] ^= 1;
    r = g.b.receive(altered, g.now);
    EXPECT_EQ(r.refusal, Refusal::bad_tag);

    // A gateway that is not a peer, with the right key.
    KeyRing same(key_of('k'));
    SyncEndpoint stranger(config(3, {2}), same);
    r = g.b.receive(stranger.send(session_events(1), 19, g.now)[0].bytes, g.now);
    EXPECT_EQ(r.refusal, Refusal::unknown_peer);

    // Garbage.
    r = g.b.receive(std::vector<uint8_t>(10, 0xff), g.now);
    EXPECT_EQ(r.refusal, Refusal::truncated);

    EXPECT_EQ(accepted_total(g.b, 1), 0u) << "nothing reached the reliability state";
    EXPECT_FALSE(g.b.link(1)->peer_alive(g.now));

    r = g.b.receive(good, g.now);
    EXPECT_TRUE(r.accepted);
    EXPECT_EQ(r.events.size(), 2u);
    r = g.b.receive(good, g.now);
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(r.refusal, Refusal::replayed);
    EXPECT_TRUE(r.events.empty());

    const auto& n = g.b.refusals();
    EXPECT_EQ(n[static_cast<size_t>(Refusal::bad_tag)], 2u);
    EXPECT_EQ(n[static_cast<size_t>(Refusal::unknown_peer)], 1u);
    EXPECT_EQ(n[static_cast<size_t>(Refusal::truncated)], 1u);
    EXPECT_EQ(n[static_cast<size_t>(Refusal::replayed)], 1u);
    EXPECT_EQ(accepted_total(g.b, 1), 1u);
}

TEST(SyncEndpoint, AForgedDatagramCannotMoveTheReplayWindow) {
    Gateways g;
    auto first = g.a.send(session_events(1), 19, g.now)[0].bytes;
    // An attacker without the key sends a huge counter; were it counted before the tag was
    // checked, every genuine datagram after it would look replayed.
    KeyRing wrong(key_of('x'));
    EndpointConfig fc = config(1, {2});
    fc.first_counter = ~0ull >> 1;
    SyncEndpoint forger(fc, wrong);
    EXPECT_EQ(g.b.receive(forger.send(session_events(1), 19, g.now)[0].bytes, g.now).refusal, Refusal::bad_tag);
    EXPECT_TRUE(g.b.receive(first, g.now).accepted);
}

TEST(SyncEndpoint, DuringAKeyRotationThePreviousKeyIsAcceptedThenNot) {
    Gateways g;
    g.key_b.rotate(key_of('n'), g.now);  // b read the new key first; a has not yet
    auto r = g.b.receive(g.a.send(session_events(1), 19, g.now)[0].bytes, g.now);
    EXPECT_TRUE(r.accepted);
    EXPECT_EQ(g.b.accepted_with_previous_key(), 1u);
    // a's answer, signed by b with the new key, fails at a until a rotates too.
    auto from_b = g.b.send(session_events(1), 19, g.now)[0].bytes;
    EXPECT_EQ(g.a.receive(from_b, g.now).refusal, Refusal::bad_tag);
    g.key_a.rotate(key_of('n'), g.now);
    EXPECT_TRUE(g.a.receive(from_b, g.now).accepted);

    g.now += 61s;  // past the default overlap
    KeyRing stale(key_of('k'));
    EndpointConfig c = config(1, {2});
    c.first_counter = 9'000'000;
    SyncEndpoint old_a2(c, stale);
    EXPECT_EQ(g.b.receive(old_a2.send(session_events(1), 19, g.now)[0].bytes, g.now).refusal, Refusal::bad_tag);
}

TEST(SyncEndpoint, LossIsRepairedThroughSignedNacks) {
    Gateways g;
    auto out = g.a.send(session_events(3), 1, g.now);
    ASSERT_EQ(out.size(), 3u);
    g.b.receive(out[0].bytes, g.now);
    auto r = g.b.receive(out[2].bytes, g.now);  // out[1] lost
    ASSERT_EQ(r.replies.size(), 1u);
    auto back = g.a.receive(r.replies[0].bytes, g.now);
    ASSERT_TRUE(back.accepted);
    ASSERT_EQ(back.replies.size(), 1u);
    auto resent = g.b.receive(back.replies[0].bytes, g.now);
    ASSERT_TRUE(resent.accepted);
    ASSERT_EQ(resent.events.size(), 1u);
    EXPECT_EQ(resent.events[0], session_events(3)[1]);
    EXPECT_EQ(g.b.link(1)->expected(), 4u);
}

TEST(SyncEndpoint, AGatewayCannotBeItsOwnPeer) {
    KeyRing k(key_of('k'));
    EXPECT_THROW(SyncEndpoint(config(1, {1}), k), std::invalid_argument);
}

}  // namespace
