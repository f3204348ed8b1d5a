// SPDX-License-Identifier: Apache-2.0
//
// The ICMP errors the gateway originates itself (gateway_icmp_error.cpp builds them), as one list: it
// feeds the per-worker counters, the status file, the CLI and the metrics, like drop_reason.h.
// The ICMPv6 ones (RFC 4443) are their own entries, with ICMPv6 types and codes, named with a 6
// (but packet_too_big, which only ICMPv6 has); kIcmpErrorIs6 tells them apart.
// The ICMP errors egw translates on behalf of others (nat_icmp_error.cpp) are not in it.
#pragma once

#include <cstdint>

namespace egw::dp {

// name, ICMP type, code, what it answers
#define EGW_ICMP_ERRORS(X)                                                                                             \
    X(time_exceeded, 11, 0, "TTL exceeded in transit: the TTL would have left as 0")                                   \
    X(net_unreachable, 3, 0, "destination unreachable, net: no route in the VRF nor the default table")                \
    X(protocol_unreachable, 3, 2,                                                                                      \
      "destination unreachable, protocol: the gateway's own address, a protocol it does not serve")                    \
    X(port_unreachable, 3, 3, "destination unreachable, port: UDP to the gateway's own address")                       \
    X(fragmentation_needed, 3, 4,                                                                                      \
      "destination unreachable, fragmentation needed: DF set and larger than the next hop's MTU")                      \
    X(admin_prohibited, 3, 13,                                                                                         \
      "destination unreachable, communication administratively prohibited: a pod to a served ingress IP (hairpin)")    \
    X(firewall_prohibited, 3, 13,                                                                                      \
      "destination unreachable, communication administratively prohibited: denied by an EgressFirewall")               \
    X(time_exceeded6, 3, 0, "ICMPv6 time exceeded, hop limit exceeded in transit: the hop limit would have left as 0") \
    X(no_route6, 1, 0,                                                                                                 \
      "ICMPv6 destination unreachable, no route to destination: none in the VRF nor the default table")                \
    X(packet_too_big, 2, 0, "ICMPv6 packet too big: larger than the next hop's MTU (routers never fragment IPv6)")     \
    X(port_unreachable6, 1, 4,                                                                                         \
      "ICMPv6 destination unreachable, port unreachable: UDP to the gateway's own IPv6 address")                       \
    X(admin_prohibited6, 1, 1, "ICMPv6 destination unreachable, communication administratively prohibited")            \
    X(firewall_prohibited6, 1, 1,                                                                                      \
      "ICMPv6 destination unreachable, communication administratively prohibited: denied by an EgressFirewall")

enum class IcmpError : uint8_t {
#define EGW_X(name, type, code, help) name,
    EGW_ICMP_ERRORS(EGW_X)
#undef EGW_X
        count
};

inline constexpr unsigned kIcmpErrorCount = static_cast<unsigned>(IcmpError::count);

inline constexpr const char* kIcmpErrorNames[] = {
#define EGW_X(name, type, code, help) #name,
    EGW_ICMP_ERRORS(EGW_X)
#undef EGW_X
};

inline constexpr const char* kIcmpErrorHelp[] = {
#define EGW_X(name, type, code, help) help,
    EGW_ICMP_ERRORS(EGW_X)
#undef EGW_X
};

inline constexpr uint8_t kIcmpErrorType[] = {
#define EGW_X(name, type, code, help) type,
    EGW_ICMP_ERRORS(EGW_X)
#undef EGW_X
};

inline constexpr uint8_t kIcmpErrorCode[] = {
#define EGW_X(name, type, code, help) code,
    EGW_ICMP_ERRORS(EGW_X)
#undef EGW_X
};

// Whether an error is an ICMPv6 one (answers an IPv6 packet).
inline constexpr bool icmp_error_is6(IcmpError e) {
    return e >= IcmpError::time_exceeded6 && e < IcmpError::count;
}

// Whether `e` answers a packet sent to one of the gateway's own addresses (its ports', its NAT
// addresses, a served ingress IP), for both families: such an answer comes from the address the
// packet was sent to (RFC 1122 3.2.2, RFC 4443 2.2(a)), every other error from the receiving
// port's address on the sender's subnet (gateway_icmp_error.cpp).
inline constexpr bool answers_own_address(IcmpError e) {
    switch (e) {
    case IcmpError::protocol_unreachable:
    case IcmpError::port_unreachable:
    case IcmpError::admin_prohibited:
    case IcmpError::port_unreachable6:
    case IcmpError::admin_prohibited6:
        return true;
    default:
        return false;
    }
}

// The ICMPv6 error that answers an IPv6 packet for which a stage asked `e` (a stage may name the
// IPv4 kind); IcmpError::count where ICMPv6 has none egw sends (protocol unreachable: ICMPv6 says
// it with a Parameter Problem pointing into the headers), and then nothing is sent.
inline constexpr IcmpError as_icmp6(IcmpError e) {
    switch (e) {
    case IcmpError::time_exceeded:
        return IcmpError::time_exceeded6;
    case IcmpError::net_unreachable:
        return IcmpError::no_route6;
    case IcmpError::port_unreachable:
        return IcmpError::port_unreachable6;
    case IcmpError::fragmentation_needed:
        return IcmpError::packet_too_big;
    case IcmpError::admin_prohibited:
        return IcmpError::admin_prohibited6;
    case IcmpError::firewall_prohibited:
        return IcmpError::firewall_prohibited6;
    case IcmpError::protocol_unreachable:
        return IcmpError::count;
    default:
        return e;
    }
}

}  // namespace egw::dp
