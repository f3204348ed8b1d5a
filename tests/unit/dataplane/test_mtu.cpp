// SPDX-License-Identifier: Apache-2.0
//
// Each port's MTU on the way out: no frame longer than the MTU leaves; a datagram that may be
// fragmented leaves in fragments whose bytes and checksums are checked here, one that may not
// (DF) is answered with Fragmentation Needed; frames that arrive as chains of mbufs (jumbo frames, scattered receive)
// are translated like any other.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <rte_cycles.h>

#include "control/runtime/runtime.h"
#include "control/runtime/tx_stall.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

constexpr uint16_t kDf = 0x4000;

Bytes pattern(size_t n) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = static_cast<uint8_t>(i * 7 + i / 251);
    return b;
}

Bytes ip_of(const Bytes& frame) {
    return Bytes(frame.begin() + 14, frame.end());
}

// Sets the MTU of the named ports.
std::function<void(config::Config&)> mtus(std::vector<std::pair<std::string, unsigned>> m) {
    return [m](config::Config& c) {
        for (auto& [name, mtu] : m)
            for (auto& p : c.ports)
                if (p.name == name) p.mtu = mtu;
    };
}

// The frames of one datagram that left a port: each within `mtu`, each to `dst_mac` from
// `src_mac`, all with the same identifier; returns the datagram they make.
Bytes put_together(const std::vector<Bytes>& frames, unsigned mtu, const Mac& dst_mac, const Mac& src_mac) {
    std::vector<Bytes> ips;
    for (const Bytes& f : frames) {
        EXPECT_LE(f.size(), mtu + 14u) << "a frame longer than the MTU left";
        EXPECT_EQ(mac_str(Mac{f[0], f[1], f[2], f[3], f[4], f[5]}), mac_str(dst_mac));
        EXPECT_EQ(mac_str(Mac{f[6], f[7], f[8], f[9], f[10], f[11]}), mac_str(src_mac));
        ips.push_back(ip_of(f));
        EXPECT_EQ(get16(&ips.back()[4]), get16(&ips.front()[4])) << "fragments of one datagram share its identifier";
    }
    std::string why;
    Bytes d = reassemble(ips, &why);
    EXPECT_FALSE(d.empty()) << why;
    return d;
}

TEST_F(DataplaneTest, TranslatedDatagramLargerThanTheOutsideMtuLeavesInFragments) {
    Rig& r = start({.configure = mtus({{"ext1", 1000}})});
    Bytes payload = pattern(1800);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 5353, payload, IpOpt{.id = 0x1234})));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 2u);
    // 980 bytes of room after the header, cut at a multiple of 8: 976, then the remaining 852.
    Bytes first = ip_of(frames[0]), second = ip_of(frames[1]);
    EXPECT_EQ(first.size(), 996u);
    EXPECT_EQ(get16(&first[6]), 0x2000) << "first: MF, offset 0";
    EXPECT_EQ(second.size(), 20u + 1828u - 20u - 976u);
    EXPECT_EQ(get16(&second[6]), 976 / 8) << "last: no MF, offset 976";
    for (const Bytes& f : {first, second}) {
        EXPECT_EQ(f[8], 63) << "TTL";
        EXPECT_EQ(get32(&f[12]), kIngress);
        EXPECT_EQ(get32(&f[16]), kServer);
        EXPECT_EQ(finish(sum16(f.data(), 20)), 0) << "header checksum";
    }
    Bytes d = put_together(frames, 1000, kServerMac, kExt1Mac);
    // The datagram they make is the translated one, UDP checksum included.
    EXPECT_EQ(d, udp_ip(kIngress, 40000, kServer, 5353, payload, IpOpt{.ttl = 63, .id = 0x1234}));
    Parsed p = parse_ipv4(d.data(), d.size());
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(r.w().counters.fragmented, 1u);
    EXPECT_EQ(r.w().counters.fragments_out, 2u);
    EXPECT_EQ(r.w().counters.tx_packets, 2u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, DatagramOfExactlyTheMtuLeavesWholeAndOneByteMoreIsCut) {
    Rig& r = start({.configure = mtus({{"ext1", 1000}})});
    // 20 + 8 + 972 = 1000 bytes.
    Bytes fits = udp_ip(kPod10, 40000, kServer, 53, pattern(972));
    r.process(r.pods, r.from_pod(kPod10, fits));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].size(), 1014u);
    EXPECT_EQ(get16(&frames[0][14 + 6]), 0) << "not a fragment";
    EXPECT_EQ(r.w().counters.fragmented, 0u);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, pattern(973))));
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(put_together(frames, 1000, kServerMac, kExt1Mac),
              udp_ip(kIngress, 40000, kServer, 53, pattern(973), IpOpt{.ttl = 63}));
    EXPECT_EQ(r.w().counters.fragmented, 1u);
}

TEST_F(DataplaneTest, InOneBurstEachPortHoldsItsDatagramsToItsOwnMtu) {
    // Output takes the MTU of a burst's repeated next hop from what it kept of the first packet
    // to it: a datagram one byte over must still be cut, and a next hop on another port must be
    // held to that port's MTU, not to the one before.
    Rig& r = start({.configure = mtus({{"ext1", 1000}, {"pods", 1280}})});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, pattern(10))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    auto out = [&](size_t n) { return udp_ip(kPod10, 40000, kServer, 53, pattern(n)); };
    auto back = [&](size_t n) { return udp_ip(kServer, 53, kIngress, 40000, pattern(n)); };
    r.process(0, {{r.pods, r.from_pod(kPod10, out(972))},
                  {r.pods, r.from_pod(kPod10, out(973))},
                  {r.ext1, r.from_ext1(back(1252))},
                  {r.ext1, r.from_ext1(back(1252))},
                  {r.ext1, r.from_ext1(back(1253))},
                  {r.pods, r.from_pod(kPod10, out(973))}});
    auto translated_out = [](size_t n) { return udp_ip(kIngress, 40000, kServer, 53, pattern(n), IpOpt{.ttl = 63}); };
    auto translated_back = [](size_t n) { return udp_ip(kServer, 53, kPod10, 40000, pattern(n), IpOpt{.ttl = 63}); };
    auto ext1 = r.tx(r.ext1);
    ASSERT_EQ(ext1.size(), 5u);
    EXPECT_EQ(ext1[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4, translated_out(972))) << "exactly the MTU, whole";
    EXPECT_EQ(put_together({ext1[1], ext1[2]}, 1000, kServerMac, kExt1Mac), translated_out(973));
    EXPECT_EQ(put_together({ext1[3], ext1[4]}, 1000, kServerMac, kExt1Mac), translated_out(973));
    auto pods = r.tx(r.pods);
    ASSERT_EQ(pods.size(), 4u);
    EXPECT_EQ(pods[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4, translated_back(1252))) << "exactly the MTU, whole";
    EXPECT_EQ(pods[1], ethernet(kPod10Mac, kPodsMac, kEtherIpv4, translated_back(1252)));
    EXPECT_EQ(put_together({pods[2], pods[3]}, 1280, kPod10Mac, kPodsMac), translated_back(1253));
    for (const Bytes& f : ext1)
        EXPECT_EQ(finish(sum16(f.data() + 14, 20)), 0) << "header checksum";
    for (const Bytes& f : pods)
        EXPECT_EQ(finish(sum16(f.data() + 14, 20)), 0) << "header checksum";
    EXPECT_EQ(r.w().counters.fragmented, 3u);
    EXPECT_EQ(r.w().counters.fragments_out, 6u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// The ICMP error of frame `f`: Destination Unreachable, Fragmentation Needed, from `from` (the
// address of the port the refused packet came in by) to `to`, carrying `mtu` as the next-hop MTU
// (RFC 1191), quoting `quoted`.
void expect_frag_needed(const Bytes& f, uint32_t to, unsigned mtu, const Bytes& quoted, uint32_t from = kPodsAddr) {
    Parsed e = parse_frame(f);
    ASSERT_TRUE(e.ok) << e.error;
    EXPECT_TRUE(checksums_valid(e));
    EXPECT_EQ(e.src, from);
    EXPECT_EQ(e.dst, to);
    EXPECT_EQ(e.icmp_type, 3);
    EXPECT_EQ(e.icmp_code, 4);
    EXPECT_EQ(get16(&f[14 + 20 + 6]), mtu) << "next-hop MTU";
    // The quote is the start of the datagram as the pod sent it, untranslated.
    ASSERT_GE(e.payload.size(), 28u);
    EXPECT_TRUE(std::equal(e.payload.begin(), e.payload.end(), quoted.begin())) << "quote differs from what was sent";
}

TEST_F(DataplaneTest, DontFragmentLargerThanTheEgressMtuGetsFragmentationNeeded) {
    Rig& r = start({.configure = mtus({{"ext1", 1000}})});
    Bytes big = tcp_ip(kPod10, 40000, kServer, 443, kAck, pattern(1400), IpOpt{.frag = kDf});
    r.process(r.pods, r.from_pod(kPod10, big));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto back = r.tx(r.pods);
    ASSERT_EQ(back.size(), 1u);
    expect_frag_needed(back[0], kPod10, 1000, big);
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::fragmentation_needed)], 1u);
    EXPECT_EQ(r.drops(DropReason::frag_needed), 0u);
    EXPECT_EQ(r.w().counters.fragmented, 0u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 0u) << "refused before it was translated";
    // A segment that fits, DF or not, goes through the same session.
    r.process(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 443, kAck, pattern(900), IpOpt{.frag = kDf})));
    Parsed p = single(r.tx(r.ext1));
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kIngress);
    EXPECT_EQ(p.frag, kDf);
    EXPECT_TRUE(r.tx(r.pods).empty());
}

TEST_F(DataplaneTest, ReplyLargerThanTheInsideMtuReachesThePodInFragments) {
    Rig& r = start({.configure = mtus({{"ext1", 9000}, {"pods", 1500}})});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 5353, pattern(10))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    // A jumbo reply: 4,000 bytes of payload arrive as a chain of two mbufs.
    Bytes payload = pattern(4000);
    r.process(0, {{.port = r.ext1, .frame = r.from_ext1(udp_ip(kServer, 5353, kIngress, 40000, payload))}});
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 3u);
    Bytes d = put_together(frames, 1500, kPod10Mac, kPodsMac);
    EXPECT_EQ(d, udp_ip(kServer, 5353, kPod10, 40000, payload, IpOpt{.ttl = 63}));
    EXPECT_EQ(r.svc(kWeb).packets_in, 1u);
    EXPECT_EQ(r.w().counters.fragments_out, 3u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, DontFragmentIsHeldToItsEgressPortsMtuNotToTheSmallestOne) {
    // The MTU rule passes a datagram no larger than the smallest MTU of any port without looking
    // up its egress port's (PolicySnapshot::smallest_mtu): here the pods port's 1,000. A larger one
    // is held to the MTU of the port it leaves by, in both directions.
    Rig& r = start({.configure = mtus({{"pods", 1000}, {"ext1", 1500}})});
    auto out = [](size_t total) {
        return udp_ip(kPod10, 40000, kServer, 5353, pattern(total - 28), IpOpt{.frag = kDf});
    };
    auto back = [](size_t total) {
        return udp_ip(kServer, 5353, kIngress, 40000, pattern(total - 28), IpOpt{.frag = kDf});
    };
    r.process(r.pods, r.from_pod(kPod10, out(1200)));
    Parsed p = single(r.tx(r.ext1));
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.src, kIngress);
    EXPECT_EQ(p.total_length, 1200u) << "over the smallest MTU, within ext1's: leaves whole";
    EXPECT_TRUE(r.tx(r.pods).empty());

    Bytes too_big = out(1501);
    r.process(r.pods, r.from_pod(kPod10, too_big));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    auto refused = r.tx(r.pods);
    ASSERT_EQ(refused.size(), 1u);
    expect_frag_needed(refused[0], kPod10, 1500, too_big);

    r.process(0, {{.port = r.ext1, .frame = r.from_ext1(back(1000))}});
    Parsed whole = single(r.tx(r.pods));
    EXPECT_TRUE(checksums_valid(whole));
    EXPECT_EQ(whole.dst, kPod10);
    EXPECT_EQ(whole.total_length, 1000u) << "exactly the pods port's MTU: leaves whole";

    Bytes too_big_back = back(1001);
    r.process(0, {{.port = r.ext1, .frame = r.from_ext1(too_big_back)}});
    EXPECT_TRUE(r.tx(r.pods).empty()) << "one byte over the pods port's MTU, DF: not sent to the pod";
    auto answer = r.tx(r.ext1);
    ASSERT_EQ(answer.size(), 1u);
    expect_frag_needed(answer[0], kServer, 1000, too_big_back, kExt1Addr);
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::fragmentation_needed)], 2u);
    EXPECT_EQ(r.svc(kWeb).packets_out, 1u);
    EXPECT_EQ(r.svc(kWeb).packets_in, 1u);
    EXPECT_EQ(r.w().counters.fragmented, 0u);
}

TEST_F(DataplaneTest, UntranslatedTrafficIsHeldToTheMtuToo) {
    Rig& r = start({.configure = mtus({{"pods", 1280}})});
    // A pod to a pod of another node: routed back through the inside port.
    Bytes big = udp_ip(kPod10, 40000, kRemotePod, 8080, pattern(1500));
    r.process(r.pods, r.from_pod(kPod10, big));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(put_together(frames, 1280, kPodsRouterMac, kPodsMac),
              udp_ip(kPod10, 40000, kRemotePod, 8080, pattern(1500), IpOpt{.ttl = 63}));
    Bytes df = udp_ip(kPod10, 40000, kRemotePod, 8080, pattern(1500), IpOpt{.frag = kDf});
    r.process(r.pods, r.from_pod(kPod10, df));
    auto back = r.tx(r.pods);
    ASSERT_EQ(back.size(), 1u) << "only the error, not the datagram";
    expect_frag_needed(back[0], kPod10, 1280, df);
    EXPECT_EQ(r.w().counters.routed, 1u);
}

TEST_F(DataplaneTest, ChainedFrameThatFitsLeavesAsItsBytesWithValidChecksums) {
    Rig& r = start({.configure = mtus({{"pods", 9000}, {"ext1", 9000}})});
    Bytes payload = pattern(6000);
    // Received as three mbufs (2,048 + 2,048 + the rest), as a scattering NIC delivers a jumbo frame.
    r.process(
        0, {{.port = r.pods, .frame = r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 443, kPsh | kAck, payload))}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    auto segs = r.tx_segments();
    ASSERT_EQ(segs.size(), 1u);
    EXPECT_EQ(segs[0], 3) << "sent as the chain it arrived in";
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  tcp_ip(kIngress, 40000, kServer, 443, kPsh | kAck, payload, IpOpt{.ttl = 63})));
    Parsed p = parse_frame(frames[0]);
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(r.total_drops(), 0u);
    // Headers split across two mbufs are taken as well: the first mbuf ends inside the TCP header.
    r.process(0, {{.port = r.pods,
                   .frame = r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 443, kAck, payload)),
                   .segment = 40}});
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  tcp_ip(kIngress, 40000, kServer, 443, kAck, payload, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// IPv6 twins. A router never fragments IPv6: a translated datagram of exactly the egress MTU
// leaves whole, one byte more is answered with Packet Too Big carrying the MTU (quoting the
// packet as the pod sent it), and nothing is cut.
TEST_F(DataplaneTest, Ipv6DatagramOfExactlyTheMtuLeavesWholeAndOneByteMoreGetsPacketTooBig) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        mtus({{"ext1", 1280}})(c);
    };
    Rig& r = start(o);
    // 40 + 8 + 1232 = 1280 bytes.
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(1232))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                  udp6_ip(kIngressV6, 40000, kServerV6, 53, pattern(1232), Ip6Opt{63})));
    Bytes more = udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(1233));
    r.process(r.pods, from_pod6(kPod10v6, more));
    EXPECT_TRUE(r.tx(r.ext1).empty()) << "IPv6 is not cut";
    Parsed e = single(r.tx(r.pods));
    EXPECT_TRUE(checksums_valid(e));
    EXPECT_EQ(e.icmp_type, 2);
    EXPECT_EQ(get32(&e.l3[44]), 1280u) << "the egress MTU";
    ASSERT_TRUE(e.inner);
    EXPECT_EQ(e.inner->src6, kPod10v6) << "quoted as the pod sent it";
    EXPECT_TRUE(std::equal(e.l3.begin() + 48, e.l3.end(), more.begin()));
    EXPECT_EQ(r.w().counters.fragmented, 0u);
}

// The IPv6 twin of DontFragmentIsHeldToItsEgressPortsMtuNotToTheSmallestOne: a datagram larger
// than the smallest MTU of any port (the pods port's 1,280) is held to the MTU of the port it
// leaves by (ext1's 1,500), not to the smallest.
TEST_F(DataplaneTest, Ipv6DatagramIsHeldToItsEgressPortsMtuNotToTheSmallestOne) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        mtus({{"pods", 1280}, {"ext1", 1500}})(c);
    };
    Rig& r = start(o);
    // 40 + 8 + 1352 = 1400 bytes: over the pods port's MTU, within ext1's.
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(1352))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                  udp6_ip(kIngressV6, 40000, kServerV6, 53, pattern(1352), Ip6Opt{63})));
    EXPECT_TRUE(r.tx(r.pods).empty());
    // 1,501 bytes: one over ext1's MTU, answered with Packet Too Big carrying 1,500.
    Bytes more = udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(1453));
    r.process(r.pods, from_pod6(kPod10v6, more));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    Parsed e = single(r.tx(r.pods));
    EXPECT_TRUE(checksums_valid(e));
    EXPECT_EQ(e.icmp_type, 2);
    EXPECT_EQ(get32(&e.l3[44]), 1500u) << "ext1's MTU, not the smallest";
    ASSERT_TRUE(e.inner);
    EXPECT_EQ(e.inner->src6, kPod10v6);
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::packet_too_big)], 1u);
    EXPECT_EQ(r.w().counters.fragmented, 0u);
}

// An IPv6 jumbo frame received as a chain of mbufs leaves translated as the chain it came in,
// also when the first mbuf ends inside the TCP header.
TEST_F(DataplaneTest, ChainedIpv6FrameThatFitsLeavesAsItsBytesWithValidChecksums) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        mtus({{"pods", 9000}, {"ext1", 9000}})(c);
    };
    Rig& r = start(o);
    Bytes payload = pattern(6000);
    r.process(0, {{.port = r.pods,
                   .frame = from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 443, kPsh | kAck, payload))}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    auto segs = r.tx_segments();
    ASSERT_EQ(segs.size(), 1u);
    EXPECT_EQ(segs[0], 3) << "sent as the chain it arrived in";
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                  tcp6_ip(kIngressV6, 40000, kServerV6, 443, kPsh | kAck, payload, Ip6Opt{63})));
    EXPECT_TRUE(checksums_valid(parse_frame(frames[0])));
    r.process(0, {{.port = r.pods,
                   .frame = from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 443, kAck, payload)),
                   .segment = 60}});
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                                  tcp6_ip(kIngressV6, 40000, kServerV6, 443, kAck, payload, Ip6Opt{63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// A transmit queue that stops taking frames. ext1's transmit ring (1,023 frames) is never drained
// here until the test says so: once full it refuses every burst whole. Refusals for less than
// kTxStallMs are only tx_full drops; past it the worker counts one stall and flags the queue,
// however long the streak goes on, and the control thread's log says so once, then once more when
// the queue takes frames again.
TEST_F(DataplaneTest, TransmitQueueThatTakesNothingIsCountedStalledAndLoggedOncePerStreak) {
    Rig& r = start();
    const uint64_t stall = rte_get_tsc_hz() * dp::kTxStallMs / 1000;
    const dp::WorkerCounters& c = r.w().counters;
    std::vector<control::PortInfo> ports{{.name = "pods", .device = "net_ring_pods", .id = r.pods},
                                         {.name = "ext1", .device = "net_ring_ext1", .id = r.ext1}};
    control::TxStallLog log;
    auto send = [&](unsigned n) {
        std::vector<In> burst;
        for (unsigned i = 0; i < n; ++i)
            burst.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, pattern(8)))});
        r.process(0, burst);
    };
    auto check = [&] { return log.check(r.workers, ports); };

    for (unsigned i = 0; i < 32; ++i)
        send(dp::kBurst);
    ASSERT_EQ(c.tx_packets, 1023u);
    EXPECT_EQ(c.tx_refused[r.ext1], 1u) << "the last burst was taken in part: not refused whole";
    EXPECT_TRUE(check().empty());

    // Refused whole, over just less than the stall time: drops, no stall.
    send(4);
    r.advance(stall / 2);
    send(4);
    r.advance(stall - stall / 2 - 1);
    send(4);
    EXPECT_EQ(c.tx_refused[r.ext1], 13u);
    EXPECT_EQ(c.drops[static_cast<unsigned>(DropReason::tx_full)], 13u);
    EXPECT_EQ(c.tx_stalls[r.ext1], 0u);
    EXPECT_EQ(c.tx_stalled[r.ext1], 0u);
    EXPECT_TRUE(check().empty());

    // The stall time reached: one stall, flagged, one warning naming the port.
    r.advance(1);
    send(1);
    EXPECT_EQ(c.tx_stalls[r.ext1], 1u);
    EXPECT_EQ(c.tx_stalled[r.ext1], 1u);
    auto lines = check();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("port ext1 (net_ring_ext1): the transmit queue of worker 0 has accepted no frame"),
              std::string::npos)
        << lines[0];

    // The streak goes on for ten stall times: still one stall, no more lines.
    for (unsigned i = 0; i < 20; ++i) {
        r.advance(stall / 2);
        send(dp::kBurst);
        EXPECT_EQ(c.tx_stalls[r.ext1], 1u);
        EXPECT_EQ(c.tx_stalled[r.ext1], 1u);
        EXPECT_TRUE(check().empty());
    }
    control::PortTx tx = control::read_port_tx(r.workers, r.ext1);
    EXPECT_EQ(tx.refused, 14u + 20 * dp::kBurst);
    EXPECT_EQ(tx.stalls, 1u);
    EXPECT_EQ(tx.stalled_queues, 1u);
    EXPECT_EQ(control::read_port_tx(r.workers, r.pods).stalls, 0u);
    EXPECT_EQ(c.tx_packets, 1023u);

    // The ring drained: the next frame is taken, the flag drops, one line says so.
    EXPECT_EQ(r.tx(r.ext1).size(), 1023u);
    send(1);
    EXPECT_EQ(c.tx_packets, 1024u);
    EXPECT_EQ(c.tx_stalled[r.ext1], 0u);
    EXPECT_EQ(c.tx_stalls[r.ext1], 1u);
    lines = check();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("port ext1 (net_ring_ext1): the transmit queue of worker 0 takes frames again (" +
                            std::to_string(1 + 20 * dp::kBurst) + " frames refused meanwhile)"),
              std::string::npos)
        << lines[0];
    EXPECT_TRUE(check().empty());

    // A second streak that begins and ends between two looks is still logged, begin and end.
    for (unsigned i = 0; i < 32; ++i)
        send(dp::kBurst);
    send(1);
    r.advance(stall);
    send(1);
    EXPECT_EQ(c.tx_stalls[r.ext1], 2u);
    r.tx(r.ext1);
    send(1);
    EXPECT_EQ(c.tx_stalled[r.ext1], 0u);
    lines = check();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[0].find("has accepted no frame"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("takes frames again (4 frames refused meanwhile)"), std::string::npos) << lines[1];
}

}  // namespace
}  // namespace egw::test
