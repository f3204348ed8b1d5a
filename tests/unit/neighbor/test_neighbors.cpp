// SPDX-License-Identifier: Apache-2.0
//
// The control thread's ARP (control/neighbor/neighbor_resolver.h, announcer.h) on a real
// control::Runtime: two net_ring ports made with rte_eth_from_rings() (ext1 outside in the default
// network, blue outside in VRF blue) and one inside port, one worker that is set up but never
// launched. What the resolver sends goes to worker 0's inject ring, which the test drains and
// parses; the policy comes from the real PolicyBuilder. Time is the TSC value the test passes.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "control/neighbor/neighbor_resolver.h"
#include "control/policy/policy_builder.h"
#include "control/runtime/runtime.h"
#include "dataplane/held.h"
#include "dataplane/tables/neighbor_table.h"
#include "dataplane/tables/neighbor_table6.h"
#include "tests/unit/eal_main.h"

namespace {

using namespace egw;

constexpr uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return a << 24 | b << 16 | c << 8 | d;
}

constexpr uint32_t kPodsAddr = ip4(10, 244, 1, 1);
constexpr uint32_t kExt1Addr = ip4(192, 0, 2, 1);
constexpr uint32_t kBlueAddr = ip4(198, 51, 100, 1);
constexpr uint32_t kIngress = ip4(192, 0, 2, 50);
constexpr uint32_t kIngress2 = ip4(192, 0, 2, 51);
using Mac = std::array<uint8_t, 6>;
const Mac kPodsMac{0x02, 0, 0, 0, 0x01, 0x01};
const Mac kExt1Mac{0x02, 0, 0, 0, 0x02, 0x01};
const Mac kBlueMac{0x02, 0, 0, 0, 0x03, 0x01};

config::Config* g_cfg = nullptr;
control::Runtime* g_rt = nullptr;

bool make_port(const std::string& name) {
    std::string n = name + "_r";
    rte_ring* ring = rte_ring_create(n.c_str(), 256, static_cast<int>(rte_socket_id()), 0);
    return ring && rte_eth_from_rings(name.c_str(), &ring, 1, &ring, 1, rte_socket_id()) >= 0;
}

class RuntimeEnvironment : public ::testing::Environment {
public:
    void TearDown() override {
        delete g_rt;
        g_rt = nullptr;
        delete g_cfg;
        g_cfg = nullptr;
    }
};

config::PortConfig port(const std::string& name, config::PortRole role, const std::string& vrf, uint32_t addr,
                        const Mac& mac) {
    config::PortConfig p;
    p.name = name;
    p.device = "net_ring_nb_" + name;
    p.role = role;
    p.vrf = vrf;
    p.addresses = {net::IpPrefix::from_v4(addr, 24)};
    config::MacAddr m;
    std::copy(mac.begin(), mac.end(), m.bytes);
    p.mac = m;
    p.rx_desc = p.tx_desc = 128;
    return p;
}

bool set_up_runtime() {
    ::testing::AddGlobalTestEnvironment(new RuntimeEnvironment);
    for (const char* d : {"nb_pods", "nb_ext1", "nb_blue"})
        if (!make_port(d)) {
            std::fprintf(stderr, "test_neighbors: cannot make %s: %s\n", d, rte_strerror(rte_errno));
            return false;
        }
    g_cfg = new config::Config;
    g_cfg->file = "test_neighbors";
    g_cfg->workers = {1};
    g_cfg->mempool.mbufs = 1023;
    g_cfg->reassembly.max_datagrams = 32;  // its fragments must fit the small pool
    g_cfg->mempool.cache = 32;
    g_cfg->sessions.max_sessions = 1024;
    g_cfg->arp.max_neighbors = 64;
    g_cfg->vrfs = {config::VrfConfig{"default", 254}, config::VrfConfig{"blue", 100}};
    g_cfg->ports = {port("pods", config::PortRole::inside, "default", kPodsAddr, kPodsMac),
                    port("ext1", config::PortRole::outside, "default", kExt1Addr, kExt1Mac),
                    port("blue", config::PortRole::outside, "blue", kBlueAddr, kBlueMac)};
    g_cfg->node.name = "gw-1";
    try {
        g_rt = new control::Runtime(*g_cfg);
        g_rt->setup(0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "test_neighbors: %s\n", e.what());
        return false;
    }
    return true;
}

model::ServiceState lb_service(const std::string& key, uint32_t ingress, const std::string& network = "") {
    model::ServiceState s;
    s.key = key;
    s.mode = model::Mode::load_balancer_ip;
    s.status_host = "gw-1";
    s.serve_here = true;
    s.network = network;
    s.ingress_ipv4 = ingress;
    s.endpoint_ipv4s = {ip4(10, 244, 1, 10)};
    s.endpoint_nodes = {"worker-1"};
    return s;
}

uint16_t port_id(const std::string& name) {
    for (const auto& p : g_rt->ports())
        if (p.name == name) return p.id;
    ADD_FAILURE() << "no port " << name;
    return 0;
}

// One frame the resolver handed to worker 0.
struct Sent {
    uint16_t port;
    std::vector<uint8_t> bytes;
};

std::vector<Sent> drain() {
    std::vector<Sent> out;
    void* obj;
    while (rte_ring_dequeue(g_rt->workers()[0]->inject, &obj) == 0) {
        auto* m = static_cast<rte_mbuf*>(obj);
        const auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
        out.push_back(Sent{m->port, std::vector<uint8_t>(d, d + rte_pktmbuf_data_len(m))});
        rte_pktmbuf_free(m);
    }
    return out;
}

// The RFC 5227 announcement of `ip` from `mac`, byte by byte.
std::vector<uint8_t> announcement(const Mac& mac, uint32_t ip) {
    std::vector<uint8_t> f(6, 0xff);
    f.insert(f.end(), mac.begin(), mac.end());
    f.insert(f.end(), {0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01});
    auto addr = [&](uint32_t a) {
        for (int s = 24; s >= 0; s -= 8)
            f.push_back(static_cast<uint8_t>(a >> s));
    };
    f.insert(f.end(), mac.begin(), mac.end());
    addr(ip);
    f.insert(f.end(), 6, 0x00);
    addr(ip);
    return f;
}

std::vector<std::pair<uint16_t, uint32_t>> announced(const std::vector<Sent>& frames) {
    std::vector<std::pair<uint16_t, uint32_t>> out;
    for (const auto& s : frames) {
        EXPECT_EQ(s.bytes.size(), 42u);
        if (s.bytes.size() < 42) continue;
        uint32_t ip =
            uint32_t{s.bytes[28]} << 24 | uint32_t{s.bytes[29]} << 16 | uint32_t{s.bytes[30]} << 8 | s.bytes[31];
        out.emplace_back(s.port, ip);
    }
    std::sort(out.begin(), out.end());
    return out;
}

class Neighbors : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_NE(g_rt, nullptr);
        g_cfg->arp.announce_count = 3;
        g_cfg->arp.announce_interval_ms = 1000;
        drain();
        builder_ = std::make_unique<control::PolicyBuilder>(*g_cfg, g_rt->port_ids(), g_rt->port_macs());
        resolver_ = std::make_unique<control::NeighborResolver>(*g_cfg, *g_rt);
        hz_ = rte_get_tsc_hz();
        t0_ = rte_rdtsc();
    }
    void TearDown() override {
        resolver_.reset();
        drain();
    }

    void publish(const std::vector<model::ServiceState>& services) { snap_ = builder_->build(services); }
    // The resolver's loop at t0 + ms.
    std::vector<Sent> poll_at(uint64_t ms) {
        resolver_->poll(*snap_, t0_ + ms * hz_ / 1000);
        return drain();
    }

    std::unique_ptr<control::PolicyBuilder> builder_;
    std::unique_ptr<control::NeighborResolver> resolver_;
    std::unique_ptr<dp::PolicySnapshot> snap_;
    uint64_t hz_ = 0, t0_ = 0;
};

// At start: every port's address on its port, and the served ingress IP on the outside port of
// its network only, each as an RFC 5227 announcement, byte for byte.
TEST_F(Neighbors, StartAnnouncesPortAddressesAndServedIngressIps) {
    publish({lb_service("default/web", kIngress)});
    auto frames = poll_at(0);
    ASSERT_EQ(frames.size(), 4u);
    const uint16_t pods = port_id("pods"), ext1 = port_id("ext1"), blue = port_id("blue");
    auto bytes_for = [&](uint16_t p, uint32_t ip) {
        for (const auto& s : frames)
            if (s.port == p && s.bytes.size() == 42 && s.bytes[31] == static_cast<uint8_t>(ip)) return s.bytes;
        ADD_FAILURE() << "nothing for port " << p;
        return std::vector<uint8_t>{};
    };
    EXPECT_EQ(bytes_for(pods, kPodsAddr), announcement(kPodsMac, kPodsAddr));
    EXPECT_EQ(bytes_for(ext1, kExt1Addr), announcement(kExt1Mac, kExt1Addr));
    EXPECT_EQ(bytes_for(ext1, kIngress), announcement(kExt1Mac, kIngress));
    EXPECT_EQ(bytes_for(blue, kBlueAddr), announcement(kBlueMac, kBlueAddr));
    const auto& st = resolver_->announcer().stats();
    EXPECT_EQ(st.sent, 4u);
    EXPECT_EQ(st.started, 4u);
    EXPECT_EQ(st.failed, 0u);
    EXPECT_EQ(resolver_->announcing().size(), 4u);
}

// announce_count frames per address, announce_interval_ms apart, and then nothing.
TEST_F(Neighbors, AnnouncementsAreCountedAndSpaced) {
    g_cfg->arp.announce_count = 3;
    g_cfg->arp.announce_interval_ms = 500;
    publish({lb_service("default/web", kIngress)});
    EXPECT_EQ(poll_at(0).size(), 4u);
    EXPECT_TRUE(poll_at(1).empty());
    EXPECT_TRUE(poll_at(499).empty());
    EXPECT_EQ(poll_at(500).size(), 4u);
    EXPECT_TRUE(poll_at(999).empty());
    // Late (the loop was busy): sent at once, and the next one spaced from then.
    EXPECT_EQ(poll_at(1200).size(), 4u);
    EXPECT_TRUE(poll_at(1700).empty());
    EXPECT_TRUE(poll_at(60000).empty());
    EXPECT_EQ(resolver_->announcer().stats().sent, 12u);
    EXPECT_TRUE(resolver_->announcing().empty());
}

// Publications: a Service that starts being served is announced (only its ingress IP); one that
// moves to another network is announced on that network's port; one that stops being served
// stops being announced; a publication that changes nothing announces nothing.
TEST_F(Neighbors, OnlyWhatAPublicationAddsIsAnnounced) {
    g_cfg->arp.announce_count = 2;
    publish({});
    EXPECT_EQ(poll_at(0).size(), 3u);  // the port addresses
    publish({lb_service("default/web", kIngress)});
    auto frames = poll_at(10);
    EXPECT_EQ(announced(frames), (std::vector<std::pair<uint16_t, uint32_t>>{{port_id("ext1"), kIngress}}));
    EXPECT_EQ(frames[0].bytes, announcement(kExt1Mac, kIngress));
    // The port addresses' second round, then web's.
    EXPECT_EQ(poll_at(1000).size(), 3u);
    EXPECT_EQ(announced(poll_at(1010)), (std::vector<std::pair<uint16_t, uint32_t>>{{port_id("ext1"), kIngress}}));
    EXPECT_TRUE(poll_at(5000).empty());

    // Nothing new: nothing sent.
    publish({lb_service("default/web", kIngress)});
    EXPECT_TRUE(poll_at(6000).empty());

    // web moves to blue: announced on blue's port.
    publish({lb_service("default/web", kIngress, "blue")});
    frames = poll_at(7000);
    EXPECT_EQ(announced(frames), (std::vector<std::pair<uint16_t, uint32_t>>{{port_id("blue"), kIngress}}));
    EXPECT_EQ(frames[0].bytes, announcement(kBlueMac, kIngress));

    // db starts and stops before its second announcement: that one is not sent.
    publish({lb_service("default/web", kIngress, "blue"), lb_service("default/db", kIngress2)});
    EXPECT_EQ(announced(poll_at(7500)), (std::vector<std::pair<uint16_t, uint32_t>>{{port_id("ext1"), kIngress2}}));
    publish({lb_service("default/web", kIngress, "blue")});
    EXPECT_EQ(announced(poll_at(8000)), (std::vector<std::pair<uint16_t, uint32_t>>{{port_id("blue"), kIngress}}));
    EXPECT_TRUE(poll_at(9000).empty());
    EXPECT_TRUE(resolver_->announcing().empty());
    // The port addresses twice, web on ext1 twice, on blue twice, db once.
    EXPECT_EQ(resolver_->announcer().stats().sent, 3u * 2 + 2 + 2 + 1);
    EXPECT_EQ(resolver_->announcer().stats().started, 3u + 1 + 1 + 1);
}

// announce_count 0 turns gratuitous ARP off.
TEST_F(Neighbors, ZeroAnnouncementsSendNothing) {
    g_cfg->arp.announce_count = 0;
    publish({lb_service("default/web", kIngress)});
    EXPECT_TRUE(poll_at(0).empty());
    EXPECT_TRUE(poll_at(10000).empty());
    EXPECT_EQ(resolver_->announcer().stats().sent, 0u);
}

// ---------------------------------------------------------------------------------------------
// Aging, invalidation, freeing and recycling of learned entries. The test plays the workers:
// it puts held packets and ARP replies into the control ring as they would, and marks use of an
// entry the way their output stage does (NeighborTable::resolve).

constexpr uint32_t kHop = ip4(192, 0, 2, 100);
const Mac kHopMac{0x52, 0x54, 0x00, 0x00, 0x00, 0x64};
const Mac kHopMac2{0x52, 0x54, 0x00, 0x00, 0x10, 0x64};
const Mac kAllOnes{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

class Aging : public Neighbors {
protected:
    void SetUp() override {
        g_cfg->arp.reachable_s = 30;
        g_cfg->arp.probes = 3;
        g_cfg->arp.retry_ms = 1000;
        g_cfg->arp.unused_s = 60;
        g_cfg->arp.hold_packets = 256;
        Neighbors::SetUp();
        g_cfg->arp.announce_count = 0;
        publish({});
        ext1_ = port_id("ext1");
    }
    dp::NeighborTable& table() { return *g_rt->shared().neighbors; }

    rte_mbuf* frame(const std::vector<uint8_t>& bytes, uint16_t port) {
        rte_mbuf* m = rte_pktmbuf_alloc(g_rt->pool());
        EXPECT_NE(m, nullptr);
        char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(bytes.size()));
        std::copy(bytes.begin(), bytes.end(), d);
        m->port = port;
        dp::held_of(m, g_rt->shared().next_hop_field).what = dp::kHeldPacket;  // as a worker hands it over
        return m;
    }
    // A translated packet a worker found no MAC for: Ethernet header still to be written.
    void held_packet(uint32_t next_hop, uint8_t tag) {
        std::vector<uint8_t> f(14, 0);
        f[12] = 0x08;
        f[13] = 0x00;
        f.insert(f.end(), {0x45, 0, 0, 21, 0, 0, 0, 0, 63, 17, 0, 0, 10, 244, 1, 10, 198, 51, 100, 9, tag});
        rte_mbuf* m = frame(f, ext1_);
        *RTE_MBUF_DYNFIELD(m, g_rt->shared().next_hop_field, uint32_t*) = next_hop;
        ASSERT_EQ(rte_ring_mp_enqueue(g_rt->shared().to_control, m), 0);
    }
    // An Ethernet frame of ARP for IPv4 (RFC 826): `op` 1 a request, 2 a reply.
    static std::vector<uint8_t> arp_frame(const Mac& eth_dst, const Mac& eth_src, uint8_t op, const Mac& sha,
                                          uint32_t spa, const Mac& tha, uint32_t tpa) {
        std::vector<uint8_t> f(eth_dst.begin(), eth_dst.end());
        f.insert(f.end(), eth_src.begin(), eth_src.end());
        f.insert(f.end(), {0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, op});
        auto addr = [&](uint32_t a) {
            for (int s = 24; s >= 0; s -= 8)
                f.push_back(static_cast<uint8_t>(a >> s));
        };
        f.insert(f.end(), sha.begin(), sha.end());
        addr(spa);
        f.insert(f.end(), tha.begin(), tha.end());
        addr(tpa);
        return f;
    }
    void arp_reply(uint32_t from, const Mac& mac) {
        ASSERT_EQ(rte_ring_mp_enqueue(g_rt->shared().to_control,
                                      frame(arp_frame(kExt1Mac, mac, 2, mac, from, kExt1Mac, kExt1Addr), ext1_)),
                  0);
    }
    // An ARP request from (`mac`, `from`) for `target`; a gratuitous one when they are the same.
    std::vector<uint8_t> arp_request_frame(uint32_t from, uint32_t target, const Mac& mac) {
        return arp_frame(kAllOnes, mac, 1, mac, from, Mac{}, target);
    }
    // The local stage's answer to `ip` at `mac` (a moved neighbour's request for ext1's address).
    std::vector<uint8_t> arp_answer_frame(uint32_t ip, const Mac& mac) {
        return arp_frame(mac, kExt1Mac, 2, kExt1Mac, kExt1Addr, mac, ip);
    }
    void hand_over(const std::vector<uint8_t>& bytes, uint32_t what = dp::kHeldPacket) {
        rte_mbuf* m = frame(bytes, ext1_);
        dp::held_of(m, g_rt->shared().next_hop_field).what = what;
        ASSERT_EQ(rte_ring_mp_enqueue(g_rt->shared().to_control, m), 0);
    }
    // What egw sends to ask for `ip` on ext1: broadcast, or to `dst` (a probe).
    std::vector<uint8_t> request(uint32_t ip, const Mac& dst) {
        return arp_frame(dst, kExt1Mac, 1, kExt1Mac, kExt1Addr, Mac{}, ip);
    }
    // A worker sending to `ip` through its slot; the MAC it would write, or nullopt.
    std::optional<Mac> use(uint32_t ip) {
        uint32_t slot = table().find(ext1_, ip);
        Mac m;
        if (slot == dp::NeighborTable::kNone ||
            !table().resolve(slot, dp::NeighborTable::make_key(ext1_, ip), m.data()))
            return std::nullopt;
        return m;
    }
    std::vector<Sent> tick_at(uint64_t ms) {
        resolver_->tick(*snap_, t0_ + ms * hz_ / 1000);
        return drain();
    }
    std::string state_of(uint32_t ip) {
        for (const auto& v : resolver_->list())
            if (v.ip == net::IpAddr::from_v4(ip)) return v.state;
        return "";
    }
    // Resolves `ip` from scratch at `ms`: a held packet, the request, the reply, the packet sent.
    void resolve_at(uint64_t ms, uint32_t ip, const Mac& mac) {
        held_packet(ip, 1);
        auto asked = poll_at(ms);
        ASSERT_EQ(asked.size(), 1u);
        EXPECT_EQ(asked[0].bytes, request(ip, kAllOnes));
        arp_reply(ip, mac);
        auto sent = poll_at(ms);
        ASSERT_EQ(sent.size(), 1u);
        EXPECT_TRUE(std::equal(mac.begin(), mac.end(), sent[0].bytes.begin())) << "the held packet goes to the MAC";
    }

    uint16_t ext1_ = 0;
};

// A next hop in use that stops answering: reachable for reachable_s, then probed by unicast
// (the old MAC still used meanwhile), and after `probes` unanswered probes its MAC is gone; the
// next packet is held and ARPed for by broadcast again, and the new answer is used.
TEST_F(Aging, DeadNextHopIsInvalidatedAfterUnansweredProbesThenHeldAndArpedAgain) {
    resolve_at(0, kHop, kHopMac);
    EXPECT_EQ(state_of(kHop), "reachable");
    uint64_t requests = resolver_->requests_sent();
    for (uint64_t s = 1; s <= 30; ++s) {
        ASSERT_EQ(use(kHop), kHopMac);
        EXPECT_TRUE(tick_at(s * 1000).empty()) << "nothing is asked while the entry is reachable, at " << s << " s";
    }
    // Stale and in use: the first probe, to the MAC it has.
    ASSERT_EQ(use(kHop), kHopMac);
    auto probe = tick_at(30001);
    ASSERT_EQ(probe.size(), 1u);
    EXPECT_EQ(probe[0].port, ext1_);
    EXPECT_EQ(probe[0].bytes, request(kHop, kHopMac));
    EXPECT_EQ(state_of(kHop), "probing");
    EXPECT_EQ(use(kHop), kHopMac) << "the MAC stays in use while it is probed";
    EXPECT_TRUE(tick_at(30500).empty()) << "probes are retry_ms apart";
    EXPECT_EQ(tick_at(31002).size(), 1u);
    EXPECT_EQ(tick_at(32003).size(), 1u);
    EXPECT_EQ(resolver_->probes_sent(), 3u);
    EXPECT_EQ(resolver_->invalidated(), 0u);
    // The third went unanswered too: invalidated.
    EXPECT_TRUE(tick_at(33004).empty());
    EXPECT_EQ(resolver_->invalidated(), 1u);
    EXPECT_EQ(state_of(kHop), "incomplete");
    EXPECT_EQ(use(kHop), std::nullopt) << "a worker finds no MAC and holds the packet";
    EXPECT_EQ(resolver_->requests_sent(), requests + 3);

    // The held packet asks again, by broadcast, and waits for the answer (the host came back with
    // another MAC).
    held_packet(kHop, 2);
    auto asked = poll_at(33100);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].bytes, request(kHop, kAllOnes));
    EXPECT_EQ(resolver_->list().at(0).held, 1u);
    arp_reply(kHop, kHopMac2);
    auto sent = poll_at(33200);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_TRUE(std::equal(kHopMac2.begin(), kHopMac2.end(), sent[0].bytes.begin()));
    EXPECT_TRUE(std::equal(kExt1Mac.begin(), kExt1Mac.end(), sent[0].bytes.begin() + 6));
    EXPECT_EQ(sent[0].bytes.back(), 2) << "the packet held after the invalidation";
    EXPECT_EQ(use(kHop), kHopMac2);
    EXPECT_EQ(state_of(kHop), "reachable");
    EXPECT_EQ(resolver_->held_dropped(), 0u);
}

// A probe that is answered keeps the entry: no invalidation, reachable again from the reply.
TEST_F(Aging, AnsweredProbeKeepsTheMac) {
    resolve_at(0, kHop, kHopMac);
    ASSERT_EQ(use(kHop), kHopMac);
    tick_at(20000);
    ASSERT_EQ(use(kHop), kHopMac);
    ASSERT_EQ(tick_at(30001).size(), 1u);
    arp_reply(kHop, kHopMac);
    EXPECT_TRUE(poll_at(30100).empty());
    EXPECT_EQ(state_of(kHop), "reachable");
    for (uint64_t ms = 31000; ms <= 40000; ms += 1000) {
        ASSERT_EQ(use(kHop), kHopMac);
        EXPECT_TRUE(tick_at(ms).empty()) << ms;
    }
    EXPECT_EQ(resolver_->invalidated(), 0u);
    EXPECT_EQ(resolver_->probes_sent(), 1u);
}

// A router that fails over to another MAC says so with a gratuitous ARP request. A known
// neighbour's entry takes the new MAC at once (the workers send to it from their next packet),
// stale: in use, it is probed at the new MAC right away, and the answer makes it reachable. A
// request that repeats the MAC the entry has changes nothing; one from an address nobody asked
// for creates no entry. The local stage's answer to a moved neighbour's request for ext1's
// address teaches the same, and then leaves as it is.
TEST_F(Aging, GratuitousArpMovesAKnownNeighbourAtOnce) {
    const Mac kHopMac3{0x52, 0x54, 0x00, 0x00, 0x20, 0x64};
    constexpr uint32_t kStranger = ip4(192, 0, 2, 150);
    resolve_at(0, kHop, kHopMac);
    hand_over(arp_request_frame(kHop, kHop, kHopMac));
    hand_over(arp_request_frame(kStranger, kStranger, kHopMac2));
    EXPECT_TRUE(poll_at(100).empty());
    EXPECT_EQ(state_of(kHop), "reachable");
    EXPECT_EQ(state_of(kStranger), "") << "nobody asked for it";

    hand_over(arp_request_frame(kHop, kHop, kHopMac2));
    EXPECT_TRUE(poll_at(200).empty());
    EXPECT_EQ(use(kHop), kHopMac2) << "the new MAC, without waiting for the old one to stop answering";
    EXPECT_EQ(state_of(kHop), "stale");
    auto probe = tick_at(1000);
    ASSERT_EQ(probe.size(), 1u);
    EXPECT_EQ(probe[0].bytes, request(kHop, kHopMac2)) << "probed at the new MAC";
    EXPECT_EQ(state_of(kHop), "probing");
    arp_reply(kHop, kHopMac2);
    EXPECT_TRUE(poll_at(1100).empty());
    EXPECT_EQ(state_of(kHop), "reachable");
    EXPECT_EQ(use(kHop), kHopMac2);

    const std::vector<uint8_t> answer = arp_answer_frame(kHop, kHopMac3);
    hand_over(answer, dp::kHeldArpAnswer);
    auto sent = poll_at(1200);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].port, ext1_);
    EXPECT_EQ(sent[0].bytes, answer);
    EXPECT_EQ(use(kHop), kHopMac3);
    EXPECT_EQ(state_of(kHop), "stale");
    EXPECT_EQ(resolver_->invalidated(), 0u);
    EXPECT_EQ(resolver_->held_dropped(), 0u);
}

// An entry no packet uses is not probed when it goes stale, and is freed after unused_s: its slot
// is empty again and a worker finds nothing.
TEST_F(Aging, UnusedEntryIsFreed) {
    uint32_t before = table().used();
    resolve_at(0, kHop, kHopMac);
    EXPECT_EQ(table().used(), before + 1);
    for (uint64_t s = 1; s <= 60; ++s)
        EXPECT_TRUE(tick_at(s * 1000).empty()) << "an unused stale entry is not probed (" << s << " s)";
    EXPECT_EQ(state_of(kHop), "stale");
    EXPECT_EQ(resolver_->freed(), 0u);
    EXPECT_TRUE(tick_at(60001).empty());
    EXPECT_EQ(resolver_->freed(), 1u);
    EXPECT_EQ(state_of(kHop), "");
    EXPECT_EQ(table().used(), before);
    EXPECT_EQ(table().find(ext1_, kHop), dp::NeighborTable::kNone);
    EXPECT_EQ(resolver_->probes_sent(), 0u);
}

// A next hop that never answers and that nothing waits for any more is given up after `probes`
// requests; requests go on while a packet waits, and a packet waits 3 s at most.
TEST_F(Aging, NextHopThatNeverAnswersIsGivenUp) {
    g_cfg->arp.probes = 2;
    held_packet(kHop, 1);
    EXPECT_EQ(poll_at(0).size(), 1u);
    EXPECT_EQ(tick_at(1001).size(), 1u);
    EXPECT_EQ(tick_at(2002).size(), 1u) << "past `probes` requests while a packet waits";
    EXPECT_TRUE(tick_at(2500).empty());
    EXPECT_EQ(resolver_->held_dropped(), 0u);
    EXPECT_EQ(state_of(kHop), "incomplete");
    EXPECT_TRUE(tick_at(3003).empty());
    EXPECT_EQ(resolver_->held_dropped(), 1u) << "held for 3 s at most";
    EXPECT_EQ(state_of(kHop), "") << "nobody answered and nothing waits";
    EXPECT_EQ(resolver_->freed(), 1u);
    EXPECT_EQ(resolver_->requests_sent(), 3u);
}

// With the table full, a new next hop's reply takes the slot of the least recently used learned
// entry: that one is gone (a worker finds nothing for it and would ARP again), the new one
// resolves and its held packet leaves.
TEST_F(Aging, FullTableRecyclesTheLeastRecentlyUsedEntry) {
    const uint32_t cap = table().capacity();
    ASSERT_EQ(table().used(), 0u);
    auto hop = [](uint32_t i) { return ip4(192, 0, 2, 100) + i; };
    auto mac_of = [](uint32_t i) { return Mac{0x52, 0x54, 0x00, 0x00, 0x01, static_cast<uint8_t>(i)}; };
    for (uint32_t i = 0; i < cap; ++i)
        resolve_at(i, hop(i), mac_of(i));
    EXPECT_EQ(table().used(), cap);
    // All in use but number 5.
    for (uint32_t i = 0; i < cap; ++i) {
        if (i != 5) {
            ASSERT_EQ(use(hop(i)), mac_of(i)) << i;
        }
    }
    tick_at(5000);
    const uint32_t old_slot = table().find(ext1_, hop(5));
    ASSERT_NE(old_slot, dp::NeighborTable::kNone);

    const uint32_t fresh = ip4(192, 0, 2, 250);
    const Mac fresh_mac{0x52, 0x54, 0x00, 0x00, 0x02, 0xfa};
    resolve_at(6000, fresh, fresh_mac);
    EXPECT_EQ(resolver_->recycled(), 1u);
    EXPECT_EQ(table().used(), cap);
    EXPECT_EQ(use(fresh), fresh_mac);
    EXPECT_EQ(table().find(ext1_, hop(5)), dp::NeighborTable::kNone);
    EXPECT_EQ(state_of(hop(5)), "");
    Mac out;
    EXPECT_FALSE(table().resolve(old_slot, dp::NeighborTable::make_key(ext1_, hop(5)), out.data()))
        << "the slot a session may still cache no longer answers for number 5";
    for (uint32_t i = 0; i < cap; ++i) {
        if (i != 5) {
            EXPECT_EQ(use(hop(i)), mac_of(i)) << i;
        }
    }
    // Number 5 comes back: it resolves again, recycling the least recently used one now.
    tick_at(7000);
    resolve_at(8000, hop(5), mac_of(5));
    EXPECT_EQ(resolver_->recycled(), 2u);
    EXPECT_EQ(use(hop(5)), mac_of(5));
}

// ---------------------------------------------------------------------------------------------
// IPv6 next hops: resolved by Neighbor Solicitation with the same hold queue and aging. The test
// plays the workers: it puts held IPv6 packets (the next hop in the dynfield, held.h) and Neighbor
// Advertisements (marked as such, as the local stage does) into the control ring.

using Ip6 = std::array<uint8_t, 16>;
const Ip6 kExt1V6{0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};        // 2001:db8:2::1/64 on ext1
const Ip6 kHop6{0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0xbc, 0xfe};    // 2001:db8:2::abc:fe
const Ip6 kHop6Ll{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 0x64};  // fe80::5054:ff:fe00:64

// fe80::/64 and the modified EUI-64 of `m` (RFC 4291 2.5.1).
Ip6 link_local(const Mac& m) {
    return Ip6{0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(m[0] ^ 2), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
}

// The ICMPv6 checksum field of `msg` between src and dst, computed from scratch.
uint16_t icmp6_sum(const Ip6& src, const Ip6& dst, const std::vector<uint8_t>& msg) {
    uint32_t sum = 0;
    auto add = [&](const uint8_t* d, size_t n) {
        for (size_t i = 0; i < n; i += 2)
            sum += uint32_t{d[i]} << 8 | (i + 1 < n ? d[i + 1] : 0);
    };
    add(src.data(), 16);
    add(dst.data(), 16);
    sum += static_cast<uint32_t>(msg.size()) + 58;
    add(msg.data(), msg.size());
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
}

// An Ethernet frame with an IPv6 header (hop limit 255) and ICMPv6 message `msg`, checksum filled.
std::vector<uint8_t> icmp6_frame(const Mac& dst_mac, const Mac& src_mac, const Ip6& src, const Ip6& dst,
                                 std::vector<uint8_t> msg) {
    uint16_t c = icmp6_sum(src, dst, msg);
    msg[2] = static_cast<uint8_t>(c >> 8);
    msg[3] = static_cast<uint8_t>(c);
    std::vector<uint8_t> f(dst_mac.begin(), dst_mac.end());
    f.insert(f.end(), src_mac.begin(), src_mac.end());
    f.insert(f.end(), {0x86, 0xdd, 0x60, 0, 0, 0, 0, static_cast<uint8_t>(msg.size()), 58, 255});
    f.insert(f.end(), src.begin(), src.end());
    f.insert(f.end(), dst.begin(), dst.end());
    f.insert(f.end(), msg.begin(), msg.end());
    return f;
}

class Ipv6Resolution : public Aging {
protected:
    void SetUp() override {
        auto& ext1 = g_cfg->ports[1];
        ext1.addresses.push_back(net::IpPrefix{net::IpAddr::from_v6(kExt1V6.data()), 64});
        Aging::SetUp();
    }
    void TearDown() override {
        Aging::TearDown();
        g_cfg->ports[1].addresses.pop_back();
    }
    dp::NeighborTable6& table6() { return *g_rt->shared().neighbors6; }

    // A routed IPv6 packet a worker found no MAC for (EtherType set, MACs not written).
    void held6(const Ip6& next_hop, uint8_t tag) {
        std::vector<uint8_t> f(12, 0);
        f.insert(f.end(), {0x86, 0xdd, 0x60, 0, 0, 0, 0, 1, 59, 63});
        const Ip6 pod{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10};
        f.insert(f.end(), pod.begin(), pod.end());
        f.insert(f.end(), kHop6.begin(), kHop6.end());
        f.push_back(tag);
        rte_mbuf* m = frame(f, ext1_);
        dp::HeldNextHop& h = dp::held_of(m, g_rt->shared().next_hop_field);
        h.v4 = 0;
        h.what = dp::kHeldPacket;
        std::copy(next_hop.begin(), next_hop.end(), h.v6);
        ASSERT_EQ(rte_ring_mp_enqueue(g_rt->shared().to_control, m), 0);
    }
    // A Neighbor Advertisement from `target` with flags (0x40 solicited, 0x20 override) and, when
    // given, the target link-layer address option.
    void advert(const Ip6& target, uint8_t flags, const Mac* tll) {
        std::vector<uint8_t> msg = {136, 0, 0, 0, flags, 0, 0, 0};
        msg.insert(msg.end(), target.begin(), target.end());
        if (tll) {
            msg.insert(msg.end(), {2, 1});
            msg.insert(msg.end(), tll->begin(), tll->end());
        }
        rte_mbuf* m = frame(icmp6_frame(kExt1Mac, tll ? *tll : kHopMac, target, kExt1V6, msg), ext1_);
        dp::held_of(m, g_rt->shared().next_hop_field).what = dp::kHeldAdvertisement;
        ASSERT_EQ(rte_ring_mp_enqueue(g_rt->shared().to_control, m), 0);
    }
    // What egw must send to ask for `target` on ext1 from `src`: to its solicited-node group, or
    // to `probe_mac` and the target itself (a probe).
    std::vector<uint8_t> solicitation(const Ip6& target, const Ip6& src, const Mac* probe_mac) {
        Ip6 group{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, target[13], target[14], target[15]};
        Mac dst_mac{0x33, 0x33, 0xff, target[13], target[14], target[15]};
        std::vector<uint8_t> msg = {135, 0, 0, 0, 0, 0, 0, 0};
        msg.insert(msg.end(), target.begin(), target.end());
        msg.insert(msg.end(), {1, 1});
        msg.insert(msg.end(), kExt1Mac.begin(), kExt1Mac.end());
        return icmp6_frame(probe_mac ? *probe_mac : dst_mac, kExt1Mac, src, probe_mac ? target : group, msg);
    }
    std::optional<Mac> use6(const Ip6& ip) {
        uint32_t slot = table6().find(ext1_, ip.data());
        Mac m;
        if (slot == dp::NeighborTable6::kNone || !table6().resolve(slot, ext1_, ip.data(), m.data()))
            return std::nullopt;
        return m;
    }
    std::string state_of6(const Ip6& ip) {
        for (const auto& v : resolver_->list())
            if (v.ip == net::IpAddr::from_v6(ip.data())) return v.state;
        return "";
    }
};

// A packet for an unresolved IPv6 next hop is held; the solicitation goes to the target's
// solicited-node group from ext1's global address on its prefix, byte for byte; the solicited
// advertisement fills the entry and the held packet leaves with the next hop's MAC, ext1's as
// its source and EtherType 0x86DD; a worker then finds the MAC.
TEST_F(Ipv6Resolution, HeldPacketIsSolicitedForAndReleasedByTheAdvertisement) {
    held6(kHop6, 7);
    auto asked = poll_at(0);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].port, ext1_);
    EXPECT_EQ(asked[0].bytes, solicitation(kHop6, kExt1V6, nullptr));
    EXPECT_EQ(resolver_->solicitations_sent(), 1u);
    EXPECT_EQ(resolver_->requests_sent(), 0u) << "no ARP for an IPv6 next hop";
    EXPECT_EQ(state_of6(kHop6), "incomplete");
    EXPECT_EQ(use6(kHop6), std::nullopt);
    // Not again before retry_ms, again after.
    held6(kHop6, 8);
    EXPECT_TRUE(poll_at(500).empty());
    EXPECT_EQ(tick_at(1001).size(), 1u);

    advert(kHop6, 0x60, &kHopMac);
    auto sent = poll_at(1100);
    ASSERT_EQ(sent.size(), 2u);
    for (unsigned k = 0; k < 2; ++k) {
        const auto& b = sent[k].bytes;
        EXPECT_EQ(sent[k].port, ext1_);
        EXPECT_TRUE(std::equal(kHopMac.begin(), kHopMac.end(), b.begin())) << k;
        EXPECT_TRUE(std::equal(kExt1Mac.begin(), kExt1Mac.end(), b.begin() + 6)) << k;
        EXPECT_EQ(b[12], 0x86);
        EXPECT_EQ(b[13], 0xdd);
        EXPECT_EQ(b.back(), 7 + k) << "held packets leave in order";
    }
    EXPECT_EQ(use6(kHop6), kHopMac);
    EXPECT_EQ(state_of6(kHop6), "reachable");
    EXPECT_EQ(resolver_->entries_in_table6(), 1u);
    EXPECT_EQ(resolver_->entries_in_table(), 0u);
    // The next packet finds it resolved on the control thread too (a race with the worker).
    held6(kHop6, 9);
    sent = poll_at(1200);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].bytes.back(), 9);
    EXPECT_EQ(resolver_->held_dropped(), 0u);
}

// A link-local next hop is asked from ext1's link-local address.
TEST_F(Ipv6Resolution, LinkLocalNextHopIsAskedFromTheLinkLocalAddress) {
    held6(kHop6Ll, 1);
    auto asked = poll_at(0);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].bytes, solicitation(kHop6Ll, link_local(kExt1Mac), nullptr));
    advert(kHop6Ll, 0x60, &kHopMac);
    ASSERT_EQ(poll_at(10).size(), 1u);
}

// Only what was asked for is learned; an advertisement without Solicited does not resolve an
// incomplete entry; without a target link-layer address an incomplete entry learns nothing; one
// without Override does not replace a known MAC, one with Override does.
TEST_F(Ipv6Resolution, AdvertisementsAreLearnedOnlyAsRfc4861Says) {
    advert(kHop6, 0x60, &kHopMac);
    EXPECT_TRUE(poll_at(0).empty());
    EXPECT_EQ(state_of6(kHop6), "") << "nobody asked for it";
    EXPECT_EQ(resolver_->entries_in_table6(), 0u);

    held6(kHop6, 1);
    ASSERT_EQ(poll_at(10).size(), 1u);
    advert(kHop6, 0x60, nullptr);
    EXPECT_TRUE(poll_at(20).empty());
    EXPECT_EQ(state_of6(kHop6), "incomplete") << "no target link-layer address: nothing to learn";

    // Unsolicited: the MAC is taken, stale (RFC 4861 7.2.5); the held packet leaves.
    advert(kHop6, 0x20, &kHopMac);
    ASSERT_EQ(poll_at(25).size(), 1u);
    EXPECT_EQ(use6(kHop6), kHopMac);
    EXPECT_EQ(state_of6(kHop6), "stale");
    advert(kHop6, 0x40, &kHopMac);
    EXPECT_TRUE(poll_at(30).empty());
    EXPECT_EQ(state_of6(kHop6), "reachable") << "solicited: confirmed";
    advert(kHop6, 0x40, &kHopMac2);
    EXPECT_TRUE(poll_at(40).empty());
    EXPECT_EQ(use6(kHop6), kHopMac) << "no Override: the known MAC stays";
    EXPECT_EQ(state_of6(kHop6), "stale") << "but it is no longer trusted";
    advert(kHop6, 0x20, &kHopMac2);
    EXPECT_TRUE(poll_at(50).empty());
    EXPECT_EQ(use6(kHop6), kHopMac2) << "Override: the host moved";
}

// A router that fails over announces its new MAC with an unsolicited advertisement with Override:
// taken at once, stale until a probe at the new MAC confirms it. The Router flag of the last
// advertisement is recorded, and a router clearing it is counted.
TEST_F(Ipv6Resolution, FailoverAdvertisementMovesTheEntryAndTheRouterFlagIsRecorded) {
    auto router_of6 = [&](const Ip6& ip) {
        for (const auto& v : resolver_->list())
            if (v.ip == net::IpAddr::from_v6(ip.data())) return v.router;
        return std::string("?");
    };
    held6(kHop6, 1);
    ASSERT_EQ(poll_at(0).size(), 1u);
    EXPECT_EQ(router_of6(kHop6), "") << "not said yet";
    advert(kHop6, 0xe0, &kHopMac);
    ASSERT_EQ(poll_at(10).size(), 1u);
    EXPECT_EQ(router_of6(kHop6), "yes");

    advert(kHop6, 0xa0, &kHopMac2);
    EXPECT_TRUE(poll_at(100).empty());
    EXPECT_EQ(use6(kHop6), kHopMac2);
    EXPECT_EQ(state_of6(kHop6), "stale");
    auto probe = tick_at(1000);
    ASSERT_EQ(probe.size(), 1u);
    EXPECT_EQ(probe[0].bytes, solicitation(kHop6, kExt1V6, &kHopMac2)) << "probed at the new MAC";
    advert(kHop6, 0xe0, &kHopMac2);
    EXPECT_TRUE(poll_at(1100).empty());
    EXPECT_EQ(state_of6(kHop6), "reachable");
    EXPECT_EQ(resolver_->routers_lost(), 0u);

    advert(kHop6, 0x60, &kHopMac2);
    EXPECT_TRUE(poll_at(1200).empty());
    EXPECT_EQ(router_of6(kHop6), "no");
    EXPECT_EQ(resolver_->routers_lost(), 1u);
    EXPECT_EQ(use6(kHop6), kHopMac2) << "still the neighbour's MAC";
}

// Aging as for ARP: stale and in use, probed by unicast solicitations to the address and the MAC
// it has; unanswered probes invalidate it, and the next packet is solicited for by multicast again.
TEST_F(Ipv6Resolution, StaleNextHopIsProbedByUnicastAndInvalidated) {
    held6(kHop6, 1);
    ASSERT_EQ(poll_at(0).size(), 1u);
    advert(kHop6, 0x60, &kHopMac);
    ASSERT_EQ(poll_at(0).size(), 1u);
    for (uint64_t s = 1; s <= 30; ++s) {
        ASSERT_EQ(use6(kHop6), kHopMac);
        EXPECT_TRUE(tick_at(s * 1000).empty()) << s;
    }
    ASSERT_EQ(use6(kHop6), kHopMac);
    auto probe = tick_at(30001);
    ASSERT_EQ(probe.size(), 1u);
    EXPECT_EQ(probe[0].bytes, solicitation(kHop6, kExt1V6, &kHopMac));
    EXPECT_EQ(state_of6(kHop6), "probing");
    EXPECT_EQ(tick_at(31002).size(), 1u);
    EXPECT_EQ(tick_at(32003).size(), 1u);
    EXPECT_EQ(resolver_->probes_sent(), 3u);
    EXPECT_TRUE(tick_at(33004).empty());
    EXPECT_EQ(resolver_->invalidated(), 1u);
    EXPECT_EQ(use6(kHop6), std::nullopt);
    held6(kHop6, 2);
    auto asked = poll_at(33100);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].bytes, solicitation(kHop6, kExt1V6, nullptr));
    // An answered probe would have kept it; the new answer is learned.
    advert(kHop6, 0x60, &kHopMac2);
    ASSERT_EQ(poll_at(33200).size(), 1u);
    EXPECT_EQ(use6(kHop6), kHopMac2);
    // Unused for unused_s: freed.
    tick_at(33300);
    for (uint64_t s = 34; s <= 93; ++s)
        tick_at(s * 1000);
    EXPECT_TRUE(tick_at(94000).empty());
    EXPECT_EQ(state_of6(kHop6), "");
    EXPECT_EQ(table6().find(ext1_, kHop6.data()), dp::NeighborTable6::kNone);
    EXPECT_EQ(resolver_->entries_in_table6(), 0u);
}

// The IPv6 table recycles its own least recently used entry when full; IPv4 entries are not
// touched.
TEST_F(Ipv6Resolution, FullIpv6TableRecyclesAnIpv6Entry) {
    const uint32_t cap = table6().capacity();
    resolve_at(0, kHop, kHopMac);
    auto hop = [](uint32_t i) {
        Ip6 a = kHop6;
        a[15] = static_cast<uint8_t>(i);
        return a;
    };
    for (uint32_t i = 0; i <= cap; ++i) {
        held6(hop(i), 1);
        ASSERT_EQ(poll_at(10 + i).size(), 1u) << i;
        advert(hop(i), 0x60, &kHopMac2);
        ASSERT_EQ(poll_at(10 + i).size(), 1u) << i;
    }
    EXPECT_EQ(resolver_->recycled(), 1u);
    EXPECT_EQ(table6().used(), cap);
    EXPECT_EQ(use6(hop(cap)), kHopMac2);
    EXPECT_EQ(use6(hop(0)), std::nullopt) << "the least recently used one";
    EXPECT_EQ(use(kHop), kHopMac) << "the IPv4 entry stays";
}

// ---------------------------------------------------------------------------------------------
// Unsolicited Neighbor Advertisements: the IPv6 twin of gratuitous ARP.

const Ip6 kIngress6{0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x50};  // 2001:db8:2::50
const Ip6 kAllNodes6{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const Mac kAllNodesMac{0x33, 0x33, 0, 0, 0, 1};

// RFC 4861 7.2.6, byte by byte: from the address to all nodes (33:33:00:00:00:01), hop limit 255,
// Router and Override set, Solicited clear, the target and its link-layer address option.
std::vector<uint8_t> unsolicited_na(const Mac& mac, const Ip6& target) {
    std::vector<uint8_t> msg = {136, 0, 0, 0, 0xa0, 0, 0, 0};
    msg.insert(msg.end(), target.begin(), target.end());
    msg.insert(msg.end(), {2, 1});
    msg.insert(msg.end(), mac.begin(), mac.end());
    return icmp6_frame(kAllNodesMac, mac, target, kAllNodes6, msg);
}

class Announcements6 : public Neighbors {
protected:
    void SetUp() override {
        g_cfg->ports[1].addresses.push_back(net::IpPrefix{net::IpAddr::from_v6(kExt1V6.data()), 64});
        Neighbors::SetUp();
    }
    void TearDown() override {
        Neighbors::TearDown();
        g_cfg->ports[1].addresses.pop_back();
    }
    static model::ServiceState web6(const std::string& network = "") {
        model::ServiceState s = lb_service("default/web", kIngress, network);
        s.ingress_ipv6 = net::IpAddr::from_v6(kIngress6.data());
        return s;
    }
    // The IPv6 frames among `frames`, as (port, target).
    static std::vector<std::pair<uint16_t, Ip6>> advertised(const std::vector<Sent>& frames) {
        std::vector<std::pair<uint16_t, Ip6>> out;
        for (const auto& f : frames)
            if (f.bytes.size() >= 14 + 40 + 24 && f.bytes[12] == 0x86 && f.bytes[13] == 0xdd) {
                Ip6 t;
                std::copy(f.bytes.begin() + 62, f.bytes.begin() + 78, t.begin());
                out.emplace_back(f.port, t);
            }
        std::sort(out.begin(), out.end());
        return out;
    }
};

// At start: ext1's IPv6 address and the served IPv6 ingress IP on ext1 (its network's outside
// port), each an unsolicited advertisement, byte for byte; no link-local address, nothing on a
// port without IPv6 addresses; the IPv4 announcements as before, each family counted on its own.
TEST_F(Announcements6, StartAdvertisesIpv6PortAddressesAndServedIngressIps) {
    publish({web6()});
    auto frames = poll_at(0);
    ASSERT_EQ(frames.size(), 6u);
    const uint16_t ext1 = port_id("ext1");
    EXPECT_EQ(advertised(frames), (std::vector<std::pair<uint16_t, Ip6>>{{ext1, kExt1V6}, {ext1, kIngress6}}));
    for (const auto& f : frames) {
        if (f.bytes[12] != 0x86) continue;
        Ip6 target;
        std::copy(f.bytes.begin() + 62, f.bytes.begin() + 78, target.begin());
        EXPECT_EQ(f.bytes, unsolicited_na(kExt1Mac, target));
    }
    const auto& st6 = resolver_->announcer().stats6();
    EXPECT_EQ(st6.sent, 2u);
    EXPECT_EQ(st6.started, 2u);
    EXPECT_EQ(st6.failed, 0u);
    EXPECT_EQ(resolver_->announcer().stats().sent, 4u) << "the gratuitous ARPs of the IPv4 addresses";
    EXPECT_EQ(resolver_->announcer().pending_count6(), 2u);
    EXPECT_EQ(resolver_->announcer().pending_count(), 4u);
    std::vector<std::string> views;
    for (const auto& v : resolver_->announcing())
        if (v.ip.is_v6()) views.push_back(v.port + " " + net::to_string(v.ip) + " " + v.what);
    std::sort(views.begin(), views.end());
    EXPECT_EQ(views, (std::vector<std::string>{"ext1 2001:db8:2::1 port address", "ext1 2001:db8:2::50 ingress IP"}));
    // announce_count of each, announce_interval_ms apart, then nothing.
    EXPECT_EQ(advertised(poll_at(1000)).size(), 2u);
    EXPECT_EQ(advertised(poll_at(2000)).size(), 2u);
    EXPECT_TRUE(poll_at(5000).empty());
    EXPECT_EQ(resolver_->announcer().stats6().sent, 6u);
    EXPECT_EQ(resolver_->announcer().pending_count6(), 0u);
}

// Taking the IPv6 ingress IP over: a Service that begins to be served here (an election, a
// failover) has its IPv6 ingress IP advertised again; one that moves to another network is
// advertised there only if that network answers for it (blue's port has no IPv6 address, but the
// ingress IP is answered on the network's outside ports whatever their addresses); one served
// elsewhere stops being advertised.
TEST_F(Announcements6, TakingAnIpv6IngressIpOverAdvertisesIt) {
    g_cfg->arp.announce_count = 2;
    publish({});
    EXPECT_EQ(advertised(poll_at(0)).size(), 1u);  // ext1's address
    model::ServiceState away = web6();
    away.serve_here = false;
    away.status_host = "gw-2";
    publish({away});
    EXPECT_TRUE(advertised(poll_at(10)).empty()) << "served elsewhere: not this gateway's to advertise";
    publish({web6()});
    auto frames = poll_at(20);
    EXPECT_EQ(advertised(frames), (std::vector<std::pair<uint16_t, Ip6>>{{port_id("ext1"), kIngress6}}));
    // Served elsewhere again before its second advertisement: that one is not sent; ext1's
    // address has its second one.
    publish({away});
    EXPECT_EQ(advertised(poll_at(1000)), (std::vector<std::pair<uint16_t, Ip6>>{{port_id("ext1"), kExt1V6}}));
    EXPECT_TRUE(poll_at(2000).empty());
    // Back, in network blue: advertised on blue's port.
    publish({web6("blue")});
    frames = poll_at(3000);
    EXPECT_EQ(advertised(frames), (std::vector<std::pair<uint16_t, Ip6>>{{port_id("blue"), kIngress6}}));
    for (const auto& f : frames)
        if (f.bytes[12] == 0x86) {
            EXPECT_EQ(f.bytes, unsolicited_na(kBlueMac, kIngress6));
        }
    EXPECT_EQ(resolver_->announcer().stats6().started, 1u + 1 + 1);
    EXPECT_EQ(resolver_->announcer().stats6().sent, 2u + 1 + 1);
}

// announce_count 0 turns unsolicited advertisements off too.
TEST_F(Announcements6, ZeroAnnouncementsAdvertiseNothing) {
    g_cfg->arp.announce_count = 0;
    publish({web6()});
    EXPECT_TRUE(poll_at(0).empty());
    EXPECT_EQ(resolver_->announcer().stats6().sent, 0u);
}

}  // namespace

int main(int argc, char** argv) {
    return egw::test::run_with_eal(argc, argv, "unit-neighbors", 256, set_up_runtime, "0,1@0");
}
