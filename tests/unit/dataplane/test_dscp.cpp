// SPDX-License-Identifier: Apache-2.0
//
// The DSCP and ECN bits a packet arrives with leave with it, through every translation egw makes
// without an EgressQoS rule: NAT44 and NAT66, out and back, for a Service's ingress IP and for the
// default action's masquerade. An upstream mark (set by the pod, by OVN's QoS, or a congestion
// mark on the way back) must survive the gateway, and the header checksum must still be right
// after the rewrite around it. Each output is compared byte for byte with the frame that a
// correct translation gives, built by packet.cpp with the same IPv4 TOS or IPv6 traffic class.
//
// With an EgressQoS rule (control/model/egress_qos.h, made into the snapshot's table by
// control/policy/egress_qos_table.h), the packets a matched pod sends toward the remote side leave
// with the rule's DSCP and their own ECN bits, in both families and both NAT modes; replies and
// unmatched flows keep theirs; a rule change reaches a flow's existing session at the next
// publication. (The default action "route" makes no sessions and marks nothing.)
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "control/model/egress_qos.h"
#include "control/policy/egress_qos_table.h"
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

// web's EgressQoS: EF (46) for app=voice pods toward the server's network, AF11 (10) for every
// pod toward the internet host, in both families; pod10 is app=voice, pod11 and pod20 are not.
dp::EgressQosTable web_qos() {
    const auto qos = model::parse_egress_qos(nlohmann::json::parse(R"({
        "apiVersion": "k8s.ovn.org/v1", "kind": "EgressQoS", "metadata": {"name": "default", "namespace": "web"},
        "spec": {"egress": [
            {"dscp": 46, "dstCIDR": "192.0.2.0/24", "podSelector": {"matchLabels": {"app": "voice"}}},
            {"dscp": 46, "dstCIDR": "2001:db8:2::/64", "podSelector": {"matchLabels": {"app": "voice"}}},
            {"dscp": 10, "dstCIDR": "203.0.113.9/32"},
            {"dscp": 10, "dstCIDR": "2001:db8:99::9/128"}]}})"));
    const std::map<std::string, model::EgressQoS> objects{{"web/default", qos}};
    std::map<std::string, model::Pod> pods;
    auto add = [&](const std::string& name, uint32_t v4, const Ip6Addr& v6, std::map<std::string, std::string> labels) {
        model::Pod& p = pods["web/" + name];
        p.meta.namespace_ = "web";
        p.meta.name = name;
        p.meta.labels = std::move(labels);
        p.phase = model::PodPhase::running;
        p.ips = {net::IpAddr::from_v4(v4), net::IpAddr::from_v6(v6.data())};
    };
    add("pod10", kPod10, kPod10v6, {{"app", "voice"}});
    add("pod11", kPod11, kPod11v6, {});
    add("pod20", kPod20, kPod20v6, {{"app", "batch"}});
    return control::build_egress_qos_table(model::select_egress_qos(objects), pods);
}

// A TOS or traffic class with `dscp` in the upper six bits and the lower two of `arrived`.
uint8_t marked(uint8_t dscp, uint8_t arrived) {
    return static_cast<uint8_t>(dscp << 2 | (arrived & 0x03));
}

struct QosFlow {
    const char* name;
    bool service;                 // through web's ingress IP; otherwise the default action's masquerade
    uint32_t pod;                 // IPv4 side
    bool to_server;               // toward the server; otherwise toward the internet host
    std::optional<uint8_t> dscp;  // what the rules give it
};
constexpr QosFlow kQosFlows[] = {
    {"pod10 (voice) to the server, ingress IP", true, kPod10, true, 46},
    {"pod11 to the server, ingress IP: no rule", true, kPod11, true, std::nullopt},
    {"pod20 to the internet, masquerade", false, kPod20, false, 10},
};

TEST_F(DataplaneTest, EgressQosSetsDscpKeepsEcnNapt44) {
    Rig& r = start();
    r.builder().set_egress_qos(web_qos());
    r.publish(RigOptions{}.services);
    const Bytes payload = text("qos");
    uint16_t pod_port = 41000;
    for (const QosFlow& fl : kQosFlows)
        for (uint8_t mark : kMarks) {
            SCOPED_TRACE(std::string(fl.name) + ", TOS " + std::to_string(mark));
            const uint32_t remote = fl.to_server ? kServer : kInternet;
            const uint32_t nat = fl.service ? kIngress : kExt1Addr;
            const Mac remote_mac = fl.to_server ? kServerMac : kExt1GwMac;
            const uint8_t out_tos = fl.dscp ? marked(*fl.dscp, mark) : mark;
            ++pod_port;
            // Two packets: the one that makes the session (slow path), one that finds it (fast).
            for (int k = 0; k < 2; ++k) {
                r.process(r.pods, r.from_pod(fl.pod, udp_ip(fl.pod, pod_port, remote, 443, payload,
                                                            IpOpt{.ttl = 64, .tos = mark})));
                auto frames = r.tx(r.ext1);
                ASSERT_EQ(frames.size(), 1u);
                Parsed p = parse_frame(frames[0]);
                ASSERT_TRUE(checksums_valid(p));
                EXPECT_EQ(p.tos, out_tos);
                EXPECT_EQ(frames[0],
                          ethernet(remote_mac, kExt1Mac, kEtherIpv4,
                                   udp_ip(nat, p.sport, remote, 443, payload, IpOpt{.ttl = 63, .tos = out_tos})));
                // The reply is not the pod's egress: its marks pass untouched.
                const uint8_t back_mark = static_cast<uint8_t>(mark ^ 0x03);
                r.process(r.ext1,
                          r.from_ext1(udp_ip(remote, 443, nat, p.sport, payload, IpOpt{.ttl = 57, .tos = back_mark}),
                                      remote_mac));
                frames = r.tx(r.pods);
                ASSERT_EQ(frames.size(), 1u);
                p = parse_frame(frames[0]);
                ASSERT_TRUE(checksums_valid(p));
                EXPECT_EQ(p.tos, back_mark);
            }
        }
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, EgressQosSetsTrafficClassKeepsEcnNapt66) {
    Rig& r = start(dual_stack());
    r.builder().set_egress_qos(web_qos());
    r.publish(dual_stack().services);
    const Bytes payload = text("qos");
    uint16_t pod_port = 41000;
    struct Flow6 {
        const char* name;
        Ip6Addr pod, remote, nat;
        Mac remote_mac;
        std::optional<uint8_t> dscp;
    };
    const Flow6 flows[] = {
        {"pod10 (voice) to the server, ingress IP", kPod10v6, kServerV6, kIngressV6, kServerMac, 46},
        {"pod11 to the server, ingress IP: no rule", kPod11v6, kServerV6, kIngressV6, kServerMac, std::nullopt},
        {"pod20 to the internet, masquerade", kPod20v6, kInternetV6, kExt1V6, kExt1GwMac, 10},
    };
    for (const Flow6& fl : flows)
        for (uint8_t mark : kMarks) {
            SCOPED_TRACE(std::string(fl.name) + ", traffic class " + std::to_string(mark));
            const uint8_t out_tc = fl.dscp ? marked(*fl.dscp, mark) : mark;
            ++pod_port;
            for (int k = 0; k < 2; ++k) {
                r.process(r.pods, from_pod6(fl.pod, udp6_ip(fl.pod, pod_port, fl.remote, 443, payload,
                                                            Ip6Opt{.hop_limit = 64, .traffic_class = mark})));
                auto frames = r.tx(r.ext1);
                ASSERT_EQ(frames.size(), 1u);
                Parsed p = parse_frame(frames[0]);
                ASSERT_TRUE(checksums_valid(p));
                EXPECT_EQ(frames[0], ethernet(fl.remote_mac, kExt1Mac, kEtherIpv6,
                                              udp6_ip(fl.nat, p.sport, fl.remote, 443, payload,
                                                      Ip6Opt{.hop_limit = 63, .traffic_class = out_tc})));
                const uint8_t back_mark = static_cast<uint8_t>(mark ^ 0x03);
                r.process(r.ext1, from_ext1_6(udp6_ip(fl.remote, 443, fl.nat, p.sport, payload,
                                                      Ip6Opt{.hop_limit = 57, .traffic_class = back_mark}),
                                              fl.remote_mac));
                frames = r.tx(r.pods);
                ASSERT_EQ(frames.size(), 1u);
                EXPECT_EQ(frames[0], to_pod6(fl.pod, udp6_ip(fl.remote, 443, fl.pod, pod_port, payload,
                                                             Ip6Opt{.hop_limit = 56, .traffic_class = back_mark})));
            }
        }
    EXPECT_EQ(r.total_drops(), 0u);
}

// A flow's session made before its pod had a rule takes the rule up at the next publication, and
// drops it at the one after the rule is gone: the same session (same NAT port) throughout.
TEST_F(DataplaneTest, EgressQosChangeReachesExistingSessionsAtThePublication) {
    Rig& r = start();
    const Bytes payload = text("qos");
    const uint8_t tos = 0x22;  // AF11 with ECT(0)
    auto send = [&]() {
        r.process(r.pods,
                  r.from_pod(kPod10, udp_ip(kPod10, 42000, kServer, 443, payload, IpOpt{.ttl = 64, .tos = tos})));
        auto frames = r.tx(r.ext1);
        EXPECT_EQ(frames.size(), 1u);
        Parsed p = parse_frame(frames.at(0));
        EXPECT_TRUE(checksums_valid(p));
        return std::make_pair(p.tos, p.sport);
    };
    const auto [tos0, port0] = send();
    EXPECT_EQ(tos0, tos);
    r.builder().set_egress_qos(web_qos());
    r.publish(RigOptions{}.services);
    const auto [tos1, port1] = send();
    EXPECT_EQ(tos1, marked(46, tos));
    EXPECT_EQ(port1, port0);
    EXPECT_EQ(send().first, marked(46, tos));  // and so on, on the fast path
    r.builder().set_egress_qos({});
    r.publish(RigOptions{}.services);
    const auto [tos2, port2] = send();
    EXPECT_EQ(tos2, tos);
    EXPECT_EQ(port2, port0);
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

}  // namespace
}  // namespace egw::test
