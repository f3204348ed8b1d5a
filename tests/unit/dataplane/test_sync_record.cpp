// SPDX-License-Identifier: Apache-2.0
//
// The workers' session sync hooks (dataplane/sync_record.h): a session's creation and its
// deletion each put one event in the worker's ring, with the session's tuple and expiry; a full
// ring drops and counts without disturbing the packet; without a ring nothing is recorded.
#include <gtest/gtest.h>

#include <cstring>

#include "dataplane/sync_events.h"
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

}  // namespace
}  // namespace egw::test
