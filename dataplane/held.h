// SPDX-License-Identifier: Apache-2.0
//
// What travels with an mbuf handed to the control thread through DataplaneShared::to_control, in
// the mbuf dynamic field "egw_next_hop" (DataplaneShared::next_hop_field): for a packet whose
// next hop has no MAC yet, that next hop (the IPv4 one, host order, or the IPv6 one, by the
// frame's EtherType); for a Neighbor Advertisement from the local stage, a mark that it is one.
// ARP frames are told by their EtherType; `what` says whether one is a neighbour's (a reply, or a
// request from a neighbour that moved) or the local stage's answer to a moved neighbour's request,
// which the control thread learns from and then sends. The reassembly stage uses the first
// word as a fragment mark while the datagram is incomplete (reassembly.h). Every program that runs
// workers registers the field with next_hop_dynfield() before it makes them.
#pragma once

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include <cstdint>

namespace egw::dp {

struct HeldNextHop {
    uint32_t v4;     // IPv4 next hop, host order; the reassembly mark
    uint32_t what;   // kHeldPacket, kHeldAdvertisement or kHeldArpAnswer
    uint8_t v6[16];  // IPv6 next hop, network order
};

inline constexpr uint32_t kHeldPacket = 0;
inline constexpr uint32_t kHeldAdvertisement = 1;
inline constexpr uint32_t kHeldArpAnswer = 2;

inline const rte_mbuf_dynfield& next_hop_dynfield() {
    static const rte_mbuf_dynfield desc = {"egw_next_hop", sizeof(HeldNextHop), alignof(HeldNextHop), 0};
    return desc;
}

inline HeldNextHop& held_of(rte_mbuf* m, int field) {
    return *RTE_MBUF_DYNFIELD(m, field, HeldNextHop*);
}

}  // namespace egw::dp
