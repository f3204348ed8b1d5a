// SPDX-License-Identifier: Apache-2.0
//
// The gateway's own ICMP errors (RFC 1812 4.3): how a stage asks for one. The stage that finds a
// packet it cannot forward (TTL, no route, the gateway's own address, too big for the next hop)
// calls reply_icmp_error() instead of Burst::drop(); the icmp_reply stage (gateway_icmp_error.cpp) then
// turns the packet into the error in its own mbuf and sends it back out the port it came in on,
// or drops it under `why` when RFC 1812 forbids an answer or the worker's rate limit holds it back.
#pragma once

#include <cstdint>

#include "dataplane/burst.h"

namespace egw::dp {

// Asks for packet i of the burst to be answered with ICMP error `e` (its type and code are in
// gateway_icmp_error_kinds.h). `why` is the drop reason the packet is counted under when no error is sent.
// `aux` fills bytes 4-7 of the ICMP header, host order: for fragmentation_needed the next-hop
// MTU (RFC 1191: the low 16 bits), 0 otherwise.
//
// Call it before the packet is rewritten: the error quotes the packet as it is then, and the
// sender must recognise its own header (a pod's packet is answered untranslated). Any stage that
// runs before icmp_reply may call it (every stage but output).
inline void reply_icmp_error(Burst& b, unsigned i, IcmpError e, DropReason why, uint32_t aux = 0) {
    PacketMeta& pk = b.pkt[i];
    pk.reason = why;
    pk.icmp = e;
    pk.icmp_aux = aux;
    b.set_next(i, Next::icmp_reply);
}

// The most of an ICMP error's IPv4 datagram: 576 bytes (RFC 1812 4.3.2.3), so at most 548 bytes
// of the offending datagram are quoted after the 20-byte header and the 8-byte ICMP header.
inline constexpr uint32_t kIcmpErrorMaxLength = 576;
inline constexpr uint32_t kIcmpErrorMaxQuote = kIcmpErrorMaxLength - 20 - 8;

}  // namespace egw::dp
