// SPDX-License-Identifier: Apache-2.0
//
// IPv4 fragments through the NAT (reassembly.h): a datagram that arrives in fragments, in any
// order, is put together, translated like any other (its session made or found from the first
// fragment's ports) and leaves cut again for the egress port's MTU; fragments that cannot make a
// datagram (timed out, too many, the table full) are dropped and counted, and nothing is leaked.
#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <algorithm>
#include <string>

#include "dataplane/reassembly.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes pattern(size_t n, unsigned seed = 0) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i)
        b[i] = static_cast<uint8_t>(i * 13 + seed + i / 253);
    return b;
}

Bytes ip_of(const Bytes& frame) {
    return Bytes(frame.begin() + 14, frame.end());
}

// The frames that left a port, each within 1500 bytes, put together (one datagram).
Bytes whole(const std::vector<Bytes>& frames) {
    std::vector<Bytes> ips;
    for (const Bytes& f : frames) {
        EXPECT_LE(f.size(), 1514u);
        ips.push_back(ip_of(f));
    }
    std::string why;
    Bytes d = reassemble(ips, &why);
    EXPECT_FALSE(d.empty()) << why;
    return d;
}

std::vector<In> burst(uint16_t port, const std::vector<Bytes>& frames) {
    std::vector<In> v;
    for (const Bytes& f : frames)
        v.push_back(In{port, f});
    return v;
}

TEST_F(DataplaneTest, OutgoingDatagramInFragmentsLeavesTranslatedWholeAndCutForTheMtu) {
    Rig& r = start();
    Bytes payload = pattern(3000);
    Bytes dgram = udp_ip(kPod10, 40000, kServer, 5353, payload, IpOpt{.id = 0x5151});
    std::vector<Bytes> in;
    for (const Bytes& f : fragments(dgram, 1480))
        in.push_back(r.from_pod(kPod10, f));
    ASSERT_EQ(in.size(), 3u);
    r.process(0, burst(r.pods, in));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 3u) << "3,028 bytes leave a 1,500-byte port in three fragments";
    Bytes d = whole(out);
    EXPECT_EQ(d, udp_ip(kIngress, 40000, kServer, 5353, payload, IpOpt{.ttl = 63, .id = 0x5151}));
    EXPECT_TRUE(checksums_valid(parse_ipv4(d.data(), d.size())));
    for (const Bytes& f : out)
        EXPECT_EQ(finish(sum16(f.data() + 14, 20)), 0) << "each fragment's header checksum";
    auto sessions = r.sessions();
    ASSERT_EQ(sessions.size(), 1u);
    EXPECT_EQ(sessions[0].pod_ip, nbo32(kPod10));
    EXPECT_EQ(sessions[0].pod_port, nbo16(40000));
    EXPECT_EQ(r.w().counters.fragments_in, 3u);
    EXPECT_EQ(r.w().counters.reassembled, 1u);
    EXPECT_EQ(r.w().counters.fragmented, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, FragmentsOutOfOrderWithTheFirstLastAreHeldUntilTheDatagramIsWhole) {
    Rig& r = start();
    Bytes payload = pattern(2500, 7);
    Bytes dgram = udp_ip(kPod11, 41000, kServerB, 7000, payload, IpOpt{.id = 0x0102});
    std::vector<Bytes> f = fragments(dgram, 1000);
    ASSERT_EQ(f.size(), 3u);
    // Last, middle, then first, each in a burst of its own.
    r.process(r.pods, r.from_pod(kPod11, f[2]));
    r.process(r.pods, r.from_pod(kPod11, f[1]));
    EXPECT_TRUE(r.tx(r.ext1).empty()) << "nothing leaves before the datagram is whole";
    EXPECT_TRUE(r.sessions().empty()) << "no session before the first fragment's ports are known";
    r.process(r.pods, r.from_pod(kPod11, f[0]));
    Bytes d = whole(r.tx(r.ext1));
    EXPECT_EQ(d, udp_ip(kIngress, 41000, kServerB, 7000, payload, IpOpt{.ttl = 63, .id = 0x0102}));
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.w().counters.reassembled, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, ReplyInFragmentsReachesThePodTranslated) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 5353, {1, 2, 3})));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    Bytes payload = pattern(4000, 3);
    Bytes reply = udp_ip(kServer, 5353, kIngress, 40000, payload, IpOpt{.id = 0x7777});
    std::vector<Bytes> f = fragments(reply, 1480);
    ASSERT_EQ(f.size(), 3u);
    // Middle, first, last.
    r.process(0, burst(r.ext1, {r.from_ext1(f[1]), r.from_ext1(f[0]), r.from_ext1(f[2])}));
    auto out = r.tx(r.pods);
    ASSERT_EQ(out.size(), 3u);
    for (const Bytes& fr : out)
        EXPECT_EQ(mac_str(Mac{fr[0], fr[1], fr[2], fr[3], fr[4], fr[5]}), mac_str(kPod10Mac));
    Bytes d = whole(out);
    EXPECT_EQ(d, udp_ip(kServer, 5353, kPod10, 40000, payload, IpOpt{.ttl = 63, .id = 0x7777}));
    EXPECT_TRUE(checksums_valid(parse_ipv4(d.data(), d.size())));
    EXPECT_EQ(r.svc(kWeb).packets_in, 1u) << "the datagram counts once";
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, LoneFragmentIsHeldThenDroppedAsTimedOut) {
    Rig& r = start();
    ASSERT_EQ(r.cfg.reassembly.timeout_ms, 2000u) << "the default";
    Bytes dgram = udp_ip(kPod10, 40000, kServer, 53, pattern(2000));
    std::vector<Bytes> f = fragments(dgram, 1480);
    r.process(r.pods, r.from_pod(kPod10, f[1]));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.mbufs_in_use(), 1) << "held";
    r.advance(rte_get_tsc_hz() * r.cfg.reassembly.timeout_ms / 1000 / 2);
    dp::reassembly_expire(r.w());
    EXPECT_EQ(r.drops(DropReason::fragment_timeout), 0u) << "not yet";
    r.advance(rte_get_tsc_hz() * r.cfg.reassembly.timeout_ms / 1000);
    dp::reassembly_expire(r.w());
    EXPECT_EQ(r.drops(DropReason::fragment_timeout), 1u);
    EXPECT_EQ(r.mbufs_in_use(), 0);
    // The first fragment arriving now starts over, and is held alone.
    r.process(r.pods, r.from_pod(kPod10, f[0]));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.sessions().empty());
}

// A last fragment with no payload is refused by the table at once: one drop, nothing held and
// nothing counted as taken in (a fuzz run found it counted twice).
TEST_F(DataplaneTest, EmptyFragmentIsDroppedOnceAndNotTakenIn) {
    Rig& r = start();
    r.process(r.pods, r.from_pod(kPod10, ipv4(kPod10, kServer, kProtoUdp, {}, IpOpt{.frag = 500})));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::fragment), 1u);
    EXPECT_EQ(r.total_drops(), 1u);
    EXPECT_EQ(r.w().counters.fragments_in, 0u);
    EXPECT_EQ(r.mbufs_in_use(), 0);
}

TEST_F(DataplaneTest, DatagramInMoreFragmentsThanTheLimitIsDroppedAndCounted) {
    Rig& r = start();
    Bytes dgram = udp_ip(kPod10, 40000, kServer, 53, pattern(8 * (dp::kMaxFragmentsPerDatagram + 1) * 8));
    std::vector<Bytes> f = fragments(dgram, 64);
    ASSERT_GT(f.size(), dp::kMaxFragmentsPerDatagram);
    std::vector<Bytes> in;
    for (const Bytes& x : f)
        in.push_back(r.from_pod(kPod10, x));
    r.process(0, burst(r.pods, in));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_GE(r.drops(DropReason::fragment), dp::kMaxFragmentsPerDatagram)
        << "the fragment past the limit and those held with it";
    r.drain_all();
    EXPECT_EQ(r.drops(DropReason::fragment) + r.drops(DropReason::fragment_timeout), f.size())
        << "every fragment dropped, once";
}

TEST_F(DataplaneTest, ReassemblyTableHoldsAtMostItsDatagramsAndCountsTheRest) {
    Rig& r = start();
    ASSERT_EQ(r.cfg.reassembly.max_datagrams, 256u) << "the default";
    const unsigned n = r.cfg.reassembly.max_datagrams + 40;
    for (unsigned k = 0; k < n; ++k) {
        Bytes dgram = udp_ip(kPod10, 40000, kServer, 53, pattern(1600), IpOpt{.id = static_cast<uint16_t>(k)});
        r.process(r.pods, r.from_pod(kPod10, fragments(dgram, 1480)[0]));
    }
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_GE(r.drops(DropReason::fragment), 40u);
    EXPECT_LE(r.mbufs_in_use(), static_cast<int64_t>(r.cfg.reassembly.max_datagrams));
    r.drain_all();
    EXPECT_EQ(r.drops(DropReason::fragment) + r.drops(DropReason::fragment_timeout), n);
}

// The `reassembly` section of the configuration sets the three bounds.
TEST_F(DataplaneTest, ConfiguredReassemblyLimitsHold) {
    Rig& r = start({.configure = [](config::Config& c) {
        c.reassembly = {.max_datagrams = 16, .max_fragments = 3, .timeout_ms = 50};
    }});
    const uint64_t ms = rte_get_tsc_hz() / 1000;
    auto from_pod = [&](const std::vector<Bytes>& f) {
        std::vector<Bytes> in;
        for (const Bytes& x : f)
            in.push_back(r.from_pod(kPod10, x));
        return burst(r.pods, in);
    };

    // Three fragments (the limit), last first: through, translated.
    Bytes three = udp_ip(kPod10, 40000, kServer, 53, pattern(2400), IpOpt{.id = 1});
    std::vector<Bytes> f3 = fragments(three, 1000);
    ASSERT_EQ(f3.size(), 3u);
    r.process(0, from_pod({f3[2], f3[0], f3[1]}));
    const Bytes translated = udp_ip(kIngress, 40000, kServer, 53, pattern(2400), IpOpt{.ttl = 63, .id = 1});
    EXPECT_EQ(whole(r.tx(r.ext1)), translated);
    EXPECT_EQ(r.total_drops(), 0u);

    // Four fragments: put together, then dropped as one datagram; no mbuf kept.
    Bytes four = udp_ip(kPod10, 40001, kServer, 53, pattern(2400), IpOpt{.id = 2});
    std::vector<Bytes> f4 = fragments(four, 800);
    ASSERT_EQ(f4.size(), 4u);
    r.process(0, from_pod(f4));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::fragment), 1u);
    EXPECT_EQ(r.w().counters.fragments_in, 7u);
    EXPECT_EQ(r.w().counters.reassembled, 2u);
    EXPECT_EQ(r.mbufs_in_use(), 0);
    // The same again in other mbufs (the marks of the first try must not count twice): the same.
    r.process(0, from_pod({f4[3], f4[1], f4[2], f4[0]}));
    EXPECT_EQ(r.drops(DropReason::fragment), 2u);
    r.process(0, from_pod({f3[1], f3[2], f3[0]}));
    EXPECT_EQ(whole(r.tx(r.ext1)), translated) << "three fragments still pass";

    // At most 16 datagrams held.
    for (unsigned k = 0; k < 26; ++k) {
        Bytes d = udp_ip(kPod10, 40000, kServer, 53, pattern(1600), IpOpt{.id = static_cast<uint16_t>(100 + k)});
        r.process(r.pods, r.from_pod(kPod10, fragments(d, 1480)[0]));
    }
    EXPECT_LE(r.mbufs_in_use(), 16);
    EXPECT_GE(r.drops(DropReason::fragment), 2u + 10u);
    uint64_t refused = r.drops(DropReason::fragment) - 2;
    EXPECT_EQ(r.mbufs_in_use(), static_cast<int64_t>(26 - refused));

    // Held for 50 ms, not 2 s.
    r.advance(45 * ms);
    dp::reassembly_expire(r.w());
    EXPECT_EQ(r.drops(DropReason::fragment_timeout), 0u) << "not yet";
    r.advance(10 * ms);
    dp::reassembly_expire(r.w());
    EXPECT_EQ(r.drops(DropReason::fragment_timeout), 26 - refused);
    EXPECT_EQ(r.mbufs_in_use(), 0);
}

}  // namespace
}  // namespace egw::test
