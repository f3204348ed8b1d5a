// SPDX-License-Identifier: Apache-2.0
#include "config/ip.h"

#include <arpa/inet.h>

#include <cstring>

namespace egw::net {

namespace {

// Decimal 0..255 without leading zeros or signs.
bool octet(std::string_view s, uint32_t& out) {
    if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return false;
    uint32_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint32_t>(c - '0');
    }
    if (v > 255) return false;
    out = v;
    return true;
}

std::optional<uint32_t> parse_v4(std::string_view s) {
    uint32_t ip = 0;
    for (int i = 0; i < 4; ++i) {
        size_t end = i < 3 ? s.find('.') : s.size();
        if (end == std::string_view::npos) return std::nullopt;
        uint32_t o = 0;
        if (!octet(s.substr(0, end), o)) return std::nullopt;
        ip = ip << 8 | o;
        s = i < 3 ? s.substr(end + 1) : std::string_view();
    }
    return ip;
}

}  // namespace

const char* to_string(Family f) {
    return f == Family::v4 ? "IPv4" : "IPv6";
}

IpAddr IpAddr::from_v4(uint32_t host_order) {
    IpAddr a;
    a.family_ = Family::v4;
    a.bytes_[0] = static_cast<uint8_t>(host_order >> 24);
    a.bytes_[1] = static_cast<uint8_t>(host_order >> 16);
    a.bytes_[2] = static_cast<uint8_t>(host_order >> 8);
    a.bytes_[3] = static_cast<uint8_t>(host_order);
    return a;
}

IpAddr IpAddr::from_v6(const uint8_t bytes[16]) {
    IpAddr a;
    a.family_ = Family::v6;
    std::memcpy(a.bytes_.data(), bytes, 16);
    return a;
}

uint32_t IpAddr::v4() const {
    return uint32_t{bytes_[0]} << 24 | uint32_t{bytes_[1]} << 16 | uint32_t{bytes_[2]} << 8 | bytes_[3];
}

bool IpAddr::is_unspecified() const {
    for (unsigned i = 0; i < bits() / 8; ++i)
        if (bytes_[i]) return false;
    return true;
}

bool IpAddr::is_loopback() const {
    if (is_v4()) return bytes_[0] == 127;
    for (unsigned i = 0; i < 15; ++i)
        if (bytes_[i]) return false;
    return bytes_[15] == 1;
}

bool IpAddr::is_multicast() const {
    return is_v4() ? (bytes_[0] >> 4) == 0xe : bytes_[0] == 0xff;
}

bool IpAddr::is_link_local() const {
    if (is_v4()) return bytes_[0] == 169 && bytes_[1] == 254;
    return bytes_[0] == 0xfe && (bytes_[1] & 0xc0) == 0x80;
}

bool IpAddr::is_v4_mapped() const {
    if (!is_v6()) return false;
    for (unsigned i = 0; i < 10; ++i)
        if (bytes_[i]) return false;
    return bytes_[10] == 0xff && bytes_[11] == 0xff;
}

IpAddr IpPrefix::network() const {
    if (addr.is_v4()) return IpAddr::from_v4(network4());
    std::array<uint8_t, 16> b = addr.bytes();
    for (unsigned i = 0; i < 16; ++i) {
        const unsigned keep = len > 8 * i ? len - 8 * i : 0;  // bits of byte i inside the prefix
        if (keep < 8) b[i] = static_cast<uint8_t>(b[i] & (0xff00u >> keep));
    }
    return IpAddr::from_v6(b.data());
}

bool IpPrefix::contains(const IpAddr& ip) const {
    if (ip.family() != addr.family()) return false;
    return IpPrefix{ip, len}.network() == network();
}

std::optional<IpAddr> parse_ip(std::string_view s) {
    if (s.find(':') == std::string_view::npos) {
        auto v4 = parse_v4(s);
        if (!v4) return std::nullopt;
        return IpAddr::from_v4(*v4);
    }
    // inet_pton wants a terminated string: the longest IPv6 text is 45 characters.
    char buf[64];
    if (s.size() >= sizeof buf) return std::nullopt;
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = '\0';
    uint8_t b[16];
    if (inet_pton(AF_INET6, buf, b) != 1) return std::nullopt;
    return IpAddr::from_v6(b);
}

std::optional<IpPrefix> parse_prefix(std::string_view s) {
    const size_t slash = s.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto a = parse_ip(s.substr(0, slash));
    if (!a) return std::nullopt;
    std::string_view l = s.substr(slash + 1);
    if (l.empty() || l.size() > 3 || (l.size() > 1 && l[0] == '0')) return std::nullopt;
    unsigned len = 0;
    for (char c : l) {
        if (c < '0' || c > '9') return std::nullopt;
        len = len * 10 + static_cast<unsigned>(c - '0');
    }
    if (len > a->bits()) return std::nullopt;
    return IpPrefix{*a, static_cast<uint8_t>(len)};
}

std::string to_string(const IpAddr& a) {
    char buf[INET6_ADDRSTRLEN];
    if (a.is_v4()) {
        const uint32_t v = a.v4();
        return std::to_string(v >> 24) + "." + std::to_string(v >> 16 & 0xff) + "." + std::to_string(v >> 8 & 0xff) +
               "." + std::to_string(v & 0xff);
    }
    inet_ntop(AF_INET6, a.bytes().data(), buf, sizeof buf);
    return buf;
}

std::string to_string(const IpPrefix& p) {
    return to_string(p.addr) + "/" + std::to_string(p.len);
}

size_t IpAddrHash::operator()(const IpAddr& a) const {
    // FNV-1a over the family and the bytes: control-plane maps only.
    uint64_t h = 1469598103934665603ull ^ static_cast<uint8_t>(a.family());
    h *= 1099511628211ull;
    for (uint8_t b : a.bytes()) {
        h ^= b;
        h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
}

}  // namespace egw::net
