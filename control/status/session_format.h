// SPDX-License-Identifier: Apache-2.0
//
// How a data-plane session is written for people and scripts: one spelling shared by the status
// file, the CLI and anything else that lists sessions.
#pragma once

#include <rte_byteorder.h>

#include <cstdint>
#include <string>

#include "config/config.h"
#include "dataplane/tables/session_table.h"

namespace egw::control {

inline const char* session_proto_name(uint8_t proto) {
    switch (proto) {
    case 6: return "tcp";
    case 17: return "udp";
    case 1: return "icmp";
    default: return "other";
    }
}

// "a.b.c.d:port" from network-order fields.
inline std::string session_endpoint(uint32_t ip_be, uint16_t port_be) {
    return config::format_ipv4(rte_be_to_cpu_32(ip_be)) + ":" + std::to_string(rte_be_to_cpu_16(port_be));
}

// "" for non-TCP; otherwise opening, established, half-closed or closing (dataplane/tcp_track.h).
inline std::string session_tcp_state(const dp::Session& s) {
    if (s.proto != 6)
        return "";
    if (s.tcp_seen & dp::kTcpClosing)
        return "closing";
    if ((s.tcp_seen & (dp::kTcpSeenInside | dp::kTcpSeenOutside)) == (dp::kTcpSeenInside | dp::kTcpSeenOutside))
        return s.tcp_seen & (dp::kTcpFinInside | dp::kTcpFinOutside) ? "half-closed" : "established";
    return "opening";
}

}  // namespace egw::control
