// SPDX-License-Identifier: Apache-2.0
//
// The PolicyPublisher (control/policy/publisher.h) without EAL: the snapshot it hands over is the
// one workers read, the snapshot it replaced is not freed (publish() does not return) while a
// reader registered with the QSBR may still hold it, and its hooks hear of changed NAT address
// sets and of every publication.
#include "control/policy/publisher.h"

#include <gtest/gtest.h>
#include <rte_rcu_qsbr.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "dataplane/worker.h"

namespace {

using egw::control::PolicyPublisher;
namespace dp = egw::dp;
using namespace std::chrono_literals;

// `ingress`: (ingress IP, IP protocol, Service port) served.
std::unique_ptr<dp::PolicySnapshot> snapshot(uint64_t generation, std::vector<uint32_t> nat_ips = {},
                                             std::vector<std::tuple<uint32_t, uint8_t, uint16_t>> ingress = {}) {
    auto s = std::make_unique<dp::PolicySnapshot>();
    s->generation = generation;
    std::vector<std::pair<uint64_t, uint32_t>> items;
    for (uint32_t ip : nat_ips)
        items.emplace_back(ip, 0);
    s->nat_addresses.build(items);
    items.clear();
    for (auto [ip, proto, port] : ingress)
        items.emplace_back(dp::PolicySnapshot::ingress_key(ip, proto, port), 0);
    s->ingress_ports.build(items);
    return s;
}

// Polls `cond` until it holds or `limit` passes.
template <typename F>
bool wait_for(F cond, std::chrono::milliseconds limit = 5000ms) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!cond()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

struct Recorder {
    std::vector<std::vector<uint32_t>> nat_sets;  // the addresses of each call
    std::vector<PolicyPublisher::NatAddresses> calls;
    std::vector<double> seconds;
    PolicyPublisher::Hooks hooks() {
        return {[this](const PolicyPublisher::NatAddresses& nat) {
                    calls.push_back(nat);
                    nat_sets.emplace_back();
                    for (const auto& [ip, ports] : nat)
                        nat_sets.back().push_back(ip);
                },
                [this](double s) { seconds.push_back(s); }};
    }
};

TEST(PolicyPublisher, HandsOverTheSnapshotAndTellsOnlyChangedNatAddresses) {
    dp::DataplaneShared shared;  // no qsbr: no worker reads yet
    Recorder rec;
    PolicyPublisher pub(shared, rec.hooks());
    EXPECT_EQ(pub.current(), nullptr);

    auto first = snapshot(1, {0xc0000232, 0xc0000201});
    const dp::PolicySnapshot* p1 = first.get();
    pub.publish(std::move(first));
    EXPECT_EQ(pub.current(), p1);
    EXPECT_EQ(shared.policy.current.load(), p1);
    ASSERT_EQ(rec.nat_sets.size(), 1u);
    EXPECT_EQ(rec.nat_sets[0], (std::vector<uint32_t>{0xc0000201, 0xc0000232}));  // sorted

    pub.publish(snapshot(2, {0xc0000201, 0xc0000232}));  // the same addresses: no call
    EXPECT_EQ(rec.nat_sets.size(), 1u);
    EXPECT_EQ(pub.current()->generation, 2u);

    pub.publish(snapshot(3, {0xc0000201}));
    pub.publish(snapshot(4));
    ASSERT_EQ(rec.nat_sets.size(), 3u);
    EXPECT_EQ(rec.nat_sets[1], (std::vector<uint32_t>{0xc0000201}));
    EXPECT_TRUE(rec.nat_sets[2].empty());

    ASSERT_EQ(rec.seconds.size(), 4u);
    for (double s : rec.seconds)
        EXPECT_GE(s, 0.0);
    EXPECT_EQ(pub.publications(), 4u);

    pub.retire();
    EXPECT_EQ(pub.current(), nullptr);
    EXPECT_EQ(shared.policy.current.load(), nullptr);
}

TEST(PolicyPublisher, TellsTheServicePortsOfNatAddressesThatAreIngressIps) {
    // Steering leaves these out of its rules (control/runtime/steering.h); an ingress IP that is
    // no NAT address has no rules to leave them out of.
    dp::DataplaneShared shared;
    Recorder rec;
    PolicyPublisher pub(shared, rec.hooks());
    pub.publish(
        snapshot(1, {0xc0000232, 0xc0000201}, {{0xc0000232, 17, 53}, {0xc0000232, 6, 8080}, {0xc0000263, 6, 80}}));
    ASSERT_EQ(rec.calls.size(), 1u);
    using Ports = std::vector<std::pair<uint8_t, uint16_t>>;
    EXPECT_EQ(rec.calls[0],
              (PolicyPublisher::NatAddresses{{0xc0000201, {}}, {0xc0000232, Ports{{6, 8080}, {17, 53}}}}));
    // The same addresses with one Service port fewer: a call.
    pub.publish(snapshot(2, {0xc0000232, 0xc0000201}, {{0xc0000232, 6, 8080}}));
    ASSERT_EQ(rec.calls.size(), 2u);
    EXPECT_EQ(rec.calls[1], (PolicyPublisher::NatAddresses{{0xc0000201, {}}, {0xc0000232, Ports{{6, 8080}}}}));
    // Only a port of an address that is no NAT address changed: none.
    pub.publish(snapshot(3, {0xc0000232, 0xc0000201}, {{0xc0000232, 6, 8080}, {0xc0000263, 6, 443}}));
    EXPECT_EQ(rec.calls.size(), 2u);
    pub.retire();
}

TEST(PolicyPublisher, FirstSnapshotWithoutNatAddressesCallsNoHook) {
    dp::DataplaneShared shared;
    Recorder rec;
    PolicyPublisher pub(shared, rec.hooks());
    pub.publish(snapshot(1));
    EXPECT_TRUE(rec.nat_sets.empty());
    EXPECT_EQ(rec.seconds.size(), 1u);
    pub.retire();
}

TEST(PolicyPublisher, WaitsForTheReadersBeforeFreeingTheOldSnapshot) {
    size_t size = rte_rcu_qsbr_get_memsize(1);
    size = (size + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
    auto* qsbr = static_cast<rte_rcu_qsbr*>(std::aligned_alloc(RTE_CACHE_LINE_SIZE, size));
    ASSERT_NE(qsbr, nullptr);
    ASSERT_EQ(rte_rcu_qsbr_init(qsbr, 1), 0);

    dp::DataplaneShared shared;
    shared.qsbr = qsbr;
    Recorder rec;
    PolicyPublisher pub(shared, rec.hooks());
    pub.publish(snapshot(1));  // no reader online yet: returns at once

    // A reader as a worker is one: online, it loads the snapshot and keeps it until it reports
    // a quiescent state.
    std::atomic<const dp::PolicySnapshot*> held{nullptr};
    std::atomic<bool> release{false};
    std::atomic<uint64_t> read_generation{0};
    ASSERT_EQ(rte_rcu_qsbr_thread_register(qsbr, 0), 0);
    std::thread reader([&] {
        rte_rcu_qsbr_thread_online(qsbr, 0);
        held = shared.policy.current.load(std::memory_order_acquire);
        wait_for([&] { return release.load(); }, 10000ms);
        read_generation = held.load()->generation;  // still valid: not freed yet
        rte_rcu_qsbr_quiescent(qsbr, 0);
        rte_rcu_qsbr_thread_offline(qsbr, 0);
    });
    ASSERT_TRUE(wait_for([&] { return held.load() != nullptr; }));

    std::atomic<bool> returned{false};
    std::thread publisher([&] {
        pub.publish(snapshot(2));
        returned = true;
    });
    ASSERT_TRUE(wait_for([&] { return pub.current() != nullptr && pub.current()->generation == 2; }));
    // While the reader holds generation 1, publish() does not return, checked over 200 ms.
    auto end = std::chrono::steady_clock::now() + 200ms;
    bool early = false;
    while (std::chrono::steady_clock::now() < end && !early) {
        early = returned.load();
        std::this_thread::sleep_for(5ms);
    }
    EXPECT_FALSE(early) << "the old snapshot was freed while a reader held it";
    EXPECT_EQ(rec.seconds.size(), 1u);

    release = true;
    EXPECT_TRUE(wait_for([&] { return returned.load(); }));
    publisher.join();
    reader.join();
    EXPECT_EQ(read_generation.load(), 1u);
    ASSERT_EQ(rec.seconds.size(), 2u);
    EXPECT_GE(rec.seconds[1], 0.15);  // it waited for the reader

    rte_rcu_qsbr_thread_unregister(qsbr, 0);
    pub.retire();
    std::free(qsbr);
}

}  // namespace
