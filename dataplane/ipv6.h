// SPDX-License-Identifier: Apache-2.0
//
// IPv6 on the packet path: the address classes the input stage filters on, the extension-header
// walk and its bound, and the ICMPv6 types egw tells apart. Header-only, no state.
#pragma once

#include <cstdint>
#include <cstring>

namespace egw::dp {

// An IPv6 address as it is on the wire (network order), compared and copied as two words.
struct Ip6 {
    uint8_t b[16];
};
static_assert(sizeof(Ip6) == 16);

inline uint64_t ip6_hi(const uint8_t* a) {
    uint64_t v;
    std::memcpy(&v, a, 8);
    return v;
}
inline uint64_t ip6_lo(const uint8_t* a) {
    uint64_t v;
    std::memcpy(&v, a + 8, 8);
    return v;
}
inline bool ip6_equal(const uint8_t* a, const uint8_t* b) {
    return ((ip6_hi(a) ^ ip6_hi(b)) | (ip6_lo(a) ^ ip6_lo(b))) == 0;
}

// IPv6 five-tuple in network order, as FlowKey is for IPv4 (session_table.h): outgoing (pod,
// remote, pod port, remote port), back (remote, NAT address, remote port, NAT port).
struct FlowKey6 {
    uint8_t src[16];
    uint8_t dst[16];
    uint16_t sport;
    uint16_t dport;
    uint8_t proto;
    uint8_t pad[3];
};
static_assert(sizeof(FlowKey6) == 40);

// Next-header values.
inline constexpr uint8_t kIp6HopByHop = 0;
inline constexpr uint8_t kIp6Routing = 43;
inline constexpr uint8_t kIp6Fragment = 44;
inline constexpr uint8_t kIp6Icmp = 58;
inline constexpr uint8_t kIp6NoNext = 59;
inline constexpr uint8_t kIp6DestOpts = 60;

// The walk to the transport header stops after this many extension headers or this many bytes of
// them: a longer chain is dropped (ipv6_extension_header) rather than followed to its end.
inline constexpr unsigned kIp6MaxExtHeaders = 4;
inline constexpr unsigned kIp6MaxExtBytes = 256;

// ICMPv6 types (RFC 4443, RFC 4861).
inline constexpr uint8_t kIcmp6DestUnreachable = 1;
inline constexpr uint8_t kIcmp6PacketTooBig = 2;
inline constexpr uint8_t kIcmp6TimeExceeded = 3;
inline constexpr uint8_t kIcmp6ParamProblem = 4;
inline constexpr uint8_t kIcmp6EchoRequest = 128;
inline constexpr uint8_t kIcmp6EchoReply = 129;
inline constexpr uint8_t kNdpRouterSolicit = 133;
inline constexpr uint8_t kNdpRouterAdvert = 134;
inline constexpr uint8_t kNdpNeighborSolicit = 135;
inline constexpr uint8_t kNdpNeighborAdvert = 136;
inline constexpr uint8_t kNdpRedirect = 137;

inline bool is_icmp6_error(uint8_t type) {
    return type >= kIcmp6DestUnreachable && type <= kIcmp6ParamProblem;
}
inline bool is_ndp(uint8_t type) {
    return type >= kNdpRouterSolicit && type <= kNdpRedirect;
}

// Address classes (RFC 4291 2.4, RFC 6890).
inline bool ip6_is_multicast(const uint8_t* a) {
    return a[0] == 0xff;
}
inline bool ip6_is_unspecified(const uint8_t* a) {
    return (ip6_hi(a) | ip6_lo(a)) == 0;
}
inline bool ip6_is_loopback(const uint8_t* a) {
    static constexpr uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return ip6_equal(a, kLoopback);
}
inline bool ip6_is_link_local(const uint8_t* a) {
    return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}
// ::ffff:0:0/96: IPv4 addresses in IPv6 form, never on the wire.
inline bool ip6_is_v4_mapped(const uint8_t* a) {
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(a, kMapped, 12) == 0;
}

}  // namespace egw::dp
