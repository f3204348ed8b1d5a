// SPDX-License-Identifier: Apache-2.0
//
// IP addresses and prefixes of either family, as plain values.
//
// The configuration, the Kubernetes object model and the control plane hold addresses in these
// two types, so IPv4 and IPv6 go through the same code up to the point where a family-specific
// table is filled (the IPv4 data plane takes host-order integers: IpAddr::v4()). An IpAddr is 17
// bytes with no heap: the family and 16 bytes in network order, an IPv4 address in the first four
// and zeros after, so that comparison, ordering and hashing look at every byte the same way.
//
// Text: parse_ip() takes the dotted quad without leading zeros (as the configuration always has)
// and IPv6 in any RFC 4291 form, including an embedded IPv4 tail; to_string() writes IPv6 in the
// RFC 5952 canonical form (inet_ntop), so equal addresses print equally.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace egw::net {

enum class Family : uint8_t { v4 = 4, v6 = 6 };

const char* to_string(Family f);  // "IPv4" / "IPv6", as Kubernetes writes address types

class IpAddr {
public:
    IpAddr() = default;  // 0.0.0.0
    static IpAddr from_v4(uint32_t host_order);
    static IpAddr from_v6(const uint8_t bytes[16]);

    Family family() const { return family_; }
    bool is_v4() const { return family_ == Family::v4; }
    bool is_v6() const { return family_ == Family::v6; }
    // The address in host order. Only meaningful for IPv4 (an IPv6 address gives its first word).
    uint32_t v4() const;
    // Network order; 4 meaningful bytes for IPv4, 16 for IPv6.
    const std::array<uint8_t, 16>& bytes() const { return bytes_; }
    unsigned bits() const { return is_v4() ? 32 : 128; }

    bool is_unspecified() const;  // 0.0.0.0, ::
    bool is_loopback() const;     // 127/8, ::1
    bool is_multicast() const;    // 224/4, ff00::/8
    bool is_link_local() const;   // 169.254/16, fe80::/10
    bool is_v4_mapped() const;    // ::ffff:0:0/96 (an IPv6 address naming an IPv4 one)

    bool operator==(const IpAddr&) const = default;
    auto operator<=>(const IpAddr&) const = default;  // IPv4 before IPv6, then by bytes

private:
    Family family_ = Family::v4;
    std::array<uint8_t, 16> bytes_{};
};

// An address with a prefix length. `addr` keeps the host bits as written (an interface address
// such as 2001:db8::1/64); network() clears them.
struct IpPrefix {
    IpAddr addr;
    uint8_t len = 0;

    static IpPrefix from_v4(uint32_t host_order, uint8_t len) { return IpPrefix{IpAddr::from_v4(host_order), len}; }
    Family family() const { return addr.family(); }
    bool is_v4() const { return addr.is_v4(); }
    bool is_v6() const { return addr.is_v6(); }
    IpAddr network() const;
    // Same family and the first `len` bits equal.
    bool contains(const IpAddr& ip) const;
    // IPv4 only, host order: the mask and the network as integers.
    uint32_t mask4() const { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }
    uint32_t network4() const { return addr.v4() & mask4(); }

    bool operator==(const IpPrefix&) const = default;
    auto operator<=>(const IpPrefix&) const = default;
};

// nullopt for anything but one address of either family (no prefix, no zone, no spaces).
std::optional<IpAddr> parse_ip(std::string_view s);
// "address/len" with len within the family's bits; nullopt otherwise.
std::optional<IpPrefix> parse_prefix(std::string_view s);
std::string to_string(const IpAddr& a);
std::string to_string(const IpPrefix& p);

struct IpAddrHash {
    size_t operator()(const IpAddr& a) const;
};

}  // namespace egw::net
