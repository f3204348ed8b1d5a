// SPDX-License-Identifier: Apache-2.0
//
// The TTL rule, in one place: a packet the gateway forwards leaves with its TTL one lower, and a
// packet that would leave with 0 is dropped as ttl_exceeded. The ip_forward stage applies it to
// untranslated packets; the NAT stages apply the same test before a packet may touch (or create)
// a session, and fold the decrement into their one IPv4 checksum update.
#pragma once

#include <rte_ip.h>

#include <cstdint>

#include "dataplane/checksum.h"
#include "dataplane/drop_reason.h"
#include "dataplane/gateway_icmp_error_kinds.h"

namespace egw::dp {

inline bool ttl_expires(const rte_ipv4_hdr* ip) {
    return ip->time_to_live <= 1;
}

// IPv6's hop limit, the same rule (RFC 8200 3); no header checksum to update.
inline bool hop_limit_expires(const rte_ipv6_hdr* ip6) {
    return ip6->hop_limits <= 1;
}

// Decrements the TTL and returns the IPv4 checksum delta for it (the TTL shares a 16-bit word
// with the protocol), to be applied with the other changes of the header. The word falls by
// 0x0100 in network order whatever it held (every caller has checked TTL > 1, so no borrow), and
// RFC 1624's ~m + m' of that is always 0xFEFF: the same value csum_delta16() of the two words
// gives, without reading them.
inline uint16_t ttl_decrement(rte_ipv4_hdr* ip) {
    --ip->time_to_live;
    return rte_cpu_to_be_16(0xfeff);
}

}  // namespace egw::dp
