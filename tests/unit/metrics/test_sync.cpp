// SPDX-License-Identifier: Apache-2.0
//
// Session sync's families (control/metrics/sync.h) from a hand-made SyncServiceStats: every
// series with its exact value, the acknowledgement lag as a cumulative histogram, refusals and
// dropped events by reason, standby sessions per Service address.
#include "control/metrics/sync.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace {

using namespace egw::metrics;
using namespace egw::sync;

std::map<std::string, std::string> samples(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty() && line[0] != '#') {
            size_t sp = line.rfind(' ');
            EXPECT_TRUE(out.emplace(line.substr(0, sp), line.substr(sp + 1)).second) << "twice: " << line;
        }
    return out;
}

TEST(SyncFamilies, EverySeriesCarriesItsOwnValue) {
    SyncServiceStats s;
    s.events_out = 10;
    s.events_in = 20;
    s.datagrams_out = 3;
    s.datagrams_in = 4;
    s.bytes_out = 500;
    s.bytes_in = 600;
    s.ring_drops = 7;
    s.refused[static_cast<size_t>(Refusal::bad_tag)] = 2;
    s.refused[static_cast<size_t>(Refusal::replayed)] = 1;
    SyncPeerStatus p;
    p.id = 2;
    p.alive = true;
    p.unacknowledged = 5;
    p.link.resent = 8;
    p.link.lost = 9;
    p.link.lost_announced = 11;
    p.link.ack_lag[0] = 4;  // <= 1 ms
    p.link.ack_lag[9] = 1;  // <= 1 s
    p.link.ack_lag_seconds = 1.002;
    p.bulk_complete = true;
    s.peers = {p};
    s.bulk_queued = 30;
    s.bulk_sent = 25;
    s.standby_sessions = 3;
    s.standby_max = 100;
    s.standby.created = 4;
    s.standby.removed = 1;
    s.standby.full = 12;
    s.standby.stale_epoch = 13;
    s.standby_per_service[ipv4_address(0xC6336407)] = 2;
    s.standby_per_service[ipv4_address(0xC6336408)] = 1;
    s.reserved_ports = 3;
    s.port_conflicts = 1;

    std::string text;
    Writer w(text);
    write_sync(w, s);
    ASSERT_EQ(w.error(), "");
    auto m = samples(text);
    EXPECT_EQ(m["egw_sync_events_total{direction=\"out\"}"], "10");
    EXPECT_EQ(m["egw_sync_events_total{direction=\"in\"}"], "20");
    EXPECT_EQ(m["egw_sync_datagrams_total{direction=\"in\"}"], "4");
    EXPECT_EQ(m["egw_sync_bytes_total{direction=\"out\"}"], "500");
    EXPECT_EQ(m["egw_sync_peer_up{peer=\"2\"}"], "1");
    EXPECT_EQ(m["egw_sync_resent_datagrams_total{peer=\"2\"}"], "8");
    EXPECT_EQ(m["egw_sync_lost_datagrams_total{peer=\"2\",direction=\"in\"}"], "9");
    EXPECT_EQ(m["egw_sync_lost_datagrams_total{peer=\"2\",direction=\"out\"}"], "11");
    EXPECT_EQ(m["egw_sync_unacknowledged_datagrams{peer=\"2\"}"], "5");
    EXPECT_EQ(m["egw_sync_ack_lag_seconds_bucket{peer=\"2\",le=\"0.001\"}"], "4");
    EXPECT_EQ(m["egw_sync_ack_lag_seconds_bucket{peer=\"2\",le=\"0.5\"}"], "4");
    EXPECT_EQ(m["egw_sync_ack_lag_seconds_bucket{peer=\"2\",le=\"1\"}"], "5");
    EXPECT_EQ(m["egw_sync_ack_lag_seconds_bucket{peer=\"2\",le=\"+Inf\"}"], "5");
    EXPECT_EQ(m["egw_sync_ack_lag_seconds_count{peer=\"2\"}"], "5");
    EXPECT_EQ(m["egw_sync_refused_datagrams_total{reason=\"bad_tag\"}"], "2");
    EXPECT_EQ(m["egw_sync_refused_datagrams_total{reason=\"replayed\"}"], "1");
    EXPECT_EQ(m["egw_sync_refused_datagrams_total{reason=\"unknown_peer\"}"], "0");
    EXPECT_EQ(m["egw_sync_dropped_events_total{reason=\"ring_full\"}"], "7");
    EXPECT_EQ(m["egw_sync_dropped_events_total{reason=\"standby_full\"}"], "12");
    EXPECT_EQ(m["egw_sync_dropped_events_total{reason=\"stale_epoch\"}"], "13");
    EXPECT_EQ(m["egw_sync_standby_sessions{address=\"198.51.100.7\"}"], "2");
    EXPECT_EQ(m["egw_sync_standby_sessions{address=\"198.51.100.8\"}"], "1");
    EXPECT_EQ(m["egw_sync_standby_max_sessions"], "100");
    EXPECT_EQ(m["egw_sync_standby_changes_total{change=\"created\"}"], "4");
    EXPECT_EQ(m["egw_sync_standby_changes_total{change=\"removed\"}"], "1");
    EXPECT_EQ(m["egw_sync_reserved_ports"], "3");
    EXPECT_EQ(m["egw_sync_port_conflicts"], "1");
    EXPECT_EQ(m["egw_sync_bulk_complete{peer=\"2\"}"], "1");
    EXPECT_EQ(m["egw_sync_bulk_events_total{state=\"queued\"}"], "30");
    EXPECT_EQ(m["egw_sync_bulk_events_total{state=\"sent\"}"], "25");
}

TEST(SyncFamilies, WithoutPeersOrStandbyTheFamiliesStillAppear) {
    std::string text;
    Writer w(text);
    write_sync(w, SyncServiceStats{});
    ASSERT_EQ(w.error(), "");
    for (const char* f : {"egw_sync_peer_up", "egw_sync_ack_lag_seconds", "egw_sync_standby_sessions"})
        EXPECT_NE(text.find(std::string("# TYPE ") + f + " "), std::string::npos) << f;
}

}  // namespace
