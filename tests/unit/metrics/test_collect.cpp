// SPDX-License-Identifier: Apache-2.0
//
// Reading the workers' counters (control/metrics/state.h) and writing egwd's families
// (control/metrics/collect.h) from a hand-made ControlView and fake workers: sums across
// workers, baselines for reused Service ids, drops by reason, NAT address attribution, and a
// strict check of the whole exposition.
#include "control/metrics/collect.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

namespace {

using namespace egw::metrics;
namespace dp = egw::dp;

// Workers as the data plane lays them out, without EAL: only the counters are used.
struct FakeWorkers {
    std::vector<std::unique_ptr<dp::Worker>> owned;
    std::vector<std::vector<dp::ServiceCounters>> counters;
    std::vector<dp::Worker*> ptrs;

    explicit FakeWorkers(unsigned n) {
        counters.resize(n, std::vector<dp::ServiceCounters>(dp::kMaxServices));
        for (unsigned i = 0; i < n; ++i) {
            owned.push_back(std::make_unique<dp::Worker>());
            owned.back()->index = i;
            owned.back()->service_counters = counters[i].data();
            ptrs.push_back(owned.back().get());
        }
    }
    dp::Worker& operator[](unsigned i) { return *owned[i]; }
};

ServiceEntry service(uint32_t id, const std::string& ns, const std::string& name, uint32_t nat = 0) {
    ServiceEntry e;
    e.id = id;
    e.key = ns + "/" + name;
    e.ns = ns;
    e.name = name;
    e.source_ip_by = nat ? "LoadBalancerIP" : "Network";
    e.status_host = nat ? "gw-1" : "ALL";
    e.vrf = "default";
    e.programmed = true;
    e.serve_here = true;
    e.nat_address = nat;
    e.endpoints = 2;
    return e;
}

constexpr uint32_t kIngress = 0xc0000232;   // 192.0.2.50
constexpr uint32_t kPortAddr = 0xc0000201;  // 192.0.2.1
constexpr uint32_t kBlueAddr = 0xc6336401;  // 198.51.100.1

ControlView make_view() {
    ControlView v;
    v.generation = 3;
    v.last_publish_seconds = 0.0002;
    v.last_publish_unix = 1700000000.5;
    v.publish_duration = Histogram({0.001, 0.01});
    v.publish_duration.observe(0.0002);
    v.services = {service(2, "default", "db"), service(1, "default", "web", kIngress)};
    std::sort(v.services.begin(), v.services.end(), [](auto& a, auto& b) { return a.key < b.key; });
    v.ports = {PortEntry{"pods", "net_af_packet0", "inside", "default", 0},
               PortEntry{"ext1", "net_af_packet1", "outside", "default", 1}};
    v.nat_addresses = {NatAddressEntry{egw::net::IpAddr::from_v4(kPortAddr), "port", {0}, true},
                       NatAddressEntry{egw::net::IpAddr::from_v4(kIngress), "ingress_ip", {1}, true},
                       NatAddressEntry{egw::net::IpAddr::from_v4(kBlueAddr), "port", {}, false}};
    v.workers = {WorkerEntry{0, 1}, WorkerEntry{1, 3}};
    v.nat_ports = 64512;
    v.max_sessions = 65536;
    v.max_sessions_ipv6 = 4096;
    v.node = "gw-1";
    v.default_action = "masquerade";
    return v;
}

// A strict reader of text format 0.0.4: every sample belongs to the family declared just before
// it (HELP and TYPE once each), names and label names are valid, no series twice, values parse.
std::string check_exposition(const std::string& text) {
    static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))");
    static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
    static const std::regex sample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+))");
    static const std::regex label(R"(^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\"(,|$))");
    std::set<std::string> helps, types, series;
    std::map<std::string, std::string> type_of;
    std::string current;
    std::istringstream in(text);
    std::string line;
    if (text.empty() || text.back() != '\n') return "the exposition must end with a newline";
    while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_match(line, m, help)) {
            if (!helps.insert(m[1]).second) return "HELP twice for " + m[1].str();
            current = m[1];
        } else if (std::regex_match(line, m, type)) {
            if (!types.insert(m[1]).second) return "TYPE twice for " + m[1].str();
            if (m[1] != current) return "TYPE of " + m[1].str() + " not after its HELP";
            type_of[m[1]] = m[2];
        } else if (std::regex_match(line, m, sample)) {
            std::string name = m[1], family = name;
            if (type_of[current] == "histogram")
                for (const char* suffix : {"_bucket", "_sum", "_count"})
                    if (name == current + suffix) family = current;
            if (family != current || !type_of.count(family))
                return "sample " + name + " outside its family (current " + current + ")";
            if (type_of[family] == "counter" && !family.ends_with("_total"))
                return "counter " + family + " without _total";
            std::string rest = m[3];
            std::set<std::string> names;
            while (!rest.empty()) {
                std::smatch l;
                if (!std::regex_search(rest, l, label)) return "bad labels in: " + line;
                if (!names.insert(l[1]).second) return "label twice in: " + line;
                rest = l.suffix();
            }
            if (!series.insert(name + "{" + m[3].str() + "}").second) return "series twice: " + line;
            static const std::regex number(R"([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)");
            std::string value = m[4];
            if (value != "NaN" && value != "+Inf" && value != "-Inf" && !std::regex_match(value, number))
                return "bad value in: " + line;
        } else {
            return "unparsable line: " + line;
        }
    }
    return "";
}

TEST(Checker, CatchesWhatItShould) {
    EXPECT_EQ(check_exposition("# HELP egw_a_total a\n# TYPE egw_a_total counter\negw_a_total 1\n"), "");
    EXPECT_NE(check_exposition("egw_a 1\n"), "");
    EXPECT_NE(check_exposition("# HELP egw_a a\n# TYPE egw_a gauge\negw_a 1\negw_a 2\n"), "");
    EXPECT_NE(check_exposition("# HELP egw_a a\n# TYPE egw_a counter\negw_a 1\n"), "");
    EXPECT_NE(check_exposition("# HELP egw_a a\n# TYPE egw_a gauge\negw_a{x=\"1\",x=\"2\"} 1\n"), "");
    EXPECT_NE(check_exposition("# HELP egw_a a\n# TYPE egw_a gauge\negw_a{1x=\"1\"} 1\n"), "");
    EXPECT_NE(check_exposition("# HELP egw_a a\n# TYPE egw_a gauge\negw_a one\n"), "");
}

TEST(Read, SumsWorkersAndSubtractsBaselines) {
    FakeWorkers w(2);
    ControlView v = make_view();
    // web (id 1) reused an id: its previous owner left 100 packets and 3 open sessions behind.
    ServiceEntry& web = v.services[1];
    ASSERT_EQ(web.name, "web");
    web.baseline.packets_out = 100;
    web.baseline.sessions_created = 10;
    w.counters[0][1].packets_out = 60;
    w.counters[1][1].packets_out = 55;
    w.counters[0][1].bytes_out = 6000;
    w.counters[0][1].packets_in = 7;
    w.counters[1][1].bytes_in = 700;
    w.counters[0][1].sessions_created = 12;
    w.counters[1][1].sessions_created = 1;
    w.counters[0][1].sessions_closed = 8;
    w.counters[1][1].port_alloc_failures = 2;
    w.counters[1][0].packets_out = 9;  // default action
    w.counters[1][0].sessions_created = 4;
    w.counters[1][0].sessions_closed = 1;
    w[0].counters.drops[static_cast<unsigned>(dp::DropReason::no_route)] = 3;
    w[1].counters.drops[static_cast<unsigned>(dp::DropReason::no_route)] = 4;
    w[1].counters.drops[static_cast<unsigned>(dp::DropReason::neighbor_unresolved)] = 1;
    w[0].counters.sessions_created = 12;
    w[0].counters.sessions_closed = 8;
    w[1].counters.sessions_created = 5;
    w[1].counters.sessions_closed = 1;
    w[1].counters.busy_cycles = 10;
    w[1].counters.total_cycles = 40;
    w[1].counters.iterations = 99;

    Readings r = read_counters(v, w.ptrs, /*neighbor_held_dropped=*/5);
    ASSERT_EQ(r.services.size(), 2u);
    EXPECT_EQ(r.services[1].packets_out, 15u);  // 115 - 100
    EXPECT_EQ(r.services[1].bytes_out, 6000u);
    EXPECT_EQ(r.services[1].packets_in, 7u);
    EXPECT_EQ(r.services[1].bytes_in, 700u);
    EXPECT_EQ(r.services[1].sessions_created, 3u);  // 13 - 10
    EXPECT_EQ(r.services[1].port_alloc_failures, 2u);
    EXPECT_EQ(r.services_active[1], 5u);  // raw 13 - 8: the previous owner's sessions are still open
    EXPECT_EQ(r.services[0].packets_out, 0u);
    EXPECT_EQ(r.default_action.packets_out, 9u);
    EXPECT_EQ(r.default_action.sessions_active(), 3u);
    EXPECT_EQ(r.drops[static_cast<unsigned>(dp::DropReason::no_route)], 7u);
    EXPECT_EQ(r.drops[static_cast<unsigned>(dp::DropReason::neighbor_unresolved)], 6u);
    ASSERT_EQ(r.lcores.size(), 2u);
    EXPECT_EQ(r.lcores[1].lcore, 3u);
    EXPECT_EQ(r.lcores[1][dp::WorkerCounter::busy_cycles], 10u);
    EXPECT_EQ(r.lcores[1][dp::WorkerCounter::total_cycles], 40u);
    EXPECT_EQ(r.lcores[1][dp::WorkerCounter::iterations], 99u);
    EXPECT_EQ(r.sessions_active, 8u);
    EXPECT_EQ(sessions_on(v.nat_addresses[0], v, r), 3u);  // the default action's, on the port address
    EXPECT_EQ(sessions_on(v.nat_addresses[1], v, r), 5u);  // web's, on its ingress IP
}

TEST(Read, ServiceWithoutIdHasNoCounters) {
    FakeWorkers w(1);
    ControlView v = make_view();
    v.services[0].id = 0;  // over the Service limit: never programmed
    w.counters[0][0].packets_out = 9;
    Readings r = read_counters(v, w.ptrs, 0);
    EXPECT_EQ(r.services[0].packets_out, 0u);
    EXPECT_EQ(r.services_active[0], 0u);
}

TEST(Read, FindServiceByKey) {
    ControlView v = make_view();
    ASSERT_NE(v.find_service("default/web"), nullptr);
    EXPECT_EQ(v.find_service("default/web")->id, 1u);
    EXPECT_EQ(v.find_service("default/nope"), nullptr);
    EXPECT_EQ(v.find_service(""), nullptr);
}

std::string scrape(const ControlView& v, const Readings& r, std::string* error = nullptr) {
    std::string out;
    Writer w(out);
    std::vector<PortReading> ports(2);
    ports[0] = PortReading{true, true, 10, 20, 1000, 2000, 1, 2, 3, 4};
    ports[1] = PortReading{false, false};
    ports[1].tx_refused = 700;
    ports[1].tx_stalls = 2;
    ports[1].tx_stalled_queues = 1;
    write_metrics(w, v, r, ports, ProcessInfo{"1.2.3", "22.11.11", 1700000000, 2000000000});
    if (error) *error = w.error();
    return out;
}

TEST(Write, TheWholeExpositionIsStrictlyValid) {
    FakeWorkers w(2);
    ControlView v = make_view();
    Readings r = read_counters(v, w.ptrs, 0);
    std::string error;
    std::string text = scrape(v, r, &error);
    EXPECT_EQ(error, "");
    EXPECT_EQ(check_exposition(text), "") << text;
}

TEST(Write, EmptyViewBeforeTheFirstPublication) {
    ControlView v;
    Readings r = read_counters(v, {}, 0);
    std::string error, out;
    Writer w(out);
    write_metrics(w, v, r, {}, ProcessInfo{});
    EXPECT_EQ(w.error(), "");
    EXPECT_EQ(check_exposition(out), "") << out;
    EXPECT_NE(out.find("egw_config_generation 0\n"), std::string::npos);
    EXPECT_EQ(out.find("\negw_config_last_publish_timestamp_seconds "), std::string::npos);
}

TEST(Write, ServiceSeriesCarryNamespaceServiceAndDirection) {
    FakeWorkers w(1);
    ControlView v = make_view();
    w.counters[0][1].packets_out = 15;
    w.counters[0][1].bytes_in = 1500;
    w.counters[0][1].sessions_created = 2;
    w.counters[0][1].port_alloc_failures = 1;
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    for (const char* want : {
             "egw_service_packets_total{namespace=\"default\",service=\"web\",direction=\"egress\"} 15\n",
             "egw_service_packets_total{namespace=\"default\",service=\"web\",direction=\"reply\"} 0\n",
             "egw_service_bytes_total{namespace=\"default\",service=\"web\",direction=\"reply\"} 1500\n",
             "egw_service_sessions_active{namespace=\"default\",service=\"web\"} 2\n",
             "egw_service_sessions_created_total{namespace=\"default\",service=\"web\"} 2\n",
             "egw_service_snat_allocation_failures_total{namespace=\"default\",service=\"web\"} 1\n",
             "egw_service_info{namespace=\"default\",service=\"web\",source_ip_by=\"LoadBalancerIP\",vrf=\"default\","
             "status_host=\"gw-1\"} 1\n",
             "egw_service_programmed{namespace=\"default\",service=\"db\"} 1\n",
             "egw_service_endpoints{namespace=\"default\",service=\"db\"} 2\n",
         })
        EXPECT_NE(text.find(want), std::string::npos) << want;
}

// Per family, a Service says which of its endpoints are translated here (issue 11 §2): a
// dual-stack one both, one with only an IPv6 ingress IP IPv6 alone (IPv4 0, as
// egw_service_programmed), one with only an IPv4 ingress IP IPv4 alone, though it has IPv6 pods.
TEST(Write, ServiceFamilySeriesSayWhichFamilyIsTranslated) {
    FakeWorkers w(1);
    ControlView v = make_view();
    ServiceEntry dual = service(3, "default", "dual", 0xc0000233);
    dual.endpoints_ipv6 = 2;
    dual.ipv6_translated = true;
    ServiceEntry v6only = service(4, "default", "v6only");
    v6only.source_ip_by = "LoadBalancerIP";
    v6only.programmed = false;
    v6only.endpoints = 0;
    v6only.endpoints_ipv6 = 1;
    v6only.ipv6_translated = true;
    ServiceEntry v4only = service(5, "default", "v4only", 0xc0000234);
    v4only.endpoints_ipv6 = 3;
    v.services.push_back(dual);
    v.services.push_back(v6only);
    v.services.push_back(v4only);
    std::sort(v.services.begin(), v.services.end(), [](auto& a, auto& b) { return a.key < b.key; });
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    for (const char* want : {
             "egw_service_family_translated{namespace=\"default\",service=\"dual\",family=\"IPv4\"} 1\n",
             "egw_service_family_translated{namespace=\"default\",service=\"dual\",family=\"IPv6\"} 1\n",
             "egw_service_family_endpoints{namespace=\"default\",service=\"dual\",family=\"IPv6\"} 2\n",
             "egw_service_family_translated{namespace=\"default\",service=\"v6only\",family=\"IPv4\"} 0\n",
             "egw_service_family_translated{namespace=\"default\",service=\"v6only\",family=\"IPv6\"} 1\n",
             "egw_service_family_endpoints{namespace=\"default\",service=\"v6only\",family=\"IPv4\"} 0\n",
             "egw_service_family_endpoints{namespace=\"default\",service=\"v6only\",family=\"IPv6\"} 1\n",
             "egw_service_programmed{namespace=\"default\",service=\"v6only\"} 0\n",
             "egw_service_family_translated{namespace=\"default\",service=\"v4only\",family=\"IPv4\"} 1\n",
             "egw_service_family_translated{namespace=\"default\",service=\"v4only\",family=\"IPv6\"} 0\n",
             "egw_service_family_endpoints{namespace=\"default\",service=\"v4only\",family=\"IPv6\"} 3\n",
         })
        EXPECT_NE(text.find(want), std::string::npos) << want;
    EXPECT_EQ(check_exposition(text), "");
}

// A Service served elsewhere has no per-Service series here; the counts say how many there are.
TEST(Write, PerServiceSeriesOnlyForServicesThisGatewayServes) {
    FakeWorkers w(1);
    ControlView v = make_view();
    ServiceEntry other = service(3, "default", "elsewhere", 0xc0000233);
    other.programmed = false;
    other.serve_here = false;
    other.status_host = "gw-2";
    ServiceEntry broken = service(4, "default", "broken", 0xc0000234);
    broken.programmed = false;  // should be served here, but is not: it stays visible
    v.services.push_back(other);
    v.services.push_back(broken);
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    EXPECT_EQ(text.find("service=\"elsewhere\""), std::string::npos) << text;
    EXPECT_NE(text.find("egw_service_programmed{namespace=\"default\",service=\"broken\"} 0\n"), std::string::npos);
    EXPECT_NE(text.find("egw_services_known 4\n"), std::string::npos);
    EXPECT_NE(text.find("egw_services_served 3\n"), std::string::npos);
    EXPECT_EQ(check_exposition(text), "");
}

// 10,000 EgressServices across a fleet, 100 of them served by this gateway: the scrape carries
// the 100, not the 10,000. Sizes and times are recorded (--gtest_output=xml) for docs/metrics.md.
TEST(Write, TenThousandServicesOfWhichAHundredServedHere) {
    FakeWorkers w(2);
    auto build = [&](size_t served) {
        ControlView v = make_view();
        v.services.clear();
        for (uint32_t i = 0; i < 10000; ++i) {
            char name[32];
            std::snprintf(name, sizeof name, "svc-%05u", i);
            ServiceEntry e = service(i + 1, "ns-" + std::to_string(i % 100), name, 0x0a000000 + i);
            e.programmed = e.serve_here = i < served;
            e.status_host = i < served ? "gw-1" : "gw-2";
            v.services.push_back(e);
        }
        std::sort(v.services.begin(), v.services.end(), [](auto& a, auto& b) { return a.key < b.key; });
        return v;
    };
    auto measure = [&](const ControlView& v, size_t& bytes, size_t& series) {
        auto t0 = std::chrono::steady_clock::now();
        std::string text = scrape(v, read_counters(v, w.ptrs, 0));
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        bytes = text.size();
        series = 0;
        for (size_t p = 0; (p = text.find('\n', p)) != std::string::npos; ++p)
            series += p + 1 < text.size() && text[p + 1] != '#';
        return ms;
    };
    size_t all_bytes, all_series, few_bytes, few_series;
    double all_ms = measure(build(10000), all_bytes, all_series);
    double few_ms = measure(build(100), few_bytes, few_series);
    RecordProperty("all_served_bytes", std::to_string(all_bytes));
    RecordProperty("all_served_series", std::to_string(all_series));
    RecordProperty("all_served_ms", std::to_string(all_ms));
    RecordProperty("hundred_served_bytes", std::to_string(few_bytes));
    RecordProperty("hundred_served_series", std::to_string(few_series));
    RecordProperty("hundred_served_ms", std::to_string(few_ms));
    EXPECT_GT(all_series, 100000u);
    EXPECT_LT(few_series, 1600u);  // about 14 a Service, and the gateway's own
    EXPECT_LT(few_bytes * 50, all_bytes);
}

TEST(Write, EveryDropReasonIsASeriesAndTheHelpNamesThemAll) {
    FakeWorkers w(1);
    ControlView v = make_view();
    w[0].counters.drops[static_cast<unsigned>(dp::DropReason::stale_session)] = 4;
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    for (unsigned i = 0; i < dp::kDropReasonCount; ++i) {
        std::string reason = dp::kDropReasonNames[i];
        EXPECT_NE(text.find("egw_drops_total{reason=\"" + reason + "\"} "), std::string::npos) << reason;
        EXPECT_NE(text.find(" " + reason + ": " + dp::kDropReasonHelp[i] + ";"), std::string::npos) << reason;
    }
    EXPECT_NE(text.find("egw_drops_total{reason=\"stale_session\"} 4\n"), std::string::npos);
}

TEST(Write, IcmpErrorsByTypeAndRateLimitedSummedOverWorkers) {
    FakeWorkers w(2);
    ControlView v = make_view();
    w[0].counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::time_exceeded)] = 3;
    w[1].counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::time_exceeded)] = 4;
    w[1].counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::port_unreachable)] = 2;
    w[0].counters.icmp_rate_limited = 5;
    w[1].counters.icmp_rate_limited = 6;
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    for (unsigned i = 0; i < dp::kIcmpErrorCount; ++i) {
        std::string type = dp::kIcmpErrorNames[i];
        EXPECT_NE(text.find("egw_icmp_errors_sent_total{type=\"" + type + "\"} "), std::string::npos) << type;
        EXPECT_NE(text.find(" " + type + ": " + dp::kIcmpErrorHelp[i] + ";"), std::string::npos) << type;
    }
    EXPECT_NE(text.find("egw_icmp_errors_sent_total{type=\"time_exceeded\"} 7\n"), std::string::npos);
    EXPECT_NE(text.find("egw_icmp_errors_sent_total{type=\"port_unreachable\"} 2\n"), std::string::npos);
    EXPECT_NE(text.find("egw_icmp_errors_sent_total{type=\"net_unreachable\"} 0\n"), std::string::npos);
    EXPECT_NE(text.find("egw_icmp_errors_rate_limited_total 11\n"), std::string::npos);
}

TEST(Write, FragmentCountersSummedOverWorkers) {
    FakeWorkers w(2);
    ControlView v = make_view();
    w[0].counters.fragments_in = 6;
    w[1].counters.fragments_in = 3;
    w[0].counters.reassembled = 2;
    w[1].counters.reassembled = 1;
    w[1].counters.fragmented = 4;
    w[0].counters.fragments_out = 5;
    w[1].counters.fragments_out = 9;
    w[1].counters.drops[static_cast<unsigned>(dp::DropReason::fragment_timeout)] = 7;
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    for (const char* want : {
             "# TYPE egw_ip_fragments_received_total counter\n",
             "egw_ip_fragments_received_total 9\n",
             "egw_ip_datagrams_reassembled_total 3\n",
             "egw_ip_datagrams_fragmented_total 4\n",
             "egw_ip_fragments_sent_total 14\n",
             "egw_drops_total{reason=\"fragment_timeout\"} 7\n",
             "egw_drops_total{reason=\"fragment\"} 0\n",
             "egw_drops_total{reason=\"fragment_failed\"} 0\n",
         })
        EXPECT_NE(text.find(want), std::string::npos) << want;
}

TEST(Write, NatAddressesInUseOnlyWhenAttributable) {
    FakeWorkers w(1);
    ControlView v = make_view();
    w.counters[0][1].sessions_created = 7;
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    EXPECT_NE(text.find("egw_snat_sessions{address=\"192.0.2.50\",kind=\"ingress_ip\",family=\"IPv4\"} 7\n"),
              std::string::npos);
    EXPECT_NE(text.find("egw_snat_sessions{address=\"192.0.2.1\",kind=\"port\",family=\"IPv4\"} 0\n"),
              std::string::npos);
    EXPECT_EQ(text.find("egw_snat_sessions{address=\"198.51.100.1\""), std::string::npos);
    EXPECT_NE(text.find("egw_snat_ports_capacity{address=\"198.51.100.1\",kind=\"port\",family=\"IPv4\"} 64512\n"),
              std::string::npos);
}

// A dual-stack gateway: web translates both families to its two ingress IPs and the default
// action masquerades both to ext1's two addresses. Each address counts its own family's sessions
// only: the per-Service counts of both families are told apart by sessions6_created/_closed.
TEST(Write, NatAddressesOfBothFamiliesCountTheirOwnSessions) {
    FakeWorkers w(2);
    ControlView v = make_view();
    const egw::net::IpAddr web6 = *egw::net::parse_ip("2001:db8:2::50");
    const egw::net::IpAddr port6 = *egw::net::parse_ip("2001:db8:1::1");
    v.nat_addresses.push_back(NatAddressEntry{port6, "port", {0}, true});
    v.nat_addresses.push_back(NatAddressEntry{web6, "ingress_ip", {1}, true});
    // web: 9 open on worker 0 (6 IPv4, 3 IPv6) and 4 on worker 1 (1 IPv4, 3 IPv6).
    w.counters[0][1].sessions_created = 12;
    w.counters[0][1].sessions_closed = 3;
    w.counters[0][1].sessions6_created = 5;
    w.counters[0][1].sessions6_closed = 2;
    w.counters[1][1].sessions_created = 4;
    w.counters[1][1].sessions6_created = 3;
    // The default action: 5 open on worker 0 (all IPv4, its one IPv6 closed), 2 IPv6 on worker 1.
    w.counters[0][0].sessions_created = 6;
    w.counters[0][0].sessions_closed = 1;
    w.counters[0][0].sessions6_created = 1;
    w.counters[0][0].sessions6_closed = 1;
    w.counters[1][0].sessions_created = 2;
    w.counters[1][0].sessions6_created = 2;
    Readings r = read_counters(v, w.ptrs, 0);
    ASSERT_EQ(v.services[1].name, "web");
    EXPECT_EQ(r.services_active[1], 13u);
    EXPECT_EQ(r.services_active6[1], 6u);
    EXPECT_EQ(r.default_action.sessions_active(), 7u);
    EXPECT_EQ(r.default_action.sessions_active_ipv6(), 2u);
    EXPECT_EQ(sessions_on(v.nat_addresses[1], v, r), 7u) << "192.0.2.50 counts web's IPv4 sessions only";
    EXPECT_EQ(sessions_on(v.nat_addresses[0], v, r), 5u) << "192.0.2.1 counts the default action's IPv4 ones";
    EXPECT_EQ(sessions_on(v.nat_addresses[4], v, r), 6u);
    EXPECT_EQ(sessions_on(v.nat_addresses[3], v, r), 2u);
    std::string error;
    std::string text = scrape(v, r, &error);
    EXPECT_EQ(error, "");
    EXPECT_EQ(check_exposition(text), "");
    for (const char* want : {
             "egw_snat_sessions{address=\"192.0.2.50\",kind=\"ingress_ip\",family=\"IPv4\"} 7\n",
             "egw_snat_sessions{address=\"2001:db8:2::50\",kind=\"ingress_ip\",family=\"IPv6\"} 6\n",
             "egw_snat_sessions{address=\"192.0.2.1\",kind=\"port\",family=\"IPv4\"} 5\n",
             "egw_snat_sessions{address=\"2001:db8:1::1\",kind=\"port\",family=\"IPv6\"} 2\n",
             "egw_snat_ports_capacity{address=\"2001:db8:2::50\",kind=\"ingress_ip\",family=\"IPv6\"} 64512\n",
             "egw_snat_ports_capacity{address=\"2001:db8:1::1\",kind=\"port\",family=\"IPv6\"} 64512\n",
         })
        EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
}

// A Service's reused id: the IPv6 counts are baselined as the others, and an IPv6 count above the
// total (read while a worker was between its two stores) never makes the IPv4 count wrap.
TEST(Read, IpV6SessionCountsBaselinedAndBounded) {
    FakeWorkers w(1);
    ControlView v = make_view();
    v.services[1].baseline.sessions6_created = 4;
    w.counters[0][1].sessions_created = 10;
    w.counters[0][1].sessions6_created = 11;
    Readings r = read_counters(v, w.ptrs, 0);
    EXPECT_EQ(r.services[1].sessions6_created, 7u);
    EXPECT_EQ(r.services_active[1], 10u);
    EXPECT_EQ(sessions_on(v.nat_addresses[1], v, r), 0u);
    ServiceCounters c;
    c.sessions_created = 3;
    c.sessions6_created = 5;
    EXPECT_EQ(c.sessions_active_ipv6(), 3u);
    EXPECT_EQ(c.sessions_active_ipv4(), 0u);
}

TEST(Write, EveryWorkerCounterOfTheListHasItsFamily) {
    // Each counter of EGW_WORKER_COUNTERS gets a value of its own on each worker; every one with a
    // family is exported with that value (per lcore) or the sum (a total), under its HELP text.
    FakeWorkers w(2);
    ControlView v = make_view();
    for (unsigned i = 0; i < dp::kWorkerCounterCount; ++i)
        for (unsigned k = 0; k < 2; ++k)
            w[k].counters.*dp::kWorkerCounterField[i] = 100 * (i + 1) + k;
    Readings r = read_counters(v, w.ptrs, 0);
    std::string text = scrape(v, r);
    unsigned exported = 0;
    for (unsigned i = 0; i < dp::kWorkerCounterCount; ++i) {
        const dp::WorkerCounterInfo& c = dp::kWorkerCounterInfo[i];
        if (!*c.metric) continue;
        ++exported;
        std::string family = std::string("egw_") + c.metric;
        EXPECT_NE(text.find("# HELP " + family + " " + c.help + "\n"), std::string::npos) << c.name;
        std::string direction = *c.direction ? std::string("direction=\"") + c.direction + "\"" : "";
        if (c.scope == dp::CounterScope::total) {
            std::string labels = direction.empty() ? "" : "{" + direction + "}";
            EXPECT_NE(text.find(family + labels + " " + std::to_string(200 * (i + 1) + 1) + "\n"), std::string::npos)
                << c.name;
            continue;
        }
        for (unsigned k = 0; k < 2; ++k) {
            std::string labels = "{lcore=\"" + std::to_string(r.lcores[k].lcore) + "\"" +
                                 (direction.empty() ? "" : "," + direction) + "}";
            EXPECT_NE(text.find(family + labels + " " + std::to_string(100 * (i + 1) + k) + "\n"), std::string::npos)
                << c.name << " on worker " << k;
        }
    }
    EXPECT_GE(exported, 15u);
}

// Open sessions per lcore and family: the IPv6 ones are counted apart (sessions6_created and
// _closed), the IPv4 ones are the rest of each worker's sessions.
TEST(Write, SessionsActivePerFamily) {
    FakeWorkers w(2);
    ControlView v = make_view();
    w[0].counters.sessions_created = 20;  // 12 IPv4 and 8 IPv6 created
    w[0].counters.sessions_closed = 5;    // 2 IPv4 and 3 IPv6 closed
    w[0].counters.sessions6_created = 8;
    w[0].counters.sessions6_closed = 3;
    w[1].counters.sessions_created = 7;  // IPv4 only
    w[1].counters.sessions_closed = 1;
    Readings r = read_counters(v, w.ptrs, 0);
    EXPECT_EQ(r.lcores[0].sessions_active(), 15u);
    EXPECT_EQ(r.lcores[0].sessions_active_ipv6(), 5u);
    std::string text = scrape(v, r);
    for (const char* want : {
             "# HELP egw_sessions_active NAT sessions open now, per worker lcore and address family\n",
             "egw_sessions_active{lcore=\"1\",family=\"IPv4\"} 10\n",
             "egw_sessions_active{lcore=\"1\",family=\"IPv6\"} 5\n",
             "egw_sessions_active{lcore=\"3\",family=\"IPv4\"} 6\n",
             "egw_sessions_active{lcore=\"3\",family=\"IPv6\"} 0\n",
             "egw_sessions_capacity{family=\"IPv4\"} 65536\n",
             "egw_sessions_capacity{family=\"IPv6\"} 4096\n",
         })
        EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
    EXPECT_EQ(text.find("egw_sessions_active{lcore=\"1\"}"), std::string::npos) << "a series without its family";
}

TEST(Write, PortsLcoresConfigAndBuild) {
    FakeWorkers w(2);
    ControlView v = make_view();
    w[1].counters.busy_cycles = 10;
    w[1].counters.total_cycles = 40;
    w[1].counters.rx_packets = 6;
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    for (const char* want : {
             "egw_build_info{version=\"1.2.3\",dpdk_version=\"22.11.11\"} 1\n",
             "egw_config_generation 3\n",
             "egw_config_publish_duration_seconds_count 1\n",
             "egw_config_publish_duration_seconds_bucket{le=\"0.001\"} 1\n",
             "egw_config_last_publish_timestamp_seconds 1700000000.5\n",
             "egw_lcore_busy_cycles_total{lcore=\"3\"} 10\n",
             "egw_lcore_cycles_total{lcore=\"3\"} 40\n",
             "egw_lcore_packets_total{lcore=\"3\",direction=\"rx\"} 6\n",
             "egw_port_rx_packets_total{port=\"pods\"} 10\n",
             "egw_port_tx_bytes_total{port=\"pods\"} 2000\n",
             "egw_port_rx_missed_total{port=\"pods\"} 1\n",
             "egw_port_rx_nombuf_total{port=\"pods\"} 4\n",
             "egw_port_up{port=\"pods\"} 1\n",
             "egw_port_up{port=\"ext1\"} 0\n",
             "egw_port_info{port=\"ext1\",device=\"net_af_packet1\",role=\"outside\",vrf=\"default\"} 1\n",
             "egw_sessions_capacity{family=\"IPv4\"} 65536\n",
             "egw_sessions_capacity{family=\"IPv6\"} 4096\n",
             "egw_tsc_hertz 2000000000\n",
         })
        EXPECT_NE(text.find(want), std::string::npos) << want;
    // A port whose statistics could not be read has no counter series, rather than zeros.
    EXPECT_EQ(text.find("egw_port_rx_packets_total{port=\"ext1\"}"), std::string::npos);
    // egw's own transmit counters are there either way: they come from the workers, not ethdev.
    for (const char* want : {
             "egw_port_tx_refused_total{port=\"pods\"} 0\n",
             "egw_port_tx_refused_total{port=\"ext1\"} 700\n",
             "egw_port_tx_stalls_total{port=\"pods\"} 0\n",
             "egw_port_tx_stalls_total{port=\"ext1\"} 2\n",
             "egw_port_tx_stalled_queues{port=\"ext1\"} 1\n",
             "# TYPE egw_port_tx_stalled_queues gauge\n",
             "# TYPE egw_port_tx_stalls_total counter\n",
         })
        EXPECT_NE(text.find(want), std::string::npos) << want;
}

TEST(Write, NoPodAddressesOrPortsInLabels) {
    FakeWorkers w(1);
    ControlView v = make_view();
    std::string text = scrape(v, read_counters(v, w.ptrs, 0));
    static const std::regex forbidden(R"((pod|src|dst|sport|dport|remote|endpoint)[a-z_]*=)");
    EXPECT_FALSE(std::regex_search(text, forbidden));
}

}  // namespace

namespace {

TEST(Write, EgressQosSeriesPerAppliedNamespaceAndTheIgnoredCounted) {
    std::string out;
    Writer w(out);
    write_egress_qos(w, {{"shop", true, 3, 12}, {"shop", false, 1, 0}, {"web", true, 1, 0}});
    EXPECT_EQ(w.error(), "");
    EXPECT_EQ(check_exposition(out), "") << out;
    EXPECT_NE(out.find("egw_egress_qos_rules{namespace=\"shop\"} 3\n"), std::string::npos) << out;
    EXPECT_NE(out.find("egw_egress_qos_rules{namespace=\"web\"} 1\n"), std::string::npos) << out;
    EXPECT_NE(out.find("egw_egress_qos_pods{namespace=\"shop\"} 12\n"), std::string::npos) << out;
    EXPECT_NE(out.find("egw_egress_qos_pods{namespace=\"web\"} 0\n"), std::string::npos) << out;
    EXPECT_NE(out.find("egw_egress_qos_ignored 1\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("egw_egress_qos_rules{namespace=\"shop\"} 1\n"), std::string::npos) << out;

    std::string none;
    Writer empty(none);
    write_egress_qos(empty, {});
    EXPECT_EQ(check_exposition(none), "") << none;
    EXPECT_NE(none.find("# TYPE egw_egress_qos_rules gauge\n"), std::string::npos) << none;
    EXPECT_NE(none.find("egw_egress_qos_ignored 0\n"), std::string::npos) << none;
}

TEST(Write, VlanSeriesOnePerVlanAndFamiliesWithoutAny) {
    std::string out;
    Writer w(out);
    VlanReading v;
    v.name = "ext1-v100";
    v.parent = "ext1";
    v.vlan = 100;
    v.role = "outside";
    v.vrf = "red";
    v.rx_packets = 7;
    v.tx_packets = 9;
    v.tx_refused = 2;
    write_vlans(w, {v});
    EXPECT_EQ(w.error(), "");
    EXPECT_EQ(check_exposition(out), "") << out;
    EXPECT_NE(
        out.find("egw_vlan_info{port=\"ext1-v100\",parent=\"ext1\",vlan=\"100\",role=\"outside\",vrf=\"red\"} 1\n"),
        std::string::npos)
        << out;
    EXPECT_NE(out.find("egw_vlan_packets_total{port=\"ext1-v100\",direction=\"rx\"} 7\n"), std::string::npos) << out;
    EXPECT_NE(out.find("egw_vlan_packets_total{port=\"ext1-v100\",direction=\"tx\"} 9\n"), std::string::npos) << out;
    EXPECT_NE(out.find("egw_vlan_tx_refused_total{port=\"ext1-v100\"} 2\n"), std::string::npos) << out;

    std::string none;
    Writer empty(none);
    write_vlans(empty, {});
    EXPECT_EQ(check_exposition(none), "") << none;
    EXPECT_NE(none.find("# TYPE egw_vlan_packets_total counter\n"), std::string::npos) << none;
    EXPECT_EQ(none.find("egw_vlan_packets_total{"), std::string::npos) << none;
}

}  // namespace
