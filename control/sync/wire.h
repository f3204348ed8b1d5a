// SPDX-License-Identifier: Apache-2.0
//
// The session sync datagram (docs/architecture.md, "Session sync"): a fixed binary layout, every
// multi-byte field in network byte order, so that two gateways of different builds agree on it
// byte for byte. encode() writes the canonical form; decode() accepts only that form and says
// why it refused anything else, so the decoder and the encoder are each other's test.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace egw::sync {

inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kHeaderSize = 40;
inline constexpr size_t kEventSize = 72;
inline constexpr size_t kTagSize = 32;  // HMAC-SHA256
// The length field is 16 bits wide: the largest datagram a UDP socket can carry over IPv4.
inline constexpr size_t kMaxDatagramSize = 65507;
inline constexpr size_t kMaxEventsPerDatagram = (kMaxDatagramSize - kHeaderSize - kTagSize) / kEventSize;

// Header flags.
inline constexpr uint8_t kFlagAck = 0x01;   // `ack` holds the sender's cumulative acknowledgement
inline constexpr uint8_t kFlagNack = 0x02;  // range: sequence numbers the sender asks to be sent again
inline constexpr uint8_t kFlagLost = 0x04;  // range: sequence numbers the sender can no longer resend
// Bulk sync, on datagrams without events only: the sender asks for a dump of the receiver's
// sessions; the sender's dump ends at `sequence` (every sequence number up to it has the dump).
inline constexpr uint8_t kFlagBulkRequest = 0x08;
inline constexpr uint8_t kFlagBulkEnd = 0x10;
inline constexpr uint8_t kKnownFlags = kFlagAck | kFlagNack | kFlagLost | kFlagBulkRequest | kFlagBulkEnd;

enum class EventKind : uint8_t { create = 1, state_change = 2, refresh = 3, remove = 4 };

// The TCP state bits an event carries: the same meanings as the session table's (both sides
// seen, closing, a FIN from each side), defined here so the wire does not follow the table's
// layout by accident.
inline constexpr uint8_t kTcpSeenInside = 1;
inline constexpr uint8_t kTcpSeenOutside = 2;
inline constexpr uint8_t kTcpClosing = 4;
inline constexpr uint8_t kTcpFinInside = 8;
inline constexpr uint8_t kTcpFinOutside = 16;
inline constexpr uint8_t kTcpKnownBits = 31;

// An address of either family: IPv4 as the IPv4-mapped IPv6 address ::ffff:a.b.c.d.
using Address = std::array<uint8_t, 16>;
Address ipv4_address(uint32_t host_order);

struct Endpoint {
    Address addr{};
    uint16_t port = 0;  // the ICMP/ICMPv6 echo identifier for echo sessions
    bool operator==(const Endpoint&) const = default;
};

// What a peer needs to rebuild one NAT session.
struct Event {
    EventKind kind = EventKind::create;
    uint8_t family = 4;     // 4 or 6
    uint8_t protocol = 17;  // IPPROTO_TCP, _UDP, _ICMP (family 4) or _ICMPV6 (family 6)
    uint8_t tcp_state = 0;  // kTcp* bits; 0 for every other protocol
    uint16_t vrf = 0;
    uint32_t time_left_ms = 0;  // relative to when the datagram was sent, never a clock
    uint32_t service_epoch = 0;
    Endpoint inside, outside, remote;
    bool operator==(const Event&) const = default;
};

struct Header {
    uint8_t flags = 0;
    uint32_t sender = 0;       // the sending gateway's configured id
    uint32_t boot = 0;         // changes when the sender restarts (its sequence numbers restart)
    uint64_t counter = 0;      // strictly increasing per sender, across restarts: replay protection
    uint32_t sequence = 0;     // with events: this datagram's; without: the last one sent (0: none)
    uint32_t ack = 0;          // kFlagAck: every sequence number up to this one has arrived
    uint32_t range_first = 0;  // kFlagNack / kFlagLost: an inclusive range of sequence numbers
    uint32_t range_last = 0;
    bool operator==(const Header&) const = default;
};

struct Datagram {
    Header header;
    std::vector<Event> events;
    bool operator==(const Datagram&) const = default;
};

// Why a datagram was refused; each has its own counter (Stats in endpoint.h) and metric label.
enum class Refusal : uint8_t {
    truncated,     // shorter than a header and a tag
    bad_version,   // not kWireVersion
    bad_length,    // the length field differs from the bytes received
    bad_count,     // the event count does not match the length
    bad_flags,     // an unknown flag, or NACK and LOST together
    bad_range,     // a range without NACK/LOST, or one that runs backwards
    bad_reserved,  // a reserved field is not zero
    bad_event,     // an event field out of its range (kind, family, protocol, state, address form)
    unknown_peer,  // the sender id is not a configured peer
    bad_tag,       // the HMAC matches neither the current nor the previous key
    replayed,      // the counter was seen before or is older than the window
    count_,
};
inline constexpr size_t kRefusalCount = static_cast<size_t>(Refusal::count_);
std::string_view refusal_name(Refusal r);

// Serial number arithmetic (RFC 1982) on 32-bit sequence numbers: a is after b.
inline bool seq_after(uint32_t a, uint32_t b) {
    return static_cast<int32_t>(a - b) > 0;
}

// The size of a datagram carrying `events` events.
constexpr size_t datagram_size(size_t events) {
    return kHeaderSize + events * kEventSize + kTagSize;
}

// Writes `d` with a zero tag (the signer fills the last kTagSize bytes). d.events.size() must not
// exceed kMaxEventsPerDatagram.
std::vector<uint8_t> encode(const Datagram& d);

// Checks the header's structure only (enough to pick the peer and verify the tag).
struct HeaderResult {
    bool ok = false;
    Refusal refusal = Refusal::truncated;
    Header header;
    size_t events = 0;
};
HeaderResult decode_header(std::span<const uint8_t> bytes);

// The whole datagram, strictly: everything decode_header checks, then every event.
struct DecodeResult {
    bool ok = false;
    Refusal refusal = Refusal::truncated;
    size_t bad_event_index = 0;  // for bad_event
};
DecodeResult decode(std::span<const uint8_t> bytes, Datagram& out);

}  // namespace egw::sync
