// SPDX-License-Identifier: Apache-2.0
//
// The DSCP and ECN bits a packet arrives with leave with it, through every translation egw makes
// without an EgressQoS rule: NAT44 and NAT66, out and back, for a Service's ingress IP and for the
// default action's masquerade. An upstream mark (set by the pod, by OVN's QoS, or a congestion
// mark on the way back) must survive the gateway, and the header checksum must still be right
// after the rewrite around it. Each output is compared byte for byte with the frame that a
// correct translation gives, built by packet.cpp with the same IPv4 TOS or IPv6 traffic class.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using namespace std_rig6;

// DSCP in the upper six bits, ECN in the lower two: none, EF, CE alone, EF with ECT(1), CS7
// with CE (every bit set but one).
constexpr uint8_t kMarks[] = {0x00, 0xb8, 0x03, 0xb9, 0xe3};

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

struct Policy {
    const char* name;
    bool service;  // web's ingress IP; otherwise the default action's masquerade
};
constexpr Policy kPolicies[] = {{"web's ingress IP", true}, {"default action", false}};

TEST_F(DataplaneTest, DscpAndEcnSurviveNapt44BothWays) {
    Rig& r = start();
    const Bytes payload = text("marked");
    uint16_t pod_port = 40000;
    for (const Policy& pol : kPolicies)
        for (uint8_t mark : kMarks) {
            SCOPED_TRACE(std::string(pol.name) + ", TOS " + std::to_string(mark));
            const uint32_t pod = pol.service ? kPod10 : kPod20;
            const uint32_t remote = pol.service ? kServer : kInternet;
            const uint32_t nat = pol.service ? kIngress : kExt1Addr;
            const Mac remote_mac = pol.service ? kServerMac : kExt1GwMac;
            ++pod_port;
            r.process(r.pods,
                      r.from_pod(pod, udp_ip(pod, pod_port, remote, 443, payload, IpOpt{.ttl = 64, .tos = mark})));
            auto frames = r.tx(r.ext1);
            ASSERT_EQ(frames.size(), 1u);
            Parsed p = parse_frame(frames[0]);
            ASSERT_TRUE(checksums_valid(p));
            EXPECT_EQ(p.tos, mark);
            const uint16_t nat_port = p.sport;
            EXPECT_EQ(frames[0], ethernet(remote_mac, kExt1Mac, kEtherIpv4,
                                          udp_ip(nat, nat_port, remote, 443, payload, IpOpt{.ttl = 63, .tos = mark})));

            // The reply carries a mark of its own (the upstream network's, or CE on the way).
            const uint8_t back_mark = static_cast<uint8_t>(mark ^ 0x03);
            r.process(r.ext1,
                      r.from_ext1(udp_ip(remote, 443, nat, nat_port, payload, IpOpt{.ttl = 57, .tos = back_mark}),
                                  remote_mac));
            frames = r.tx(r.pods);
            ASSERT_EQ(frames.size(), 1u);
            p = parse_frame(frames[0]);
            ASSERT_TRUE(checksums_valid(p));
            EXPECT_EQ(p.tos, back_mark);
            const Mac pod_mac = pol.service ? kPod10Mac : kPod20Mac;
            EXPECT_EQ(frames[0],
                      ethernet(pod_mac, kPodsMac, kEtherIpv4,
                               udp_ip(remote, 443, pod, pod_port, payload, IpOpt{.ttl = 56, .tos = back_mark})));
        }
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, DscpAndEcnSurviveNapt66BothWays) {
    Rig& r = start(dual_stack());
    const Bytes payload = text("marked");
    uint16_t pod_port = 40000;
    for (const Policy& pol : kPolicies)
        for (uint8_t mark : kMarks) {
            SCOPED_TRACE(std::string(pol.name) + ", traffic class " + std::to_string(mark));
            const Ip6Addr pod = pol.service ? kPod10v6 : kPod20v6;
            const Ip6Addr remote = pol.service ? kServerV6 : kInternetV6;
            const Ip6Addr nat = pol.service ? kIngressV6 : kExt1V6;
            const Mac remote_mac = pol.service ? kServerMac : kExt1GwMac;
            ++pod_port;
            r.process(r.pods, from_pod6(pod, udp6_ip(pod, pod_port, remote, 443, payload,
                                                     Ip6Opt{.hop_limit = 64, .traffic_class = mark})));
            auto frames = r.tx(r.ext1);
            ASSERT_EQ(frames.size(), 1u);
            Parsed p = parse_frame(frames[0]);
            ASSERT_TRUE(checksums_valid(p));
            const uint16_t nat_port = p.sport;
            EXPECT_EQ(frames[0], ethernet(remote_mac, kExt1Mac, kEtherIpv6,
                                          udp6_ip(nat, nat_port, remote, 443, payload,
                                                  Ip6Opt{.hop_limit = 63, .traffic_class = mark})));

            const uint8_t back_mark = static_cast<uint8_t>(mark ^ 0x03);
            r.process(r.ext1, from_ext1_6(udp6_ip(remote, 443, nat, nat_port, payload,
                                                  Ip6Opt{.hop_limit = 57, .traffic_class = back_mark}),
                                          remote_mac));
            frames = r.tx(r.pods);
            ASSERT_EQ(frames.size(), 1u);
            ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
            EXPECT_EQ(frames[0], to_pod6(pod, udp6_ip(remote, 443, pod, pod_port, payload,
                                                      Ip6Opt{.hop_limit = 56, .traffic_class = back_mark})));
        }
    EXPECT_EQ(r.total_drops(), 0u);
}

}  // namespace
}  // namespace egw::test
