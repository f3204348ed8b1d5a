// SPDX-License-Identifier: Apache-2.0
//
// How a data-plane session is written for people and scripts: one spelling shared by the status
// file, the CLI and anything else that lists sessions.
#pragma once

#include <rte_byteorder.h>

#include <cstdint>
#include <string>

#include "config/config.h"
#include "config/ip.h"
#include "dataplane/tables/session_table.h"
#include "dataplane/worker.h"

namespace egw::control {

inline const char* session_proto_name(uint8_t proto) {
    switch (proto) {
    case 6:
        return "tcp";
    case 17:
        return "udp";
    case 1:
        return "icmp";
    case 58:
        return "icmpv6";
    default:
        return "other";
    }
}

// "a.b.c.d:port" from network-order fields.
inline std::string session_endpoint(uint32_t ip_be, uint16_t port_be) {
    return config::format_ipv4(rte_be_to_cpu_32(ip_be)) + ":" + std::to_string(rte_be_to_cpu_16(port_be));
}

// "[2001:db8::1]:port" from an IPv6 address and a network-order port.
inline std::string session_endpoint(const dp::Ip6& ip, uint16_t port_be) {
    return "[" + net::to_string(net::IpAddr::from_v6(ip.b)) + "]:" + std::to_string(rte_be_to_cpu_16(port_be));
}

// "" for non-TCP; otherwise opening, established, half-closed or closing (dataplane/tcp_track.h).
template <class S>
inline std::string session_tcp_state(const S& s) {
    if (s.proto != 6) return "";
    if (s.tcp_seen & dp::kTcpClosing) return "closing";
    if ((s.tcp_seen & (dp::kTcpSeenInside | dp::kTcpSeenOutside)) == (dp::kTcpSeenInside | dp::kTcpSeenOutside))
        return s.tcp_seen & (dp::kTcpFinInside | dp::kTcpFinOutside) ? "half-closed" : "established";
    return "opening";
}

// What a listing shows of a session of either family.
struct SessionRow {
    bool v6 = false;
    std::string proto, inside, outside, remote, state;
    uint16_t service_id = 0;
    uint16_t out_port = 0;
    uint8_t vrf = 0;
    uint8_t proto_number = 0;
};

inline SessionRow session_row(const dp::SessionRecord& r) {
    SessionRow row;
    auto fill = [&](const auto& s) {
        row.proto = session_proto_name(s.proto);
        row.proto_number = s.proto;
        row.inside = session_endpoint(s.pod_ip, s.pod_port);
        row.outside = session_endpoint(s.nat_ip, s.nat_port);
        row.remote = session_endpoint(s.remote_ip, s.remote_port);
        row.state = session_tcp_state(s);
        row.service_id = s.service_id;
        row.out_port = s.out_port;
        row.vrf = s.vrf;
    };
    row.v6 = r.v6;
    if (r.v6)
        fill(r.session6);
    else
        fill(r.session);
    return row;
}

}  // namespace egw::control
