// SPDX-License-Identifier: Apache-2.0
//
// Frames held in chains of mbufs (dataplane/chain.h): datagrams reassembly put together from
// fragments and jumbo frames a NIC scattered over several buffers. The stages that read a message
// past its headers (the translation of ICMP and ICMPv6 errors, Neighbor Discovery) must read the
// chain, not the memory behind its first buffer. The rigs here use a pool of small buffers, so
// that a frame of a few kilobytes is a chain of many and a read past a segment's end meets other
// buffers' bytes. Every frame out is compared byte for byte with the one expected, built
// independently (packet.cpp), and its checksums recomputed in full.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

// 768 bytes after the headroom: room for what input makes contiguous (590 bytes), and a
// 1,500-byte frame in two buffers.
constexpr uint16_t kSmallRoom = 768;

Bytes pattern(size_t n, uint8_t seed = 0) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = static_cast<uint8_t>(i * 7 + seed + (i >> 8));
    return b;
}

Bytes ip_of(const Bytes& frame) {
    return Bytes(frame.begin() + 14, frame.end());
}

// The IPv4 datagram the fragments that left a port make, each fragment to `dst_mac` from
// `src_mac` and within a 1,500-byte MTU.
Bytes put_together(const std::vector<Bytes>& frames, const Mac& dst_mac, const Mac& src_mac) {
    std::vector<Bytes> ips;
    for (const Bytes& f : frames) {
        EXPECT_LE(f.size(), 1514u);
        EXPECT_EQ(mac_str(Mac{f[0], f[1], f[2], f[3], f[4], f[5]}), mac_str(dst_mac));
        EXPECT_EQ(mac_str(Mac{f[6], f[7], f[8], f[9], f[10], f[11]}), mac_str(src_mac));
        ips.push_back(ip_of(f));
    }
    std::string why;
    Bytes d = reassemble(ips, &why);
    EXPECT_FALSE(d.empty()) << why;
    return d;
}

// The same of IPv6.
Bytes put_together6(const std::vector<Bytes>& frames) {
    std::vector<Bytes> ips;
    for (const Bytes& f : frames)
        ips.push_back(ip_of(f));
    std::string why;
    Bytes d = reassemble6(ips, &why);
    EXPECT_FALSE(d.empty()) << why;
    return d;
}

// One burst of frames into `port`.
std::vector<In> burst_of(uint16_t port, const std::vector<Bytes>& frames, unsigned segment = 0) {
    std::vector<In> in;
    for (const Bytes& f : frames)
        in.push_back(In{.port = port, .frame = f, .segment = segment});
    return in;
}

// A UDP datagram of 11,000 bytes a pod sends to the server in eight fragments, translated and
// sent on in fragments: the datagram as the server gets it.
Bytes big_datagram_out(Rig& r, const Bytes& payload) {
    Bytes pod_ip = udp_ip(kPod10, 500, kServer, 53, payload, IpOpt{.id = 0x0a0a});
    std::vector<Bytes> pieces;
    for (const Bytes& f : fragments(pod_ip, 1400))
        pieces.push_back(r.from_pod(kPod10, f));
    EXPECT_EQ(pieces.size(), 8u);
    r.process(0, burst_of(r.pods, pieces));
    return put_together(r.tx(r.ext1), kServerMac, kExt1Mac);
}

// The case: an ICMP error of about 11 KB that quotes a session's whole datagram, in eight
// fragments. Reassembled, it is a chain of many small buffers; the translated error reaches the
// pod (in fragments again) with every checksum right, the quote's UDP checksum included.
TEST_F(DataplaneTest, AnIcmpErrorInEightFragmentsIsTranslatedWithItsChecksumRight) {
    Rig& r = start({.mbuf_data_room = kSmallRoom});
    Bytes payload = pattern(11000);
    Bytes sent_ip = big_datagram_out(r, payload);
    ASSERT_EQ(sent_ip.size(), 11028u);
    const uint16_t nat_port = get16(&sent_ip[20]);
    ASSERT_NE(nat_port, 500);

    Bytes error = ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, sent_ip), IpOpt{.id = 0x0b0b});
    std::vector<Bytes> pieces;
    for (const Bytes& f : fragments(error, 1400))
        pieces.push_back(r.from_ext1(f));
    ASSERT_EQ(pieces.size(), 8u);
    r.process(0, burst_of(r.ext1, pieces));

    Bytes got = put_together(r.tx(r.pods), kPod10Mac, kPodsMac);
    Bytes quoted = udp_ip(kPod10, 500, kServer, 53, payload, IpOpt{.ttl = 63, .id = 0x0a0a});
    Bytes want = ipv4(kServer, kPod10, kProtoIcmp, icmp_error(3, 3, quoted), IpOpt{.ttl = 63, .id = 0x0b0b});
    Parsed p = parse_ipv4(got.data(), got.size());
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(got, want);
    EXPECT_EQ(r.svc(kWeb).packets_in, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// A jumbo error scattered by the NIC over buffers of 1,000 bytes, and of odd sizes (a segment that
// starts at an odd offset of the message has its words summed the other way round), and a short
// one whose first buffer ends inside the quoted IPv4 header: input moves the headers into the first
// buffer, the checksum is summed over the chain.
TEST_F(DataplaneTest, AScatteredIcmpErrorIsTranslatedWithItsChecksumRight) {
    Rig& r = start({.configure = [](config::Config& c) {
        for (auto& port : c.ports)
            port.mtu = 9000;
    }});
    Bytes payload = pattern(7000, 3);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 500, kServer, 53, payload)));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    Bytes sent_ip = ip_of(frames[0]);
    Bytes quoted = udp_ip(kPod10, 500, kServer, 53, payload, IpOpt{.ttl = 63});

    for (unsigned segment : {1000u, 999u, 333u}) {
        SCOPED_TRACE(segment);
        r.process(0, {{.port = r.ext1,
                       .frame = r.from_ext1(ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, sent_ip))),
                       .segment = segment}});
        frames = r.tx(r.pods);
        ASSERT_EQ(frames.size(), 1u);
        EXPECT_TRUE(checksums_valid(parse_frame(frames[0])));
        EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                      ipv4(kServer, kPod10, kProtoIcmp, icmp_error(3, 3, quoted), IpOpt{.ttl = 63})));
    }
    EXPECT_EQ(r.drops(DropReason::icmp_checksum), 0u);

    // The header and 8 bytes, the first buffer ending 10 bytes into the quoted header.
    Bytes head(sent_ip.begin(), sent_ip.begin() + 28);
    r.process(0, {{.port = r.ext1,
                   .frame = r.from_ext1(ipv4(kExt1Gw, kIngress, kProtoIcmp, icmp_error(11, 0, head)), kExt1GwMac),
                   .segment = 14 + 20 + 8 + 10}});
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    Bytes want_head(quoted.begin(), quoted.begin() + 28);
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  ipv4(kExt1Gw, kPod10, kProtoIcmp, icmp_error(11, 0, want_head), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// Bytes past the datagram's length that span more than the chain's last buffer (a sender's junk
// after a jumbo datagram) are cut off before it is translated, as from a frame in one buffer.
TEST_F(DataplaneTest, BytesPastTheDatagramAreCutFromAChainWhateverBuffersTheySpan) {
    Rig& r = start({.configure = [](config::Config& c) {
        for (auto& port : c.ports)
            port.mtu = 9000;
    }});
    Bytes payload = pattern(3000, 7);
    Bytes frame = r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, payload));
    Bytes junk = pattern(700, 1);
    frame.insert(frame.end(), junk.begin(), junk.end());
    r.process(0, {{.port = r.pods, .frame = frame, .segment = 256}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  udp_ip(kIngress, 40000, kServer, 53, payload, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// An error whose own checksum is wrong (a bit flipped on the way) is not translated: dropped and
// counted, never sent on with a checksum made valid again. Whole, and in fragments with the
// damage in the last one.
TEST_F(DataplaneTest, AnIcmpErrorWithAWrongChecksumIsDroppedNotTranslated) {
    Rig& r = start({.mbuf_data_room = kSmallRoom});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 500, kServer, 53, pattern(100))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    Bytes error = ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, ip_of(frames[0])));
    error[20 + 8 + 28 + 50] ^= 0x10;  // in the quoted payload: the ICMP checksum no longer holds
    r.process(r.ext1, r.from_ext1(error));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::icmp_checksum), 1u);

    Bytes big = big_datagram_out(r, pattern(11000, 5));
    Bytes big_error = ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, big));
    big_error[big_error.size() - 3] ^= 0x01;
    std::vector<Bytes> pieces;
    for (const Bytes& f : fragments(big_error, 1400))
        pieces.push_back(r.from_ext1(f));
    r.process(0, burst_of(r.ext1, pieces));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::icmp_checksum), 2u);
    EXPECT_EQ(r.svc(kWeb).packets_in, 0u);
    EXPECT_EQ(r.total_drops(), 2u);
}

// ICMPv6 the same way: an error quoting a session's whole 8,000-byte packet, in seven fragments,
// reaches the pod (refragmented no larger than it came) with its checksum over the pseudo-header
// right; one with a flipped bit is dropped.
TEST_F(DataplaneTest, AnIcmpv6ErrorInFragmentsIsTranslatedWithItsChecksumRightAndABadOneDropped) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    o.mbuf_data_room = kSmallRoom;
    Rig& r = start(o);
    Bytes payload = pattern(8000, 9);
    Bytes pod_packet = udp6_ip(kPod10v6, 500, kServerV6, 53, payload);
    std::vector<Bytes> pieces;
    for (const Bytes& f : fragments6(pod_packet, 1232, 0x1111))
        pieces.push_back(from_pod6(kPod10v6, f));
    ASSERT_EQ(pieces.size(), 7u);
    r.process(0, burst_of(r.pods, pieces));
    Bytes sent = put_together6(r.tx(r.ext1));
    ASSERT_EQ(sent.size(), 8048u);

    auto error_of = [](const Ip6Addr& to, const Bytes& quote, uint8_t hop_limit) {
        Bytes body(4 + quote.size(), 0);
        std::copy(quote.begin(), quote.end(), body.begin() + 4);
        return icmp6_ip(kServerV6, to, 1, 4, body, Ip6Opt{hop_limit});
    };
    pieces.clear();
    for (const Bytes& f : fragments6(error_of(kIngressV6, sent, 64), 1232, 0x2222))
        pieces.push_back(from_ext1_6(f));
    r.process(0, burst_of(r.ext1, pieces));
    Bytes got = put_together6(r.tx(r.pods));
    Bytes want = error_of(kPod10v6, udp6_ip(kPod10v6, 500, kServerV6, 53, payload, Ip6Opt{63}), 63);
    Parsed p = parse_ipv6(got.data(), got.size());
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(got, want);
    EXPECT_EQ(r.total_drops(), 0u);

    Bytes bad = error_of(kIngressV6, sent, 64);
    bad[bad.size() - 100] ^= 0x80;
    pieces.clear();
    for (const Bytes& f : fragments6(bad, 1232, 0x3333))
        pieces.push_back(from_ext1_6(f));
    r.process(0, burst_of(r.ext1, pieces));
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.drops(DropReason::icmp_checksum), 1u);
}

// A Neighbor Solicitation longer than what input makes contiguous (an unknown 600-byte option,
// which RFC 4861 says to skip), scattered over small buffers: its checksum and options are read
// whole, and it is answered.
TEST_F(DataplaneTest, AChainedNeighborSolicitationWithLongOptionsIsAnswered) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    auto solicitation = [](const Bytes& option_data) {
        Bytes body(4 + 16);
        std::copy(kExt1V6.begin(), kExt1V6.end(), body.begin() + 4);
        body.push_back(1);  // source link-layer address
        body.push_back(1);
        body.insert(body.end(), kServerMac.begin(), kServerMac.end());
        body.push_back(250);  // not a type RFC 4861 knows: skipped
        body.push_back(75);   // 600 bytes
        body.insert(body.end(), option_data.begin(), option_data.end());
        Ip6Addr group = solicited_node(kExt1V6);
        return ethernet(multicast_mac(group), kServerMac, kEtherIpv6,
                        icmp6_ip(kServerV6, group, 135, 0, body, Ip6Opt{255}));
    };
    Bytes unknown = pattern(598, 1);
    Bytes ns = solicitation(unknown);
    r.process(0, {{.port = r.ext1, .frame = ns, .segment = 100}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    Bytes na(4 + 16 + 8, 0);
    na[0] = 0x80 | 0x40 | 0x20;  // router, solicited, override
    std::copy(kExt1V6.begin(), kExt1V6.end(), na.begin() + 4);
    na[20] = 2;  // target link-layer address
    na[21] = 1;
    std::copy(kExt1Mac.begin(), kExt1Mac.end(), na.begin() + 22);
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv6, icmp6_ip(kExt1V6, kServerV6, 136, 0, na, Ip6Opt{255})));
    EXPECT_EQ(r.total_drops(), 0u);

    // The same with a flipped bit in the option: malformed.
    Bytes bad = solicitation(unknown);
    Bytes damaged = unknown;
    damaged[590] ^= 0x04;
    const size_t end = bad.size();
    std::copy(damaged.begin(), damaged.end(), bad.begin() + static_cast<std::ptrdiff_t>(end - damaged.size()));
    r.process(0, {{.port = r.ext1, .frame = bad, .segment = 100}});
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::malformed), 1u);
}

}  // namespace
}  // namespace egw::test
