// SPDX-License-Identifier: Apache-2.0
//
// dataplane/checksum.h: every incremental update the worker makes, checked against a full
// recomputation by the independent code of packet.cpp, on many random packets.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "dataplane/checksum.h"
#include "tests/unit/dataplane/packet.h"

namespace egw::test {
namespace {

using namespace egw::dp;

// Fields as the worker reads them: the wire bytes taken as a native integer.
uint16_t raw16(const Bytes& b, size_t off) {
    uint16_t v;
    std::memcpy(&v, &b[off], 2);
    return v;
}
uint32_t raw32(const Bytes& b, size_t off) {
    uint32_t v;
    std::memcpy(&v, &b[off], 4);
    return v;
}
void set_raw16(Bytes& b, size_t off, uint16_t v) {
    std::memcpy(&b[off], &v, 2);
}
void set_raw32(Bytes& b, size_t off, uint32_t v) {
    std::memcpy(&b[off], &v, 4);
}

Bytes random_bytes(std::mt19937& rng, size_t n) {
    Bytes b(n);
    for (auto& x : b)
        x = static_cast<uint8_t>(rng());
    return b;
}

struct Translation {
    uint16_t ip_delta;  // folded: address change + TTL decrement
    uint16_t l4_delta;  // folded: address (pseudo-header) + port change
};

// Replaces the source address and port of an IPv4 TCP/UDP datagram the way the worker does for
// an outgoing packet (session deltas precomputed, TTL decrement folded into the IP delta).
// Returns the deltas used, so they can be undone.
Translation snat(Bytes& ip, uint32_t new_src, uint16_t new_sport) {
    size_t l4 = (ip[0] & 0x0f) * 4u;
    uint8_t proto = ip[9];
    uint32_t old_src_raw = raw32(ip, 12), new_src_raw;
    uint8_t nb[4];
    put32(nb, new_src);
    std::memcpy(&new_src_raw, nb, 4);
    uint16_t old_port_raw = raw16(ip, l4), new_port_raw;
    uint8_t pb[2];
    put16(pb, new_sport);
    std::memcpy(&new_port_raw, pb, 2);

    uint32_t l3 = csum_delta32(old_src_raw, new_src_raw);
    uint16_t old_ttl_word = raw16(ip, 8);
    ip[8] = static_cast<uint8_t>(ip[8] - 1);
    uint16_t new_ttl_word = raw16(ip, 8);
    Translation t;
    t.ip_delta = csum_delta_fold(l3 + csum_delta16(old_ttl_word, new_ttl_word));
    t.l4_delta = csum_delta_fold(l3 + csum_delta16(old_port_raw, new_port_raw));

    set_raw32(ip, 12, new_src_raw);
    set_raw16(ip, 10, csum_apply(raw16(ip, 10), t.ip_delta));
    set_raw16(ip, l4, new_port_raw);
    size_t c = l4 + (proto == kProtoTcp ? 16 : 6);
    set_raw16(ip, c,
              proto == kProtoTcp ? csum_apply(raw16(ip, c), t.l4_delta) : csum_apply_udp(raw16(ip, c), t.l4_delta));
    return t;
}

Parsed parsed(const Bytes& ip) {
    return parse_ipv4(ip.data(), ip.size());
}

TEST(Checksum, PartialSumMatchesIndependentSum) {
    std::mt19937 rng(7);
    for (int i = 0; i < 2000; ++i) {
        Bytes b = random_bytes(rng, rng() % 101);
        uint16_t native = csum_finish(csum_partial(b.data(), static_cast<uint32_t>(b.size())));
        uint8_t wire[2];
        std::memcpy(wire, &native, 2);
        ASSERT_EQ(get16(wire), finish(sum16(b.data(), b.size()))) << "length " << b.size();
    }
}

TEST(Checksum, RandomSourceTranslationMatchesFullRecomputation) {
    std::mt19937 rng(20261121);
    for (int i = 0; i < 20000; ++i) {
        bool tcp = rng() & 1;
        uint32_t src = rng(), dst = rng();
        uint16_t sport = static_cast<uint16_t>(rng()), dport = static_cast<uint16_t>(rng());
        Bytes payload = random_bytes(rng, rng() % 64);  // odd lengths too
        IpOpt o;
        o.ttl = static_cast<uint8_t>(2 + rng() % 254);
        o.id = static_cast<uint16_t>(rng());
        Bytes ip = tcp ? tcp_ip(src, sport, dst, dport, static_cast<uint8_t>(rng()), payload, o)
                       : udp_ip(src, sport, dst, dport, payload, o);
        Bytes original = ip;
        uint32_t nat = rng();
        uint16_t nat_port = static_cast<uint16_t>(rng());
        snat(ip, nat, nat_port);

        Parsed p = parsed(ip);
        ASSERT_TRUE(checksums_valid(p)) << "packet " << i;
        ASSERT_EQ(p.src, nat);
        ASSERT_EQ(p.sport, nat_port);
        ASSERT_EQ(p.ttl, o.ttl - 1);
        ASSERT_EQ(p.payload, parsed(original).payload);
        ASSERT_NE(p.l4_csum, tcp ? 0xffff : 0) << "a checksum a sender never computes";
    }
}

TEST(Checksum, ReverseTranslationWithInvertedDeltasRestoresEveryByte) {
    // An outgoing packet translated with the session's deltas, then its reply translated back
    // with the inverted deltas (as the worker does for replies): the reply must carry the
    // original address, port and checksum exactly.
    std::mt19937 rng(99);
    for (int i = 0; i < 20000; ++i) {
        bool tcp = rng() % 2;
        uint32_t pod = rng(), remote = rng(), nat = rng();
        uint16_t pod_port = static_cast<uint16_t>(rng()), remote_port = static_cast<uint16_t>(rng());
        uint16_t nat_port = static_cast<uint16_t>(rng());
        Bytes payload = random_bytes(rng, rng() % 40);
        uint8_t proto = tcp ? kProtoTcp : kProtoUdp;

        // The reply as the remote sends it (to the NAT address) and as the pod must see it.
        IpOpt o;
        o.ttl = 60;
        Bytes wire = tcp ? tcp_ip(remote, remote_port, nat, nat_port, kAck, payload, o)
                         : udp_ip(remote, remote_port, nat, nat_port, payload, o);
        o.ttl = 59;
        Bytes want = tcp ? tcp_ip(remote, remote_port, pod, pod_port, kAck, payload, o)
                         : udp_ip(remote, remote_port, pod, pod_port, payload, o);

        uint8_t b[4];
        uint32_t pod_raw, nat_raw;
        put32(b, pod);
        std::memcpy(&pod_raw, b, 4);
        put32(b, nat);
        std::memcpy(&nat_raw, b, 4);
        uint16_t pod_port_raw, nat_port_raw;
        put16(b, pod_port);
        std::memcpy(&pod_port_raw, b, 2);
        put16(b, nat_port);
        std::memcpy(&nat_port_raw, b, 2);
        uint32_t l3 = csum_delta32(pod_raw, nat_raw);
        uint16_t l3_delta = csum_delta_fold(l3);
        uint16_t l4_delta = csum_delta_fold(l3 + csum_delta16(pod_port_raw, nat_port_raw));

        uint16_t l3_back = csum_delta_invert(l3_delta), l4_back = csum_delta_invert(l4_delta);
        uint16_t old_ttl = raw16(wire, 8);
        wire[8] = static_cast<uint8_t>(wire[8] - 1);
        set_raw32(wire, 16, pod_raw);
        set_raw16(wire, 10, csum_apply(raw16(wire, 10), uint32_t{l3_back} + csum_delta16(old_ttl, raw16(wire, 8))));
        set_raw16(wire, 22, pod_port_raw);
        size_t c = 20 + (proto == kProtoTcp ? 16 : 6);
        set_raw16(wire, c, tcp ? csum_apply(raw16(wire, c), l4_back) : csum_apply_udp(raw16(wire, c), l4_back));
        ASSERT_EQ(wire, want) << "packet " << i;
    }
}

TEST(Checksum, UdpZeroChecksumStaysZero) {
    std::mt19937 rng(3);
    for (int i = 0; i < 2000; ++i) {
        Bytes ip = udp_ip(rng(), static_cast<uint16_t>(rng()), rng(), static_cast<uint16_t>(rng()),
                          random_bytes(rng, rng() % 30), {}, /*zero_checksum=*/true);
        snat(ip, rng(), static_cast<uint16_t>(rng()));
        Parsed p = parsed(ip);
        ASSERT_TRUE(checksums_valid(p));
        ASSERT_EQ(p.l4_csum, 0) << "a UDP datagram without checksum got one";
    }
}

// A payload word chosen so that the translated datagram's full checksum computes to 0.
Bytes payload_for_zero_checksum(uint8_t proto, uint32_t nat, uint32_t dst, uint16_t nat_port, uint16_t dport) {
    Bytes payload(8, 0x5a);
    Bytes seg = proto == kProtoTcp ? tcp_segment(nat, dst, nat_port, dport, kAck, payload)
                                   : udp_datagram(nat, dst, nat_port, dport, payload);
    size_t c = proto == kProtoTcp ? 16 : 6;
    seg[c] = seg[c + 1] = 0;
    uint32_t s = sum16(seg.data(), seg.size(), pseudo_sum(nat, dst, proto, static_cast<uint32_t>(seg.size())));
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    // Folded sum 0xFFFF makes the checksum 0: add the one's complement distance with payload[0..1].
    uint32_t word = 0xffff - s + 0x5a5a;
    if (word > 0xffff) word -= 0xffff;
    put16(payload.data(), static_cast<uint16_t>(word));
    return payload;
}

TEST(Checksum, TranslatedChecksumThatComputesToZero) {
    uint32_t pod = ip4(10, 244, 1, 10), dst = ip4(192, 0, 2, 100), nat = ip4(192, 0, 2, 50);
    for (uint8_t proto : {kProtoTcp, kProtoUdp}) {
        SCOPED_TRACE(proto == kProtoTcp ? "TCP" : "UDP");
        Bytes payload = payload_for_zero_checksum(proto, nat, dst, 40001, 80);
        Bytes ip =
            proto == kProtoTcp ? tcp_ip(pod, 40000, dst, 80, kAck, payload) : udp_ip(pod, 40000, dst, 80, payload);
        snat(ip, nat, 40001);
        Parsed p = parsed(ip);
        ASSERT_TRUE(checksums_valid(p));
        // TCP carries the computed 0; UDP must send it as 0xFFFF, never as "no checksum".
        EXPECT_EQ(p.l4_csum, proto == kProtoTcp ? 0x0000 : 0xffff);
    }
}

TEST(Checksum, CombinedDeltaEqualsSuccessiveUpdates) {
    std::mt19937 rng(11);
    for (int i = 0; i < 20000; ++i) {
        uint16_t c = static_cast<uint16_t>(rng());
        if (c == 0xffff) continue;  // never produced by a sender
        uint16_t a0 = static_cast<uint16_t>(rng()), a1 = static_cast<uint16_t>(rng());
        uint32_t b0 = rng(), b1 = rng();
        uint32_t da = csum_delta16(a0, a1), db = csum_delta32(b0, b1);
        uint16_t successive = csum_apply(csum_apply(c, da), db);
        uint16_t combined = csum_apply(c, csum_delta_fold(da + db));
        uint16_t combined_unfolded = csum_apply(c, da + db);
        ASSERT_EQ(successive, combined);
        ASSERT_EQ(successive, combined_unfolded);
    }
}

// csum_apply adds with the carry wrapped around instead of folding a 32-bit sum: for every
// checksum and every delta it must give what the fold of RFC 1624 eqn. 3 gives, including which
// of the two zeros (0x0000, 0xFFFF) comes out; the two-delta form the same as their sum.
TEST(Checksum, CarryWrappingAddEqualsTheFoldedSum) {
    auto folded = [](uint16_t c, uint32_t delta) {
        uint64_t sum = uint64_t{static_cast<uint16_t>(~c)} + delta;
        while (sum >> 16)
            sum = (sum & 0xffff) + (sum >> 16);
        return static_cast<uint16_t>(~sum);
    };
    const uint16_t edges[] = {0x0000, 0x0001, 0x00ff, 0x0100, 0x7fff, 0x8000, 0xfeff, 0xfffe, 0xffff};
    for (uint16_t c : edges)
        for (uint16_t d : edges) {
            ASSERT_EQ(csum_apply(c, uint32_t{d}), folded(c, d)) << "c=" << c << " d=" << d;
            for (uint16_t e : edges)
                ASSERT_EQ(csum_apply(c, d, e), folded(c, uint32_t{d} + e)) << "c=" << c << " d=" << d << " e=" << e;
        }
    std::mt19937 rng(17);
    for (int i = 0; i < 200000; ++i) {
        auto c = static_cast<uint16_t>(rng());
        auto d = static_cast<uint16_t>(rng()), e = static_cast<uint16_t>(rng());
        uint32_t wide = rng();
        ASSERT_EQ(csum_apply(c, wide), folded(c, wide)) << "c=" << c << " delta=" << wide;
        ASSERT_EQ(csum_apply(c, d, e), folded(c, uint32_t{d} + e)) << "c=" << c << " d=" << d << " e=" << e;
    }
}

TEST(Checksum, InvertedDeltaRoundTrip) {
    std::mt19937 rng(5);
    for (int i = 0; i < 50000; ++i) {
        uint16_t c = static_cast<uint16_t>(rng());
        if (c == 0xffff) continue;
        uint16_t d = csum_delta_fold(csum_delta32(rng(), rng()) +
                                     csum_delta16(static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng())));
        ASSERT_EQ(csum_apply(csum_apply(c, d), csum_delta_invert(d)), c) << "c=" << c << " d=" << d;
        uint16_t u = c == 0 ? 1 : c;
        ASSERT_EQ(csum_apply_udp(csum_apply_udp(u, d), csum_delta_invert(d)), u);
    }
    EXPECT_EQ(csum_apply_udp(0, 0x1234), 0);
    EXPECT_EQ(csum_apply_udp(0, csum_delta_invert(0x1234)), 0);
}

}  // namespace
}  // namespace egw::test
