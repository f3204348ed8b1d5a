// SPDX-License-Identifier: Apache-2.0
//
// Exporter::serving_problems() (control/metrics/exporter.h), the check behind egwd's liveness
// Lease, on a real control::Runtime: two net_ring ports made with rte_eth_from_rings(), one
// outside and one inside, and two workers on lcores mapped onto CPU 0. The workers are set up but
// never launched: the test writes their iteration counters itself, so "advancing" and "stuck"
// are exact, and the links go down and up through rte_eth_dev_set_link_down/up. The stall
// detector runs on the real monotonic clock with its one-second threshold, so the stall case
// waits a little over a second and bounds the wait.
#include <gtest/gtest.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <unistd.h>

#include "control/runtime/mbuf_pool.h"
#include "control/runtime/runtime.h"
#include "control/metrics/exporter.h"
#include "tests/unit/eal_main.h"

namespace {

using namespace egw;
using Clock = std::chrono::steady_clock;

// The threshold serving_problems() documents: a worker whose counter has not moved for a second.
constexpr double kStallSeconds = 1.0;

config::Config* g_cfg = nullptr;
control::Runtime* g_rt = nullptr;

// The net_ring ethdev "net_ring_<name>", with one ring per queue (two workers need two transmit
// queues).
bool make_port(const std::string& name) {
    rte_ring* rings[2];
    for (int q = 0; q < 2; ++q) {
        std::string n = name + "_r" + std::to_string(q);
        rings[q] = rte_ring_create(n.c_str(), 256, static_cast<int>(rte_socket_id()), 0);
        if (!rings[q]) return false;
    }
    return rte_eth_from_rings(name.c_str(), rings, 2, rings, 2, rte_socket_id()) >= 0;
}

// Stops and closes the ports before the EAL goes (run_with_eal cleans up after RUN_ALL_TESTS).
class RuntimeEnvironment : public ::testing::Environment {
public:
    void TearDown() override {
        delete g_rt;
        g_rt = nullptr;
        delete g_cfg;
        g_cfg = nullptr;
    }
};

bool set_up_runtime() {
    ::testing::AddGlobalTestEnvironment(new RuntimeEnvironment);
    for (const char* d : {"srv_out", "srv_in"})
        if (!make_port(d)) {
            std::fprintf(stderr, "test_metrics_serving: cannot make %s: %s\n", d, rte_strerror(rte_errno));
            return false;
        }
    g_cfg = new config::Config;
    g_cfg->workers = {1, 2};
    g_cfg->mempool.mbufs = 1023;
    g_cfg->reassembly.max_datagrams = 32;  // its fragments must fit the small pool
    g_cfg->mempool.cache = 32;
    g_cfg->sessions.max_sessions = 2048;
    g_cfg->arp.max_neighbors = 64;
    config::PortConfig out;
    out.name = "ext1";
    out.device = "net_ring_srv_out";
    out.role = config::PortRole::outside;
    out.rx_desc = out.tx_desc = 128;
    config::PortConfig in = out;
    in.name = "pods";
    in.device = "net_ring_srv_in";
    in.role = config::PortRole::inside;
    g_cfg->ports = {out, in};
    try {
        g_rt = new control::Runtime(*g_cfg);
        g_rt->setup(0);
        g_rt->start_ports();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "test_metrics_serving: %s\n", e.what());
        return false;
    }
    return true;
}

uint16_t port_id(const std::string& name) {
    for (const auto& p : g_rt->ports())
        if (p.name == name) return p.id;
    ADD_FAILURE() << "no port " << name;
    return 0;
}

bool link_up(uint16_t id) {
    rte_eth_link link{};
    EXPECT_EQ(rte_eth_link_get_nowait(id, &link), 0);
    return link.link_status == RTE_ETH_LINK_UP;
}

void set_iterations(unsigned worker, uint64_t v) {
    __atomic_store_n(&g_rt->workers()[worker]->counters.iterations, v, __ATOMIC_RELAXED);
}

void advance(unsigned worker) {
    __atomic_fetch_add(&g_rt->workers()[worker]->counters.iterations, 1, __ATOMIC_RELAXED);
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

class Serving : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_NE(g_rt, nullptr);
        // Every case starts serving: both links up, both workers past their first iteration.
        ASSERT_EQ(rte_eth_dev_set_link_up(port_id("ext1")), 0);
        ASSERT_EQ(rte_eth_dev_set_link_up(port_id("pods")), 0);
        ASSERT_TRUE(link_up(port_id("ext1")));
        ASSERT_TRUE(link_up(port_id("pods")));
        set_iterations(0, 100);
        set_iterations(1, 200);
        exporter_ = std::make_unique<metrics::Exporter>(*g_cfg, *g_rt);
    }
    void TearDown() override { exporter_.reset(); }

    std::unique_ptr<metrics::Exporter> exporter_;
};

// Checked over twice the stall threshold: advancing workers and an up link serve all along.
TEST_F(Serving, LinkUpAndAdvancingWorkersServeConsistently) {
    const auto start = Clock::now();
    int checks = 0;
    while (seconds_since(start) < 2 * kStallSeconds) {
        advance(0);
        advance(1);
        ASSERT_EQ(exporter_->serving_problems(), "") << "after " << seconds_since(start) << " s";
        ++checks;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_GE(checks, 5);
}

TEST_F(Serving, OutsideLinkDownIsNamedAndUpServesAgain) {
    const uint16_t ext1 = port_id("ext1");
    ASSERT_EQ(exporter_->serving_problems(), "");
    ASSERT_EQ(rte_eth_dev_set_link_down(ext1), 0);
    ASSERT_FALSE(link_up(ext1));
    EXPECT_EQ(exporter_->serving_problems(), "port ext1: link down\n");
    advance(0);
    advance(1);
    EXPECT_EQ(exporter_->serving_problems(), "port ext1: link down\n");  // moving workers do not hide it
    ASSERT_EQ(rte_eth_dev_set_link_up(ext1), 0);
    ASSERT_TRUE(link_up(ext1));
    EXPECT_EQ(exporter_->serving_problems(), "");
}

TEST_F(Serving, InsideLinkDownDoesNotMatter) {
    const uint16_t pods = port_id("pods");
    ASSERT_EQ(rte_eth_dev_set_link_down(pods), 0);
    ASSERT_FALSE(link_up(pods));
    EXPECT_EQ(exporter_->serving_problems(), "");
    // Nor does it mask the outside port.
    ASSERT_EQ(rte_eth_dev_set_link_down(port_id("ext1")), 0);
    EXPECT_EQ(exporter_->serving_problems(), "port ext1: link down\n");
}

TEST_F(Serving, AWorkerAtZeroHasNotStarted) {
    set_iterations(1, 0);
    EXPECT_EQ(exporter_->serving_problems(), "worker 1 has not started\n");
    // Workers come first, then ports.
    ASSERT_EQ(rte_eth_dev_set_link_down(port_id("ext1")), 0);
    EXPECT_EQ(exporter_->serving_problems(), "worker 1 has not started\nport ext1: link down\n");
    ASSERT_EQ(rte_eth_dev_set_link_up(port_id("ext1")), 0);
    set_iterations(1, 1);
    EXPECT_EQ(exporter_->serving_problems(), "");
}

// Worker 0 stops at 100 while worker 1 keeps moving. The detector's clock starts inside the first
// call, between `before` and `after`: no answer may report the stall before a second has passed
// since `before`, every call that starts a second after `after` must report it, and it goes as
// soon as the counter moves again.
TEST_F(Serving, AStuckWorkerIsStalledAfterASecondAndRecovers) {
    set_iterations(0, 100);
    const auto before = Clock::now();
    ASSERT_EQ(exporter_->serving_problems(), "");
    const auto after = Clock::now();

    const std::regex stalled(R"(worker 0 stalled: its iteration counter stayed at 100 for (\d+\.\d) s\n)");
    std::string problems;
    double reported_at = 0;
    while (true) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        advance(1);
        const double call_start = seconds_since(after);
        problems = exporter_->serving_problems();
        if (!problems.empty()) {
            reported_at = seconds_since(before);
            break;
        }
        ASSERT_LT(call_start, kStallSeconds) << "still serving a second after worker 0 stopped";
        ASSERT_LT(seconds_since(before), 2 * kStallSeconds);  // bounded even if the assertion above is wrong
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(problems, m, stalled)) << problems;
    EXPECT_GE(reported_at, kStallSeconds);
    const double stuck_for = std::stod(m[1].str());
    EXPECT_GE(stuck_for, kStallSeconds);
    EXPECT_LE(stuck_for, reported_at + 0.05);  // printed with one decimal

    // Still stalled while it stays put (and worker 1 keeps moving) ...
    advance(1);
    EXPECT_TRUE(std::regex_match(exporter_->serving_problems(), stalled));
    // ... and serving the moment it moves.
    advance(0);
    advance(1);
    EXPECT_EQ(exporter_->serving_problems(), "");
}

// A worker that never ran is "has not started", however long it stays at zero, never "stalled".
TEST_F(Serving, AWorkerThatNeverStartedIsNotCalledStalled) {
    set_iterations(1, 0);
    const auto start = Clock::now();
    EXPECT_EQ(exporter_->serving_problems(), "worker 1 has not started\n");
    while (seconds_since(start) < kStallSeconds + 0.2) {
        advance(0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    advance(0);
    EXPECT_EQ(exporter_->serving_problems(), "worker 1 has not started\n");
}

// Not serving but the same real Runtime, without hugepages: its mbuf pool is the padded one
// (control/runtime/mbuf_pool.h), every header a cache line further into its page than the last.
TEST(RuntimePool, WithoutHugepagesTheMbufHeadersSpreadOverAPage) {
    ASSERT_NE(g_rt, nullptr);
    ASSERT_FALSE(rte_eal_has_hugepages());
    rte_mempool* pool = g_rt->pool();
    EXPECT_EQ(rte_pktmbuf_priv_size(pool),
              control::mbuf_pad_for_pages(g_cfg->mempool.data_room, static_cast<size_t>(sysconf(_SC_PAGESIZE))));
    EXPECT_GT(rte_pktmbuf_priv_size(pool), 0);
    constexpr unsigned kTaken = 64;
    rte_mbuf* m[kTaken];
    ASSERT_EQ(rte_pktmbuf_alloc_bulk(pool, m, kTaken), 0);
    std::set<uintptr_t> lines;
    for (rte_mbuf* x : m)
        lines.insert((reinterpret_cast<uintptr_t>(x) & 4095) >> 6);
    rte_pktmbuf_free_bulk(m, kTaken);
    // DPDK's own layout puts them all on one line (tests/unit/runtime/test_mbuf_pool.cpp).
    EXPECT_GE(lines.size(), kTaken / 2);
}

}  // namespace

int main(int argc, char** argv) {
    int rc = egw::test::run_with_eal(argc, argv, "unit-metrics-serving", 256, set_up_runtime, "0,1@0,2@0");
    return rc;
}
