// SPDX-License-Identifier: Apache-2.0
#include "control/sync/wire.h"

#include <algorithm>
#include <cassert>

namespace egw::sync {

namespace {

constexpr uint8_t kProtoIcmp = 1, kProtoTcp = 6, kProtoUdp = 17, kProtoIcmp6 = 58;
constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// Offsets in the header (docs/architecture.md, "Session sync").
enum : size_t {
    kOffVersion = 0,
    kOffFlags = 1,
    kOffCount = 2,
    kOffLength = 4,
    kOffHeaderReserved = 6,
    kOffSender = 8,
    kOffBoot = 12,
    kOffCounter = 16,
    kOffSequence = 24,
    kOffAck = 28,
    kOffRangeFirst = 32,
    kOffRangeLast = 36,
};
static_assert(kOffRangeLast + 4 == kHeaderSize);

// Offsets in an event.
enum : size_t {
    kEvKind = 0,
    kEvFamily = 1,
    kEvProtocol = 2,
    kEvTcpState = 3,
    kEvVrf = 4,
    kEvReserved = 6,
    kEvTimeLeft = 8,
    kEvEpoch = 12,
    kEvInsidePort = 16,
    kEvOutsidePort = 18,
    kEvRemotePort = 20,
    kEvReserved2 = 22,
    kEvInsideAddr = 24,
    kEvOutsideAddr = 40,
    kEvRemoteAddr = 56,
};
static_assert(kEvRemoteAddr + 16 == kEventSize);

void put16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
    put16(p, static_cast<uint16_t>(v >> 16));
    put16(p + 2, static_cast<uint16_t>(v));
}
void put64(uint8_t* p, uint64_t v) {
    put32(p, static_cast<uint32_t>(v >> 32));
    put32(p + 4, static_cast<uint32_t>(v));
}
uint16_t get16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
uint32_t get32(const uint8_t* p) {
    return uint32_t{get16(p)} << 16 | get16(p + 2);
}
uint64_t get64(const uint8_t* p) {
    return uint64_t{get32(p)} << 32 | get32(p + 4);
}

bool is_v4_mapped(const Address& a) {
    return std::equal(kV4MappedPrefix.begin(), kV4MappedPrefix.end(), a.begin());
}

bool event_valid(const Event& e) {
    if (e.kind < EventKind::create || e.kind > EventKind::remove) return false;
    switch (e.protocol) {
    case kProtoTcp:
    case kProtoUdp:
        if (e.family != 4 && e.family != 6) return false;
        break;
    case kProtoIcmp:
        if (e.family != 4) return false;
        break;
    case kProtoIcmp6:
        if (e.family != 6) return false;
        break;
    default:
        return false;
    }
    if (e.protocol == kProtoTcp ? (e.tcp_state & ~kTcpKnownBits) != 0 : e.tcp_state != 0) return false;
    // One family per session: all three addresses IPv4-mapped for family 4, none for family 6.
    bool v4 = e.family == 4;
    return is_v4_mapped(e.inside.addr) == v4 && is_v4_mapped(e.outside.addr) == v4 && is_v4_mapped(e.remote.addr) == v4;
}

void put_event(uint8_t* p, const Event& e) {
    p[kEvKind] = static_cast<uint8_t>(e.kind);
    p[kEvFamily] = e.family;
    p[kEvProtocol] = e.protocol;
    p[kEvTcpState] = e.tcp_state;
    put16(p + kEvVrf, e.vrf);
    put16(p + kEvReserved, 0);
    put32(p + kEvTimeLeft, e.time_left_ms);
    put32(p + kEvEpoch, e.service_epoch);
    put16(p + kEvInsidePort, e.inside.port);
    put16(p + kEvOutsidePort, e.outside.port);
    put16(p + kEvRemotePort, e.remote.port);
    put16(p + kEvReserved2, 0);
    std::copy(e.inside.addr.begin(), e.inside.addr.end(), p + kEvInsideAddr);
    std::copy(e.outside.addr.begin(), e.outside.addr.end(), p + kEvOutsideAddr);
    std::copy(e.remote.addr.begin(), e.remote.addr.end(), p + kEvRemoteAddr);
}

// False when a reserved field is set; the rest is checked by event_valid.
bool get_event(const uint8_t* p, Event& e) {
    if (get16(p + kEvReserved) != 0 || get16(p + kEvReserved2) != 0) return false;
    e.kind = static_cast<EventKind>(p[kEvKind]);
    e.family = p[kEvFamily];
    e.protocol = p[kEvProtocol];
    e.tcp_state = p[kEvTcpState];
    e.vrf = get16(p + kEvVrf);
    e.time_left_ms = get32(p + kEvTimeLeft);
    e.service_epoch = get32(p + kEvEpoch);
    e.inside.port = get16(p + kEvInsidePort);
    e.outside.port = get16(p + kEvOutsidePort);
    e.remote.port = get16(p + kEvRemotePort);
    std::copy_n(p + kEvInsideAddr, 16, e.inside.addr.begin());
    std::copy_n(p + kEvOutsideAddr, 16, e.outside.addr.begin());
    std::copy_n(p + kEvRemoteAddr, 16, e.remote.addr.begin());
    return true;
}

HeaderResult refuse(Refusal r) {
    HeaderResult res;
    res.refusal = r;
    return res;
}

}  // namespace

Address ipv4_address(uint32_t host_order) {
    Address a{};
    std::copy(kV4MappedPrefix.begin(), kV4MappedPrefix.end(), a.begin());
    a[12] = static_cast<uint8_t>(host_order >> 24);
    a[13] = static_cast<uint8_t>(host_order >> 16);
    a[14] = static_cast<uint8_t>(host_order >> 8);
    a[15] = static_cast<uint8_t>(host_order);
    return a;
}

std::string_view refusal_name(Refusal r) {
    switch (r) {
    case Refusal::truncated:
        return "truncated";
    case Refusal::bad_version:
        return "bad_version";
    case Refusal::bad_length:
        return "bad_length";
    case Refusal::bad_count:
        return "bad_count";
    case Refusal::bad_flags:
        return "bad_flags";
    case Refusal::bad_range:
        return "bad_range";
    case Refusal::bad_reserved:
        return "bad_reserved";
    case Refusal::bad_event:
        return "bad_event";
    case Refusal::unknown_peer:
        return "unknown_peer";
    case Refusal::bad_tag:
        return "bad_tag";
    case Refusal::replayed:
        return "replayed";
    case Refusal::count_:
        break;
    }
    return "unknown";
}

std::vector<uint8_t> encode(const Datagram& d) {
    assert(d.events.size() <= kMaxEventsPerDatagram);
    const Header& h = d.header;
    std::vector<uint8_t> out(datagram_size(d.events.size()), 0);
    uint8_t* p = out.data();
    p[kOffVersion] = kWireVersion;
    p[kOffFlags] = h.flags;
    put16(p + kOffCount, static_cast<uint16_t>(d.events.size()));
    put16(p + kOffLength, static_cast<uint16_t>(out.size()));
    put32(p + kOffSender, h.sender);
    put32(p + kOffBoot, h.boot);
    put64(p + kOffCounter, h.counter);
    put32(p + kOffSequence, h.sequence);
    put32(p + kOffAck, h.ack);
    put32(p + kOffRangeFirst, h.range_first);
    put32(p + kOffRangeLast, h.range_last);
    for (size_t i = 0; i < d.events.size(); ++i)
        put_event(p + kHeaderSize + i * kEventSize, d.events[i]);
    return out;
}

HeaderResult decode_header(std::span<const uint8_t> bytes) {
    if (bytes.size() < datagram_size(0)) return refuse(Refusal::truncated);
    const uint8_t* p = bytes.data();
    if (p[kOffVersion] != kWireVersion) return refuse(Refusal::bad_version);
    if (get16(p + kOffLength) != bytes.size()) return refuse(Refusal::bad_length);
    size_t count = get16(p + kOffCount);
    if (datagram_size(count) != bytes.size()) return refuse(Refusal::bad_count);
    if (get16(p + kOffHeaderReserved) != 0) return refuse(Refusal::bad_reserved);
    HeaderResult res;
    Header& h = res.header;
    h.flags = p[kOffFlags];
    h.sender = get32(p + kOffSender);
    h.boot = get32(p + kOffBoot);
    h.counter = get64(p + kOffCounter);
    h.sequence = get32(p + kOffSequence);
    h.ack = get32(p + kOffAck);
    h.range_first = get32(p + kOffRangeFirst);
    h.range_last = get32(p + kOffRangeLast);
    if ((h.flags & ~kKnownFlags) != 0 || (h.flags & kFlagNack && h.flags & kFlagLost))
        return refuse(Refusal::bad_flags);
    if (h.flags & (kFlagBulkRequest | kFlagBulkEnd) && count != 0) return refuse(Refusal::bad_flags);
    // Fields a flag does not give meaning to are zero, so every datagram has one encoding.
    if (!(h.flags & kFlagAck) && h.ack != 0) return refuse(Refusal::bad_reserved);
    bool has_range = h.flags & (kFlagNack | kFlagLost);
    if (has_range ? seq_after(h.range_first, h.range_last) : (h.range_first != 0 || h.range_last != 0))
        return refuse(Refusal::bad_range);
    res.ok = true;
    res.events = count;
    return res;
}

DecodeResult decode(std::span<const uint8_t> bytes, Datagram& out) {
    DecodeResult res;
    HeaderResult h = decode_header(bytes);
    if (!h.ok) {
        res.refusal = h.refusal;
        return res;
    }
    out.header = h.header;
    out.events.resize(h.events);
    for (size_t i = 0; i < h.events; ++i) {
        Event& e = out.events[i];
        if (!get_event(bytes.data() + kHeaderSize + i * kEventSize, e)) {
            res.refusal = Refusal::bad_reserved;
            res.bad_event_index = i;
            return res;
        }
        if (!event_valid(e)) {
            res.refusal = Refusal::bad_event;
            res.bad_event_index = i;
            return res;
        }
    }
    res.ok = true;
    return res;
}

}  // namespace egw::sync
