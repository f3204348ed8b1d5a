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
#include <rte_ring.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "control/neighbor/neighbor_resolver.h"
#include "control/policy/policy_builder.h"
#include "control/runtime/runtime.h"
#include "tests/unit/eal_main.h"

namespace {

using namespace egw;

constexpr uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d) { return a << 24 | b << 16 | c << 8 | d; }

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
        for (int s = 24; s >= 0; s -= 8) f.push_back(static_cast<uint8_t>(a >> s));
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
        uint32_t ip = uint32_t{s.bytes[28]} << 24 | uint32_t{s.bytes[29]} << 16 | uint32_t{s.bytes[30]} << 8 | s.bytes[31];
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

}  // namespace

int main(int argc, char** argv) {
    return egw::test::run_with_eal(argc, argv, "unit-neighbors", 256, set_up_runtime, "0,1@0");
}
