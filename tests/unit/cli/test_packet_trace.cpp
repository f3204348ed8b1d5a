// SPDX-License-Identifier: Apache-2.0
//
// The control side of the packet trace (control/cli/packet_trace.h): buffers handed to the
// workers and taken back, records read only once published, and `show trace` rendered from
// records written here the way a worker writes them (tests/unit/dataplane/test_trace.cpp checks
// what the workers write).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "control/cli/packet_trace.h"

using namespace egw;

namespace {

using Frame = std::vector<uint8_t>;

// Ethernet + IPv4 + UDP (or ICMP when `proto` is 1), checksums as given.
Frame ipv4_frame(const uint8_t (&src)[4], const uint8_t (&dst)[4], uint16_t sport, uint16_t dport, uint8_t ttl,
                 uint8_t proto = 17) {
    Frame f = {0x02, 0, 0, 0, 0x01, 0x01, 0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x0a, 0x08, 0x00};
    Frame ip = {0x45, 0, 0, 28, 0x12, 0x34, 0, 0, ttl, proto, 0xbe, 0xef};
    ip.insert(ip.end(), src, src + 4);
    ip.insert(ip.end(), dst, dst + 4);
    f.insert(f.end(), ip.begin(), ip.end());
    if (proto == 1) {
        Frame icmp = {11, 0, 0xab, 0xcd, 0, 0, 0, 0};
        f.insert(f.end(), icmp.begin(), icmp.end());
    } else {
        Frame udp = {static_cast<uint8_t>(sport >> 8),
                     static_cast<uint8_t>(sport),
                     static_cast<uint8_t>(dport >> 8),
                     static_cast<uint8_t>(dport),
                     0,
                     8,
                     0x11,
                     0x22};
        f.insert(f.end(), udp.begin(), udp.end());
    }
    return f;
}

constexpr uint8_t kPod[4] = {10, 244, 1, 10};
constexpr uint8_t kServer[4] = {192, 0, 2, 100};
constexpr uint8_t kIngress[4] = {192, 0, 2, 50};
constexpr uint8_t kPodsAddr[4] = {10, 244, 1, 1};

void put_head(uint8_t* to, uint16_t& len, const Frame& f) {
    len = static_cast<uint16_t>(std::min<size_t>(f.size(), dp::kTraceHeadBytes));
    std::copy(f.begin(), f.begin() + len, to);
}

dp::TraceStep step(dp::ProfiledStage stage, dp::Next next) {
    dp::TraceStep s{};
    s.stage = static_cast<uint8_t>(stage);
    s.next = static_cast<uint8_t>(next);
    s.session = dp::SessionTable::kNone;
    return s;
}

void tuple(dp::TraceStep& s, const uint8_t (&src)[4], uint16_t sport, const uint8_t (&dst)[4], uint16_t dport,
           uint8_t ttl) {
    s.has_tuple = true;
    std::copy(src, src + 4, s.src);
    std::copy(dst, dst + 4, s.dst);
    s.sport = sport;
    s.dport = dport;
    s.ttl = ttl;
    s.proto = 17;
}

// As a worker records a translated packet: input, lookup (no session), slow path (created).
void record_snat(dp::TracePacket& p, uint64_t tsc) {
    p = dp::TracePacket{};
    p.tsc = tsc;
    p.rx_port = 0;
    Frame in = ipv4_frame(kPod, kServer, 40000, 53, 64);
    Frame out = ipv4_frame(kIngress, kServer, 40000, 53, 63);
    p.frame_len = static_cast<uint32_t>(in.size());
    put_head(p.before, p.before_len, in);
    put_head(p.after, p.after_len, out);
    p.steps[0] = step(dp::ProfiledStage::input, dp::Next::nat_lookup);
    tuple(p.steps[0], kPod, 40000, kServer, 53, 64);
    p.steps[1] = step(dp::ProfiledStage::nat_lookup, dp::Next::nat_slow);
    tuple(p.steps[1], kPod, 40000, kServer, 53, 64);
    p.steps[2] = step(dp::ProfiledStage::nat_slow, dp::Next::output);
    p.steps[2].session = 7;
    p.steps[2].session_change = static_cast<uint8_t>(dp::TraceSession::created);
    p.steps[2].out_port = 1;
    std::copy(kServer, kServer + 4, p.steps[2].next_hop);
    tuple(p.steps[2], kIngress, 40000, kServer, 53, 63);
    p.steps[3] = step(dp::ProfiledStage::output, dp::Next::output);
    p.steps[3].out_port = 1;
    p.n_steps = 4;
    p.outcome = static_cast<uint8_t>(dp::TraceOutcome::queued);
}

// TTL 1: ip_forward refuses it with an ICMP error, icmp_reply builds it.
void record_ttl(dp::TracePacket& p, uint64_t tsc) {
    p = dp::TracePacket{};
    p.tsc = tsc;
    Frame in = ipv4_frame(kPod, kServer, 33434, 33435, 1);
    Frame out = ipv4_frame(kPodsAddr, kPod, 0, 0, 64, 1);
    p.frame_len = static_cast<uint32_t>(in.size());
    put_head(p.before, p.before_len, in);
    put_head(p.after, p.after_len, out);
    p.steps[0] = step(dp::ProfiledStage::input, dp::Next::nat_lookup);
    p.steps[1] = step(dp::ProfiledStage::nat_lookup, dp::Next::nat_slow);
    p.steps[2] = step(dp::ProfiledStage::nat_slow, dp::Next::icmp_reply);
    p.steps[2].reason = static_cast<uint8_t>(dp::DropReason::ttl_exceeded);
    p.steps[2].icmp = static_cast<uint8_t>(dp::IcmpError::time_exceeded);
    p.steps[3] = step(dp::ProfiledStage::icmp_reply, dp::Next::transmit);
    p.steps[3].out_port = 0;
    tuple(p.steps[3], kPodsAddr, 0, kPod, 0, 64);
    p.steps[3].proto = 1;
    p.steps[4] = step(dp::ProfiledStage::output, dp::Next::transmit);
    p.n_steps = 5;
    p.outcome = static_cast<uint8_t>(dp::TraceOutcome::queued);
}

struct Workers {
    std::unique_ptr<dp::Worker> a = std::make_unique<dp::Worker>();
    std::unique_ptr<dp::Worker> b = std::make_unique<dp::Worker>();
    std::vector<dp::Worker*> all() { return {a.get(), b.get()}; }
    Workers() { b->index = 1; }
};

// What a worker does with its buffer: writes a record, then publishes the count.
void publish(dp::Worker& w, void (*record)(dp::TracePacket&, uint64_t), uint64_t tsc) {
    dp::TraceBuffer* t = w.trace.load(std::memory_order_acquire);
    ASSERT_NE(t, nullptr);
    ASSERT_LT(t->used, t->capacity);
    record(t->packets[t->used++], tsc);
    t->published.store(t->used, std::memory_order_release);
}

TEST(PacketTrace, StartHandsEachWorkerABufferAndStopTakesItBack) {
    Workers ws;
    dp::DataplaneShared shared;
    cli::PacketTrace trace;
    EXPECT_FALSE(trace.started());
    dp::TraceMatch m;
    m.proto = 17;
    trace.start(shared, ws.all(), m, 50, 1000);
    EXPECT_TRUE(trace.active());
    ASSERT_NE(ws.a->trace.load(), nullptr);
    ASSERT_NE(ws.b->trace.load(), nullptr);
    EXPECT_NE(ws.a->trace.load(), ws.b->trace.load()) << "one buffer per worker";
    EXPECT_EQ(ws.a->trace.load()->capacity, 50u) << "each worker may take all N";
    EXPECT_EQ(ws.a->trace.load()->shared, ws.b->trace.load()->shared) << "N is the workers' together";
    EXPECT_EQ(ws.a->trace.load()->shared->match.proto, 17);
    EXPECT_EQ(trace.entries().size(), 0u);

    // Records come in the order the workers took them, whichever worker took them.
    publish(*ws.b, record_snat, 2000);
    publish(*ws.a, record_ttl, 3000);
    publish(*ws.b, record_snat, 4000);
    // A record begun but not published is not read.
    ws.a->trace.load()->used++;
    auto e = trace.entries();
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[0].worker, 1u);
    EXPECT_EQ(e[1].worker, 0u);
    EXPECT_EQ(e[2].packet->tsc, 4000u);

    trace.stop();
    EXPECT_FALSE(trace.active());
    EXPECT_TRUE(trace.started());
    EXPECT_EQ(ws.a->trace.load(), nullptr);
    EXPECT_EQ(ws.b->trace.load(), nullptr);
    EXPECT_EQ(trace.entries().size(), 3u) << "stopping keeps what was taken";

    trace.start(shared, ws.all(), {}, 5, 9000);
    EXPECT_EQ(trace.entries().size(), 0u) << "a new trace starts empty";
    EXPECT_EQ(trace.limit(), 5u);
    EXPECT_EQ(ws.a->trace.load()->capacity, 5u);
}

TEST(PacketTrace, DestroyedTraceLeavesNoWorkerPointingAtIt) {
    Workers ws;
    dp::DataplaneShared shared;
    {
        cli::PacketTrace trace;
        trace.start(shared, ws.all(), {}, 3, 0);
    }
    EXPECT_EQ(ws.a->trace.load(), nullptr);
    EXPECT_EQ(ws.b->trace.load(), nullptr);
}

TEST(PacketTrace, ShowTraceRendersEachStageAndTheHeaders) {
    dp::TracePacket snat, ttl;
    record_snat(snat, 2'000'000 + 12'345'000);
    record_ttl(ttl, 2'000'000 + 20'000'000);
    std::vector<cli::PacketTrace::Entry> e = {{1, &snat}, {0, &ttl}};
    cli::TraceView v;
    v.port_names = {{0, "pods"}, {1, "ext1"}};
    v.tsc_hz = 1'000'000'000;
    v.start_tsc = 2'000'000;
    std::string text = cli::render_trace(e, v);
    EXPECT_NE(text.find("packet 1, worker 1, port pods, 12.345 ms after start, 42 bytes\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  input -> nat_lookup\n  nat_lookup -> nat_slow\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  nat_slow -> output, session 7 created, port ext1 via 192.0.2.100; now 192.0.2.50.40000 > "
                        "192.0.2.100.53 ttl 63\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  before: 0a:58:0a:f4:01:0a > 02:00:00:00:01:01, IPv4 10.244.1.10.40000 > 192.0.2.100.53: "
                        "UDP ttl 64 id 4660 len 28 ipsum 0xbeef sum 0x1122\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  after:  0a:58:0a:f4:01:0a > 02:00:00:00:01:01, IPv4 192.0.2.50.40000 > 192.0.2.100.53: "
                        "UDP ttl 63"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("packet 2, worker 0, port pods, 20.000 ms after start"), std::string::npos) << text;
    EXPECT_NE(text.find("  nat_slow -> icmp_reply, answered with ICMP time_exceeded (ttl_exceeded)\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  icmp_reply -> transmit, ICMP error built, port pods; now 10.244.1.1 > "
                        "10.244.1.10 ttl 64\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("IPv4 10.244.1.1 > 10.244.1.10: ICMP type 11 code 0 id 0 ttl 64"), std::string::npos) << text;
    EXPECT_NE(text.find("2 packet(s) traced\n"), std::string::npos);

    nlohmann::json j = cli::trace_json(e, v);
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0]["worker"], 1);
    EXPECT_EQ(j[0]["port"], "pods");
    EXPECT_EQ(j[0]["outcome"], "queued");
    ASSERT_EQ(j[0]["steps"].size(), 4u);
    const auto& slow = j[0]["steps"][2];
    EXPECT_EQ(slow["stage"], "nat_slow");
    EXPECT_EQ(slow["next"], "output");
    EXPECT_EQ(slow["session"], 7);
    EXPECT_EQ(slow["session_change"], "created");
    EXPECT_EQ(slow["port"], "ext1");
    EXPECT_EQ(slow["next_hop"], "192.0.2.100");
    EXPECT_EQ(slow["headers"]["src"], "192.0.2.50");
    EXPECT_EQ(slow["headers"]["sport"], 40000);
    EXPECT_EQ(j[0]["before"]["src"], "10.244.1.10");
    EXPECT_EQ(j[0]["before"]["ttl"], 64);
    EXPECT_EQ(j[0]["before"]["ip_checksum"], "0xbeef");
    EXPECT_EQ(j[0]["after"]["src"], "192.0.2.50");
    EXPECT_EQ(j[1]["steps"][2]["icmp"], "time_exceeded");
    EXPECT_EQ(j[1]["steps"][2]["reason"], "ttl_exceeded");
    EXPECT_EQ(j[1]["after"]["icmp_type"], 11);
}

TEST(PacketTrace, FramesCutShortSayWhatTheyHold) {
    Frame f = ipv4_frame(kPod, kServer, 1, 2, 9);
    EXPECT_EQ(cli::describe_frame(f.data(), 10), "(10 bytes, no Ethernet header)");
    EXPECT_EQ(cli::describe_frame(f.data(), 20), "0a:58:0a:f4:01:0a > 02:00:00:00:01:01, ethertype 0x0800");
    EXPECT_EQ(cli::describe_frame(f.data(), 36),
              "0a:58:0a:f4:01:0a > 02:00:00:00:01:01, IPv4 10.244.1.10 > 192.0.2.100: UDP ttl 9 id 4660 len 28 "
              "ipsum 0xbeef");
    Frame arp = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1};
    EXPECT_EQ(cli::describe_frame(arp.data(), static_cast<unsigned>(arp.size())),
              "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff, ethertype 0x0806 (ARP)");
}

}  // namespace
