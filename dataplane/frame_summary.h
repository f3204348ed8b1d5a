// SPDX-License-Identifier: Apache-2.0
//
// What the first bytes of an Ethernet frame say: MACs, one VLAN tag, IPv4 or IPv6 addresses, TTL
// or hop limit, checksums, and the TCP/UDP ports or ICMP type. The packet trace (trace.h) matches
// the packets it is asked for on it and the CLI renders the frames it kept with it. Reads only the
// bytes it is given, with no DPDK and no allocation, so it serves a worker and the control thread
// alike; a frame cut short gives what its bytes hold and says where it stopped (`l3`, `l4`).
#pragma once

#include <cstdint>
#include <cstring>

namespace egw::dp {

struct FrameSummary {
    uint8_t dst_mac[6];
    uint8_t src_mac[6];
    uint16_t ethertype;  // after the VLAN tag, when there is one
    int32_t vlan;        // -1: untagged
    bool l3;             // an IPv4 or IPv6 header was there whole
    bool v6;
    uint8_t src[16];  // IPv4: the first 4 bytes, network order
    uint8_t dst[16];
    uint8_t proto;  // IPv6: the fixed header's next header (extension headers are not walked)
    uint8_t ttl;    // IPv6: the hop limit
    uint16_t ip_len;
    uint16_t ip_id;
    uint16_t ip_checksum;  // IPv4
    bool fragment;         // IPv4: MF set or an offset; IPv6: a Fragment header next
    bool l4;               // the L4 fields below were there
    uint16_t sport;        // TCP and UDP, host order
    uint16_t dport;
    uint16_t l4_checksum;  // TCP, UDP, ICMP, ICMPv6
    uint8_t tcp_flags;
    uint8_t icmp_type;
    uint8_t icmp_code;
    uint16_t icmp_id;  // echo request and reply
};

namespace frame_detail {
inline uint16_t rd16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
}  // namespace frame_detail

inline FrameSummary summarize_frame(const uint8_t* f, unsigned len) {
    using frame_detail::rd16;
    FrameSummary s{};
    s.vlan = -1;
    if (len < 14) return s;
    std::memcpy(s.dst_mac, f, 6);
    std::memcpy(s.src_mac, f + 6, 6);
    s.ethertype = rd16(f + 12);
    unsigned off = 14;
    if ((s.ethertype == 0x8100 || s.ethertype == 0x88a8) && len >= 18) {
        s.vlan = rd16(f + 14) & 0x0fff;
        s.ethertype = rd16(f + 16);
        off = 18;
    }
    const uint8_t* ip = f + off;
    unsigned l4_off;
    if (s.ethertype == 0x0800 && len >= off + 20 && (ip[0] >> 4) == 4) {
        unsigned ihl = (ip[0] & 0x0f) * 4u;
        s.l3 = true;
        s.proto = ip[9];
        s.ttl = ip[8];
        s.ip_len = rd16(ip + 2);
        s.ip_id = rd16(ip + 4);
        s.ip_checksum = rd16(ip + 10);
        s.fragment = (rd16(ip + 6) & 0x3fff) != 0;
        std::memcpy(s.src, ip + 12, 4);
        std::memcpy(s.dst, ip + 16, 4);
        if (ihl < 20 || (rd16(ip + 6) & 0x1fff) != 0) return s;  // not the first fragment: no L4 header
        l4_off = off + ihl;
    } else if (s.ethertype == 0x86dd && len >= off + 40 && (ip[0] >> 4) == 6) {
        s.l3 = true;
        s.v6 = true;
        s.proto = ip[6];
        s.ttl = ip[7];
        s.ip_len = rd16(ip + 4);
        s.fragment = s.proto == 44;
        std::memcpy(s.src, ip + 8, 16);
        std::memcpy(s.dst, ip + 24, 16);
        l4_off = off + 40;
    } else {
        return s;
    }
    const uint8_t* l4 = f + l4_off;
    switch (s.proto) {
    case 6:
        if (len < l4_off + 20) return s;
        s.sport = rd16(l4);
        s.dport = rd16(l4 + 2);
        s.tcp_flags = l4[13];
        s.l4_checksum = rd16(l4 + 16);
        s.l4 = true;
        break;
    case 17:
        if (len < l4_off + 8) return s;
        s.sport = rd16(l4);
        s.dport = rd16(l4 + 2);
        s.l4_checksum = rd16(l4 + 6);
        s.l4 = true;
        break;
    case 1:
    case 58:
        if (len < l4_off + 8) return s;
        s.icmp_type = l4[0];
        s.icmp_code = l4[1];
        s.l4_checksum = rd16(l4 + 2);
        s.icmp_id = rd16(l4 + 4);
        s.l4 = true;
        break;
    default:
        break;
    }
    return s;
}

}  // namespace egw::dp
