// SPDX-License-Identifier: Apache-2.0
//
// IPv4 and IPv6 fragments through the NAT (reassembly.h): a datagram that arrives in fragments, in
// any order, is put together, translated like any other (its session made or found from the first
// fragment's ports) and leaves cut again: IPv4 for the egress port's MTU, IPv6 no larger than the
// largest fragment it came in; fragments that cannot make a datagram (timed out, too many,
// overlapping, the table full) are dropped and counted, and nothing is leaked. The IPv6 tests
// follow the IPv4 ones, as their twins, and the limits are checked for both families from one
// table.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>

#include <algorithm>
#include <string>

#include "dataplane/gateway_icmp_error_kinds.h"
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

// A device that cannot transmit chained mbufs (no multi-segment transmit): the fragments a
// datagram is cut into for the MTU, each a header mbuf chained to the data it refers to, leave in
// one buffer each, byte for byte the same, with no mbuf left behind; on a port that can send
// chains they stay chains.
TEST_F(DataplaneTest, PortWithoutMultiSegmentTransmitGetsEachFrameInOneBuffer) {
    Rig& r = start();
    Bytes payload = pattern(3000);
    Bytes dgram = udp_ip(kPod10, 40000, kServer, 5353, payload, IpOpt{.id = 0x5151});
    auto send = [&] {
        std::vector<Bytes> in;
        for (const Bytes& f : fragments(dgram, 1480))
            in.push_back(r.from_pod(kPod10, f));
        r.process(0, burst(r.pods, in));
        return r.tx(r.ext1);
    };
    const Bytes translated = udp_ip(kIngress, 40000, kServer, 5353, payload, IpOpt{.ttl = 63, .id = 0x5151});
    auto chained = send();
    ASSERT_EQ(chained.size(), 3u);
    EXPECT_EQ(whole(chained), translated);
    EXPECT_EQ(r.tx_segments(), (std::vector<uint16_t>{2, 2, 2})) << "a header mbuf and the data it refers to";

    r.shared.single_segment_tx |= 1u << r.ext1;
    auto copied = send();
    ASSERT_EQ(copied.size(), 3u);
    EXPECT_EQ(copied, chained) << "the same bytes";
    EXPECT_EQ(r.tx_segments(), (std::vector<uint16_t>{1, 1, 1}));
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.mbufs_in_use(), 0);
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

// One source may hold the whole table when max_per_source says so; past it, a new datagram is
// refused as reassembly_table_full (the table's own hash buckets may refuse one a little sooner).
TEST_F(DataplaneTest, ReassemblyTableHoldsAtMostItsDatagramsAndCountsTheRest) {
    Rig& r = start({.configure = [](config::Config& c) { c.reassembly.max_per_source = c.reassembly.max_datagrams; }});
    ASSERT_EQ(r.cfg.reassembly.max_datagrams, 256u) << "the default";
    const unsigned n = r.cfg.reassembly.max_datagrams + 40;
    for (unsigned k = 0; k < n; ++k) {
        Bytes dgram = udp_ip(kPod10, 40000, kServer, 53, pattern(1600), IpOpt{.id = static_cast<uint16_t>(k)});
        r.process(r.pods, r.from_pod(kPod10, fragments(dgram, 1480)[0]));
    }
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_GE(r.drops(DropReason::reassembly_table_full), 40u);
    EXPECT_EQ(r.drops(DropReason::fragment), 0u);
    EXPECT_EQ(r.mbufs_in_use(), static_cast<int64_t>(n - r.drops(DropReason::reassembly_table_full)));
    EXPECT_EQ(dp::reassembly_held(*r.w().reassembly), n - r.drops(DropReason::reassembly_table_full));
    r.drain_all();
    EXPECT_EQ(r.drops(DropReason::reassembly_table_full) + r.drops(DropReason::fragment_timeout), n);
    EXPECT_EQ(dp::reassembly_held(*r.w().reassembly), 0u);
}

// One source sending first fragments alone (each a datagram that never completes) holds at most
// max_per_source datagrams (by default a quarter of the table); the rest are refused and counted
// as reassembly_source_limit, and another source's datagram is still put together and leaves.
// Its room comes back when its datagrams time out.
TEST_F(DataplaneTest, OneSourceSendingFirstFragmentsCannotBlockAnother) {
    Rig& r = start();
    ASSERT_EQ(r.cfg.reassembly.per_source(), r.cfg.reassembly.max_datagrams / 4) << "the default";
    const unsigned limit = r.cfg.reassembly.per_source();
    const unsigned n = r.cfg.reassembly.max_datagrams + 40;
    for (unsigned k = 0; k < n; ++k) {
        Bytes dgram = udp_ip(kPod10, 40000, kServer, 53, pattern(1600), IpOpt{.id = static_cast<uint16_t>(k)});
        r.process(r.pods, r.from_pod(kPod10, fragments(dgram, 1480)[0]));
    }
    EXPECT_EQ(r.drops(DropReason::reassembly_source_limit), n - limit);
    const uint32_t pod10 = rte_cpu_to_be_32(kPod10), pod11 = rte_cpu_to_be_32(kPod11);
    EXPECT_EQ(dp::reassembly_held_by(*r.w().reassembly, reinterpret_cast<const uint8_t*>(&pod10), false), limit);
    EXPECT_EQ(r.mbufs_in_use(), static_cast<int64_t>(limit));

    Bytes other = udp_ip(kPod11, 40001, kServer, 53, pattern(1600), IpOpt{.id = 7});
    std::vector<Bytes> f = fragments(other, 1480);
    ASSERT_EQ(f.size(), 2u);
    r.process(0, burst(r.pods, {r.from_pod(kPod11, f[0]), r.from_pod(kPod11, f[1])}));
    EXPECT_EQ(whole(r.tx(r.ext1)), udp_ip(kIngress, 40001, kServer, 53, pattern(1600), IpOpt{.ttl = 63, .id = 7}));
    EXPECT_EQ(dp::reassembly_held_by(*r.w().reassembly, reinterpret_cast<const uint8_t*>(&pod11), false), 0u);
    EXPECT_EQ(r.drops(DropReason::reassembly_table_full), 0u);

    r.drain_all();
    EXPECT_EQ(r.drops(DropReason::fragment_timeout), limit);
    EXPECT_EQ(dp::reassembly_held_by(*r.w().reassembly, reinterpret_cast<const uint8_t*>(&pod10), false), 0u);
    Bytes again = udp_ip(kPod10, 40000, kServer, 53, pattern(1600), IpOpt{.id = 9});
    r.process(r.pods, r.from_pod(kPod10, fragments(again, 1480)[0]));
    EXPECT_EQ(r.drops(DropReason::reassembly_source_limit), n - limit) << "the source may start one again";
    EXPECT_EQ(r.mbufs_in_use(), 1);
}

// The `reassembly` section of the configuration sets the three bounds.
TEST_F(DataplaneTest, ConfiguredReassemblyLimitsHold) {
    Rig& r = start({.configure = [](config::Config& c) {
        c.reassembly = {.max_datagrams = 16, .max_fragments = 3, .timeout_ms = 50, .max_per_source = 16};
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
    EXPECT_GE(r.drops(DropReason::reassembly_table_full), 10u);
    EXPECT_EQ(r.drops(DropReason::fragment), 2u);
    uint64_t refused = r.drops(DropReason::reassembly_table_full);
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

// IPv6 ---------------------------------------------------------------------------------------

using namespace std_rig6;

// The IPv6 frames that left a port, each a fragment of one datagram no larger than `size` bytes
// (IPv6 header included) behind the port's Ethernet header, put together; `id` gets their
// identification.
Bytes whole6(const std::vector<Bytes>& frames, size_t size, uint32_t* id = nullptr) {
    std::vector<Bytes> ips;
    for (const Bytes& f : frames) {
        EXPECT_LE(f.size(), 14 + size);
        EXPECT_EQ(get16(&f[12]), kEtherIpv6);
        ips.push_back(ip_of(f));
    }
    std::string why;
    Bytes d = reassemble6(ips, &why, id);
    EXPECT_FALSE(d.empty()) << why;
    return d;
}

std::vector<Bytes> from_pod6_all(const Ip6Addr& pod, const std::vector<Bytes>& ips) {
    std::vector<Bytes> v;
    for (const Bytes& ip : ips)
        v.push_back(from_pod6(pod, ip));
    return v;
}

// Through the NAT both ways, as the IPv4 tests above: out in order (1,280-byte fragments), out of
// order with the first last in bursts of their own, and a reply; each whole datagram leaves
// translated, in fragments no larger than the largest it came in (and none below 1,280 bytes).
TEST_F(DataplaneTest, Ipv6DatagramsInFragmentsLeaveTranslatedAndCutNoLargerThanTheyCame) {
    struct Case {
        std::string name;
        bool reply;
        size_t payload, piece;           // UDP payload, fragmentable bytes per fragment
        std::vector<unsigned> order;     // the fragments in the order they arrive
        bool separate_bursts;            // each fragment in a burst of its own
        size_t fragments_out, size_out;  // what leaves: so many fragments of at most so many bytes
    };
    const std::vector<Case> cases = {
        {"out, in order", false, 3000, 1232, {0, 1, 2}, false, 3, 1280},
        {"out, first fragment last", false, 2500, 1000, {2, 1, 0}, true, 3, 1280},
        {"reply, middle first", true, 4000, 1448, {1, 0, 2}, false, 3, 1496},
        {"out, one large and one small fragment", false, 1700, 1448, {1, 0}, false, 2, 1496},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        Rig& r = start(dual_stack());
        const Bytes payload = pattern(c.payload, static_cast<unsigned>(c.payload));
        Bytes dgram, want;
        uint16_t in_port = r.pods, out_port = r.ext1;
        if (!c.reply) {
            dgram = udp6_ip(kPod10v6, 40000, kServerV6, 5353, payload);
            want = udp6_ip(kIngressV6, 40000, kServerV6, 5353, payload, Ip6Opt{63});
        } else {
            r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 5353, {1, 2, 3})));
            ASSERT_EQ(r.tx(r.ext1).size(), 1u);
            dgram = udp6_ip(kServerV6, 5353, kIngressV6, 40000, payload);
            want = udp6_ip(kServerV6, 5353, kPod10v6, 40000, payload, Ip6Opt{63});
            in_port = r.ext1;
            out_port = r.pods;
        }
        std::vector<Bytes> f = fragments6(dgram, c.piece, 0x01020304);
        ASSERT_EQ(f.size(), c.order.size());
        std::vector<Bytes> frames;
        for (unsigned k : c.order)
            frames.push_back(c.reply ? from_ext1_6(f[k]) : from_pod6(kPod10v6, f[k]));
        if (c.separate_bursts) {
            for (size_t k = 0; k + 1 < frames.size(); ++k) {
                r.process(in_port, frames[k]);
                EXPECT_TRUE(r.tx(out_port).empty()) << "nothing leaves before the datagram is whole";
                EXPECT_TRUE(r.sessions6().empty()) << "no session before the first fragment's ports are known";
            }
            r.process(in_port, frames.back());
        } else {
            r.process(0, burst(in_port, frames));
        }
        auto out = r.tx(out_port);
        EXPECT_EQ(out.size(), c.fragments_out);
        uint32_t id = 0;
        Bytes d = whole6(out, c.size_out, &id);
        EXPECT_EQ(d, want);
        EXPECT_TRUE(checksums_valid(parse_ipv6(d.data(), d.size())));
        EXPECT_NE(id, 0x01020304u) << "the gateway's own identification";
        EXPECT_EQ(r.sessions6().size(), 1u);
        EXPECT_EQ(r.w().counters.fragments_in, f.size());
        EXPECT_EQ(r.w().counters.reassembled, 1u);
        EXPECT_EQ(r.w().counters.fragmented, 1u);
        EXPECT_EQ(r.w().counters.fragments_out, c.fragments_out);
        EXPECT_EQ(r.total_drops(), 0u);
        if (c.reply) {
            EXPECT_EQ(r.svc(kWeb).packets_in, 1u) << "the datagram counts once";
        }
        rig_->drain_all();
        ASSERT_EQ(rig_->mbufs_in_use(), 0);
        rig_.reset();
    }
}

// A datagram no larger than its largest fragment, or than 1,280 bytes, leaves whole; two
// datagrams cut by the gateway get different identifications.
TEST_F(DataplaneTest, Ipv6DatagramWithinItsLargestFragmentLeavesWhole) {
    Rig& r = start(dual_stack());
    Bytes small = udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(600));
    r.process(0, burst(r.pods, from_pod6_all(kPod10v6, fragments6(small, 304, 7))));
    EXPECT_EQ(single(r.tx(r.ext1)).l3, udp6_ip(kIngressV6, 40000, kServerV6, 53, pattern(600), Ip6Opt{63}))
        << "648 bytes: within 1,280";
    uint32_t ids[2] = {};
    for (uint32_t k = 0; k < 2; ++k) {
        Bytes big = udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(2000, k));
        r.process(0, burst(r.pods, from_pod6_all(kPod10v6, fragments6(big, 1232, 7 + k))));
        whole6(r.tx(r.ext1), 1280, &ids[k]);
    }
    EXPECT_NE(ids[0], ids[1]);
    EXPECT_EQ(r.w().counters.reassembled, 3u);
    EXPECT_EQ(r.w().counters.fragmented, 2u);
}

// Output takes a burst's repeated next hop from what it kept of the first packet to it; a
// datagram put together here that follows that packet must still leave no larger than its
// largest fragment, though it would pass the port's MTU whole.
TEST_F(DataplaneTest, Ipv6DatagramPutTogetherBehindAnotherPacketToItsNextHopIsStillCut) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(10))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    // 1,448 bytes in fragments of at most 1,048: within the MTU of 1,500, over the 1,280 it may
    // leave in.
    const Bytes big = udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(1400));
    std::vector<Bytes> frames = {from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(20)))};
    for (const Bytes& f : fragments6(big, 1000, 9))
        frames.push_back(from_pod6(kPod10v6, f));
    ASSERT_EQ(frames.size(), 3u);
    r.process(0, burst(r.pods, frames));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(ip_of(out[0]), udp6_ip(kIngressV6, 40000, kServerV6, 53, pattern(20), Ip6Opt{63}));
    EXPECT_EQ(whole6({out[1], out[2]}, 1280), udp6_ip(kIngressV6, 40000, kServerV6, 53, pattern(1400), Ip6Opt{63}));
    EXPECT_EQ(r.w().counters.reassembled, 1u);
    EXPECT_EQ(r.w().counters.fragmented, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// Routed untranslated (a cluster destination) the same way: put together, hop limit one lower,
// cut again no larger than it came.
TEST_F(DataplaneTest, Ipv6FragmentsRoutedUntranslatedArePutTogetherAndCutAgain) {
    Rig& r = start(dual_stack());
    Bytes payload = pattern(3000, 5);
    Bytes dgram = udp6_ip(kPod10v6, 40000, kRemotePodV6, 8080, payload);
    r.process(0, burst(r.pods, from_pod6_all(kPod10v6, fragments6(dgram, 1232, 99))));
    auto out = r.tx(r.pods);
    ASSERT_EQ(out.size(), 3u);
    for (const Bytes& f : out)
        EXPECT_EQ(mac_str(Mac{f[0], f[1], f[2], f[3], f[4], f[5]}), mac_str(kPodsRouterMac));
    EXPECT_EQ(whole6(out, 1280), udp6_ip(kPod10v6, 40000, kRemotePodV6, 8080, payload, Ip6Opt{63}));
    EXPECT_TRUE(r.sessions6().empty());
    EXPECT_EQ(r.total_drops(), 0u);
}

// A datagram whose largest fragment would not pass the egress port is refused with Packet Too
// Big carrying the port's MTU, quoting the datagram as it was put together (the sender must cut
// smaller); one whose fragments pass goes through the same port.
TEST_F(DataplaneTest, Ipv6FragmentLargerThanTheEgressMtuGetsPacketTooBig) {
    Rig& r = start([] {
        RigOptions o = dual_stack();
        auto more = o.configure;
        o.configure = [more](config::Config& c) {
            more(c);
            c.ports[1].mtu = 1400;
        };
        return o;
    }());
    Bytes payload = pattern(3000, 9);
    Bytes dgram = udp6_ip(kPod10v6, 40000, kServerV6, 5353, payload);
    r.process(0, burst(r.pods, from_pod6_all(kPod10v6, fragments6(dgram, 1448, 5))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    Parsed p = single(r.tx(r.pods));
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.icmp_type, 2);
    EXPECT_EQ(p.icmp_code, 0);
    EXPECT_EQ(p.src6, kPodsV6);
    EXPECT_EQ(p.dst6, kPod10v6);
    EXPECT_EQ(get32(&p.l3[44]), 1400u) << "the egress MTU";
    ASSERT_TRUE(p.inner);
    EXPECT_EQ(p.inner->src6, kPod10v6);
    EXPECT_EQ(p.inner->dst6, kServerV6);
    EXPECT_EQ(p.inner->sport, 40000);
    EXPECT_EQ(p.l3.size(), 1280u) << "the quote fills the error to IPv6's minimum MTU";
    EXPECT_TRUE(std::equal(p.l3.begin() + 48, p.l3.end(), dgram.begin())) << "the datagram as it came";
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::packet_too_big)], 1u);

    r.process(0, burst(r.pods, from_pod6_all(kPod10v6, fragments6(dgram, 1344, 6))));
    EXPECT_EQ(whole6(r.tx(r.ext1), 1392), udp6_ip(kIngressV6, 40000, kServerV6, 5353, payload, Ip6Opt{63}))
        << "1,392-byte fragments pass a 1,400-byte MTU";
}

// An atomic fragment (offset 0, no more to come; RFC 6946) is a whole datagram: translated at
// once, its Fragment header kept, nothing held.
TEST_F(DataplaneTest, Ipv6AtomicFragmentIsTranslatedAsItIs) {
    Rig& r = start(dual_stack());
    Bytes payload = pattern(100);
    Ip6Opt atomic{64, {{44, Bytes{0, 0, 0, 0, 0, 9}}}};
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, payload, atomic)));
    atomic.hop_limit = 63;
    EXPECT_EQ(single(r.tx(r.ext1)).l3, udp6_ip(kIngressV6, 40000, kServerV6, 53, payload, atomic));
    EXPECT_EQ(r.w().counters.fragments_in, 0u);
    EXPECT_EQ(r.mbufs_in_use(), 0);
}

// An ICMPv6 error about a fragment the gateway cut (Packet Too Big from a router behind it)
// quotes that first fragment: it reaches the pod with the quote's address, port and checksum
// translated back, its Fragment header as it was; one quoting a later fragment names no ports
// and is not translated.
TEST_F(DataplaneTest, Ipv6ErrorQuotingAFirstFragmentIsTranslatedBack) {
    Rig& r = start(dual_stack());
    Bytes payload = pattern(3000, 4);
    r.process(0, burst(r.pods, from_pod6_all(kPod10v6,
                                             fragments6(udp6_ip(kPod10v6, 40000, kServerV6, 5353, payload), 1232, 3))));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 3u);
    uint32_t id = 0;
    whole6(out, 1280, &id);
    // Which frame holds offset 0.
    Bytes first, later;
    for (const Bytes& f : out)
        (get16(&f[14 + 42]) >> 3 == 0 ? first : later) = ip_of(f);
    ASSERT_FALSE(first.empty());
    first.resize(1232);  // the quote within 1,280 bytes
    Bytes body(4 + first.size());
    put32(&body[0], 1280);
    std::copy(first.begin(), first.end(), body.begin() + 4);
    r.process(r.ext1, from_ext1_6(icmp6_ip(kExt1GwV6, kIngressV6, 2, 0, body, Ip6Opt{60}), kExt1GwMac));

    Bytes want_quote = fragment6_of(udp6_ip(kPod10v6, 40000, kServerV6, 5353, payload, Ip6Opt{63}), 0, 1232, true, id);
    want_quote.resize(1232);
    Bytes want_body(4 + want_quote.size());
    put32(&want_body[0], 1280);
    std::copy(want_quote.begin(), want_quote.end(), want_body.begin() + 4);
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_TRUE(checksums_valid(parse_frame(frames[0])));
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, icmp6_ip(kExt1GwV6, kPod10v6, 2, 0, want_body, Ip6Opt{59})));

    later.resize(1232);
    std::copy(later.begin(), later.end(), body.begin() + 4);
    r.process(r.ext1, from_ext1_6(icmp6_ip(kExt1GwV6, kIngressV6, 2, 0, body, Ip6Opt{60}), kExt1GwMac));
    EXPECT_TRUE(r.tx(r.pods).empty()) << "a later fragment's quote has no ports";
    EXPECT_EQ(r.total_drops(), 1u);
}

// Fragments rte_ip_frag cannot take are dropped as `fragment` before the table sees them: one
// behind another extension header, one that would make the datagram longer than 65,535 bytes of
// payload (IPv4: total length).
TEST_F(DataplaneTest, FragmentsThatCannotMakeADatagramAreRefusedAtOnce) {
    Rig& r = start(dual_stack());
    Bytes dgram = udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(2000));
    Bytes behind = fragment6_of(dgram, 0, 1000, true, 1);
    // Hop-by-Hop options (PadN) in front of the Fragment header.
    behind.insert(behind.begin() + 40, {44, 0, 1, 4, 0, 0, 0, 0});
    behind[6] = 0;
    put16(&behind[4], static_cast<uint16_t>(behind.size() - 40));
    r.process(r.pods, from_pod6(kPod10v6, behind));
    EXPECT_EQ(r.drops(DropReason::fragment), 1u);

    Bytes huge(40 + 65528 + 16, 0);
    std::copy(dgram.begin(), dgram.begin() + 40, huge.begin());
    Bytes far = fragment6_of(huge, 65528, 16, false, 2);
    r.process(r.pods, from_pod6(kPod10v6, far));
    EXPECT_EQ(r.drops(DropReason::fragment), 2u);

    Bytes v4 = ipv4(kPod10, kServer, kProtoUdp, pattern(1000), IpOpt{.frag = 8190});
    r.process(r.pods, r.from_pod(kPod10, v4));
    EXPECT_EQ(r.drops(DropReason::fragment), 3u);
    EXPECT_EQ(r.w().counters.fragments_in, 0u);
    EXPECT_EQ(r.total_drops(), 3u);
    EXPECT_EQ(r.mbufs_in_use(), 0);
}

// The limits and failures of test_fragments' IPv4 tests above, for both families: a lone
// fragment times out; an empty one is dropped once and not taken in; overlapping ones and a
// datagram in more fragments than the table holds are dropped, every fragment once; the table
// holds at most its datagrams.
struct Family {
    std::string name;
    // The frames of datagram `k` (a UDP datagram of `payload` bytes from pod 10) cut at `piece`.
    std::function<std::vector<Bytes>(size_t payload, size_t piece, unsigned k)> fragments;
    // A fragment with no payload.
    std::function<Bytes()> empty;
    // Two fragments that overlap: the first 1,000 bytes and 992 bytes from offset 504, the last.
    std::function<std::vector<Bytes>()> overlapping;
};

std::vector<Family> families() {
    auto v4 = [](size_t payload, unsigned k) {
        return udp_ip(kPod10, 40000, kServer, 53, pattern(payload), IpOpt{.id = static_cast<uint16_t>(k)});
    };
    auto v6 = [](size_t payload) { return udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(payload)); };
    auto pod4 = [](const Bytes& ip) { return ethernet(kPodsMac, kPod10Mac, kEtherIpv4, ip); };
    return {
        {"IPv4",
         [=](size_t payload, size_t piece, unsigned k) {
             std::vector<Bytes> v;
             for (const Bytes& f : fragments(v4(payload, k), piece))
                 v.push_back(pod4(f));
             return v;
         },
         [=] { return pod4(ipv4(kPod10, kServer, kProtoUdp, {}, IpOpt{.frag = 500})); },
         [=] {
             Bytes d = v4(1488, 0);
             return std::vector<Bytes>{pod4(fragment_of(d, 0, 1000, true)), pod4(fragment_of(d, 504, 992, false))};
         }},
        {"IPv6",
         [=](size_t payload, size_t piece, unsigned k) {
             return from_pod6_all(kPod10v6, fragments6(v6(payload), piece, k));
         },
         [=] { return from_pod6(kPod10v6, fragment6_of(v6(100), 504, 0, false, 1)); },
         [=] {
             Bytes d = v6(1488);
             return from_pod6_all(kPod10v6, {fragment6_of(d, 0, 1000, true, 1), fragment6_of(d, 504, 992, false, 1)});
         }},
    };
}

TEST_F(DataplaneTest, FragmentLimitsHoldForBothFamilies) {
    const uint64_t ms = rte_get_tsc_hz() / 1000;
    for (const Family& fam : families()) {
        SCOPED_TRACE(fam.name);
        {
            SCOPED_TRACE("a lone fragment times out");
            Rig& r = start(dual_stack());
            r.process(r.pods, fam.fragments(2000, 1232, 1)[1]);
            EXPECT_TRUE(r.tx(r.ext1).empty());
            EXPECT_EQ(r.mbufs_in_use(), 1) << "held";
            r.advance(r.cfg.reassembly.timeout_ms * ms / 2);
            dp::reassembly_expire(r.w());
            EXPECT_EQ(r.drops(DropReason::fragment_timeout), 0u) << "not yet";
            r.advance(r.cfg.reassembly.timeout_ms * ms);
            dp::reassembly_expire(r.w());
            EXPECT_EQ(r.drops(DropReason::fragment_timeout), 1u);
            EXPECT_EQ(r.mbufs_in_use(), 0);
            r.process(r.pods, fam.fragments(2000, 1232, 1)[0]);
            EXPECT_TRUE(r.tx(r.ext1).empty()) << "the first fragment now starts over";
            EXPECT_TRUE(r.sessions().empty());
            EXPECT_TRUE(r.sessions6().empty());
        }
        {
            SCOPED_TRACE("an empty fragment");
            Rig& r = start(dual_stack());
            r.process(r.pods, fam.empty());
            EXPECT_EQ(r.drops(DropReason::fragment), 1u);
            EXPECT_EQ(r.total_drops(), 1u);
            EXPECT_EQ(r.w().counters.fragments_in, 0u);
            EXPECT_EQ(r.mbufs_in_use(), 0);
        }
        {
            SCOPED_TRACE("overlapping fragments");
            Rig& r = start(dual_stack());
            std::vector<Bytes> f = fam.overlapping();
            r.process(0, burst(r.pods, f));
            EXPECT_TRUE(r.tx(r.ext1).empty());
            EXPECT_EQ(r.drops(DropReason::fragment), f.size()) << "both, at once";
            EXPECT_EQ(r.w().counters.reassembled, 0u);
            EXPECT_EQ(r.mbufs_in_use(), 0);
        }
        {
            SCOPED_TRACE("more fragments than the table holds");
            Rig& r = start(dual_stack());
            std::vector<Bytes> f = fam.fragments(8 * (dp::kMaxFragmentsPerDatagram + 1) * 8, 64, 1);
            ASSERT_GT(f.size(), dp::kMaxFragmentsPerDatagram);
            r.process(0, burst(r.pods, f));
            EXPECT_TRUE(r.tx(r.ext1).empty());
            EXPECT_GE(r.drops(DropReason::fragment), dp::kMaxFragmentsPerDatagram);
            r.drain_all();
            EXPECT_EQ(r.drops(DropReason::fragment) + r.drops(DropReason::fragment_timeout), f.size())
                << "every fragment dropped, once";
        }
        {
            SCOPED_TRACE("the table full");
            RigOptions o = dual_stack();
            auto base = o.configure;
            o.configure = [base](config::Config& c) {
                base(c);
                c.reassembly.max_per_source = c.reassembly.max_datagrams;
            };
            Rig& r = start(o);
            const unsigned n = r.cfg.reassembly.max_datagrams + 40;
            for (unsigned k = 0; k < n; ++k)
                r.process(r.pods, fam.fragments(1600, 1232, k)[0]);
            EXPECT_TRUE(r.tx(r.ext1).empty());
            EXPECT_GE(r.drops(DropReason::reassembly_table_full), 40u);
            EXPECT_LE(r.mbufs_in_use(), static_cast<int64_t>(r.cfg.reassembly.max_datagrams));
            r.drain_all();
            EXPECT_EQ(r.drops(DropReason::reassembly_table_full) + r.drops(DropReason::fragment_timeout), n);
        }
        {
            SCOPED_TRACE("one source's share");
            Rig& r = start(dual_stack());
            const unsigned n = r.cfg.reassembly.max_datagrams;
            for (unsigned k = 0; k < n; ++k)
                r.process(r.pods, fam.fragments(1600, 1232, k)[0]);
            EXPECT_EQ(r.drops(DropReason::reassembly_source_limit), n - r.cfg.reassembly.per_source());
            EXPECT_EQ(r.mbufs_in_use(), static_cast<int64_t>(r.cfg.reassembly.per_source()));
            r.drain_all();
            EXPECT_EQ(r.drops(DropReason::fragment_timeout), r.cfg.reassembly.per_source());
        }
    }
}

// The configured limits for IPv6, as ConfiguredReassemblyLimitsHold for IPv4: three fragments
// pass, four are put together and dropped, the table holds 16, the timeout is 50 ms.
TEST_F(DataplaneTest, ConfiguredReassemblyLimitsHoldForIpv6) {
    RigOptions o = dual_stack();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        c.reassembly = {.max_datagrams = 16, .max_fragments = 3, .timeout_ms = 50, .max_per_source = 16};
    };
    Rig& r = start(o);
    const uint64_t ms = rte_get_tsc_hz() / 1000;
    Bytes three = udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(2400));
    std::vector<Bytes> f3 = fragments6(three, 1000, 1);
    ASSERT_EQ(f3.size(), 3u);
    r.process(0, burst(r.pods, from_pod6_all(kPod10v6, {f3[2], f3[0], f3[1]})));
    const Bytes translated = udp6_ip(kIngressV6, 40000, kServerV6, 53, pattern(2400), Ip6Opt{63});
    EXPECT_EQ(whole6(r.tx(r.ext1), 1280), translated);
    EXPECT_EQ(r.total_drops(), 0u);

    std::vector<Bytes> f4 = fragments6(udp6_ip(kPod10v6, 40001, kServerV6, 53, pattern(2400)), 800, 2);
    ASSERT_EQ(f4.size(), 4u);
    r.process(0, burst(r.pods, from_pod6_all(kPod10v6, f4)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::fragment), 1u);
    EXPECT_EQ(r.w().counters.reassembled, 2u);
    EXPECT_EQ(r.mbufs_in_use(), 0);
    r.process(0, burst(r.pods, from_pod6_all(kPod10v6, {f3[1], f3[2], f3[0]})));
    EXPECT_EQ(whole6(r.tx(r.ext1), 1280), translated) << "three fragments still pass";

    for (unsigned k = 0; k < 26; ++k)
        r.process(r.pods, from_pod6(kPod10v6, fragments6(udp6_ip(kPod10v6, 40000, kServerV6, 53, pattern(1600)), 1232,
                                                         100 + k)[0]));
    EXPECT_LE(r.mbufs_in_use(), 16);
    EXPECT_EQ(r.drops(DropReason::fragment), 1u);
    uint64_t refused = r.drops(DropReason::reassembly_table_full);
    EXPECT_GE(refused, 10u);
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

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

// A UDP port of kPod10 whose flow to kServer:4500 worker `want` of the rig owns (flow_owner.h).
uint16_t pod_port_owned_by(const Rig& r, unsigned want) {
    for (uint16_t port = 40000;; ++port) {
        dp::FlowKey k{nbo32(kPod10), nbo32(kServer), nbo16(port), nbo16(4500), IPPROTO_UDP, {}};
        if (dp::flow_owner(r.shared.flow_owners, k) == want) return port;
    }
}

// One UDP flow of small and fragmented datagrams (IKE, WireGuard, DNS with EDNS), with two workers:
// a NIC's RSS gives the small ones to the queue of their 4-tuple, the fragments to the queue of
// their addresses alone. Each datagram put together from fragments goes to the worker that owns
// the flow by its key, so the flow has one session and one NAT port whatever worker received what;
// the owner receiving a small datagram hands nothing off.
TEST_F(DataplaneTest, UdpFlowOfSmallAndFragmentedDatagramsHasOneSessionOnTwoWorkers) {
    RigOptions o;
    o.workers = 2;
    Rig& r = start(o);
    for (unsigned owner : {0u, 1u}) {
        SCOPED_TRACE(owner);
        const unsigned other = 1 - owner;
        const uint16_t sport = pod_port_owned_by(r, owner);
        const uint64_t handed_before = r.w(other).counters.handed_off;
        const uint64_t owner_handed = r.w(owner).counters.handed_off;
        const uint64_t reassembled = r.w(other).counters.reassembled;
        // A small datagram on the owner: its session, no hand-off.
        r.process(owner, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, sport, kServer, 4500, pattern(40)))}});
        EXPECT_EQ(r.w(owner).counters.handed_off, owner_handed);
        Parsed small = single(r.tx(r.ext1));
        ASSERT_TRUE(checksums_valid(small));
        // A large one in fragments on the other worker: put together there, handed to the owner.
        Bytes payload = pattern(2000, owner);
        std::vector<In> frags;
        for (const Bytes& f : fragments(udp_ip(kPod10, sport, kServer, 4500, payload, IpOpt{.id = 0x4242}), 1480))
            frags.push_back(In{r.pods, r.from_pod(kPod10, f)});
        ASSERT_EQ(frags.size(), 2u);
        r.process(other, frags);
        EXPECT_TRUE(r.tx(r.ext1).empty()) << "the non-owner translates nothing";
        EXPECT_EQ(r.w(other).counters.handed_off, handed_before + 1) << "one datagram, handed off whole";
        EXPECT_EQ(r.w(other).counters.reassembled, reassembled + 1);
        r.poll(owner);
        Bytes d = whole(r.tx(r.ext1));
        EXPECT_EQ(d, udp_ip(kIngress, small.sport, kServer, 4500, payload, IpOpt{.ttl = 63, .id = 0x4242}))
            << "the small datagram's NAT port";
        EXPECT_TRUE(checksums_valid(parse_ipv4(d.data(), d.size())));
        // Another small one, received by the non-owner this time: handed off, the same port.
        r.process(other, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, sport, kServer, 4500, pattern(30)))}});
        EXPECT_EQ(r.w(other).counters.handed_off, handed_before + 2);
        r.poll(owner);
        EXPECT_EQ(single(r.tx(r.ext1)).sport, small.sport);
        EXPECT_EQ(r.w(owner).counters.handed_off, owner_handed);
        // One session, the owner's.
        unsigned on_owner = 0;
        for (const dp::Session& s : r.sessions(owner))
            on_owner += s.pod_port == nbo16(sport);
        EXPECT_EQ(on_owner, 1u);
        for (const dp::Session& s : r.sessions(other))
            EXPECT_NE(s.pod_port, nbo16(sport)) << "a second session on the worker that got the fragments";
    }
    EXPECT_EQ(r.w(0).counters.sessions_created + r.w(1).counters.sessions_created, 2u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

}  // namespace
}  // namespace egw::test
