// SPDX-License-Identifier: Apache-2.0
//
// Several workers: the NAT port range is cut into one block per worker; the worker a flow's key
// names (flow_owner.h) owns its session and gives it a NAT port of its block; packets received
// elsewhere (replies by their NAT port, flows from inside by their key) are handed to the owner
// through its single-producer/single-consumer ring (all receive queues are polled by worker 0
// here; other workers get their bursts through Rig::process).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "control/runtime/steering.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

RigOptions two_workers() {
    RigOptions o;
    o.workers = 2;
    return o;
}

// A source port of `pod` whose flow to `remote`:`dport` (UDP, or `proto`) worker `want` owns
// (flow_owner.h).
uint16_t port_owned_by(const Rig& r, uint32_t pod, uint32_t remote, unsigned want, uint16_t dport = 53,
                       uint8_t proto = IPPROTO_UDP) {
    for (uint16_t port = 40000;; ++port) {
        dp::FlowKey k{nbo32(pod), nbo32(remote), nbo16(port), nbo16(dport), proto, {}};
        if (dp::flow_owner(r.shared.flow_owners, k) == want) return port;
    }
}

uint16_t port_owned_by6(const Rig& r, const Ip6Addr& pod, const Ip6Addr& remote, unsigned want) {
    for (uint16_t port = 40000;; ++port) {
        dp::FlowKey6 k{};
        std::copy(pod.begin(), pod.end(), k.src);
        std::copy(remote.begin(), remote.end(), k.dst);
        k.sport = nbo16(port);
        k.dport = nbo16(53);
        k.proto = IPPROTO_UDP;
        if (dp::flow_owner(r.shared.flow_owners, k) == want) return port;
    }
}

// The owner of a flow from inside is the NIC's: the hash egw works out where the NIC did not
// (flow_owner.h) is the Toeplitz hash with egw's key (Microsoft's), so it gives Microsoft's
// published RSS test vectors, over the addresses alone (ICMP; a NIC's ipv4/ipv6 types) and with
// the ports (TCP, UDP). A flow's owner is its hash's redirection entry, spread over the workers.
TEST(FlowOwner, HashIsTheNicsToeplitzOverAddressesAndPorts) {
    dp::FlowOwners o;
    dp::flow_owners_init(o, 3, 128);
    struct V4 {
        uint32_t src;
        uint16_t sport;
        uint32_t dst;
        uint16_t dport;
        uint32_t l3, l4;
    };
    for (const V4& v : {V4{ip4(66, 9, 149, 187), 2794, ip4(161, 142, 100, 80), 1766, 0x323e8fc2, 0x51ccc178},
                        V4{ip4(199, 92, 111, 2), 14230, ip4(65, 69, 140, 83), 4739, 0xd718262a, 0xc626b0ea},
                        V4{ip4(24, 19, 198, 95), 12898, ip4(12, 22, 207, 184), 38024, 0xd2d0a5de, 0x5c2b394a},
                        V4{ip4(38, 27, 205, 30), 48228, ip4(209, 142, 163, 6), 2217, 0x82989176, 0xafc7327f},
                        V4{ip4(153, 39, 163, 191), 44251, ip4(202, 188, 127, 2), 1303, 0x5d1809c5, 0x10e828a2}}) {
        dp::FlowKey k{nbo32(v.src), nbo32(v.dst), nbo16(v.sport), nbo16(v.dport), IPPROTO_ICMP, {}};
        EXPECT_EQ(dp::flow_hash(o, k), v.l3) << std::hex << v.src;
        k.proto = IPPROTO_UDP;
        EXPECT_EQ(dp::flow_hash(o, k), v.l4) << std::hex << v.src;
        k.proto = IPPROTO_TCP;
        EXPECT_EQ(dp::flow_hash(o, k), v.l4) << std::hex << v.src;
        EXPECT_EQ(dp::flow_owner(o, k), (v.l4 & 127) % 3);
    }
    struct V6 {
        const char* src;
        uint16_t sport;
        const char* dst;
        uint16_t dport;
        uint32_t l3, l4;
    };
    for (const V6& v : {V6{"3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2cc18cd5, 0x40207d3d},
                        V6{"3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0f0c461c, 0xdde51bbf},
                        V6{"3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, "fe80::200:f8ff:fe21:67cf", 38024, 0x4b61e985,
                           0x02d1feef}}) {
        dp::FlowKey6 k{};
        Ip6Addr src = ip6(v.src), dst = ip6(v.dst);
        std::copy(src.begin(), src.end(), k.src);
        std::copy(dst.begin(), dst.end(), k.dst);
        k.sport = nbo16(v.sport);
        k.dport = nbo16(v.dport);
        k.proto = 58;  // ICMPv6: addresses only
        EXPECT_EQ(dp::flow_hash(o, k), v.l3) << v.src;
        k.proto = IPPROTO_TCP;
        EXPECT_EQ(dp::flow_hash(o, k), v.l4) << v.src;
    }
    // Every worker owns a share of the redirection entries.
    std::set<unsigned> owners;
    for (unsigned j = 0; j < 128; ++j)
        owners.insert(o.worker[j]);
    EXPECT_EQ(owners, (std::set<unsigned>{0, 1, 2}));
}

TEST_F(DataplaneTest, PortBlocksArePartitioned) {
    Rig& r = start(two_workers());
    // 1024-65535 is 64512 ports: 32256 each.
    EXPECT_EQ(r.w(0).nat_port_lo, 1024);
    EXPECT_EQ(r.w(0).nat_port_hi, 33279);
    EXPECT_EQ(r.w(1).nat_port_lo, 33280);
    EXPECT_EQ(r.w(1).nat_port_hi, 65535);
    EXPECT_EQ(dp::owner_of_port(r.shared, 1024), 0u);
    EXPECT_EQ(dp::owner_of_port(r.shared, 33279), 0u);
    EXPECT_EQ(dp::owner_of_port(r.shared, 33280), 1u);
    EXPECT_EQ(dp::owner_of_port(r.shared, 65535), 1u);
}

TEST_F(DataplaneTest, UnevenSplitGivesTheRemainderToTheLastWorker) {
    RigOptions o;
    o.workers = 3;
    o.configure = [](config::Config& c) {
        c.sessions.port_min = 1000;
        c.sessions.port_max = 1009;  // 10 ports: blocks of 3, the last takes 4
    };
    Rig& r = start(o);
    EXPECT_EQ(r.w(0).nat_port_lo, 1000);
    EXPECT_EQ(r.w(0).nat_port_hi, 1002);
    EXPECT_EQ(r.w(1).nat_port_lo, 1003);
    EXPECT_EQ(r.w(1).nat_port_hi, 1005);
    EXPECT_EQ(r.w(2).nat_port_lo, 1006);
    EXPECT_EQ(r.w(2).nat_port_hi, 1009);
    for (uint16_t port = 1000; port <= 1009; ++port) {
        unsigned owner = dp::owner_of_port(r.shared, port);
        EXPECT_GE(port, r.w(owner).nat_port_lo) << port;
        EXPECT_LE(port, r.w(owner).nat_port_hi) << port;
    }
}

// On a port whose NIC hashes as egwd set it up (FlowOwners::hardware), a TCP or UDP packet from
// inside that carries the NIC's hash (RTE_MBUF_F_RX_RSS_HASH) is owned by that hash's entry, taken
// as it is: nothing is computed, and the packet stays on the worker the hash names although the
// hash of its key worked out here names the other. Without the flag, or on another port, the key
// decides.
TEST_F(DataplaneTest, NicHashOfAProgrammedPortIsTakenAsItIs) {
    Rig& r = start(two_workers());
    // Three UDP flows of kPod10 whose keys name worker 1.
    std::vector<uint16_t> ports;
    for (uint16_t port = 40000; ports.size() < 3; ++port) {
        dp::FlowKey k{nbo32(kPod10), nbo32(kServer), nbo16(port), nbo16(53), IPPROTO_UDP, {}};
        if (dp::flow_owner(r.shared.flow_owners, k) == 1) ports.push_back(port);
    }
    const uint32_t worker0_hash = 0x1000;  // redirection entry 0: worker 0
    ASSERT_EQ(dp::owner_of_hash(r.shared.flow_owners, worker0_hash), 0u);
    auto frame = [&](uint16_t port) { return r.from_pod(kPod10, udp_ip(kPod10, port, kServer, 53, text("q"))); };
    // Not a programmed port: the key decides, worker 1.
    r.process(0, {{r.pods, frame(ports[0]), RTE_MBUF_F_RX_RSS_HASH, 0, worker0_hash}});
    EXPECT_EQ(r.w(0).counters.handed_off, 1u);
    r.poll(1);
    EXPECT_EQ(r.sessions(1).size(), 1u);
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    // A programmed port: the NIC's hash names worker 0, which keeps the flow.
    r.shared.flow_owners.hardware = 1u << r.pods;
    r.process(0, {{r.pods, frame(ports[1]), RTE_MBUF_F_RX_RSS_HASH, 0, worker0_hash}});
    EXPECT_EQ(r.w(0).counters.handed_off, 1u) << "no hand-off: the NIC's hash names worker 0";
    EXPECT_EQ(r.sessions(0).size(), 1u);
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
    // The same port without the flag (no hash delivered): the key decides again.
    r.process(0, {{r.pods, frame(ports[2]), 0, 0, worker0_hash}});
    EXPECT_EQ(r.w(0).counters.handed_off, 2u);
    EXPECT_EQ(r.handoff_pending(0, 1), 1u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

// A flow from inside is owned by the worker its key names (flow_owner.h), whichever received it:
// received by another it is handed over before any session is looked up, and the owner gives it a
// NAT port of its own block. Received by its owner (as a NIC egwd programmed delivers it) nothing
// is handed off.
TEST_F(DataplaneTest, FlowIsOwnedByTheWorkerItsKeyNames) {
    Rig& r = start(two_workers());
    const uint16_t sport = port_owned_by(r, kPod10, kServer, 1, 80, IPPROTO_TCP);
    r.rx(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, sport, kServer, 80, kSyn)));
    EXPECT_EQ(r.poll(0), 1u);
    EXPECT_EQ(r.w(0).counters.handed_off, 1u);
    EXPECT_EQ(r.handoff_pending(0, 1), 1u);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.poll(1), 1u);
    auto ss = r.sessions(1);
    ASSERT_EQ(ss.size(), 1u);
    EXPECT_TRUE(r.sessions(0).empty());
    uint16_t nat = rte_be_to_cpu_16(ss[0].nat_port);
    EXPECT_GE(nat, r.w(1).nat_port_lo);
    EXPECT_LE(nat, r.w(1).nat_port_hi);
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                  tcp_ip(kIngress, nat, kServer, 80, kSyn, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.svc(kWeb, 0).packets_out, 0u);
    EXPECT_EQ(r.svc(kWeb, 1).packets_out, 1u);

    // The reply is received by worker 0 and handed to worker 1 by its destination port.
    r.process(0, {{r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, nat, kSyn | kAck))}});
    EXPECT_TRUE(r.tx(r.pods).empty());
    EXPECT_EQ(r.w(0).counters.handed_off, 2u);
    EXPECT_EQ(r.handoff_pending(0, 1), 1u);
    EXPECT_EQ(r.poll(1), 1u);
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                  tcp_ip(kServer, 80, kPod10, sport, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_EQ(r.svc(kWeb, 1).packets_in, 1u);

    // The flow's next segment, received by its owner: no hand-off.
    r.process(1, {{r.pods, r.from_pod(kPod10, tcp_ip(kPod10, sport, kServer, 80, kAck))}});
    EXPECT_EQ(single(r.tx(r.ext1)).sport, nat);
    EXPECT_EQ(r.w(1).counters.handed_off, 0u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
    EXPECT_EQ(r.w(0).counters.sessions_created, 0u);
    EXPECT_EQ(r.w(1).counters.sessions_created, 1u);
}

TEST_F(DataplaneTest, FlowInOwnBlockStaysOnItsWorker) {
    Rig& r = start(two_workers());
    r.own_flows_from_inside_on(0);
    r.rx(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 2000, kServer, 53, text("q"))));
    r.poll(0);
    auto frames = r.tx(r.ext1);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(parse_frame(frames[0]).sport, 2000);
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    EXPECT_EQ(r.handoff_pending(0, 1), 0u);
    EXPECT_EQ(r.sessions(0).size(), 1u);
    EXPECT_TRUE(r.sessions(1).empty());
    r.rx(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 2000, text("a"))));
    r.poll(0);
    EXPECT_EQ(single(r.tx(r.pods)).dst, kPod10);
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
}

TEST_F(DataplaneTest, PortBelowTheRangeGetsANatPortInTheReceiversBlock) {
    Rig& r = start(two_workers());
    // Port 53 is below the NAT range: whichever worker receives the flow picks a port of its block.
    for (unsigned owner : {0u, 1u}) {
        SCOPED_TRACE(owner);
        uint32_t pod = owner == 0 ? kPod10 : kPod11;
        unsigned other = 1 - owner;
        uint64_t handed_before = r.w(owner).counters.handed_off, other_before = r.w(other).counters.handed_off;
        r.process(owner, {{r.pods, r.from_pod(pod, udp_ip(pod, 53, kServer, 53, text("q")))}});
        EXPECT_EQ(r.w(owner).counters.handed_off, handed_before);
        auto frames = r.tx(r.ext1);
        Parsed p = single(frames);
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.src, kIngress);
        EXPECT_GE(p.sport, r.w(owner).nat_port_lo);
        EXPECT_LE(p.sport, r.w(owner).nat_port_hi);
        EXPECT_EQ(frames[0], ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                                      udp_ip(kIngress, p.sport, kServer, 53, text("q"), IpOpt{.ttl = 63})));
        EXPECT_EQ(r.sessions(owner).size(), 1u);

        // Its reply, received by the other worker, is handed to the owner and reaches port 53.
        r.process(other, {{r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, p.sport, text("a")))}});
        EXPECT_EQ(r.handoff_pending(other, owner), 1u);
        EXPECT_EQ(r.w(other).counters.handed_off, other_before + 1);
        r.poll(owner);
        frames = r.tx(r.pods);
        ASSERT_TRUE(checksums_valid(single(frames)));
        EXPECT_EQ(frames[0], ethernet(owner == 0 ? kPod10Mac : kPod11Mac, kPodsMac, kEtherIpv4,
                                      udp_ip(kServer, 53, pod, 53, text("a"), IpOpt{.ttl = 63})));
    }
    EXPECT_EQ(r.sessions(0).size(), 1u);
    EXPECT_EQ(r.sessions(1).size(), 1u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

// web listening on `ports` (protocol << 16 | port) at its ingress IP, with the ingress next hop set
// (the cluster's router on the pods port), over two workers and the NAT range `lo`-`hi`.
RigOptions serving_ingress(std::vector<uint32_t> ports, uint16_t lo = 1024, uint16_t hi = 65535) {
    RigOptions o = two_workers();
    model::ServiceState web = lb_service(kWeb, kIngress, {kPod10, kPod11});
    web.ports = std::move(ports);
    o.services = {web};
    o.configure = [lo, hi](config::Config& c) {
        c.sessions.port_min = lo;
        c.sessions.port_max = hi;
        c.ingress.via = net::IpAddr::from_v4(kPodsRouter);
        c.ingress.port = "pods";
    };
    return o;
}

constexpr uint32_t service_port(uint8_t proto, uint16_t port) {
    return uint32_t{proto} << 16 | port;
}

// A connection from outside to a Service's port on its ingress IP holds no session (ingress.h),
// and no session holds that port (nat_ports.h): the worker that received it forwards it although
// the port lies in another worker's block, with no hand-off; an ICMP error quoting it the same.
// A reply to a session is still handed to the owner of its NAT port's block.
TEST_F(DataplaneTest, IngressToAServicePortInAnotherWorkersBlockStaysWhereItArrived) {
    Rig& r = start(serving_ingress({service_port(kProtoTcp, 40000)}));
    ASSERT_EQ(dp::owner_of_port(r.shared, 40000), 1u);
    Bytes syn = tcp_ip(kServer, 51000, kIngress, 40000, kSyn, {}, IpOpt{.ttl = 64, .id = 0x4242});
    r.process(0, {{r.ext1, r.from_ext1(syn)}});
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    EXPECT_EQ(r.handoff_pending(0, 1), 0u);
    auto in = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(in)));
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              tcp_ip(kServer, 51000, kIngress, 40000, kSyn, {}, IpOpt{.ttl = 63, .id = 0x4242})));
    EXPECT_EQ(r.w(0).counters.ingress_in, 1u);

    // A router's error about the cluster's answer (its quote: ingress IP and Service port as the
    // source) goes in with the connection, from worker 0 too.
    Bytes answer = tcp_ip(kIngress, 40000, kServer, 51000, kSyn | kAck, {}, IpOpt{.ttl = 63});
    Bytes error_in = ipv4(kServerB, kIngress, kProtoIcmp, icmp_error(3, 4, answer, 1400));
    r.process(0, {{r.ext1, r.from_ext1(error_in, kServerBMac)}});
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    EXPECT_EQ(r.handoff_pending(0, 1), 0u);
    in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 1u);
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              ipv4(kServerB, kIngress, kProtoIcmp, icmp_error(3, 4, answer, 1400), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.w(0).counters.ingress_in, 2u);

    // A session of worker 1: its reply, received by worker 0, is handed to worker 1.
    r.own_flows_from_inside_on(1);
    r.process(1, {{r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 45000, kServer, 80, kSyn))}});
    Parsed out = single(r.tx(r.ext1));
    ASSERT_EQ(r.sessions(1).size(), 1u);
    ASSERT_EQ(dp::owner_of_port(r.shared, out.sport), 1u);
    r.process(0, {{r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, out.sport, kSyn | kAck))}});
    EXPECT_EQ(r.w(0).counters.handed_off, 1u);
    EXPECT_EQ(r.handoff_pending(0, 1), 1u);
    EXPECT_TRUE(r.tx(r.pods).empty());
    r.poll(1);
    auto back = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(back)));
    EXPECT_EQ(back[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                tcp_ip(kServer, 80, kPod10, 45000, kSyn | kAck, {}, IpOpt{.ttl = 63})));
    EXPECT_TRUE(r.sessions(0).empty());
    EXPECT_EQ(r.w(1).counters.ingress_in, 0u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

// A pod's flow is never given a Service's port on its ingress IP as its NAT port, not even the
// pod's own port and not when it is the block's last free one; the same port of the other
// protocol, which the Service does not list, is given out as before.
TEST_F(DataplaneTest, NatPortsOnAnIngressIpLeaveOutItsServicesPorts) {
    // Blocks 1000-1004 (worker 0) and 1005-1009; web listens on UDP 1002.
    Rig& r = start(serving_ingress({service_port(kProtoUdp, 1002)}, 1000, 1009));
    r.own_flows_from_inside_on(0);
    std::set<uint16_t> given;
    // The pod's own port first (1002, in worker 0's block), then others, until the block is full.
    for (uint16_t pod_port : {uint16_t{1002}, uint16_t{2001}, uint16_t{2002}, uint16_t{2003}}) {
        r.process(0, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, pod_port, kServer, 53, text("q")))}});
        auto frames = r.tx(r.ext1);
        ASSERT_EQ(frames.size(), 1u) << pod_port;
        Parsed p = parse_frame(frames[0]);
        EXPECT_EQ(p.src, kIngress);
        given.insert(p.sport);
    }
    EXPECT_EQ(given, (std::set<uint16_t>{1000, 1001, 1003, 1004}));
    EXPECT_EQ(r.sessions(0).size(), 4u);
    r.process(0, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, 2004, kServer, 53, text("q")))}});
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::port_exhausted, 0), 1u) << "1002 is free but the Service's";
    // TCP 1002 is no Service's port: the pod keeps it.
    r.process(0, {{r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 1002, kServer, 80, kSyn))}});
    EXPECT_EQ(single(r.tx(r.ext1)).sport, 1002);
    EXPECT_TRUE(r.sessions(1).empty());
}

// A session that holds a port when its Service starts listing it keeps the port until it ends:
// its replies, received by its owner, still reach the pod (sessions are looked up first). New
// flows are given other ports, and once the session has ended the port is ingress alone.
TEST_F(DataplaneTest, ASessionHoldingAPortTheServiceStartsListingKeepsItUntilItEnds) {
    Rig& r = start(serving_ingress({}, 1000, 1009));
    r.own_flows_from_inside_on(0);
    r.process(0, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, 1002, kServer, 53, text("q")))}});
    ASSERT_EQ(single(r.tx(r.ext1)).sport, 1002);

    model::ServiceState web = lb_service(kWeb, kIngress, {kPod10, kPod11});
    web.ports = {service_port(kProtoUdp, 1002)};
    r.publish({web});
    r.process(0, {{r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 1002, text("a")))}});
    auto back = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(back)));
    EXPECT_EQ(back[0], ethernet(kPod10Mac, kPodsMac, kEtherIpv4,
                                udp_ip(kServer, 53, kPod10, 1002, text("a"), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.w(0).counters.ingress_in, 0u);
    // Another pod's flow from the same port, to another remote (toward which 1002 is free), is
    // given another.
    r.process(0, {{r.pods, r.from_pod(kPod11, udp_ip(kPod11, 1002, kServerB, 53, text("q")))}});
    uint16_t other = single(r.tx(r.ext1)).sport;
    EXPECT_NE(other, 1002);
    EXPECT_GE(other, 1000);
    EXPECT_LE(other, 1004);

    r.advance(r.shared.timeouts.udp + 1);
    r.sweep(0);
    EXPECT_TRUE(r.sessions(0).empty());
    r.process(0, {{r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, 1002, text("a")))}});
    auto in = r.tx(r.pods);
    ASSERT_EQ(in.size(), 1u);
    EXPECT_EQ(in[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                              udp_ip(kServer, 53, kIngress, 1002, text("a"), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.w(0).counters.ingress_in, 1u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

TEST_F(DataplaneTest, IcmpRepliesAreHandedOffByIdentifierAndQuotedPort) {
    Rig& r = start(two_workers());
    r.own_flows_from_inside_on(0);
    // An echo with an identifier of worker 1's block, received by worker 0: worker 0's session,
    // with an identifier of worker 0's block.
    r.rx(r.pods, r.from_pod(kPod10, echo_ip(true, kPod10, kServer, 50000, 1)));
    r.poll(0);
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    ASSERT_EQ(r.sessions(0).size(), 1u);
    EXPECT_GE(p.icmp_ident, r.w(0).nat_port_lo);
    EXPECT_LE(p.icmp_ident, r.w(0).nat_port_hi);
    r.process(1, {{r.ext1, r.from_ext1(echo_ip(false, kServer, kIngress, p.icmp_ident, 1))}});
    EXPECT_EQ(r.handoff_pending(1, 0), 1u);
    r.poll(0);
    Parsed back = single(r.tx(r.pods));
    EXPECT_EQ(back.dst, kPod10);
    EXPECT_EQ(back.icmp_ident, 50000);

    // A UDP flow of worker 1, then an ICMP error about it received by worker 0.
    r.own_flows_from_inside_on(1);
    r.process(1, {{r.pods, r.from_pod(kPod11, udp_ip(kPod11, 60000, kServer, 53, text("q")))}});
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(r.sessions(1).size(), 1u);
    Bytes sent(frames[0].begin() + 14, frames[0].end());
    uint16_t nat = parse_frame(frames[0]).sport;
    r.rx(r.ext1, r.from_ext1(ipv4(kServer, kIngress, kProtoIcmp, icmp_error(3, 3, sent))));
    r.poll(0);
    EXPECT_EQ(r.handoff_pending(0, 1), 1u);
    r.poll(1);
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              ethernet(kPod11Mac, kPodsMac, kEtherIpv4,
                       ipv4(kServer, kPod11, kProtoIcmp,
                            icmp_error(3, 3, udp_ip(kPod11, 60000, kServer, 53, text("q"), IpOpt{.ttl = 63})),
                            IpOpt{.ttl = 63})))
        << "NAT port " << nat;
    EXPECT_EQ(r.w(0).counters.handed_off, 1u);
    EXPECT_EQ(r.w(1).counters.handed_off, 1u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

TEST_F(DataplaneTest, LargeBurstOfRepliesForAnotherWorkerIsHandedOffWhole) {
    // More replies for one worker than a burst holds, in one call, toward the last worker.
    RigOptions o;
    o.workers = dp::kMaxWorkers;
    o.sessions_per_worker = 128;
    Rig& r = start(o);
    unsigned last = dp::kMaxWorkers - 1;
    r.own_flows_from_inside_on(last);  // the last worker opens the flows, worker 0 gets their replies
    unsigned n = 2 * dp::kBurst + 5;
    std::vector<In> out;
    for (uint16_t i = 0; i < n; ++i)
        out.push_back({r.pods, r.from_pod(kPod10, udp_ip(kPod10, static_cast<uint16_t>(r.w(last).nat_port_lo + i),
                                                         kServer, 53, text("q")))});
    r.process(last, out);
    EXPECT_EQ(r.tx(r.ext1).size(), n) << "the pod ports lie in the receiver's block: kept";
    std::vector<In> replies;
    for (uint16_t i = 0; i < n; ++i)
        replies.push_back({r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress,
                                                      static_cast<uint16_t>(r.w(last).nat_port_lo + i), text("a")))});
    r.process(0, replies);
    EXPECT_EQ(r.w(0).counters.handed_off, n);
    EXPECT_EQ(r.handoff_pending(0, last), n);
    EXPECT_EQ(r.total_drops(0), 0u);
    while (r.poll(last)) {
    }
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), n);
    for (size_t i = 0; i < frames.size(); ++i) {
        Parsed p = parse_frame(frames[i]);
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.dport, r.w(last).nat_port_lo + i);
        EXPECT_EQ(p.dst, kPod10);
    }
    EXPECT_EQ(r.sessions(last).size(), n);
    EXPECT_EQ(r.svc(kWeb, last).packets_in, n);
}

// The IPv6 twins of the two tests above: an ICMPv6 echo reply is handed to its owner by its
// identifier, an ICMPv6 error by the port its quote names; a burst of IPv6 replies bigger than a
// burst goes to the last worker whole.
TEST_F(DataplaneTest, Icmpv6RepliesAreHandedOffByIdentifierAndQuotedPort) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    o.workers = 2;
    Rig& r = start(o);
    r.own_flows_from_inside_on(0);
    r.rx(r.pods, from_pod6(kPod10v6, echo6_ip(true, kPod10v6, kServerV6, 50000, 1)));
    r.poll(0);
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(checksums_valid(p));
    ASSERT_EQ(r.sessions6(0).size(), 1u);
    EXPECT_EQ(p.src6, kIngressV6);
    EXPECT_GE(p.icmp_ident, r.w(0).nat_port_lo);
    EXPECT_LE(p.icmp_ident, r.w(0).nat_port_hi);
    r.process(1, {{r.ext1, from_ext1_6(echo6_ip(false, kServerV6, kIngressV6, p.icmp_ident, 1))}});
    EXPECT_EQ(r.handoff_pending(1, 0), 1u);
    EXPECT_TRUE(r.tx(r.pods).empty());
    r.poll(0);
    auto frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, echo6_ip(false, kServerV6, kPod10v6, 50000, 1, {}, Ip6Opt{63})));

    // A UDP flow of worker 1, then an ICMPv6 port unreachable about it received by worker 0.
    r.own_flows_from_inside_on(1);
    r.process(1, {{r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 60000, kServerV6, 53, text("q")))}});
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(r.sessions6(1).size(), 1u);
    auto error_body = [](const Bytes& quoted) {
        Bytes b(4 + quoted.size(), 0);  // the unused word, then the quote
        std::copy(quoted.begin(), quoted.end(), b.begin() + 4);
        return b;
    };
    Bytes sent(frames[0].begin() + 14, frames[0].end());
    r.rx(r.ext1, from_ext1_6(icmp6_ip(kServerV6, kIngressV6, 1, 4, error_body(sent))));
    r.poll(0);
    EXPECT_EQ(r.handoff_pending(0, 1), 1u);
    EXPECT_TRUE(r.tx(r.pods).empty());
    r.poll(1);
    frames = r.tx(r.pods);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0],
              to_pod6(kPod11v6, icmp6_ip(kServerV6, kPod11v6, 1, 4,
                                         error_body(udp6_ip(kPod11v6, 60000, kServerV6, 53, text("q"), Ip6Opt{63})),
                                         Ip6Opt{63})));
    EXPECT_EQ(r.w(0).counters.handed_off, 1u);
    EXPECT_EQ(r.w(1).counters.handed_off, 1u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

// An ICMP error a pod sends about one of its flows (port unreachable for an answer that came too
// late) reaches the flow's owner wherever it was received: its quote names the flow's key, and so
// its owner. Without that, a worker that received it and did not own the flow dropped it as
// no_session, which a NIC's RSS made (N-1)/N of them (the error's own addresses and no ports).
TEST_F(DataplaneTest, IcmpErrorFromAPodReachesTheOwnerOfTheFlowItQuotes) {
    Rig& r = start(two_workers());
    for (unsigned owner : {0u, 1u}) {
        SCOPED_TRACE(owner);
        const unsigned other = 1 - owner;
        const uint16_t sport = port_owned_by(r, kPod10, kServer, owner);
        r.process(owner, {{r.pods, r.from_pod(kPod10, udp_ip(kPod10, sport, kServer, 53, text("q")))}});
        const uint16_t nat = single(r.tx(r.ext1)).sport;
        r.process(owner, {{r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, nat, text("answer")))}});
        auto frames = r.tx(r.pods);
        ASSERT_EQ(frames.size(), 1u);
        Bytes got(frames[0].begin() + 14, frames[0].end());  // the answer as the pod got it
        const uint64_t handed = r.w(other).counters.handed_off;
        r.process(other, {{r.pods, r.from_pod(kPod10, ipv4(kPod10, kServer, kProtoIcmp, icmp_error(3, 3, got)))}});
        EXPECT_TRUE(r.tx(r.ext1).empty());
        EXPECT_EQ(r.handoff_pending(other, owner), 1u);
        EXPECT_EQ(r.w(other).counters.handed_off, handed + 1);
        r.poll(owner);
        frames = r.tx(r.ext1);
        ASSERT_TRUE(checksums_valid(single(frames)));
        EXPECT_EQ(frames[0],
                  ethernet(kServerMac, kExt1Mac, kEtherIpv4,
                           ipv4(kIngress, kServer, kProtoIcmp,
                                icmp_error(3, 3, udp_ip(kServer, 53, kIngress, nat, text("answer"), IpOpt{.ttl = 63})),
                                IpOpt{.ttl = 63})))
            << "the error and its quote name the NAT address and port " << nat;
    }
    EXPECT_EQ(r.drops(DropReason::no_session, 0) + r.drops(DropReason::no_session, 1), 0u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

TEST_F(DataplaneTest, Icmpv6ErrorFromAPodReachesTheOwnerOfTheFlowItQuotes) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    o.workers = 2;
    Rig& r = start(o);
    auto error_body = [](const Bytes& quoted) {
        Bytes b(4 + quoted.size(), 0);
        std::copy(quoted.begin(), quoted.end(), b.begin() + 4);
        return b;
    };
    for (unsigned owner : {0u, 1u}) {
        SCOPED_TRACE(owner);
        const unsigned other = 1 - owner;
        const uint16_t sport = port_owned_by6(r, kPod10v6, kServerV6, owner);
        r.process(owner, {{r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, sport, kServerV6, 53, text("q")))}});
        const uint16_t nat = single(r.tx(r.ext1)).sport;
        r.process(owner, {{r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, nat, text("answer")))}});
        auto frames = r.tx(r.pods);
        ASSERT_EQ(frames.size(), 1u);
        Bytes got(frames[0].begin() + 14, frames[0].end());
        r.process(other, {{r.pods, from_pod6(kPod10v6, icmp6_ip(kPod10v6, kServerV6, 1, 4, error_body(got)))}});
        EXPECT_TRUE(r.tx(r.ext1).empty());
        EXPECT_EQ(r.handoff_pending(other, owner), 1u);
        r.poll(owner);
        frames = r.tx(r.ext1);
        ASSERT_TRUE(checksums_valid(single(frames)));
        EXPECT_EQ(frames[0],
                  ethernet(kServerMac, kExt1Mac, kEtherIpv6,
                           icmp6_ip(kIngressV6, kServerV6, 1, 4,
                                    error_body(udp6_ip(kServerV6, 53, kIngressV6, nat, text("answer"), Ip6Opt{63})),
                                    Ip6Opt{63})));
    }
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
}

TEST_F(DataplaneTest, LargeBurstOfIpv6RepliesForAnotherWorkerIsHandedOffWhole) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    o.workers = dp::kMaxWorkers;
    o.sessions_per_worker = 128;
    Rig& r = start(o);
    unsigned last = dp::kMaxWorkers - 1;
    r.own_flows_from_inside_on(last);  // the last worker opens the flows, worker 0 gets their replies
    unsigned n = 2 * dp::kBurst + 5;
    std::vector<In> out;
    for (uint16_t i = 0; i < n; ++i)
        out.push_back({r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, static_cast<uint16_t>(r.w(last).nat_port_lo + i),
                                                           kServerV6, 53, text("q")))});
    r.process(last, out);
    EXPECT_EQ(r.tx(r.ext1).size(), n) << "the pod ports lie in the receiver's block: kept";
    std::vector<In> replies;
    for (uint16_t i = 0; i < n; ++i)
        replies.push_back({r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6,
                                                       static_cast<uint16_t>(r.w(last).nat_port_lo + i), text("a")))});
    r.process(0, replies);
    EXPECT_EQ(r.w(0).counters.handed_off, n);
    EXPECT_EQ(r.handoff_pending(0, last), n);
    EXPECT_EQ(r.total_drops(0), 0u);
    while (r.poll(last)) {
    }
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), n);
    for (size_t i = 0; i < frames.size(); ++i) {
        Parsed p = parse_frame(frames[i]);
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.dport, r.w(last).nat_port_lo + i);
        EXPECT_EQ(p.dst6, kPod10v6);
        EXPECT_EQ(p.src6, kServerV6);
    }
    EXPECT_EQ(r.sessions6(last).size(), n);
    EXPECT_EQ(r.svc(kWeb, last).packets_in, n);
    EXPECT_EQ(r.total_drops(last), 0u);
}

// Steering on a device without rte_flow (net_ring, like every virtual device): the first rule
// is refused by rte_flow_validate, the port falls back to the software hand-off with the reason,
// and nothing fails. Replies are then handed off as the tests above show.
TEST_F(DataplaneTest, SteeringFallsBackToSoftwareWhereTheDeviceHasNoRteFlow) {
    Rig& r = start(two_workers());
    std::vector<control::PortBlock> blocks{{r.w(0).nat_port_lo, r.w(0).nat_port_hi},
                                           {r.w(1).nat_port_lo, r.w(1).nat_port_hi}};
    control::Steering st;
    st.update(std::vector<uint32_t>{kIngress});  // the first policy is published before the ports start
    st.init({{r.ext1, "ext1", 2}, {r.ext2, "ext2", 1}}, blocks);
    ASSERT_EQ(st.ports().size(), 2u);
    const auto& ext1 = st.ports()[0];
    EXPECT_EQ(ext1.mode, control::Steering::Mode::software);
    std::string first = "rte_flow_validate refused flow create " + std::to_string(r.ext1) +
                        " ingress pattern eth / ipv4 dst is 192.0.2.50 / tcp dst spec 1024 dst mask 0xfc00 / end "
                        "actions queue index 0 / end: ";
    EXPECT_EQ(ext1.reason.substr(0, first.size()), first) << ext1.reason;
    EXPECT_TRUE(ext1.flows.empty());
    const auto& ext2 = st.ports()[1];
    EXPECT_EQ(ext2.mode, control::Steering::Mode::software);
    EXPECT_EQ(ext2.reason, "1 receive queue(s) for 2 workers: queue w is not worker w's");
    EXPECT_EQ(st.nat_ips(), (std::vector<uint32_t>{kIngress}));
    // A later change of NAT addresses touches no software port.
    st.update(std::vector<uint32_t>{kIngress, kExt1Addr});
    EXPECT_TRUE(st.ports()[0].flows.empty());
    EXPECT_EQ(st.rules_of(kExt1Addr).size(), 36u);

    control::Steering one;
    one.init({{r.ext1, "ext1", 1}}, {{1024, 65535}});
    EXPECT_EQ(one.ports()[0].reason, "one worker: every reply is its own");
}

TEST_F(DataplaneTest, SessionListingIsServedByTheWorker) {
    RigOptions o;
    o.sessions_per_worker = 256;
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    r.process(r.pods, r.from_pod(kPod11, tcp_ip(kPod11, 40001, kServer, 80, kSyn)));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    r.w().dump_request.store(1);
    // Both tables of the rig are one iteration's scan.
    ASSERT_LE(dp::dump_slots(r.w()), dp::kDumpScanPerIteration);
    r.poll();
    EXPECT_EQ(r.w().dump_done.load(), 1u);
    ASSERT_EQ(r.w().dump_count, 2u);
    std::set<uint16_t> ports;
    for (uint32_t i = 0; i < r.w().dump_count; ++i)
        ports.insert(r.w().dump_buffer[i].session.pod_port);
    EXPECT_EQ(ports, (std::set<uint16_t>{nbo16(40000), nbo16(40001)}));
}

// An IPv6 UDP session of kWeb's from pod port `port`, current under the rig's policy and seen now.
dp::Session6 web_udp_session6(Rig& r, uint16_t port) {
    dp::Session6 s{};
    s.pod_ip = dp::Ip6{{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10}};
    s.remote_ip = dp::Ip6{{0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}};
    s.nat_ip = dp::Ip6{{0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x50}};
    s.pod_port = s.nat_port = nbo16(port);
    s.remote_port = nbo16(53);
    s.proto = 17;
    s.service_id = static_cast<uint16_t>(r.service_id(kWeb));
    s.service_version = r.policy().services[s.service_id].version;
    s.epoch = static_cast<uint32_t>(r.policy().generation);
    s.last_seen = r.w().now;
    return s;
}

// The IPv6 table is walked by the same requests: a listing holds its sessions after the IPv4
// ones (marked v6), a flush of a Service closes them too, and the expiry sweep ends them.
TEST_F(DataplaneTest, Ipv6SessionsAreListedFlushedAndExpiredWithTheIpv4Ones) {
    RigOptions o;
    o.sessions_per_worker = 256;  // both tables in one iteration's scan
    Rig& r = start(o);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    auto v6 = [&](uint16_t port) { return web_udp_session6(r, port); };
    ASSERT_NE(r.w().sessions6.create(v6(41000)), dp::SessionTable6::kNone);
    ASSERT_EQ(dp::dump_slots(r.w()), 512u);
    r.w().dump_request.store(1);
    r.poll();
    ASSERT_EQ(r.w().dump_done.load(), 1u);
    ASSERT_EQ(r.w().dump_count, 2u);
    EXPECT_FALSE(r.w().dump_buffer[0].v6);
    EXPECT_EQ(r.w().dump_buffer[0].session.pod_port, nbo16(40000));
    EXPECT_TRUE(r.w().dump_buffer[1].v6);
    EXPECT_EQ(r.w().dump_buffer[1].session6.pod_port, nbo16(41000));
    EXPECT_EQ(r.w().dump_buffer[1].session6.nat_ip.b[15], 0x50);

    // A flush of the Service closes the sessions of both tables.
    r.w().flush_service = r.service_id(kWeb);
    r.w().flush_request.store(1);
    r.poll();
    ASSERT_EQ(r.w().flush_done.load(), 1u);
    EXPECT_EQ(r.w().flush_closed, 2u);
    EXPECT_EQ(r.w().sessions.active(), 0u);
    EXPECT_EQ(r.w().sessions6.active(), 0u);

    // The sweep ends an idle IPv6 session at the UDP timeout, not before.
    r.w().now = 1'000'000;
    auto s = v6(41001);
    s.last_seen = r.w().now;
    ASSERT_NE(r.w().sessions6.create(s), dp::SessionTable6::kNone);
    uint64_t closed = r.w().counters.sessions_closed;
    r.advance(r.shared.timeouts.udp);
    r.sweep();
    EXPECT_EQ(r.w().sessions6.active(), 1u);
    r.advance(1);
    r.sweep();
    EXPECT_EQ(r.w().sessions6.active(), 0u);
    EXPECT_EQ(r.w().counters.sessions_closed, closed + 1);
}

// However sparse the table, one poll iteration looks at kDumpScanPerIteration slots at most: a
// listing of a large table is spread over iterations, the packets keep flowing meanwhile, and
// the answer holds every session, found wherever it sits.
TEST_F(DataplaneTest, SessionListingOfASparseTableIsSpreadOverIterations) {
    RigOptions o;
    o.sessions_per_worker = 64 * dp::kDumpScanPerIteration;
    Rig& r = start(o);
    dp::SessionTable& st = r.w().sessions;
    // Sessions fill the table from slot 0 up: make it full, then keep only the last slot's and
    // one in the middle.
    std::vector<uint32_t> made;
    for (uint32_t i = 0; i < st.capacity(); ++i) {
        dp::Session s{};
        s.pod_ip = nbo32(kPod10);
        s.remote_ip = nbo32(kServer);
        s.pod_port = nbo16(static_cast<uint16_t>(i));
        s.remote_port = nbo16(443);
        s.nat_ip = nbo32(kIngress);
        s.nat_port = nbo16(static_cast<uint16_t>(i));
        s.proto = 6;
        s.service_id = static_cast<uint16_t>(r.service_id(kWeb));
        s.service_version = r.policy().services[s.service_id].version;
        s.last_seen = r.w().now;
        made.push_back(st.create(s));
        ASSERT_NE(made.back(), dp::SessionTable::kNone);
    }
    const uint32_t middle = st.capacity() / 2, last = st.capacity() - 1;
    for (uint32_t idx : made)
        if (idx != middle && idx != last) st.destroy(idx);
    ASSERT_EQ(st.active(), 2u);

    r.w().dump_request.store(1, std::memory_order_release);
    unsigned iterations = 0;
    uint32_t cursor = 0;
    bool forwarded = false;
    while (r.w().dump_done.load(std::memory_order_acquire) != 1u) {
        ASSERT_LT(iterations, 1000u) << "the listing never finished";
        // Traffic in the same iterations is forwarded as usual.
        if (iterations == 10) {
            r.rx(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
            r.poll();
            forwarded = r.tx(r.ext1).size() == 1;
        } else {
            r.poll();
        }
        ++iterations;
        // Slots looked at: the IPv4 table's, every one of which has been handed out. The IPv6
        // table's never were, and are stepped over without being looked at.
        uint32_t looked_up_to = std::min(r.w().dump_cursor, st.capacity());
        ASSERT_LE(looked_up_to - cursor, dp::kDumpScanPerIteration) << "iteration " << iterations;
        cursor = looked_up_to;
    }
    EXPECT_TRUE(forwarded);
    ASSERT_EQ(st.slots_handed_out(), st.capacity());
    ASSERT_EQ(r.w().sessions6.slots_handed_out(), 0u);
    EXPECT_EQ(iterations, st.capacity() / dp::kDumpScanPerIteration);
    EXPECT_EQ(r.w().dump_next, dp::dump_slots(r.w()));
    // The flow that came meanwhile took the slot freed last (last - 1), which the scan had not
    // reached yet: a listing is not a snapshot, it shows what each slot held when it was read.
    ASSERT_EQ(r.w().dump_count, 3u);
    EXPECT_EQ(r.w().dump_buffer[0].session.pod_port, nbo16(static_cast<uint16_t>(middle)));
    EXPECT_EQ(r.w().dump_buffer[1].session.pod_port, nbo16(40000));
    EXPECT_EQ(r.w().dump_buffer[2].session.pod_port, nbo16(static_cast<uint16_t>(last)));

    // A page of the table (what the CLI asks for) is bounded the same way, and says where it
    // stopped.
    r.w().dump_start = 1000;
    r.w().dump_scan = 3 * dp::kDumpScanPerIteration;
    r.w().dump_request.store(2, std::memory_order_release);
    iterations = 0;
    while (r.w().dump_done.load(std::memory_order_acquire) != 2u && iterations < 100) {
        r.poll();
        ++iterations;
    }
    EXPECT_EQ(iterations, 3u);
    EXPECT_EQ(r.w().dump_next, 1000 + 3 * dp::kDumpScanPerIteration);
    EXPECT_EQ(r.w().dump_count, 0u);
}

// A table made for many sessions that holds a few: a listing and a clear look only at the slots
// handed out (below each table's slots_handed_out()), so they answer in one poll iteration
// where walking sessions.max would take 128 and 32, and a page that ends among the slots never
// handed out sends the next one to where a session could be.
TEST_F(DataplaneTest, SessionListingAndClearStepOverTheSlotsNeverHandedOut) {
    RigOptions o;
    o.sessions_per_worker = 64 * dp::kDumpScanPerIteration;
    Rig& r = start(o);
    for (uint16_t port = 40000; port < 40003; ++port)
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, port, kServer, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 3u);
    ASSERT_NE(r.w().sessions6.create(web_udp_session6(r, 41000)), dp::SessionTable6::kNone);
    const uint32_t cap4 = r.w().sessions.capacity();
    ASSERT_EQ(r.w().sessions.slots_handed_out(), 3u);
    ASSERT_EQ(r.w().sessions6.slots_handed_out(), 1u);
    ASSERT_EQ(dp::dump_slots(r.w()), 2 * cap4);

    // A listing request from slot `start` over `scan` slots (0: to the end), answered in the
    // one poll iteration that follows, or not.
    uint32_t asked = 0;
    auto listed_in_one_iteration = [&](uint32_t start, uint32_t scan) {
        r.w().dump_start = start;
        r.w().dump_scan = scan;
        r.w().dump_request.store(++asked, std::memory_order_release);
        r.poll();
        return r.w().dump_done.load(std::memory_order_acquire) == asked;
    };

    // The whole table, as the status file asks for it.
    ASSERT_TRUE(listed_in_one_iteration(0, 0));
    ASSERT_EQ(r.w().dump_count, 4u);
    std::set<uint16_t> ports;
    for (uint32_t i = 0; i < 3; ++i) {
        EXPECT_FALSE(r.w().dump_buffer[i].v6);
        ports.insert(r.w().dump_buffer[i].session.pod_port);
    }
    EXPECT_EQ(ports, (std::set<uint16_t>{nbo16(40000), nbo16(40001), nbo16(40002)}));
    EXPECT_TRUE(r.w().dump_buffer[3].v6);
    EXPECT_EQ(r.w().dump_buffer[3].session6.pod_port, nbo16(41000));
    EXPECT_EQ(r.w().dump_next, dp::dump_slots(r.w()));

    // A page among the IPv4 table's unused slots finds nothing and sends the next page to IPv6
    // slot 0; that page lists the IPv6 session and says nothing is left after it.
    ASSERT_TRUE(listed_in_one_iteration(100, 1000));
    EXPECT_EQ(r.w().dump_count, 0u);
    EXPECT_EQ(r.w().dump_next, cap4);
    ASSERT_TRUE(listed_in_one_iteration(cap4, 1000));
    ASSERT_EQ(r.w().dump_count, 1u);
    EXPECT_TRUE(r.w().dump_buffer[0].v6);
    EXPECT_EQ(r.w().dump_next, dp::dump_slots(r.w()));

    // A page that ends among the slots handed out says where the next one starts; one that
    // ends among the slots never handed out, where the next one could find a session.
    ASSERT_TRUE(listed_in_one_iteration(0, 2));
    EXPECT_EQ(r.w().dump_count, 2u);
    EXPECT_EQ(r.w().dump_next, 2u);
    ASSERT_TRUE(listed_in_one_iteration(2, 10));
    EXPECT_EQ(r.w().dump_count, 1u);
    EXPECT_EQ(r.w().dump_next, cap4);

    // Clearing every session: one iteration too, where kFlushPerIteration slots at a time over
    // sessions.max would take dump_slots() / kFlushPerIteration.
    ASSERT_GT(dp::dump_slots(r.w()) / dp::kFlushPerIteration, 1u);
    r.w().flush_service = dp::kFlushAll;
    r.w().flush_request.store(1, std::memory_order_release);
    r.poll();
    ASSERT_EQ(r.w().flush_done.load(), 1u) << "one iteration";
    EXPECT_EQ(r.w().flush_closed, 4u);
    EXPECT_EQ(r.w().sessions.active(), 0u);
    EXPECT_EQ(r.w().sessions6.active(), 0u);
    EXPECT_EQ(r.w().flush_cursor, 0u);
}

}  // namespace
}  // namespace egw::test
