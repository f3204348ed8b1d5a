// SPDX-License-Identifier: Apache-2.0
#include "tests/unit/dataplane/packet.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <functional>

namespace egw::test {

std::string ip_str(uint32_t a) {
    char b[16];
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
    return b;
}

std::string mac_str(const Mac& m) {
    char b[18];
    std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return b;
}

void put16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}

void put32(uint8_t* p, uint32_t v) {
    put16(p, static_cast<uint16_t>(v >> 16));
    put16(p + 2, static_cast<uint16_t>(v));
}

uint16_t get16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
uint32_t get32(const uint8_t* p) {
    return uint32_t{get16(p)} << 16 | get16(p + 2);
}

uint32_t sum16(const uint8_t* data, size_t len, uint32_t sum) {
    // 64-bit accumulator: no carry is ever lost, whatever the length.
    uint64_t s = sum;
    size_t i = 0;
    for (; i + 1 < len; i += 2)
        s += get16(data + i);
    if (i < len) s += uint32_t{data[i]} << 8;
    while (s >> 32)
        s = (s & 0xffffffff) + (s >> 32);
    return static_cast<uint32_t>(s);
}

uint16_t finish(uint32_t sum) {
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
}

uint32_t pseudo_sum(uint32_t src, uint32_t dst, uint8_t proto, uint32_t l4_len) {
    return (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + proto + l4_len;
}

Bytes tcp_segment(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t flags, const Bytes& payload,
                  uint32_t seq, uint32_t ack) {
    Bytes b(20 + payload.size());
    put16(&b[0], sport);
    put16(&b[2], dport);
    put32(&b[4], seq);
    put32(&b[8], ack);
    b[12] = 5 << 4;
    b[13] = flags;
    put16(&b[14], 64240);  // window
    std::copy(payload.begin(), payload.end(), b.begin() + 20);
    put16(&b[16], finish(sum16(b.data(), b.size(), pseudo_sum(src, dst, kProtoTcp, static_cast<uint32_t>(b.size())))));
    return b;
}

Bytes udp_datagram(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, const Bytes& payload,
                   bool zero_checksum) {
    Bytes b(8 + payload.size());
    put16(&b[0], sport);
    put16(&b[2], dport);
    put16(&b[4], static_cast<uint16_t>(b.size()));
    std::copy(payload.begin(), payload.end(), b.begin() + 8);
    if (!zero_checksum) {
        uint16_t c =
            finish(sum16(b.data(), b.size(), pseudo_sum(src, dst, kProtoUdp, static_cast<uint32_t>(b.size()))));
        put16(&b[6], c == 0 ? 0xffff : c);
    }
    return b;
}

Bytes icmp_echo(bool request, uint16_t ident, uint16_t seq, const Bytes& payload) {
    Bytes b(8 + payload.size());
    b[0] = request ? 8 : 0;
    put16(&b[4], ident);
    put16(&b[6], seq);
    std::copy(payload.begin(), payload.end(), b.begin() + 8);
    put16(&b[2], finish(sum16(b.data(), b.size())));
    return b;
}

Bytes icmp_error(uint8_t type, uint8_t code, const Bytes& quoted, uint32_t rest_of_header) {
    Bytes b(8 + quoted.size());
    b[0] = type;
    b[1] = code;
    put32(&b[4], rest_of_header);
    std::copy(quoted.begin(), quoted.end(), b.begin() + 8);
    put16(&b[2], finish(sum16(b.data(), b.size())));
    return b;
}

Bytes fragment_of(const Bytes& datagram, size_t offset, size_t len, bool more) {
    size_t hl = (datagram[0] & 0x0f) * 4u;
    Bytes f(datagram.begin(), datagram.begin() + static_cast<long>(hl));
    f.insert(f.end(), datagram.begin() + static_cast<long>(hl + offset),
             datagram.begin() + static_cast<long>(hl + offset + len));
    put16(&f[2], static_cast<uint16_t>(f.size()));
    uint16_t word = static_cast<uint16_t>((get16(&datagram[6]) & 0x4000) | (more ? 0x2000 : 0) | (offset / 8));
    put16(&f[6], word);
    put16(&f[10], 0);
    put16(&f[10], finish(sum16(f.data(), hl)));
    return f;
}

std::vector<Bytes> fragments(const Bytes& datagram, size_t payload_per_fragment) {
    size_t hl = (datagram[0] & 0x0f) * 4u;
    size_t payload = datagram.size() - hl;
    std::vector<Bytes> out;
    for (size_t off = 0; off < payload; off += payload_per_fragment) {
        size_t len = std::min(payload_per_fragment, payload - off);
        out.push_back(fragment_of(datagram, off, len, off + len < payload));
    }
    return out;
}

Bytes reassemble(const std::vector<Bytes>& frags, std::string* why) {
    auto fail = [&](const std::string& w) {
        if (why) *why = w;
        return Bytes{};
    };
    std::vector<std::pair<size_t, const Bytes*>> pieces;
    const Bytes* first = nullptr;
    size_t end = 0;
    bool seen_last = false;
    for (const Bytes& f : frags) {
        if (f.size() < 20) return fail("fragment shorter than a header");
        size_t hl = (f[0] & 0x0f) * 4u;
        if (finish(sum16(f.data(), hl)) != 0) return fail("a fragment's header checksum is wrong");
        if (get16(&f[2]) != f.size()) return fail("a fragment's total length is not its size");
        uint16_t word = get16(&f[6]);
        size_t off = (word & 0x1fffu) * 8u;
        bool more = word & 0x2000;
        if (more && (f.size() - hl) % 8 != 0)
            return fail("a fragment other than the last is not a multiple of 8 bytes");
        if (off == 0) first = &f;
        if (!more) {
            if (seen_last) return fail("two last fragments");
            seen_last = true;
            end = off + f.size() - hl;
        }
        pieces.emplace_back(off, &f);
    }
    if (!first || !seen_last) return fail("no first or no last fragment");
    std::sort(pieces.begin(), pieces.end());
    size_t hl = ((*first)[0] & 0x0f) * 4u;
    Bytes d(first->begin(), first->begin() + static_cast<long>(hl));
    for (auto& [off, f] : pieces) {
        size_t fhl = ((*f)[0] & 0x0f) * 4u;
        if (off != d.size() - hl) return fail("fragments overlap or leave a hole at " + std::to_string(d.size() - hl));
        d.insert(d.end(), f->begin() + static_cast<long>(fhl), f->end());
    }
    if (d.size() - hl != end) return fail("the last fragment does not end the datagram");
    put16(&d[2], static_cast<uint16_t>(d.size()));
    put16(&d[6], static_cast<uint16_t>(get16(&d[6]) & 0x4000));
    put16(&d[10], 0);
    put16(&d[10], finish(sum16(d.data(), hl)));
    return d;
}

Bytes ipv4(uint32_t src, uint32_t dst, uint8_t proto, const Bytes& l4, const IpOpt& o) {
    size_t hl = 20 + o.options.size();
    Bytes b(hl + l4.size());
    b[0] = static_cast<uint8_t>(0x40 | (hl / 4));
    b[1] = o.tos;
    put16(&b[2], static_cast<uint16_t>(b.size()));
    put16(&b[4], o.id);
    put16(&b[6], o.frag);
    b[8] = o.ttl;
    b[9] = proto;
    put32(&b[12], src);
    put32(&b[16], dst);
    std::copy(o.options.begin(), o.options.end(), b.begin() + 20);
    put16(&b[10], finish(sum16(b.data(), hl)));
    std::copy(l4.begin(), l4.end(), b.begin() + static_cast<std::ptrdiff_t>(hl));
    return b;
}

Bytes ethernet(const Mac& dst, const Mac& src, uint16_t ether_type, const Bytes& payload) {
    Bytes b(14 + payload.size());
    std::copy(dst.begin(), dst.end(), b.begin());
    std::copy(src.begin(), src.end(), b.begin() + 6);
    put16(&b[12], ether_type);
    std::copy(payload.begin(), payload.end(), b.begin() + 14);
    return b;
}

Bytes tcp_ip(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t flags, const Bytes& payload,
             const IpOpt& o) {
    return ipv4(src, dst, kProtoTcp, tcp_segment(src, dst, sport, dport, flags, payload), o);
}

Bytes udp_ip(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, const Bytes& payload, const IpOpt& o,
             bool zero_checksum) {
    return ipv4(src, dst, kProtoUdp, udp_datagram(src, dst, sport, dport, payload, zero_checksum), o);
}

Bytes echo_ip(bool request, uint32_t src, uint32_t dst, uint16_t ident, uint16_t seq, const Bytes& payload,
              const IpOpt& o) {
    return ipv4(src, dst, kProtoIcmp, icmp_echo(request, ident, seq, payload), o);
}

Ip6Addr ip6(const char* text) {
    Ip6Addr a{};
    if (inet_pton(AF_INET6, text, a.data()) != 1) ADD_FAILURE() << "not an IPv6 address: " << text;
    return a;
}

std::string ip6_str(const Ip6Addr& a) {
    char b[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, a.data(), b, sizeof b);
    return b;
}

uint32_t pseudo_sum6(const Ip6Addr& src, const Ip6Addr& dst, uint8_t proto, uint32_t l4_len) {
    uint32_t s = sum16(src.data(), 16);
    s = sum16(dst.data(), 16, s);
    return s + (l4_len >> 16) + (l4_len & 0xffff) + proto;
}

Bytes ipv6(const Ip6Addr& src, const Ip6Addr& dst, uint8_t proto, const Bytes& l4, const Ip6Opt& o) {
    Bytes ext;
    for (size_t k = 0; k < o.ext.size(); ++k) {
        const auto& [type, data] = o.ext[k];
        uint8_t next = k + 1 < o.ext.size() ? o.ext[k + 1].first : proto;
        ext.push_back(next);
        ext.push_back(type == 44 ? 0 : static_cast<uint8_t>((2 + data.size()) / 8 - 1));
        ext.insert(ext.end(), data.begin(), data.end());
    }
    Bytes b(40 + ext.size() + l4.size());
    b[0] = static_cast<uint8_t>(0x60 | o.traffic_class >> 4);
    b[1] = static_cast<uint8_t>((o.traffic_class & 0x0f) << 4);
    put16(&b[4], static_cast<uint16_t>(ext.size() + l4.size()));
    b[6] = o.ext.empty() ? proto : o.ext[0].first;
    b[7] = o.hop_limit;
    std::copy(src.begin(), src.end(), b.begin() + 8);
    std::copy(dst.begin(), dst.end(), b.begin() + 24);
    std::copy(ext.begin(), ext.end(), b.begin() + 40);
    std::copy(l4.begin(), l4.end(), b.begin() + 40 + static_cast<std::ptrdiff_t>(ext.size()));
    return b;
}

std::vector<Flow6> flows6() {
    const std::string q = "GET / HTTP/1.1\r\n\r\n", a = "HTTP/1.1 200 OK\r\n\r\n";
    const Bytes req(q.begin(), q.end()), resp(a.begin(), a.end());
    return {
        {"tcp", kProtoTcp,
         [=](const Ip6Addr& s, uint16_t sp, const Ip6Addr& d, uint16_t dp, uint8_t hl) {
             return tcp6_ip(s, sp, d, dp, kSyn, req, Ip6Opt{hl});
         },
         [=](const Ip6Addr& s, uint16_t sp, const Ip6Addr& d, uint16_t dp, uint8_t hl) {
             return tcp6_ip(s, sp, d, dp, kSyn | kAck, resp, Ip6Opt{hl});
         }},
        {"udp", kProtoUdp,
         [=](const Ip6Addr& s, uint16_t sp, const Ip6Addr& d, uint16_t dp, uint8_t hl) {
             return udp6_ip(s, sp, d, dp, req, Ip6Opt{hl});
         },
         [=](const Ip6Addr& s, uint16_t sp, const Ip6Addr& d, uint16_t dp, uint8_t hl) {
             return udp6_ip(s, sp, d, dp, resp, Ip6Opt{hl});
         }},
        {"icmpv6 echo", kProtoIcmp6,
         [=](const Ip6Addr& s, uint16_t sp, const Ip6Addr& d, uint16_t, uint8_t hl) {
             return echo6_ip(true, s, d, sp, 7, req, Ip6Opt{hl});
         },
         [=](const Ip6Addr& s, uint16_t, const Ip6Addr& d, uint16_t dp, uint8_t hl) {
             return echo6_ip(false, s, d, dp, 7, req, Ip6Opt{hl});
         }},
    };
}

Bytes fragment6_of(const Bytes& packet, size_t offset, size_t len, bool more, uint32_t id) {
    Bytes f(packet.begin(), packet.begin() + 40);
    f.resize(48);
    f[40] = packet[6];
    put16(&f[42], static_cast<uint16_t>((offset / 8) << 3 | (more ? 1 : 0)));
    put32(&f[44], id);
    f[6] = 44;
    f.insert(f.end(), packet.begin() + static_cast<long>(40 + offset),
             packet.begin() + static_cast<long>(40 + offset + len));
    put16(&f[4], static_cast<uint16_t>(f.size() - 40));
    return f;
}

std::vector<Bytes> fragments6(const Bytes& packet, size_t payload_per_fragment, uint32_t id) {
    size_t payload = packet.size() - 40;
    std::vector<Bytes> out;
    for (size_t off = 0; off < payload; off += payload_per_fragment) {
        size_t len = std::min(payload_per_fragment, payload - off);
        out.push_back(fragment6_of(packet, off, len, off + len < payload, id));
    }
    return out;
}

Bytes reassemble6(const std::vector<Bytes>& frags, std::string* why, uint32_t* id_out) {
    auto fail = [&](const std::string& w) {
        if (why) *why = w;
        return Bytes{};
    };
    std::vector<std::pair<size_t, const Bytes*>> pieces;
    const Bytes* first = nullptr;
    size_t end = 0;
    bool seen_last = false;
    for (const Bytes& f : frags) {
        if (f.size() < 48 || (f[0] >> 4) != 6) return fail("fragment shorter than the two headers, or not IPv6");
        if (f[6] != 44) return fail("a fragment's next header is not a Fragment header");
        if (get16(&f[4]) + 40u != f.size()) return fail("a fragment's payload length is not its size");
        if (get32(&f[44]) != get32(&frags[0][44])) return fail("fragments of different identifications");
        if (f[41] != 0 || (get16(&f[42]) & 6) != 0) return fail("a Fragment header's reserved bits are set");
        size_t off = (get16(&f[42]) >> 3) * 8u;
        bool more = get16(&f[42]) & 1;
        if (more && (f.size() - 48) % 8 != 0)
            return fail("a fragment other than the last is not a multiple of 8 bytes");
        if (off == 0) first = &f;
        if (!more) {
            if (seen_last) return fail("two last fragments");
            seen_last = true;
            end = off + f.size() - 48;
        }
        pieces.emplace_back(off, &f);
    }
    if (!first || !seen_last) return fail("no first or no last fragment");
    std::sort(pieces.begin(), pieces.end());
    Bytes d(first->begin(), first->begin() + 40);
    d[6] = (*first)[40];
    for (auto& [off, f] : pieces) {
        if (off != d.size() - 40) return fail("fragments overlap or leave a hole at " + std::to_string(d.size() - 40));
        d.insert(d.end(), f->begin() + 48, f->end());
    }
    if (d.size() - 40 != end) return fail("the last fragment does not end the packet");
    put16(&d[4], static_cast<uint16_t>(d.size() - 40));
    if (id_out) *id_out = get32(&(*first)[44]);
    return d;
}

Bytes tcp6_ip(const Ip6Addr& src, uint16_t sport, const Ip6Addr& dst, uint16_t dport, uint8_t flags,
              const Bytes& payload, const Ip6Opt& o) {
    Bytes t = tcp_segment(0, 0, sport, dport, flags, payload);
    t[16] = t[17] = 0;
    put16(&t[16], finish(sum16(t.data(), t.size(), pseudo_sum6(src, dst, kProtoTcp, static_cast<uint32_t>(t.size())))));
    return ipv6(src, dst, kProtoTcp, t, o);
}

Bytes udp6_ip(const Ip6Addr& src, uint16_t sport, const Ip6Addr& dst, uint16_t dport, const Bytes& payload,
              const Ip6Opt& o, bool zero_checksum) {
    Bytes u = udp_datagram(0, 0, sport, dport, payload, true);
    if (!zero_checksum) {
        uint16_t c =
            finish(sum16(u.data(), u.size(), pseudo_sum6(src, dst, kProtoUdp, static_cast<uint32_t>(u.size()))));
        put16(&u[6], c == 0 ? 0xffff : c);
    }
    return ipv6(src, dst, kProtoUdp, u, o);
}

Bytes icmp6_ip(const Ip6Addr& src, const Ip6Addr& dst, uint8_t type, uint8_t code, const Bytes& body, const Ip6Opt& o) {
    Bytes m(4 + body.size());
    m[0] = type;
    m[1] = code;
    std::copy(body.begin(), body.end(), m.begin() + 4);
    put16(&m[2],
          finish(sum16(m.data(), m.size(), pseudo_sum6(src, dst, kProtoIcmp6, static_cast<uint32_t>(m.size())))));
    return ipv6(src, dst, kProtoIcmp6, m, o);
}

Bytes echo6_ip(bool request, const Ip6Addr& src, const Ip6Addr& dst, uint16_t ident, uint16_t seq, const Bytes& payload,
               const Ip6Opt& o) {
    Bytes body(4 + payload.size());
    put16(&body[0], ident);
    put16(&body[2], seq);
    std::copy(payload.begin(), payload.end(), body.begin() + 4);
    return icmp6_ip(src, dst, request ? 128 : 129, 0, body, o);
}

Bytes ns6_ip(const Ip6Addr& src, const Ip6Addr& dst, const Ip6Addr& target, const Mac& sll, const Ip6Opt& o) {
    Bytes body(4 + 16);
    std::copy(target.begin(), target.end(), body.begin() + 4);
    if (src != Ip6Addr{}) {
        body.push_back(1);  // source link-layer address, 8 bytes
        body.push_back(1);
        body.insert(body.end(), sll.begin(), sll.end());
    }
    return icmp6_ip(src, dst, 135, 0, body, o);
}

Ip6Addr solicited_node(const Ip6Addr& a) {
    Ip6Addr g = ip6("ff02::1:ff00:0");
    std::copy(a.begin() + 13, a.end(), g.begin() + 13);
    return g;
}

Mac multicast_mac(const Ip6Addr& group) {
    return Mac{0x33, 0x33, group[12], group[13], group[14], group[15]};
}

Ip6Addr link_local_of(const Mac& m) {
    Ip6Addr a{};
    a[0] = 0xfe;
    a[1] = 0x80;
    a[8] = static_cast<uint8_t>(m[0] ^ 0x02);  // the universal/local bit inverted
    a[9] = m[1];
    a[10] = m[2];
    a[11] = 0xff;
    a[12] = 0xfe;
    a[13] = m[3];
    a[14] = m[4];
    a[15] = m[5];
    return a;
}

Bytes arp_body(uint16_t op, const Mac& sha, uint32_t spa, const Mac& tha, uint32_t tpa) {
    Bytes b(28);
    put16(&b[0], 1);
    put16(&b[2], kEtherIpv4);
    b[4] = 6;
    b[5] = 4;
    put16(&b[6], op);
    std::copy(sha.begin(), sha.end(), b.begin() + 8);
    put32(&b[14], spa);
    std::copy(tha.begin(), tha.end(), b.begin() + 18);
    put32(&b[24], tpa);
    return b;
}

namespace {

bool is_icmp_error_type(uint8_t t) {
    return t == 3 || t == 4 || t == 11 || t == 12;
}

}  // namespace

namespace {

// The transport header of a parsed IPv4 or IPv6 packet (p.proto set): `l4_len` bytes present of
// `l4_full`; `pseudo` gives the pseudo-header sum a protocol's checksum starts from.
void parse_l4(Parsed& p, const uint8_t* l4, size_t l4_len, size_t l4_full, bool quoted,
              const std::function<uint32_t(uint8_t, uint32_t)>& pseudo) {
    p.l4_complete = l4_len == l4_full;
    auto l4_sum_ok = [&](uint8_t proto, size_t csum_off) {
        if (!p.l4_complete) return false;
        Bytes m(l4, l4 + l4_len);
        m[csum_off] = m[csum_off + 1] = 0;
        uint32_t s = pseudo(proto, static_cast<uint32_t>(l4_len));
        uint16_t want = finish(sum16(m.data(), m.size(), s));
        if (proto == kProtoUdp) {
            if (p.l4_csum == 0) return p.ether_type != kEtherIpv6;  // no checksum (IPv6 has none of that)
            if (want == 0) want = 0xffff;
        }
        // An ICMP message whose words sum to -0 (0xFFFF) verifies with 0x0000 and with 0xFFFF
        // alike. An incremental update (RFC 1624 eqn. 3) cannot tell it from an all-zero message,
        // which only 0xFFFF verifies, so the gateway sends 0xFFFF for both.
        if (proto == kProtoIcmp && want == 0 && p.l4_csum == 0xffff) return true;
        return want == p.l4_csum;
    };
    switch (p.proto) {
    case kProtoTcp:
        if (l4_len < (quoted ? 8u : 20u)) {
            p.error = "TCP header truncated";
            return;
        }
        p.sport = get16(l4);
        p.dport = get16(l4 + 2);
        p.seq = get32(l4 + 4);
        if (l4_len >= 20) {
            p.ack = get32(l4 + 8);
            p.tcp_flags = l4[13];
            p.l4_csum = get16(l4 + 16);
            size_t off = (l4[12] >> 4) * 4u;
            if (off < 20 || off > l4_len) {
                p.error = "bad TCP data offset";
                return;
            }
            p.payload.assign(l4 + off, l4 + l4_len);
            p.l4_csum_ok = l4_sum_ok(kProtoTcp, 16);
        }
        break;
    case kProtoUdp:
        if (l4_len < 8) {
            p.error = "UDP header truncated";
            return;
        }
        p.sport = get16(l4);
        p.dport = get16(l4 + 2);
        p.l4_csum = get16(l4 + 6);
        if (get16(l4 + 4) != l4_full) {
            p.error = p.ether_type == kEtherIpv6 ? "UDP length disagrees with the IPv6 length"
                                                 : "UDP length disagrees with the IPv4 length";
            return;
        }
        p.payload.assign(l4 + 8, l4 + l4_len);
        p.l4_csum_ok = l4_sum_ok(kProtoUdp, 6);
        break;
    case kProtoIcmp:
    case kProtoIcmp6:
        if (p.proto != (p.ether_type == kEtherIpv6 ? kProtoIcmp6 : kProtoIcmp)) {
            p.payload.assign(l4, l4 + l4_len);
            p.l4_complete = true;
            p.l4_csum_ok = true;
            break;
        }
        if (l4_len < 8) {
            p.error = "ICMP header truncated";
            return;
        }
        p.icmp_type = l4[0];
        p.icmp_code = l4[1];
        p.l4_csum = get16(l4 + 2);
        p.icmp_ident = get16(l4 + 4);
        p.icmp_seq = get16(l4 + 6);
        p.payload.assign(l4 + 8, l4 + l4_len);
        p.l4_csum_ok = l4_sum_ok(p.proto, 2);
        if (p.ether_type == kEtherIpv6 ? (p.icmp_type >= 1 && p.icmp_type <= 4) && !quoted
                                       : is_icmp_error_type(p.icmp_type) && !quoted) {
            p.inner = std::make_shared<Parsed>(p.ether_type == kEtherIpv6 ? parse_ipv6(l4 + 8, l4_len - 8, true)
                                                                          : parse_ipv4(l4 + 8, l4_len - 8, true));
            if (!p.inner->ok) {
                p.error = "quoted datagram: " + p.inner->error;
                return;
            }
        }
        break;
    default:
        p.payload.assign(l4, l4 + l4_len);
        p.l4_complete = true;
        p.l4_csum_ok = true;  // nothing to check
        break;
    }
    p.ok = true;
}

}  // namespace

Parsed parse_ipv4(const uint8_t* d, size_t len, bool quoted) {
    Parsed p;
    p.ether_type = kEtherIpv4;
    if (len < 20) {
        p.error = "IPv4 header truncated";
        return p;
    }
    if ((d[0] >> 4) != 4) {
        p.error = "not IPv4";
        return p;
    }
    p.ihl = d[0] & 0x0f;
    size_t hl = p.ihl * 4u;
    p.tos = d[1];
    p.total_length = get16(d + 2);
    p.id = get16(d + 4);
    p.frag = get16(d + 6);
    p.ttl = d[8];
    p.proto = d[9];
    p.ip_csum = get16(d + 10);
    p.src = get32(d + 12);
    p.dst = get32(d + 16);
    if (hl < 20 || hl > len) {
        p.error = "bad IHL";
        return p;
    }
    {
        Bytes h(d, d + hl);
        h[10] = h[11] = 0;
        p.ip_csum_ok = finish(sum16(h.data(), h.size())) == p.ip_csum;
    }
    size_t end = p.total_length;
    if (end < hl) {
        p.error = "total length below IHL";
        return p;
    }
    if (end > len) {
        if (!quoted) {
            p.error = "total length beyond the frame";
            return p;
        }
        end = len;  // a quote may stop anywhere after the header
    }
    p.l3.assign(d, d + end);
    parse_l4(p, d + hl, end - hl, p.total_length - hl, quoted, [&](uint8_t proto, uint32_t len) {
        return proto == kProtoIcmp ? 0u : pseudo_sum(p.src, p.dst, proto, len);
    });
    return p;
}

Parsed parse_ipv6(const uint8_t* d, size_t len, bool quoted) {
    Parsed p;
    p.ether_type = kEtherIpv6;
    if (len < 40) {
        p.error = "IPv6 header truncated";
        return p;
    }
    if ((d[0] >> 4) != 6) {
        p.error = "not IPv6";
        return p;
    }
    p.payload_length = get16(d + 4);
    p.hop_limit = d[7];
    std::copy(d + 8, d + 24, p.src6.begin());
    std::copy(d + 24, d + 40, p.dst6.begin());
    size_t end = 40 + size_t{p.payload_length};
    if (end > len) {
        if (!quoted) {
            p.error = "payload length beyond the frame";
            return p;
        }
        end = len;
    }
    p.l3.assign(d, d + end);
    uint8_t nh = d[6];
    size_t off = 40;
    while (nh == 0 || nh == 43 || nh == 44 || nh == 60) {
        if (off + 8 > end) {
            p.error = "extension header truncated";
            return p;
        }
        size_t hlen = nh == 44 ? 8 : (d[off + 1] + 1u) * 8;
        if (nh == 44 && (get16(d + off + 2) & 0xfff9) != 0) {
            p.fragment_offset = static_cast<uint16_t>((get16(d + off + 2) >> 3) * 8);
            p.fragment = true;
        }
        nh = d[off];
        off += hlen;
        if (off > end) {
            p.error = "extension header beyond the packet";
            return p;
        }
    }
    p.proto = nh;
    size_t l4_full = 40 + size_t{p.payload_length} - off;
    if (p.fragment) {
        // A later fragment has no transport header; a first one only its start, whose lengths
        // and checksum are the whole datagram's.
        if (p.fragment_offset != 0) {
            p.payload.assign(d + off, d + end);
            p.ok = true;
            return p;
        }
        quoted = true;
        l4_full = nh == kProtoUdp && end - off >= 8 ? get16(d + off + 4) : SIZE_MAX;
    }
    parse_l4(p, d + off, end - off, l4_full, quoted,
             [&](uint8_t proto, uint32_t l4len) { return pseudo_sum6(p.src6, p.dst6, proto, l4len); });
    return p;
}

Parsed parse_frame(const Bytes& f) {
    Parsed p;
    if (f.size() < 14) {
        p.error = "Ethernet header truncated";
        return p;
    }
    Mac dst, src;
    std::copy(f.begin(), f.begin() + 6, dst.begin());
    std::copy(f.begin() + 6, f.begin() + 12, src.begin());
    uint16_t type = get16(&f[12]);
    if (type == kEtherIpv4) {
        p = parse_ipv4(f.data() + 14, f.size() - 14, false);
        if (p.ok && p.total_length != f.size() - 14) {
            p.ok = false;
            p.error = "bytes after the IPv4 datagram";
        }
    } else if (type == kEtherIpv6) {
        p = parse_ipv6(f.data() + 14, f.size() - 14, false);
        if (p.ok && 40u + p.payload_length != f.size() - 14) {
            p.ok = false;
            p.error = "bytes after the IPv6 packet";
        }
    } else if (type == kEtherArp) {
        if (f.size() < 14 + 28) {
            p.error = "ARP truncated";
        } else {
            const uint8_t* a = f.data() + 14;
            p.arp_htype = get16(a);
            p.arp_ptype = get16(a + 2);
            p.arp_hlen = a[4];
            p.arp_plen = a[5];
            p.arp_op = get16(a + 6);
            std::copy(a + 8, a + 14, p.arp_sha.begin());
            p.arp_spa = get32(a + 14);
            std::copy(a + 18, a + 24, p.arp_tha.begin());
            p.arp_tpa = get32(a + 24);
            p.ok = true;
        }
    } else {
        p.error = "unexpected EtherType";
    }
    p.eth_dst = dst;
    p.eth_src = src;
    p.ether_type = type;
    return p;
}

namespace {

std::string hex16(uint16_t v) {
    char b[8];
    std::snprintf(b, sizeof b, "0x%04x", v);
    return b;
}

}  // namespace

::testing::AssertionResult checksums_valid(const Parsed& p) {
    if (!p.ok) return ::testing::AssertionFailure() << "frame does not parse: " << p.error;
    if (p.ether_type != kEtherIpv4 && p.ether_type != kEtherIpv6) return ::testing::AssertionSuccess();
    if (p.ether_type == kEtherIpv4 && !p.ip_csum_ok)
        return ::testing::AssertionFailure() << "IPv4 header checksum " << hex16(p.ip_csum) << " is wrong";
    if (!p.l4_csum_ok)
        return ::testing::AssertionFailure()
               << "L4 (protocol " << int{p.proto} << ") checksum " << hex16(p.l4_csum) << " is wrong";
    if (p.inner) {
        if (p.ether_type == kEtherIpv4 && !p.inner->ip_csum_ok)
            return ::testing::AssertionFailure()
                   << "quoted IPv4 header checksum " << hex16(p.inner->ip_csum) << " is wrong";
        if (p.inner->l4_complete && !p.inner->l4_csum_ok)
            return ::testing::AssertionFailure() << "quoted L4 checksum " << hex16(p.inner->l4_csum) << " is wrong";
    }
    return ::testing::AssertionSuccess();
}

}  // namespace egw::test
