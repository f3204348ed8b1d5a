// SPDX-License-Identifier: Apache-2.0
//
// The workers' session sync hooks (dataplane/sync_record.h): a session's creation and its
// deletion each put one event in the worker's ring, with the session's tuple and expiry; a full
// ring drops and counts without disturbing the packet; without a ring nothing is recorded. And
// the peers' NAT ports (port_reservations.h): a new flow is never given one.
#include <gtest/gtest.h>

#include <cstring>

#include "dataplane/publish.h"
#include "dataplane/sync_events.h"
#include "dataplane/tables/port_reservations.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;

std::vector<dp::SyncEvent> drain(dp::SyncEventRing& ring) {
    std::vector<dp::SyncEvent> out(ring.capacity());
    out.resize(ring.pop(out.data(), out.size()));
    return out;
}

uint32_t v4_of(const uint8_t* a) {
    uint32_t v;
    std::memcpy(&v, a, 4);
    return v;
}

TEST_F(DataplaneTest, SyncEventsOnSessionCreateAndExpiry) {
    Rig& r = start();
    dp::SyncEventRing ring(16);
    r.w().sync_events = &ring;
    r.shared.timeouts.udp = 5000;
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 5353, kServer, 53, Bytes(8, 'q'))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    auto ev = drain(ring);
    ASSERT_EQ(ev.size(), 1u);
    const dp::SyncEvent& c = ev[0];
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(c.kind, dp::SyncEventKind::create);
    EXPECT_EQ(c.family, 4);
    EXPECT_EQ(c.proto, kProtoUdp);
    EXPECT_EQ(v4_of(c.inside_addr), nbo32(kPod10));
    EXPECT_EQ(v4_of(c.outside_addr), nbo32(kIngress));
    EXPECT_EQ(v4_of(c.remote_addr), nbo32(kServer));
    EXPECT_EQ(c.inside_port, nbo16(5353));
    EXPECT_EQ(c.outside_port, ss[0].nat_port);
    EXPECT_EQ(c.remote_port, nbo16(53));
    EXPECT_EQ(c.service_id, r.service_id(kWeb));
    EXPECT_EQ(c.vrf, ss[0].vrf);
    EXPECT_EQ(c.expires_tsc, ss[0].last_seen + 5000);

    // A second packet of the same flow is the established path: no event.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 5353, kServer, 53, Bytes(8, 'q'))));
    EXPECT_TRUE(drain(ring).empty());

    r.advance(6000);
    r.sweep();
    EXPECT_TRUE(r.sessions().empty());
    ev = drain(ring);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].kind, dp::SyncEventKind::remove);
    EXPECT_EQ(v4_of(ev[0].inside_addr), nbo32(kPod10));
    EXPECT_EQ(ev[0].inside_port, nbo16(5353));
    EXPECT_EQ(ring.dropped(), 0u);
    r.w().sync_events = nullptr;
}

TEST_F(DataplaneTest, AFullSyncRingDropsTheEventNotThePacket) {
    Rig& r = start();
    dp::SyncEventRing ring(2);
    r.w().sync_events = &ring;
    for (uint16_t port = 6000; port < 6005; ++port)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, port, kServer, 53, Bytes(8, 'q'))));
    EXPECT_EQ(r.tx(r.ext1).size(), 5u) << "every packet forwarded";
    EXPECT_EQ(r.sessions().size(), 5u);
    EXPECT_EQ(ring.dropped(), 3u);
    EXPECT_EQ(drain(ring).size(), 2u);
    r.w().sync_events = nullptr;
}

TEST_F(DataplaneTest, WithoutASyncRingNothingIsRecorded) {
    Rig& r = start();
    EXPECT_EQ(r.w().sync_events, nullptr) << "sync is off unless the control thread gives a ring";
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 7000, kServer, 53, Bytes(8, 'q'))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
}

// A peer's session holds 192.0.2.50:5353 toward 192.0.2.100:53 (UDP): a pod's flow that would
// keep its own port 5353 gets another one, a reply to it finds the session, and the same port
// toward another remote port, or over TCP, is still the pod's own (endpoint-dependent NAT).
TEST_F(DataplaneTest, APeersReservedPortIsNeverGivenToALocalFlow) {
    Rig& r = start();
    dp::FlowKey peer{nbo32(kServer), nbo32(kIngress), nbo16(53), nbo16(5353), kProtoUdp, {}};
    dp::PortReservations reservations({peer}, {});
    ASSERT_TRUE(reservations.reserved(peer));
    EXPECT_EQ(dp::publish_reservations(r.shared, &reservations), nullptr);

    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 5353, kServer, 53, Bytes(8, 'q'))));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    Parsed p = parse_frame(out[0]);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.src, kIngress);
    EXPECT_NE(p.sport, 5353) << "the peer's port went to a local flow";
    EXPECT_TRUE(p.l4_csum_ok);
    auto ss = r.sessions();
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_EQ(ss[0].nat_port, nbo16(p.sport));

    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, p.sport, Bytes(4, 'a'))));
    auto back = r.tx(r.pods);
    ASSERT_EQ(back.size(), 1u);
    Parsed b = parse_frame(back[0]);
    EXPECT_EQ(b.dst, kPod10);
    EXPECT_EQ(b.dport, 5353);
    EXPECT_TRUE(b.l4_csum_ok);

    r.process(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 5353, kServer, 54, Bytes(8, 'q'))));
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(parse_frame(out[0]).sport, 5353) << "another remote port is another outside key";

    // Taken back (the standby session aged): the port is the pod's own again.
    EXPECT_EQ(dp::publish_reservations(r.shared, nullptr), &reservations);
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 5353, kServer, 53, Bytes(8, 'q'))));
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(parse_frame(out[0]).sport, 5353);
}

TEST(PortReservations, FindsEveryKeyAndNoOther) {
    std::vector<dp::FlowKey> v4;
    std::vector<dp::FlowKey6> v6;
    for (uint16_t port = 1024; port < 3024; ++port) {
        v4.push_back(dp::FlowKey{nbo32(kServer), nbo32(kIngress), nbo16(443), nbo16(port), kProtoTcp, {}});
        dp::FlowKey6 k{};
        k.src[0] = 0x20;
        k.dst[15] = 1;
        k.sport = nbo16(443);
        k.dport = nbo16(port);
        k.proto = kProtoTcp;
        v6.push_back(k);
    }
    v4.push_back(v4[0]);  // a duplicate counts once
    dp::PortReservations set(v4, v6);
    EXPECT_EQ(set.size(), 4000u);
    for (size_t i = 0; i + 1 < v4.size(); ++i) {
        EXPECT_TRUE(set.reserved(v4[i]));
        EXPECT_TRUE(set.reserved(v6[i]));
        dp::FlowKey other = v4[i];
        other.proto = kProtoUdp;
        EXPECT_FALSE(set.reserved(other));
        dp::FlowKey6 other6 = v6[i];
        other6.sport = nbo16(444);
        EXPECT_FALSE(set.reserved(other6));
    }
    dp::PortReservations empty({}, {});
    EXPECT_FALSE(empty.reserved(v4[0]));
}

}  // namespace
}  // namespace egw::test
