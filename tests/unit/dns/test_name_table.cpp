// SPDX-License-Identifier: Apache-2.0
//
// The resolver's bookkeeping (control/dns/name_table.h) on a clock of the test's own: TTL
// clamping, re-query times, addresses held through failures until they expire, change detection,
// and the state changes that are logged once.
#include "control/dns/name_table.h"

#include <gtest/gtest.h>

namespace {

using namespace egw::dns;
using namespace std::chrono_literals;
using egw::net::IpAddr;
using egw::net::parse_ip;

IpAddr ip(const char* s) {
    return *parse_ip(s);
}

TtlPolicy policy() {
    TtlPolicy p;
    p.floor = 5s;
    p.ceiling = 1800s;
    p.negative = 30s;
    p.retry_first = 2s;
    p.retry_max = 10s;
    return p;
}

std::vector<IpAddr> addresses(const NameTable& t, const std::string& name) {
    const Snapshot s = t.snapshot();
    std::vector<IpAddr> out;
    for (const ResolvedAddress& a : s.at(name).addresses)
        out.push_back(a.address);
    return out;
}

const Clock::time_point t0 = Clock::time_point{} + 1000s;

TEST(TtlPolicy, ClampsToFloorAndCeiling) {
    const TtlPolicy p = policy();
    EXPECT_EQ(p.clamp(0), 5s);
    EXPECT_EQ(p.clamp(4), 5s);
    EXPECT_EQ(p.clamp(5), 5s);
    EXPECT_EQ(p.clamp(300), 300s);
    EXPECT_EQ(p.clamp(1800), 1800s);
    EXPECT_EQ(p.clamp(86400), 1800s);
    EXPECT_EQ(p.clamp(UINT32_MAX), 1800s);
}

TEST(NameTable, NewNamesAreDueOnceForEachRecordType) {
    NameTable t(policy());
    EXPECT_FALSE(t.set_names({"b.example", "a.example", "a.example"}, t0));
    auto due = t.take_due(t0);
    ASSERT_EQ(due.size(), 4u);
    EXPECT_EQ(due[0], std::make_pair(std::string("a.example"), RecordType::a));
    EXPECT_EQ(due[1], std::make_pair(std::string("a.example"), RecordType::aaaa));
    EXPECT_EQ(due[3], std::make_pair(std::string("b.example"), RecordType::aaaa));
    // In flight: not handed out again, and not a deadline.
    EXPECT_TRUE(t.take_due(t0 + 1h).empty());
    EXPECT_FALSE(t.next_deadline().has_value());
    const Snapshot s = t.snapshot();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s.at("a.example").a, LookupState::pending);
    EXPECT_TRUE(s.at("a.example").addresses.empty());
}

TEST(NameTable, AnswerSetsAddressesRequeryAtSmallestClampedTtlAndExpiryAtTwice) {
    NameTable t(policy());
    t.set_names({"web.example"}, t0);
    t.take_due(t0);
    EXPECT_TRUE(t.answered("web.example", RecordType::a, {{ip("192.0.2.7"), 60}, {ip("192.0.2.3"), 1}}, t0));
    EXPECT_TRUE(t.answered("web.example", RecordType::aaaa, {{ip("2001:db8::1"), 120}}, t0));
    const NameStatus s = t.snapshot().at("web.example");
    ASSERT_EQ(s.addresses.size(), 3u);
    // Sorted by address, IPv4 first; each expires two clamped TTLs after the answer.
    EXPECT_EQ(s.addresses[0], (ResolvedAddress{ip("192.0.2.3"), t0 + 10s}));  // TTL 1 -> floor 5
    EXPECT_EQ(s.addresses[1], (ResolvedAddress{ip("192.0.2.7"), t0 + 120s}));
    EXPECT_EQ(s.addresses[2], (ResolvedAddress{ip("2001:db8::1"), t0 + 240s}));
    EXPECT_EQ(s.a, LookupState::resolved);
    EXPECT_EQ(s.aaaa, LookupState::resolved);
    EXPECT_EQ(s.error, "");
    // The A query is due at its smallest clamped TTL, the AAAA one at its own.
    EXPECT_EQ(t.next_deadline(), t0 + 5s);
    EXPECT_TRUE(t.take_due(t0 + 4s).empty());
    auto due = t.take_due(t0 + 5s);
    ASSERT_EQ(due.size(), 1u);
    EXPECT_EQ(due[0].second, RecordType::a);
    EXPECT_TRUE(t.take_due(t0 + 119s).empty());
    EXPECT_EQ(t.take_due(t0 + 120s).size(), 1u);
}

TEST(NameTable, ChangeIsReportedOnlyWhenTheSetOfAddressesChanges) {
    NameTable t(policy());
    t.set_names({"web.example"}, t0);
    t.take_due(t0);
    EXPECT_TRUE(t.answered("web.example", RecordType::a, {{ip("192.0.2.1"), 60}, {ip("192.0.2.2"), 60}}, t0));
    t.take_due(t0 + 60s);
    // The same addresses in another order and with other TTLs: no change, new expiries.
    EXPECT_FALSE(t.answered("web.example", RecordType::a, {{ip("192.0.2.2"), 30}, {ip("192.0.2.1"), 90}}, t0 + 60s));
    EXPECT_EQ(t.snapshot().at("web.example").addresses[0].expires, t0 + 60s + 180s);
    t.take_due(t0 + 90s);
    // One address replaced: a change, and the old one is gone at once.
    EXPECT_TRUE(t.answered("web.example", RecordType::a, {{ip("192.0.2.2"), 60}, {ip("192.0.2.9"), 60}}, t0 + 90s));
    EXPECT_EQ(addresses(t, "web.example"), (std::vector<IpAddr>{ip("192.0.2.2"), ip("192.0.2.9")}));
    // An AAAA answer with no records changes nothing.
    EXPECT_FALSE(t.answered("web.example", RecordType::aaaa, {}, t0 + 90s));
}

TEST(NameTable, NxdomainIsAnAnswerWithNoAddresses) {
    NameTable t(policy());
    t.set_names({"gone.example"}, t0);
    t.take_due(t0);
    EXPECT_TRUE(t.answered("gone.example", RecordType::a, {{ip("192.0.2.1"), 60}}, t0));
    t.take_due(t0 + 60s);
    EXPECT_TRUE(t.answered("gone.example", RecordType::a, {}, t0 + 60s));
    const NameStatus s = t.snapshot().at("gone.example");
    EXPECT_TRUE(s.addresses.empty());
    EXPECT_EQ(s.a, LookupState::no_records);
    // Asked again after the negative interval.
    EXPECT_TRUE(t.take_due(t0 + 89s).empty());
    EXPECT_EQ(t.take_due(t0 + 90s).size(), 1u);
}

TEST(NameTable, FailureKeepsAddressesUntilTheyExpireThenNone) {
    NameTable t(policy());
    t.set_names({"web.example"}, t0);
    t.take_due(t0);
    t.answered("web.example", RecordType::a, {{ip("192.0.2.1"), 60}}, t0);
    t.answered("web.example", RecordType::aaaa, {}, t0);
    t.take_changes();

    t.take_due(t0 + 60s);
    EXPECT_FALSE(t.failed("web.example", RecordType::a, "Connection refused", t0 + 60s));
    NameStatus s = t.snapshot().at("web.example");
    EXPECT_EQ(s.a, LookupState::failing);
    EXPECT_EQ(s.error, "Connection refused");
    EXPECT_EQ(addresses(t, "web.example"), std::vector<IpAddr>{ip("192.0.2.1")});

    // Retries back off from retry_first, doubling, up to retry_max.
    Clock::time_point now = t0 + 60s;
    for (auto wait : {2s, 4s, 8s, 10s, 10s}) {
        EXPECT_TRUE(t.take_due(now + wait - 1s).empty()) << wait.count();
        ASSERT_EQ(t.take_due(now + wait).size(), 1u) << wait.count();
        now += wait;
        EXPECT_FALSE(t.failed("web.example", RecordType::a, "Timeout while contacting DNS servers", now));
    }
    // Still held: the answer at t0 holds until t0 + 120 s.
    EXPECT_FALSE(t.expire(t0 + 119s));
    EXPECT_EQ(addresses(t, "web.example").size(), 1u);
    EXPECT_TRUE(t.expire(t0 + 120s));
    EXPECT_TRUE(addresses(t, "web.example").empty());
    EXPECT_FALSE(t.expire(t0 + 121s));

    // Logged: the move to failing once (with the first error and the addresses kept), and the
    // expiry once; the repeated failures are not news.
    auto changes = t.take_changes();
    ASSERT_EQ(changes.size(), 2u);
    EXPECT_EQ(changes[0].from, LookupState::resolved);
    EXPECT_EQ(changes[0].to, LookupState::failing);
    EXPECT_EQ(changes[0].addresses, 1u);
    EXPECT_EQ(changes[0].error, "Connection refused");
    EXPECT_EQ(changes[1].from, LookupState::failing);
    EXPECT_EQ(changes[1].to, LookupState::failing);
    EXPECT_EQ(changes[1].addresses, 0u);

    // A good answer again ends the failure and the backoff.
    t.take_due(now + 10s);
    EXPECT_TRUE(t.answered("web.example", RecordType::a, {{ip("192.0.2.5"), 60}}, now + 10s));
    s = t.snapshot().at("web.example");
    EXPECT_EQ(s.a, LookupState::resolved);
    EXPECT_EQ(s.error, "");
    changes = t.take_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].to, LookupState::resolved);
}

TEST(NameTable, NextDeadlineIsTheEarliestQueryOrExpiry) {
    NameTable t(policy());
    t.set_names({"web.example"}, t0);
    EXPECT_EQ(t.next_deadline(), t0);
    t.take_due(t0);
    t.answered("web.example", RecordType::a, {{ip("192.0.2.1"), 100}}, t0);
    EXPECT_EQ(t.next_deadline(), t0 + 100s);  // the AAAA query is in flight
    t.take_due(t0 + 100s);                    // the A re-query in flight too
    EXPECT_EQ(t.next_deadline(), t0 + 200s);  // only the expiry is left
}

TEST(NameTable, ForgettingANameWithAddressesIsAChangeAndLateAnswersAreIgnored) {
    NameTable t(policy());
    t.set_names({"a.example", "b.example"}, t0);
    t.take_due(t0);
    t.answered("a.example", RecordType::a, {{ip("192.0.2.1"), 60}}, t0);
    EXPECT_FALSE(t.set_names({"a.example"}, t0));  // b had nothing
    EXPECT_FALSE(t.answered("b.example", RecordType::a, {{ip("192.0.2.2"), 60}}, t0));
    EXPECT_FALSE(t.failed("b.example", RecordType::aaaa, "Timeout", t0));
    EXPECT_EQ(t.snapshot().count("b.example"), 0u);
    EXPECT_TRUE(t.set_names({}, t0));  // a had an address
    EXPECT_TRUE(t.snapshot().empty());
}

}  // namespace
