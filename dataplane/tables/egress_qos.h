// SPDX-License-Identifier: Apache-2.0
//
// EgressQosTable: the DSCP marks EgressQoS gives the pods that have rules (docs/kubernetes.md,
// "EgressQoS"), by pod address, each pod's rules in order.
//
// Writer: the control thread builds a complete table with every PolicySnapshot that carries it
// (control/policy/egress_qos_table.h reduces the namespaces' rules to each pod's); allocation is
// fine there. Readers: workers, from the snapshot they loaded for the current poll-loop
// iteration, in the NAT slow path only: when it makes a session, and when a publication sends a
// session back to it (nat_session.h). The established path reads the mark the session keeps.
// Publication and reclamation: with the snapshot that owns it (policy.h); never modified after.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/tables/flat_map.h"
#include "dataplane/tables/ip6_map.h"

namespace egw::dp {

// A session's mark (Session::dscp_mark), for the packets it sends toward the remote side: 0 lets
// the DSCP a packet arrived with through; otherwise the DSCP to set in bits 2-7, where it lies in
// the IPv4 TOS and the IPv6 traffic class, and kDscpMarked in bit 0 (so DSCP 0 is a mark too).
// The ECN bits (0-1 of the octet) are always the packet's own.
inline constexpr uint8_t kDscpMarked = 1;
inline constexpr uint8_t kDscpBits = 0xfc;
constexpr uint8_t dscp_mark(uint8_t dscp) {
    return static_cast<uint8_t>((dscp << 2 & kDscpBits) | kDscpMarked);
}
constexpr uint8_t dscp_of_mark(uint8_t mark) {
    return static_cast<uint8_t>(mark >> 2);
}

// One rule of one pod: a destination prefix (length 0: every destination) and the mark.
struct QosRule4 {
    uint32_t network = 0;  // host order, host bits clear
    uint32_t mask = 0;     // host order
    uint8_t mark = 0;
};
struct QosRule6 {
    uint8_t network[16] = {};  // host bits clear
    uint8_t len = 0;
    uint8_t mark = 0;
};
// A pod's rules: rules4[first, first + count) or rules6[...].
struct QosSpan {
    uint32_t first = 0;
    uint32_t count = 0;
};

struct EgressQosTable {
    FlatMap pods4;  // pod IPv4 (host order) -> index into spans4
    Ip6Map pods6;   // pod IPv6 -> index into spans6
    std::vector<QosSpan> spans4;
    std::vector<QosSpan> spans6;
    std::vector<QosRule4> rules4;
    std::vector<QosRule6> rules6;

    bool empty() const { return spans4.empty() && spans6.empty(); }

    // The mark of traffic from `pod` to `dst` (host order): the first of the pod's rules whose
    // prefix holds `dst`; 0 when none does or the pod has none.
    uint8_t mark4(uint32_t pod, uint32_t dst) const { return spans4.empty() ? 0 : lookup4(pod, dst); }

    // The same for IPv6 (network order addresses).
    uint8_t mark6(const uint8_t* pod, const uint8_t* dst) const { return spans6.empty() ? 0 : lookup6(pod, dst); }

    // The lookups behind them, out of line: a gateway without EgressQoS pays one comparison per
    // new session.
    __attribute__((noinline)) uint8_t lookup4(uint32_t pod, uint32_t dst) const {
        const uint32_t span = pods4.find(pod);
        if (span == FlatMap::kMissing) return 0;
        const QosSpan& sp = spans4[span];
        for (uint32_t k = sp.first; k < sp.first + sp.count; ++k) {
            if ((dst & rules4[k].mask) == rules4[k].network) return rules4[k].mark;
        }
        return 0;
    }

    __attribute__((noinline)) uint8_t lookup6(const uint8_t* pod, const uint8_t* dst) const {
        const uint32_t span = pods6.find(pod);
        if (span == Ip6Map::kMissing) return 0;
        const QosSpan& sp = spans6[span];
        for (uint32_t k = sp.first; k < sp.first + sp.count; ++k) {
            if (prefix_holds(rules6[k], dst)) return rules6[k].mark;
        }
        return 0;
    }

    static bool prefix_holds(const QosRule6& r, const uint8_t* a) {
        const unsigned whole = r.len / 8;
        if (std::memcmp(r.network, a, whole) != 0) return false;
        const unsigned rest = r.len % 8;
        if (rest == 0) return true;
        const uint8_t mask = static_cast<uint8_t>(0xff00u >> rest);
        return (a[whole] & mask) == r.network[whole];
    }
};

}  // namespace egw::dp
