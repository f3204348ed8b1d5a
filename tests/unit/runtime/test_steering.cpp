// SPDX-License-Identifier: Apache-2.0
//
// The rte_flow steering rules (control/runtime/steering.h) without a NIC: the split of a worker's
// port block into masked matches checked port by port over all 65,536 ports against the data
// plane's own owner_of_port, and the exact testpmd text of the rules.
#include <gtest/gtest.h>

#include <vector>

#include "control/runtime/steering.h"
#include "dataplane/worker.h"

namespace egw::control {
namespace {

bool matches(PortMatch m, uint32_t port) {
    return (port & m.mask) == m.value;
}

// Every port 0..65535 is matched exactly once when inside lo..hi and never outside it.
void expect_exact_cover(uint16_t lo, uint16_t hi) {
    auto ms = split_port_range(lo, hi);
    std::vector<uint8_t> hits(65536, 0);
    for (PortMatch m : ms) {
        EXPECT_EQ(m.value & ~m.mask & 0xffff, 0) << "value has bits outside its mask";
        // The mask is a prefix: ones then zeros.
        uint32_t inv = ~uint32_t{m.mask} & 0xffff;
        EXPECT_EQ(inv & (inv + 1), 0u) << std::hex << m.mask;
    }
    for (uint32_t port = 0; port < 65536; ++port)
        for (PortMatch m : ms)
            hits[port] = static_cast<uint8_t>(hits[port] + matches(m, port));
    for (uint32_t port = 0; port < 65536; ++port) {
        bool inside = port >= lo && port <= hi;
        ASSERT_EQ(hits[port], inside ? 1 : 0) << "port " << port << " of " << lo << "-" << hi;
    }
    // A range is cut into at most two pieces per bit (one rising, one falling run).
    EXPECT_LE(ms.size(), 32u);
}

TEST(SplitPortRange, KnownSplits) {
    EXPECT_EQ(split_port_range(0, 65535), (std::vector<PortMatch>{{0, 0}}));
    EXPECT_EQ(split_port_range(40000, 40000), (std::vector<PortMatch>{{40000, 0xffff}}));
    EXPECT_EQ(split_port_range(32768, 65535), (std::vector<PortMatch>{{32768, 0x8000}}));
    // Two workers over 1024-65535: worker 0 has 1024-33279.
    EXPECT_EQ(split_port_range(1024, 33279),
              (std::vector<PortMatch>{
                  {1024, 0xfc00}, {2048, 0xf800}, {4096, 0xf000}, {8192, 0xe000}, {16384, 0xc000}, {32768, 0xfe00}}));
}

TEST(SplitPortRange, EveryPortMatchedExactlyOnceForAwkwardRanges) {
    for (auto [lo, hi] : std::vector<std::pair<uint16_t, uint16_t>>{{0, 65535},
                                                                    {1, 65534},
                                                                    {1024, 65535},
                                                                    {1000, 1009},
                                                                    {65535, 65535},
                                                                    {0, 0},
                                                                    {12345, 54321},
                                                                    {32767, 32768}})
        expect_exact_cover(lo, hi);
}

// The blocks the data plane gives n workers, and the owner it computes for every NAT port.
struct Workers {
    dp::DataplaneShared shared;
    std::vector<PortBlock> blocks;
    Workers(unsigned n, uint16_t min, uint16_t max) {
        shared.n_workers = n;
        shared.nat_port_min = min;
        shared.nat_port_max = max;
        for (unsigned i = 0; i < n; ++i) {
            dp::Worker w;
            w.index = i;
            w.shared = &shared;
            dp::worker_assign_port_block(w);
            blocks.push_back({w.nat_port_lo, w.nat_port_hi});
        }
    }
};

TEST(SteeringRules, EveryNatPortSteeredToTheWorkerTheDataPlaneHandsItTo) {
    // For 1-16 workers and a few ranges: each protocol's rules send every port of the range to
    // the queue of the worker owner_of_port names, and match no port outside the range.
    for (auto [min, max] : std::vector<std::pair<uint16_t, uint16_t>>{{1024, 65535}, {1000, 1009}, {20000, 29999}})
        for (unsigned n = 1; n <= dp::kMaxWorkers; ++n) {
            if (uint32_t{max} - min + 1 < n) continue;
            SCOPED_TRACE(testing::Message() << n << " workers, " << min << "-" << max);
            Workers ws(n, min, max);
            auto rules = steering_rules(0xc0000232, ws.blocks);
            for (SteeredProto proto : {SteeredProto::tcp, SteeredProto::udp, SteeredProto::icmp}) {
                std::vector<int> queue_of(65536, -1);
                for (const auto& r : rules) {
                    if (r.proto != proto) continue;
                    EXPECT_EQ(r.nat_ip, 0xc0000232u);
                    // A prefix mask matches value..value|~mask.
                    uint32_t inv = ~uint32_t{r.port.mask} & 0xffff;
                    ASSERT_EQ(inv & (inv + 1), 0u) << std::hex << r.port.mask;
                    uint32_t last = r.port.value | (~uint32_t{r.port.mask} & 0xffff);
                    for (uint32_t port = r.port.value; port <= last; ++port) {
                        ASSERT_TRUE(matches(r.port, port));
                        ASSERT_EQ(queue_of[port], -1) << "port " << port << " matched twice";
                        queue_of[port] = r.queue;
                    }
                }
                for (uint32_t port = 0; port < 65536; ++port) {
                    int want = port >= min && port <= max
                                   ? static_cast<int>(dp::owner_of_port(ws.shared, static_cast<uint16_t>(port)))
                                   : -1;
                    ASSERT_EQ(queue_of[port], want) << to_string(proto) << " port " << port;
                }
            }
        }
}

TEST(SteeringRules, TwoWorkersNeedTwelveRulesPerProtocol) {
    Workers ws(2, 1024, 65535);
    auto rules = steering_rules(0xc0000232, ws.blocks);
    ASSERT_EQ(rules.size(), 36u);
    EXPECT_EQ(rules[0], (SteeringRule{0xc0000232, SteeredProto::tcp, {1024, 0xfc00}, 0}));
    EXPECT_EQ(rules[6], (SteeringRule{0xc0000232, SteeredProto::tcp, {33280, 0xfe00}, 1}));
    EXPECT_EQ(rules[11], (SteeringRule{0xc0000232, SteeredProto::tcp, {49152, 0xc000}, 1}));
    EXPECT_EQ(rules[12].proto, SteeredProto::udp);
    EXPECT_EQ(rules[24].proto, SteeredProto::icmp);
    // One worker: the whole range to queue 0 (never installed: nothing to steer).
    EXPECT_EQ(steering_rules(1, Workers(1, 1024, 65535).blocks).size(), 3u * 6u);
}

// The queue each port of `proto` is steered to by `rules` (-1: no rule matches it), checking that
// no port is matched twice.
std::vector<int> queues_by_port(const std::vector<SteeringRule>& rules, SteeredProto proto) {
    std::vector<int> queue_of(65536, -1);
    for (const auto& r : rules) {
        if (r.proto != proto) continue;
        uint32_t last = r.port.value | (~uint32_t{r.port.mask} & 0xffff);
        for (uint32_t port = r.port.value; port <= last; ++port) {
            EXPECT_EQ(queue_of[port], -1) << "port " << port << " matched twice";
            queue_of[port] = r.queue;
        }
    }
    return queue_of;
}

TEST(SteeringRules, AServicePortOfTheIngressIpIsLeftToRss) {
    // The allocator never gives these out on this address, so a packet to one is ingress, which
    // any worker forwards: no rule may pin it to its block's worker. Edges of blocks, a port
    // outside the range and the other protocol's same port are all checked.
    Workers ws(2, 1024, 65535);
    ServicePorts holes{{SteeredProto::tcp, 1024},  {SteeredProto::tcp, 8080}, {SteeredProto::tcp, 33279},
                       {SteeredProto::tcp, 65535}, {SteeredProto::udp, 53},   {SteeredProto::udp, 40000}};
    auto rules = steering_rules(0xc0000232, ws.blocks, holes);
    for (SteeredProto proto : {SteeredProto::tcp, SteeredProto::udp, SteeredProto::icmp}) {
        SCOPED_TRACE(to_string(proto));
        std::vector<int> queue_of = queues_by_port(rules, proto);
        for (uint32_t port = 0; port < 65536; ++port) {
            bool hole = std::count(holes.begin(), holes.end(), ServicePort{proto, static_cast<uint16_t>(port)}) > 0;
            int want = port >= 1024 && !hole
                           ? static_cast<int>(dp::owner_of_port(ws.shared, static_cast<uint16_t>(port)))
                           : -1;
            ASSERT_EQ(queue_of[port], want) << "port " << port;
        }
    }
    // Without Service ports the rules are the plain blocks'.
    EXPECT_EQ(steering_rules(0xc0000232, ws.blocks, {}), steering_rules(0xc0000232, ws.blocks));
}

TEST(SteeringRules, TheRulesOfAnAddressFollowItsServicePorts) {
    Workers ws(2, 1024, 65535);
    Steering st;
    st.init({}, ws.blocks);
    st.update(std::map<uint32_t, ServicePorts>{{0xc0000232, {{SteeredProto::tcp, 8080}}}, {0xc0000201, {}}});
    EXPECT_EQ(st.nat_ips(), (std::vector<uint32_t>{0xc0000201, 0xc0000232}));
    EXPECT_EQ(queues_by_port(st.rules_of(0xc0000232), SteeredProto::tcp)[8080], -1);
    EXPECT_EQ(queues_by_port(st.rules_of(0xc0000201), SteeredProto::tcp)[8080], 0);
    // The Service stops listing it: its block's worker gets it back.
    st.update(std::map<uint32_t, ServicePorts>{{0xc0000232, {}}});
    EXPECT_EQ(st.nat_ips(), (std::vector<uint32_t>{0xc0000232}));
    EXPECT_EQ(queues_by_port(st.rules_of(0xc0000232), SteeredProto::tcp)[8080], 0);
}

TEST(SteeringRules, TestpmdSyntax) {
    EXPECT_EQ(testpmd_flow_create(2, SteeringRule{0xc0000232, SteeredProto::tcp, {32768, 0xfe00}, 0}),
              "flow create 2 ingress pattern eth / ipv4 dst is 192.0.2.50 / tcp dst spec 32768 dst mask 0xfe00 / end "
              "actions queue index 0 / end");
    EXPECT_EQ(testpmd_flow_create(0, SteeringRule{0xc6336401, SteeredProto::udp, {49152, 0xc000}, 3}),
              "flow create 0 ingress pattern eth / ipv4 dst is 198.51.100.1 / udp dst spec 49152 dst mask 0xc000 / end "
              "actions queue index 3 / end");
    EXPECT_EQ(testpmd_flow_create(1, SteeringRule{0xc0000232, SteeredProto::icmp, {1024, 0xfc00}, 1}),
              "flow create 1 ingress pattern eth / ipv4 dst is 192.0.2.50 / icmp type is 0 ident spec 1024 ident mask "
              "0xfc00 / end actions queue index 1 / end");
}

}  // namespace
}  // namespace egw::control
