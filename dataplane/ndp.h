// SPDX-License-Identifier: Apache-2.0
//
// Neighbor Advertisements (RFC 4861 4.4), written in one place for the two that send them: the
// local stage's answer to a Neighbor Solicitation (local.cpp, in the solicitation's own mbuf) and
// the control thread's unsolicited ones, sent when the gateway begins to answer for an address
// (control/neighbor/announcer.h, RFC 4861 7.2.6). Plain byte writes: no allocation, usable on the
// packet path.
//
// The advertisement comes from the target address itself, as Linux sends its own, with hop limit
// 255 and the target link-layer address option; the Router flag is set in both since the gateway
// forwards on every one of its links (RFC 4861 7.2.4/7.2.6: a router sets it, and a host that saw
// it cleared would drop the gateway from its default routers).
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/checksum.h"
#include "dataplane/ipv6.h"

namespace egw::dp {

inline constexpr uint8_t kNaRouter = 0x80;
inline constexpr uint8_t kNaSolicited = 0x40;
inline constexpr uint8_t kNaOverride = 0x20;
// The message (type to target, 24 bytes) and its target link-layer address option (8 bytes).
inline constexpr uint32_t kNaLen = 24 + 8;
inline constexpr uint32_t kNaFrameLen = 14 + 40 + kNaLen;
inline constexpr uint8_t kAllNodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
inline constexpr uint8_t kAllNodesMac[6] = {0x33, 0x33, 0, 0, 0, 1};

// Writes a whole advertisement frame (kNaFrameLen bytes at `f`): Ethernet to `dst_mac` from `mac`,
// IPv6 from `target` to `dst`, the message with `flags` (kNa*) and the option with `mac`, and its
// checksum. `dst_mac` may point into the frame's own source MAC (bytes 6-11): it is read first.
// `target` and `dst` must not point into the frame.
inline void write_neighbor_advert(uint8_t* f, const uint8_t* dst_mac, const uint8_t* mac, const uint8_t* target,
                                  const uint8_t* dst, uint8_t flags) {
    uint8_t to[6];
    std::memcpy(to, dst_mac, 6);
    std::memcpy(f, to, 6);
    std::memcpy(f + 6, mac, 6);
    f[12] = 0x86;
    f[13] = 0xdd;
    uint8_t* ip = f + 14;
    ip[0] = 0x60;
    ip[1] = ip[2] = ip[3] = 0;
    ip[4] = 0;
    ip[5] = kNaLen;
    ip[6] = kIp6Icmp;
    ip[7] = 255;  // RFC 4861 7.1.2: the receiver checks that it was not forwarded
    std::memcpy(ip + 8, target, 16);
    std::memcpy(ip + 24, dst, 16);
    uint8_t* na = ip + 40;
    std::memset(na, 0, kNaLen);
    na[0] = kNdpNeighborAdvert;
    na[4] = flags;
    std::memcpy(na + 8, target, 16);
    na[24] = 2;  // target link-layer address, 8 bytes
    na[25] = 1;
    std::memcpy(na + 26, mac, 6);
    const uint8_t pseudo[8] = {0, 0, 0, static_cast<uint8_t>(kNaLen), 0, 0, 0, kIp6Icmp};
    uint32_t sum = csum_partial(ip + 8, 32);
    sum = csum_partial(pseudo, sizeof pseudo, sum);
    sum = csum_partial(na, kNaLen, sum);
    uint16_t c = csum_finish(sum);
    std::memcpy(na + 2, &c, 2);
}

}  // namespace egw::dp
