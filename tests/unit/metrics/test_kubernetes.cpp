// SPDX-License-Identifier: Apache-2.0
//
// The kubernetes source's families (control/metrics/kubernetes.h) from hand-made reflector and
// election states: every series with its exact value, restart reasons kept apart, relists not
// counting the first list, the last-sync series absent before a list, and the follower's zeros.
#include "control/metrics/kubernetes.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace {

using namespace egw::metrics;

// "name{labels} value" -> value, and the HELP/TYPE lines counted per family.
struct Parsed {
    std::map<std::string, std::string> samples;
    std::map<std::string, int> help, type;
};

Parsed parse(const std::string& text) {
    Parsed p;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("# HELP ", 0) == 0) {
            ++p.help[line.substr(7, line.find(' ', 7) - 7)];
        } else if (line.rfind("# TYPE ", 0) == 0) {
            ++p.type[line.substr(7, line.find(' ', 7) - 7)];
        } else if (!line.empty()) {
            size_t sp = line.rfind(' ');
            EXPECT_TRUE(p.samples.emplace(line.substr(0, sp), line.substr(sp + 1)).second) << "twice: " << line;
        }
    }
    return p;
}

egw::k8s::ReflectorStatus resource(const std::string& plural) {
    egw::k8s::ReflectorStatus r;
    r.name = plural;
    r.resource = plural;
    return r;
}

std::string render(const std::vector<egw::k8s::ReflectorStatus>& rs, const egw::k8s_source::ControllerStats& st) {
    std::string out;
    Writer w(out);
    write_kubernetes(w, rs, st);
    EXPECT_EQ(w.error(), "");
    return out;
}

TEST(KubernetesFamilies, EveryResourceSeriesCarriesItsOwnCounter) {
    auto svc = resource("egressservices");
    svc.synced = true;
    svc.watching = true;
    svc.lists = 3;
    svc.list_failures = 2;
    svc.watch_closed = 5;
    svc.expired = 2;
    svc.watch_failures = 7;
    svc.events = 11;
    svc.bookmarks = 13;
    svc.current_until = 1700000000.5;
    auto leases = resource("leases");
    leases.name = "leases in egw";

    Parsed p = parse(render({svc, leases}, {}));
    const auto& s = p.samples;
    EXPECT_EQ(s.at("egw_k8s_synced{resource=\"egressservices\"}"), "1");
    EXPECT_EQ(s.at("egw_k8s_synced{resource=\"leases\"}"), "0");
    EXPECT_EQ(s.at("egw_k8s_watch_open{resource=\"egressservices\"}"), "1");
    EXPECT_EQ(s.at("egw_k8s_watch_open{resource=\"leases\"}"), "0");
    EXPECT_EQ(s.at("egw_k8s_watch_restarts_total{resource=\"egressservices\",reason=\"closed\"}"), "5");
    EXPECT_EQ(s.at("egw_k8s_watch_restarts_total{resource=\"egressservices\",reason=\"expired\"}"), "2");
    EXPECT_EQ(s.at("egw_k8s_watch_restarts_total{resource=\"egressservices\",reason=\"error\"}"), "7");
    EXPECT_EQ(s.at("egw_k8s_watch_restarts_total{resource=\"leases\",reason=\"error\"}"), "0");
    EXPECT_EQ(s.at("egw_k8s_relists_total{resource=\"egressservices\"}"), "2");  // the first list is not a relist
    EXPECT_EQ(s.at("egw_k8s_relists_total{resource=\"leases\"}"), "0");          // never listed: not -1
    EXPECT_EQ(s.at("egw_k8s_list_failures_total{resource=\"egressservices\"}"), "2");
    EXPECT_EQ(s.at("egw_k8s_watch_events_total{resource=\"egressservices\"}"), "11");
    EXPECT_EQ(s.at("egw_k8s_watch_bookmarks_total{resource=\"egressservices\"}"), "13");
    EXPECT_EQ(s.at("egw_k8s_last_sync_timestamp_seconds{resource=\"egressservices\"}"), "1700000000.5");
    EXPECT_EQ(s.count("egw_k8s_last_sync_timestamp_seconds{resource=\"leases\"}"), 0u)
        << "a resource never listed has no last-sync time rather than 1970";
    // The resource label is the plural alone, not the reflector's display name.
    for (const auto& [series, value] : s)
        EXPECT_EQ(series.find("leases in egw"), std::string::npos) << series;
    for (const auto& [family, n] : p.type) {
        EXPECT_EQ(n, 1) << family;
        EXPECT_EQ(p.help[family], 1) << family;
    }
}

TEST(KubernetesFamilies, LeaderStateAndWriteBacks) {
    egw::k8s_source::ControllerStats st;
    st.leader = true;
    st.leader_transitions = 2;
    st.live_nodes = 3;
    st.allocations = 4;
    st.lease_renewals = 50;
    st.status_writes = 6;
    st.label_writes = 8;
    st.status_write_failures = 1;
    st.label_write_failures = 9;
    st.write_failures = 10;
    const auto s = parse(render({}, st)).samples;
    EXPECT_EQ(s.at("egw_leader"), "1");
    EXPECT_EQ(s.at("egw_leader_transitions_total"), "2");
    EXPECT_EQ(s.at("egw_election_live_gateways"), "3");
    EXPECT_EQ(s.at("egw_election_assigned_services"), "4");
    EXPECT_EQ(s.at("egw_election_lease_renewals_total"), "50");
    EXPECT_EQ(s.at("egw_k8s_writes_total{object=\"status\"}"), "6");
    EXPECT_EQ(s.at("egw_k8s_writes_total{object=\"node_labels\"}"), "8");
    EXPECT_EQ(s.at("egw_k8s_write_failures_total{object=\"status\"}"), "1");
    EXPECT_EQ(s.at("egw_k8s_write_failures_total{object=\"node_labels\"}"), "9");
}

TEST(KubernetesFamilies, AFollowerReportsNoElectionViewOfItsOwn) {
    egw::k8s_source::ControllerStats st;
    st.leader = false;
    st.leader_transitions = 1;  // it led once
    st.live_nodes = 3;          // what it saw while it led
    st.allocations = 4;
    const auto s = parse(render({}, st)).samples;
    EXPECT_EQ(s.at("egw_leader"), "0");
    EXPECT_EQ(s.at("egw_leader_transitions_total"), "1");
    EXPECT_EQ(s.at("egw_election_live_gateways"), "0");
    EXPECT_EQ(s.at("egw_election_assigned_services"), "0");
}

TEST(KubernetesFamilies, FamiliesAppearBeforeAnyResourceStarts) {
    // A scrape before the reflectors exist still declares every family (dashboards show 0, not
    // "no data" for a missing name), and writes no per-resource series.
    Parsed p = parse(render({}, {}));
    for (const char* family : {"egw_k8s_synced", "egw_k8s_watch_open", "egw_k8s_watch_restarts_total",
                               "egw_k8s_relists_total", "egw_k8s_list_failures_total", "egw_k8s_watch_events_total",
                               "egw_k8s_watch_bookmarks_total", "egw_k8s_last_sync_timestamp_seconds", "egw_leader"})
        EXPECT_EQ(p.type.count(family), 1u) << family;
    for (const auto& [series, value] : p.samples)
        EXPECT_EQ(series.find("resource="), std::string::npos) << series;
}

}  // namespace
