// SPDX-License-Identifier: Apache-2.0
//
// The sync datagram's layout (control/sync/wire.*): the bytes at the offsets
// docs/architecture.md gives, round trips, and one refusal per kind of malformed datagram.
#include "control/sync/wire.h"

#include <gtest/gtest.h>

namespace {

using namespace egw::sync;

Event tcp_event() {
    Event e;
    e.kind = EventKind::create;
    e.family = 4;
    e.protocol = 6;
    e.tcp_state = kTcpSeenInside | kTcpSeenOutside;
    e.vrf = 0x0102;
    e.time_left_ms = 0x03040506;
    e.service_epoch = 0x0708090a;
    e.inside = {ipv4_address(0x0a800005), 0x1111};   // 10.128.0.5
    e.outside = {ipv4_address(0xc0a80a0a), 0x2222};  // 192.168.10.10
    e.remote = {ipv4_address(0x08080808), 443};
    return e;
}

Event udp6_event() {
    Event e;
    e.kind = EventKind::refresh;
    e.family = 6;
    e.protocol = 17;
    e.inside.addr = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
    e.outside.addr = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    e.remote.addr = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    e.inside.port = 5000;
    e.outside.port = 6000;
    e.remote.port = 53;
    e.time_left_ms = 30000;
    return e;
}

Datagram sample() {
    Datagram d;
    d.header.flags = kFlagAck | kFlagNack;
    d.header.sender = 0x11223344;
    d.header.boot = 0x55667788;
    d.header.counter = 0x0102030405060708ull;
    d.header.sequence = 0xa0b0c0d0;
    d.header.ack = 0x01020304;
    d.header.range_first = 10;
    d.header.range_last = 12;
    d.events = {tcp_event(), udp6_event()};
    return d;
}

uint16_t be16(const std::vector<uint8_t>& b, size_t at) {
    return static_cast<uint16_t>(b[at] << 8 | b[at + 1]);
}
uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
    return uint32_t{be16(b, at)} << 16 | be16(b, at + 2);
}

TEST(SyncWire, HeaderFieldsAtTheirDocumentedOffsetsInNetworkOrder) {
    auto b = encode(sample());
    ASSERT_EQ(b.size(), 40u + 2 * 72 + 32);
    EXPECT_EQ(b[0], 1);                     // version
    EXPECT_EQ(b[1], kFlagAck | kFlagNack);  // flags
    EXPECT_EQ(be16(b, 2), 2);               // event count
    EXPECT_EQ(be16(b, 4), b.size());        // length
    EXPECT_EQ(be16(b, 6), 0);               // reserved
    EXPECT_EQ(be32(b, 8), 0x11223344u);     // sender
    EXPECT_EQ(be32(b, 12), 0x55667788u);    // boot
    EXPECT_EQ(be32(b, 16), 0x01020304u);    // counter, high half
    EXPECT_EQ(be32(b, 20), 0x05060708u);    // counter, low half
    EXPECT_EQ(be32(b, 24), 0xa0b0c0d0u);    // sequence
    EXPECT_EQ(be32(b, 28), 0x01020304u);    // ack
    EXPECT_EQ(be32(b, 32), 10u);            // range first
    EXPECT_EQ(be32(b, 36), 12u);            // range last
    for (size_t i = b.size() - 32; i < b.size(); ++i)
        EXPECT_EQ(b[i], 0) << "the tag is the signer's";
}

TEST(SyncWire, EventFieldsAtTheirDocumentedOffsets) {
    auto b = encode(sample());
    size_t e = 40;
    EXPECT_EQ(b[e + 0], 1);  // kind: create
    EXPECT_EQ(b[e + 1], 4);  // family
    EXPECT_EQ(b[e + 2], 6);  // protocol
    EXPECT_EQ(b[e + 3], kTcpSeenInside | kTcpSeenOutside);
    EXPECT_EQ(be16(b, e + 4), 0x0102);  // vrf
    EXPECT_EQ(be16(b, e + 6), 0);
    EXPECT_EQ(be32(b, e + 8), 0x03040506u);   // time left
    EXPECT_EQ(be32(b, e + 12), 0x0708090au);  // epoch
    EXPECT_EQ(be16(b, e + 16), 0x1111);       // inside port
    EXPECT_EQ(be16(b, e + 18), 0x2222);       // outside port
    EXPECT_EQ(be16(b, e + 20), 443);          // remote port
    EXPECT_EQ(be16(b, e + 22), 0);
    // Addresses: IPv4-mapped, 16 bytes each.
    EXPECT_EQ(be32(b, e + 24), 0u);
    EXPECT_EQ(be32(b, e + 28), 0u);
    EXPECT_EQ(be32(b, e + 32), 0xffffu);
    EXPECT_EQ(be32(b, e + 36), 0x0a800005u);
    EXPECT_EQ(be32(b, e + 52), 0xc0a80a0au);
    EXPECT_EQ(be32(b, e + 68), 0x08080808u);
    size_t f = 40 + 72;
    EXPECT_EQ(b[f], 3);  // refresh
    EXPECT_EQ(b[f + 1], 6);
    EXPECT_EQ(b[f + 24], 0xfd);
    EXPECT_EQ(b[f + 40], 0x20);
}

TEST(SyncWire, RoundTripsAndTheEncodingIsCanonical) {
    Datagram d = sample();
    auto b = encode(d);
    Datagram back;
    auto r = decode(b, back);
    ASSERT_TRUE(r.ok) << refusal_name(r.refusal);
    EXPECT_EQ(back, d);
    EXPECT_EQ(encode(back), b);
}

TEST(SyncWire, TheLargestDatagramFitsTheLengthField) {
    Datagram d;
    d.events.assign(kMaxEventsPerDatagram, tcp_event());
    auto b = encode(d);
    EXPECT_LE(b.size(), kMaxDatagramSize);
    EXPECT_GT(b.size() + kEventSize, kMaxDatagramSize);
    EXPECT_GT(b.size(), 255u * 4) << "well past what an 8-bit or 10-bit length could say";
    Datagram back;
    auto r = decode(b, back);
    ASSERT_TRUE(r.ok) << refusal_name(r.refusal);
    EXPECT_EQ(back.events.size(), kMaxEventsPerDatagram);
    EXPECT_EQ(back, d);
}

// Decodes `b` and returns why it was refused (fails the test if it was not).
Refusal refused(const std::vector<uint8_t>& b) {
    Datagram d;
    auto r = decode(b, d);
    EXPECT_FALSE(r.ok);
    return r.refusal;
}

TEST(SyncWire, MalformedHeadersAreRefusedWithTheirReason) {
    auto good = encode(sample());
    EXPECT_EQ(refused({}), Refusal::truncated);
    EXPECT_EQ(refused(std::vector<uint8_t>(good.begin(), good.begin() + 71)), Refusal::truncated);

    auto b = good;
    b[0] = 2;
    EXPECT_EQ(refused(b), Refusal::bad_version);

    b = good;
    b.pop_back();  // one byte short of what the length says
    EXPECT_EQ(refused(b), Refusal::bad_length);

    b = good;
    b[3] = 3;  // three events claimed, two present
    EXPECT_EQ(refused(b), Refusal::bad_count);

    b = good;
    b[1] = 0x20;
    EXPECT_EQ(refused(b), Refusal::bad_flags);
    b[1] = kFlagBulkRequest;  // only without events
    EXPECT_EQ(refused(b), Refusal::bad_flags);
    b[1] = kFlagBulkEnd;
    EXPECT_EQ(refused(b), Refusal::bad_flags);
    b[1] = kFlagNack | kFlagLost;
    EXPECT_EQ(refused(b), Refusal::bad_flags);

    b = good;
    b[7] = 1;
    EXPECT_EQ(refused(b), Refusal::bad_reserved);

    b = good;
    b[1] = kFlagNack;  // an ack value without the ACK flag
    EXPECT_EQ(refused(b), Refusal::bad_reserved);

    b = good;
    b[1] = kFlagAck;  // a range without NACK or LOST
    EXPECT_EQ(refused(b), Refusal::bad_range);
    b = good;
    b[35] = 13;  // range 13..12 runs backwards
    EXPECT_EQ(refused(b), Refusal::bad_range);
}

TEST(SyncWire, MalformedEventsAreRefusedAndNamed) {
    auto good = encode(sample());
    auto at = [&](size_t event, size_t off) { return 40 + event * 72 + off; };
    struct Case {
        const char* what;
        size_t event, off;
        uint8_t value;
        Refusal expect;
    };
    const Case cases[] = {
        {"kind 0", 0, 0, 0, Refusal::bad_event},
        {"kind 5", 1, 0, 5, Refusal::bad_event},
        {"family 5", 0, 1, 5, Refusal::bad_event},
        {"family 6 with IPv4-mapped addresses", 0, 1, 6, Refusal::bad_event},
        {"family 4 with IPv6 addresses", 1, 1, 4, Refusal::bad_event},
        {"protocol 47", 0, 2, 47, Refusal::bad_event},
        {"ICMPv6 in family 4", 0, 2, 58, Refusal::bad_event},
        {"ICMP in family 6", 1, 2, 1, Refusal::bad_event},
        {"unknown TCP state bit", 0, 3, 32, Refusal::bad_event},
        {"TCP state on UDP", 1, 3, 1, Refusal::bad_event},
        {"reserved", 0, 7, 1, Refusal::bad_reserved},
        {"second reserved", 1, 23, 1, Refusal::bad_reserved},
        {"IPv4-mapped prefix broken", 0, 24 + 16 + 10, 0, Refusal::bad_event},
    };
    for (const Case& c : cases) {
        auto b = good;
        b[at(c.event, c.off)] = c.value;
        Datagram d;
        auto r = decode(b, d);
        EXPECT_FALSE(r.ok) << c.what;
        EXPECT_EQ(r.refusal, c.expect) << c.what;
        EXPECT_EQ(r.bad_event_index, c.event) << c.what;
    }
    // ICMP echo in family 4 and ICMPv6 in family 6 are fine.
    Datagram d = sample();
    d.events[0].protocol = 1;
    d.events[0].tcp_state = 0;
    d.events[1].protocol = 58;
    Datagram back;
    EXPECT_TRUE(decode(encode(d), back).ok);
    EXPECT_EQ(back, d);
}

TEST(SyncWire, SerialArithmeticWraps) {
    EXPECT_TRUE(seq_after(1, 0));
    EXPECT_TRUE(seq_after(0, 0xffffffffu));
    EXPECT_TRUE(seq_after(5, 0xfffffff0u));
    EXPECT_FALSE(seq_after(0xfffffff0u, 5));
    EXPECT_FALSE(seq_after(7, 7));
}

}  // namespace
