// SPDX-License-Identifier: Apache-2.0
//
// NAPT66 (issue 11 §3): the IPv6 twins of test_nat.cpp's tests. A pod's IPv6 TCP, UDP and ICMPv6
// echo leave with the Service's IPv6 ingress IP (LoadBalancerIP) or the egress port's IPv6
// address (Network, the default action), replies come back, ICMPv6 errors from outside reach the
// pod with their quote translated back. Every frame is compared byte for byte with what packet.cpp
// builds independently, and its checksums (the ICMPv6 one over the pseudo-header) recomputed.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using namespace std_rig6;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

// Tests that try several rigs in turn: each is checked for leaks before the next starts.
class Nat66Test : public DataplaneTest {
protected:
    Rig& fresh(const RigOptions& o) {
        if (rig_) {
            rig_->drain_all();
            EXPECT_EQ(rig_->mbufs_in_use(), 0) << "the data plane leaked mbufs (or freed some twice)";
            rig_.reset();
        }
        return start(o);
    }
};

Ip6Addr bytes_of(const dp::Ip6& a) {
    return std::to_array(a.b);
}

Bytes bytes_after_ethernet(const Bytes& frame) {
    return Bytes(frame.begin() + 14, frame.end());
}

// The body of an ICMPv6 error from byte 4: `rest` (MTU, pointer or unused) and the quote.
Bytes error_body(uint32_t rest, const Bytes& quote) {
    Bytes b(4 + quote.size());
    put32(b.data(), rest);
    std::copy(quote.begin(), quote.end(), b.begin() + 4);
    return b;
}

// Each kind of flow, through each kind of translation: out with the NAT address and the pod's
// own port (free and in the block), back to the pod, bytes, checksums, session and counters.
TEST_F(Nat66Test, Napt66OutAndBackForEachProtocolAndPolicy) {
    struct Policy {
        std::string name;
        Ip6Addr pod, remote, nat;
        uint16_t out_port_name;  // 1: ext1, 2: ext2
        Mac remote_mac;
        std::string service;  // "" for the default action
        bool masquerade;
    };
    std::vector<Policy> policies = {
        {"LoadBalancerIP", kPod10v6, kServerV6, kIngressV6, 1, kServerMac, kWeb, false},
        {"Network (VRF blue)", kPod20v6, kBlueServerV6, kExt2V6, 2, kBlueServerMac, "default/blue", true},
        {"default action masquerade", kPod11v6, kInternetV6, kExt1V6, 1, kExt1GwMac, "", true},
    };
    for (const Policy& pol : policies)
        for (const Flow6& f : flows6()) {
            SCOPED_TRACE(pol.name + ", " + f.name);
            RigOptions o = dual_stack();
            model::ServiceState blue = network_service("default/blue", {kPod20}, "blue");
            blue.endpoint_ipv6s = {addr6(kPod20v6)};
            model::ServiceState web = web6();
            web.endpoint_ipv6s = {addr6(kPod10v6)};  // pod 11 takes the default action here
            o.services = {web, blue};
            Rig& r = fresh(o);
            uint16_t out = pol.out_port_name == 1 ? r.ext1 : r.ext2;
            Mac out_mac = pol.out_port_name == 1 ? kExt1Mac : kExt2Mac;
            r.process(r.pods, from_pod6(pol.pod, f.out(pol.pod, 40000, pol.remote, 443, 64)));
            auto frames = r.tx(out);
            ASSERT_EQ(frames.size(), 1u);
            Parsed p = parse_frame(frames[0]);
            ASSERT_TRUE(checksums_valid(p));
            Bytes want = ethernet(pol.remote_mac, out_mac, kEtherIpv6, f.out(pol.nat, 40000, pol.remote, 443, 63));
            EXPECT_EQ(frames[0], want);
            EXPECT_EQ(r.total_drops(), 0u);

            auto ss = r.sessions6();
            ASSERT_EQ(ss.size(), 1u);
            const dp::Session6& s = ss[0];
            EXPECT_EQ(bytes_of(s.pod_ip), pol.pod);
            EXPECT_EQ(bytes_of(s.remote_ip), pol.remote);
            EXPECT_EQ(bytes_of(s.nat_ip), pol.nat);
            EXPECT_EQ(s.pod_port, nbo16(40000));
            EXPECT_EQ(s.nat_port, nbo16(40000));
            EXPECT_EQ(s.remote_port, f.proto == kProtoIcmp6 ? 0 : nbo16(443));
            EXPECT_EQ(s.proto, f.proto);
            EXPECT_EQ(s.out_port, out);
            EXPECT_EQ(bool(s.in_use & dp::kSessionMasquerade), pol.masquerade);
            EXPECT_EQ(s.service_id, pol.service.empty() ? dp::kDefaultPolicyId : r.service_id(pol.service));
            EXPECT_TRUE(r.sessions().empty());
            const dp::ServiceCounters& sc = pol.service.empty() ? r.default_counters() : r.svc(pol.service);
            EXPECT_EQ(sc.packets_out, 1u);
            EXPECT_EQ(sc.bytes_out, want.size());
            EXPECT_EQ(sc.sessions_created, 1u);
            EXPECT_EQ(sc.sessions6_created, 1u);
            EXPECT_EQ(r.w().counters.sessions_created, 1u);

            // The answer to the NAT address and port reaches the pod.
            r.process(out, ethernet(out_mac, pol.remote_mac, kEtherIpv6, f.back(pol.remote, 443, pol.nat, 40000, 57)));
            frames = r.tx(r.pods);
            ASSERT_EQ(frames.size(), 1u);
            ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
            Bytes back = to_pod6(pol.pod, f.back(pol.remote, 443, pol.pod, 40000, 56));
            EXPECT_EQ(frames[0], back);
            EXPECT_EQ(sc.packets_in, 1u);
            EXPECT_EQ(sc.bytes_in, back.size());
            EXPECT_EQ(r.total_drops(), 0u);
        }
}

// A source port below the NAT range, or taken toward the same remote by another pod, is changed;
// the reply to the new port comes back to the pod's own. Checksums follow both changes.
TEST_F(Nat66Test, Napt66ChangesAPortThatIsTakenOrOutsideTheRange) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 5353, kServerV6, 53, text("a"))));
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 5353, kServerV6, 53, text("b"))));
    r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 500, kServerV6, 53, text("c"))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 3u);
    std::vector<uint16_t> ports;
    for (const Bytes& f : frames) {
        Parsed p = parse_frame(f);
        ASSERT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.src6, kIngressV6);
        ports.push_back(p.sport);
    }
    EXPECT_EQ(ports[0], 5353);
    EXPECT_NE(ports[1], 5353);
    EXPECT_GE(ports[1], 1024);
    EXPECT_NE(ports[2], 500);
    EXPECT_GE(ports[2], 1024);
    for (unsigned k = 1; k < 3; ++k) {
        r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, ports[k], text("r"), Ip6Opt{60})));
        auto back = r.tx(r.pods);
        ASSERT_EQ(back.size(), 1u);
        EXPECT_EQ(back[0],
                  to_pod6(kPod11v6, udp6_ip(kServerV6, 53, kPod11v6, k == 1 ? 5353 : 500, text("r"), Ip6Opt{59})));
    }
    EXPECT_EQ(r.sessions6().size(), 3u);
    EXPECT_EQ(r.total_drops(), 0u);
}

// What is not translated: cluster destinations (pod and service CIDRs, node IPs) make no session
// and do not leave with a NAT address; a Service with no IPv6 ingress IP leaves its IPv6
// endpoints to the default action (as IPv4 ones without an IPv4 ingress IP); the default action
// `drop`; protocols other than TCP, UDP and ICMPv6 echo; replies with no session.
TEST_F(Nat66Test, Napt66LeavesAloneWhatItMustNotTranslate) {
    {
        Rig& r = start(dual_stack());
        for (const Ip6Addr& dst : {kRemotePodV6, kClusterIpV6, kNodeV6}) {
            SCOPED_TRACE(ip6_str(dst));
            r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, dst, 53, text("q"))));
            EXPECT_TRUE(r.sessions6().empty());
            EXPECT_TRUE(r.tx(r.ext1).empty());
            // Routed untranslated toward the pods' router, the hop limit one lower.
            auto frames = r.tx(r.pods);
            ASSERT_EQ(frames.size(), 1u);
            EXPECT_EQ(frames[0], ethernet(kPodsRouterMac, kPodsMac, kEtherIpv6,
                                          udp6_ip(kPod10v6, 40000, dst, 53, text("q"), Ip6Opt{63})));
        }
        // ESP from a pod: not translatable.
        r.process(r.pods, from_pod6(kPod10v6, ipv6(kPod10v6, kServerV6, 50, Bytes(16, 1))));
        EXPECT_EQ(r.drops(DropReason::unsupported_protocol), 1u);
        // An ICMPv6 type that is neither echo nor an error.
        r.process(r.pods, from_pod6(kPod10v6, icmp6_ip(kPod10v6, kServerV6, 139, 0, Bytes(8, 0))));
        EXPECT_EQ(r.drops(DropReason::icmp_unsupported), 1u);
        // From outside to the ingress IP with no session.
        r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text("r"))));
        EXPECT_EQ(r.drops(DropReason::no_session), 1u);
        EXPECT_TRUE(r.tx(r.pods).empty());
        EXPECT_TRUE(r.sessions6().empty());
    }
    {
        RigOptions o = dual_stack();
        model::ServiceState web = web6();
        web.ingress_ipv6.reset();
        o.services = {web};
        Rig& r = fresh(o);
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
        Parsed p = single(r.tx(r.ext1));
        EXPECT_EQ(p.src6, kExt1V6) << "the default action's masquerade";
        ASSERT_EQ(r.sessions6().size(), 1u);
        EXPECT_EQ(r.sessions6()[0].service_id, dp::kDefaultPolicyId);
        // IPv4 of the same Service still leaves with its IPv4 ingress IP.
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
        EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
    }
    {
        RigOptions o = dual_stack();
        o.configure = [c = o.configure](config::Config& cfg) {
            c(cfg);
            cfg.default_action = config::DefaultAction::drop;
        };
        Rig& r = fresh(o);
        r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kServerV6, 53, text("q"))));
        EXPECT_EQ(r.drops(DropReason::default_action_drop), 1u);
        EXPECT_TRUE(r.tx(r.ext1).empty());
        // The Service's endpoint still leaves translated.
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
        EXPECT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);
    }
}

// ICMPv6 errors from outside about a packet of a session: the outer destination becomes the pod,
// the quote the packet as the pod sent it (source, port, its checksum), the ICMPv6 checksum is
// right over the new pseudo-header. Each error type, a whole quote and one cut after 8 bytes of
// the transport header (which leaves the quoted TCP checksum out).
TEST_F(Nat66Test, Icmpv6ErrorsFromOutsideAreTranslatedBackToThePod) {
    struct Case {
        std::string name;
        uint8_t type, code;
        uint32_t rest;     // bytes 4-7 of the ICMPv6 header
        bool from_router;  // else from the server itself
        size_t quote_len;  // 0: all of it
        bool tcp;
    };
    std::vector<Case> cases = {
        {"port unreachable", 1, 4, 0, false, 0, false},  {"administratively prohibited", 1, 1, 0, true, 0, true},
        {"packet too big", 2, 0, 1280, true, 0, true},   {"time exceeded, header and 8 bytes", 3, 0, 0, true, 48, true},
        {"parameter problem", 4, 0, 6, false, 0, false},
    };
    Rig& r = start(dual_stack());
    uint16_t pod_port = 500;  // below the NAT range: the translation changes it
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        ++pod_port;
        Bytes data = text("payload");
        auto pod_packet = [&](const Ip6Addr& src, uint16_t sport, uint8_t hl) {
            return c.tcp ? tcp6_ip(src, sport, kServerV6, 443, kSyn, data, Ip6Opt{hl})
                         : udp6_ip(src, sport, kServerV6, 53, data, Ip6Opt{hl});
        };
        r.process(r.pods, from_pod6(kPod10v6, pod_packet(kPod10v6, pod_port, 64)));
        auto frames = r.tx(r.ext1);
        ASSERT_EQ(frames.size(), 1u);
        Parsed sent = parse_frame(frames[0]);
        uint16_t nat_port = sent.sport;
        ASSERT_NE(nat_port, pod_port);
        Bytes sent_ip = bytes_after_ethernet(frames[0]);
        Bytes want_quote = pod_packet(kPod10v6, pod_port, 63);
        if (c.quote_len) {
            sent_ip.resize(c.quote_len);
            want_quote.resize(c.quote_len);
        }
        auto body = [&](const Bytes& quote) { return error_body(c.rest, quote); };
        const Ip6Addr& from = c.from_router ? kExt1GwV6 : kServerV6;
        r.process(r.ext1, from_ext1_6(icmp6_ip(from, kIngressV6, c.type, c.code, body(sent_ip), Ip6Opt{60}),
                                      c.from_router ? kExt1GwMac : kServerMac));
        frames = r.tx(r.pods);
        ASSERT_EQ(frames.size(), 1u);
        Parsed p = parse_frame(frames[0]);
        ASSERT_TRUE(checksums_valid(p));
        ASSERT_TRUE(p.inner);
        EXPECT_EQ(p.inner->src6, kPod10v6);
        EXPECT_EQ(p.inner->sport, pod_port);
        EXPECT_EQ(frames[0], to_pod6(kPod10v6, icmp6_ip(from, kPod10v6, c.type, c.code, body(want_quote), Ip6Opt{59})));
        EXPECT_EQ(r.total_drops(), 0u);
    }
}

// An error about an echo request quotes the request with the NAT identifier: it comes back with
// the pod's. One about a flow with no session is dropped.
TEST_F(Nat66Test, Icmpv6ErrorAboutEchoIsTranslatedBackAndOneWithoutSessionDropped) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, echo6_ip(true, kPod10v6, kInternetV6, 0x0042, 1, text("ping"))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    Parsed sent = parse_frame(frames[0]);
    ASSERT_TRUE(checksums_valid(sent));
    EXPECT_EQ(sent.src6, kIngressV6);
    ASSERT_NE(sent.icmp_ident, 0x0042) << "identifier 66 is below the NAT range";
    Bytes body = error_body(0, bytes_after_ethernet(frames[0]));
    r.process(r.ext1, from_ext1_6(icmp6_ip(kExt1GwV6, kIngressV6, 1, 0, body), kExt1GwMac));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
    Bytes want_body = error_body(0, echo6_ip(true, kPod10v6, kInternetV6, 0x0042, 1, text("ping"), Ip6Opt{63}));
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, icmp6_ip(kExt1GwV6, kPod10v6, 1, 0, want_body, Ip6Opt{63})));

    // Quoting a flow that has no session.
    Bytes ob = error_body(0, udp6_ip(kIngressV6, 45678, kServerV6, 53, text("x")));
    r.process(r.ext1, from_ext1_6(icmp6_ip(kServerV6, kIngressV6, 1, 4, ob)));
    EXPECT_EQ(r.drops(DropReason::no_session), 1u);
    EXPECT_TRUE(r.tx(r.pods).empty());
}

// A pod's own ICMPv6 error about a reply it got (port unreachable for a UDP answer) leaves with
// the NAT address, its quote naming the NAT address and port the remote knows.
TEST_F(Nat66Test, Icmpv6ErrorFromThePodIsTranslatedToTheNatAddress) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 600, kServerV6, 53, text("q"))));
    Parsed sent = single(r.tx(r.ext1));
    uint16_t nat_port = sent.sport;
    ASSERT_NE(nat_port, 600);
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, nat_port, text("answer"))));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    Bytes body = error_body(0, bytes_after_ethernet(frames[0]));  // quoting the reply as the pod got it
    r.process(r.pods, from_pod6(kPod10v6, icmp6_ip(kPod10v6, kServerV6, 1, 4, body)));
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
    Bytes want_body = error_body(0, udp6_ip(kServerV6, 53, kIngressV6, nat_port, text("answer"), Ip6Opt{63}));
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv6, icmp6_ip(kIngressV6, kServerV6, 1, 4, want_body, Ip6Opt{63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// The twin of test_nat.cpp's error from the cluster's router: the router in front of the pod
// cannot forward a reply (Packet Too Big) and tells the server. The error's source is not the
// pod; it leaves with the NAT address, its quote naming the NAT address and port.
TEST_F(Nat66Test, Icmpv6ErrorFromTheClusterRouterAboutAReplyIsTranslated) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 500, kServerV6, 53, text("q"))));
    uint16_t nat_port = single(r.tx(r.ext1)).sport;
    ASSERT_NE(nat_port, 500);
    Bytes answer(200, 0x11);
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, nat_port, answer)));
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    Bytes body = error_body(1400, bytes_after_ethernet(frames[0]));
    r.process(r.pods, ethernet(kPodsMac, kPodsRouterMac, kEtherIpv6, icmp6_ip(kPodsRouterV6, kServerV6, 2, 0, body)));
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
    Bytes want_body = error_body(1400, udp6_ip(kServerV6, 53, kIngressV6, nat_port, answer, Ip6Opt{63}));
    EXPECT_EQ(frames[0],
              ethernet(kServerMac, kExt1Mac, kEtherIpv6, icmp6_ip(kIngressV6, kServerV6, 2, 0, want_body, Ip6Opt{63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// The twin of test_nat.cpp's error sent to another of the gateway's addresses: matched by its
// quote, the outer destination (ext1's own IPv6 address, not the ingress IP) becomes the pod's.
TEST_F(Nat66Test, Icmpv6ErrorToAnotherGatewayAddressIsStillTranslatedBack) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 500, kServerV6, 53, text("q"))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    Bytes body = error_body(0, bytes_after_ethernet(frames[0]));
    r.process(r.ext1, from_ext1_6(icmp6_ip(kServerV6, kExt1V6, 1, 4, body)));
    frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_TRUE(checksums_valid(parse_frame(frames[0])));
    Bytes want_body = error_body(0, udp6_ip(kPod10v6, 500, kServerV6, 53, text("q"), Ip6Opt{63}));
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, icmp6_ip(kServerV6, kPod10v6, 1, 4, want_body, Ip6Opt{63})));
    EXPECT_EQ(r.total_drops(), 0u);
}

// The limits apply to IPv6 as to IPv4: sessions.max_per_pod (one worker counts in its own table),
// and a full table.
TEST_F(Nat66Test, Napt66SessionLimits) {
    {
        Rig& r = start(dual_stack());
        r.shared.pod_session_limit = 2;  // sessions.max_per_pod
        for (uint16_t port = 40000; port < 40003; ++port)
            r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, port, kServerV6, 53, text("q"))));
        EXPECT_EQ(r.tx(r.ext1).size(), 2u);
        EXPECT_EQ(r.drops(DropReason::pod_session_limit), 1u);
        dp::Ip6 pod;
        std::copy(kPod10v6.begin(), kPod10v6.end(), pod.b);
        EXPECT_EQ(r.w().sessions6.pod_sessions(pod), 2u);
        // Another pod is not held back.
        r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40000, kServerV6, 53, text("q"))));
        EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    }
    {
        RigOptions o = dual_stack();
        o.sessions_per_worker = 4;
        Rig& r = fresh(o);
        for (uint16_t port = 40000; port < 40005; ++port)
            r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, port, kServerV6, 53, text("q"))));
        EXPECT_EQ(r.tx(r.ext1).size(), 4u);
        EXPECT_EQ(r.drops(DropReason::session_limit), 1u);
        // An expired session makes room for the next flow.
        r.advance(r.shared.timeouts.udp + 1);
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40010, kServerV6, 53, text("q"))));
        EXPECT_EQ(r.tx(r.ext1).size(), 1u);
        EXPECT_EQ(r.w().counters.sessions_expired, 1u);
    }
}

// sessions.max_per_pod with several workers is one limit for the pod, not a share per worker:
// with 4 workers and a limit of 1,000, a pod whose IPv6 flows are all owned by one worker (their
// hashes happen to agree, as a pod's echo flows to one server always do: a NIC hashes ICMP by its
// addresses) opens its 251st flow and every other up to the 1,000th, and not one more. The
// sessions that close give their room back to the pod.
TEST_F(Nat66Test, PodLimitWithSeveralWorkersIsTheWholeLimit) {
    RigOptions o = dual_stack();
    o.workers = 4;
    o.sessions_per_worker = 1024;
    o.configure = [base = o.configure](config::Config& c) {
        base(c);
        c.sessions.max_per_pod = 1000;
    };
    Rig& r = start(o);
    ASSERT_NE(r.shared.pod_budget, nullptr);
    EXPECT_EQ(r.shared.pod_session_limit, 1000u);
    // 1,002 source ports of the pod whose flows to the server worker 0 owns.
    std::vector<uint16_t> ports;
    for (uint32_t port = 20000; ports.size() < 1002 && port < 65536; ++port) {
        dp::FlowKey6 k{};
        std::copy(kPod10v6.begin(), kPod10v6.end(), k.src);
        std::copy(kServerV6.begin(), kServerV6.end(), k.dst);
        k.sport = nbo16(static_cast<uint16_t>(port));
        k.dport = nbo16(53);
        k.proto = IPPROTO_UDP;
        if (dp::flow_owner(r.shared.flow_owners, k) == 0) ports.push_back(static_cast<uint16_t>(port));
    }
    ASSERT_EQ(ports.size(), 1002u);
    size_t sent = 0;
    auto open = [&](uint16_t port) {
        r.process(0, {{r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, port, kServerV6, 53, text("q")))}});
        sent += r.tx(r.ext1).size();
    };
    for (size_t i = 0; i < 251; ++i)
        open(ports[i]);
    EXPECT_EQ(sent, 251u);
    EXPECT_EQ(r.drops(DropReason::pod_session_limit), 0u);
    for (size_t i = 251; i < ports.size(); ++i)
        open(ports[i]);
    EXPECT_EQ(sent, 1000u);
    EXPECT_EQ(r.drops(DropReason::pod_session_limit), 2u);
    EXPECT_EQ(r.sessions6(0).size(), 1000u);
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    dp::Ip6 pod;
    std::copy(kPod10v6.begin(), kPod10v6.end(), pod.b);
    EXPECT_EQ(r.pod_budget.held(dp::pod_budget_key(pod)), 1000u);
    // The limit holds across workers: the pod's flow that worker 1 owns is refused too.
    uint16_t on_one = 0;
    for (uint16_t port = 20000; !on_one; ++port) {
        dp::FlowKey6 k{};
        std::copy(kPod10v6.begin(), kPod10v6.end(), k.src);
        std::copy(kServerV6.begin(), kServerV6.end(), k.dst);
        k.sport = nbo16(port);
        k.dport = nbo16(53);
        k.proto = IPPROTO_UDP;
        if (dp::flow_owner(r.shared.flow_owners, k) == 1) on_one = port;
    }
    r.process(1, {{r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, on_one, kServerV6, 53, text("q")))}});
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::pod_session_limit, 1), 1u);
    // Another pod has its own budget.
    r.process(0, {{r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 20000, kServerV6, 53, text("q")))}});
    for (unsigned k = 0; k < 4; ++k)
        r.poll(k);
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);

    // Every session expires: the budget is whole again, and the pod's flow on worker 1 leaves.
    r.advance(r.shared.timeouts.udp + 1);
    for (unsigned k = 0; k < 4; ++k)
        r.sweep(k);
    EXPECT_EQ(r.sessions6(0).size(), 0u);
    EXPECT_EQ(r.pod_budget.held(dp::pod_budget_key(pod)), 0u);
    r.process(1, {{r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, on_one, kServerV6, 53, text("q")))}});
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(r.sessions6(1).size(), 1u);
}

// A Service's sessions of each family are counted apart too (egw_snat_sessions of its two ingress
// IPs): sessions_created/_closed count both, sessions6_created/_closed the IPv6 ones; an IPv4
// session leaves the IPv6 counters alone.
TEST_F(Nat66Test, Napt66ServiceCountsItsIpv6SessionsApart) {
    Rig& r = start(dual_stack());
    const dp::ServiceCounters& web = r.svc(kWeb);
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(r.tx(r.ext1).size(), 1u);
    EXPECT_EQ(web.sessions_created, 1u);
    EXPECT_EQ(web.sessions6_created, 0u);
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40001, kServerV6, 443, kSyn)));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    EXPECT_EQ(web.sessions_created, 3u);
    EXPECT_EQ(web.sessions6_created, 2u);
    EXPECT_EQ(web.sessions_closed, 0u);
    EXPECT_EQ(web.sessions6_closed, 0u);
    EXPECT_EQ(r.default_counters().sessions6_created, 0u);
    // Past both timeouts: the sweep closes all three.
    r.advance(std::max(r.shared.timeouts.udp, r.shared.timeouts.tcp_transitory) + 1);
    r.sweep();
    EXPECT_EQ(web.sessions_closed, 3u);
    EXPECT_EQ(web.sessions6_closed, 2u);
    EXPECT_EQ(r.w().counters.sessions6_closed, 2u);
}

// Each family's sessions are counted apart (egw_sessions_active{family}), and sessions.max_ipv6 0
// leaves an empty IPv6 table: IPv6 flows are refused as a full table's, IPv4 ones are not.
TEST_F(Nat66Test, Napt66SessionsPerFamilyAndAnIpv6TableOfCapacityZero) {
    {
        Rig& r = start(dual_stack());
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
        r.process(r.pods, from_pod6(kPod11v6, udp6_ip(kPod11v6, 40000, kServerV6, 53, text("q"))));
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
        EXPECT_EQ(r.tx(r.ext1).size(), 3u);
        EXPECT_EQ(r.w().counters.sessions_created, 3u);
        EXPECT_EQ(r.w().counters.sessions6_created, 2u);
        EXPECT_EQ(r.w().sessions6.active(), 2u);
        r.advance(r.shared.timeouts.udp + 1);
        r.sweep();
        EXPECT_EQ(r.w().counters.sessions_expired, 3u);
        EXPECT_EQ(r.w().counters.sessions_closed, 3u);
        EXPECT_EQ(r.w().counters.sessions6_closed, 2u);
        EXPECT_EQ(r.w().sessions6.active(), 0u);
    }
    {
        RigOptions o = dual_stack();
        o.sessions6_per_worker = 0;
        Rig& r = fresh(o);
        EXPECT_EQ(r.w().sessions6.capacity(), 0u);
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
        EXPECT_TRUE(r.tx(r.ext1).empty());
        EXPECT_EQ(r.drops(DropReason::session_limit), 1u);
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
        EXPECT_EQ(r.tx(r.ext1).size(), 1u);
        EXPECT_EQ(r.w().counters.sessions_created, 1u);
        EXPECT_EQ(r.w().counters.sessions6_created, 0u);
    }
}

// A new IPv6 ingress IP for the Service ends its sessions at once: the reply to the old address is
// stale, the pod's next packet leaves with the new one.
TEST_F(Nat66Test, Napt66PolicyChangeStopsTheOldTranslation) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 443, kSyn)));
    EXPECT_EQ(single(r.tx(r.ext1)).src6, kIngressV6);
    model::ServiceState web = web6();
    const Ip6Addr moved = ip6("2001:db8:2::51");
    web.ingress_ipv6 = addr6(moved);
    r.publish({web});
    r.process(r.ext1, from_ext1_6(tcp6_ip(kServerV6, 443, kIngressV6, 40000, kSyn | kAck)));
    EXPECT_EQ(r.drops(DropReason::stale_session), 1u);
    EXPECT_TRUE(r.tx(r.pods).empty());
    r.process(r.pods, from_pod6(kPod10v6, tcp6_ip(kPod10v6, 40000, kServerV6, 443, kSyn)));
    EXPECT_EQ(single(r.tx(r.ext1)).src6, moved);
    ASSERT_EQ(r.sessions6().size(), 1u);
    EXPECT_EQ(bytes_of(r.sessions6()[0].nat_ip), moved);
    // IPv4 of the same Service leaves with its IPv4 ingress IP as before.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 40000, kServer, 53, text("q"))));
    EXPECT_EQ(single(r.tx(r.ext1)).src, kIngress);
}

// The IPv6 twin of test_limits.cpp's route change: the IPv6 default route moves from ext1's
// router to a next hop on ext2. The Service's session keeps its IPv6 ingress IP and follows the
// route; the masqueraded one was bound to ext1's IPv6 address and is replaced by one on ext2's.
TEST_F(Nat66Test, Napt66RouteChangeMovesSessionsOrReplacesMasqueradedOnes) {
    Rig& r = start(dual_stack());
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kInternetV6, 53, text("q"))));
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kInternetV6, 53, text("q"))));
    auto frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(parse_frame(frames[0]).src6, kIngressV6);
    EXPECT_EQ(parse_frame(frames[1]).src6, kExt1V6);

    bool moved = false;
    for (auto& rt : r.cfg.routes)
        if (rt.vrf == "default" && rt.prefix.len == 0 && rt.prefix.addr.is_v6()) {
            rt.via = addr6(kBlueServerV6);
            rt.port = "ext2";
            moved = true;
        }
    ASSERT_TRUE(moved);
    r.publish({web6()});

    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kInternetV6, 53, text("q2"))));
    frames = r.tx(r.ext2);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherIpv6,
                                  udp6_ip(kIngressV6, 40000, kInternetV6, 53, text("q2"), Ip6Opt{63})));
    r.process(r.pods, from_pod6(kPod20v6, udp6_ip(kPod20v6, 40000, kInternetV6, 53, text("q2"))));
    frames = r.tx(r.ext2);
    ASSERT_TRUE(checksums_valid(single(frames)));
    EXPECT_EQ(frames[0], ethernet(kBlueServerMac, kExt2Mac, kEtherIpv6,
                                  udp6_ip(kExt2V6, 40000, kInternetV6, 53, text("q2"), Ip6Opt{63})));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.sessions6().size(), 2u);
    EXPECT_EQ(r.default_counters().sessions_closed, 1u);
    EXPECT_EQ(r.svc(kWeb).sessions_closed, 0u);

    // Replies: the Service's, arriving now on ext2, reach the pod; one to the old masquerade
    // address does not.
    r.process(r.ext2,
              ethernet(kExt2Mac, kBlueServerMac, kEtherIpv6, udp6_ip(kInternetV6, 53, kIngressV6, 40000, text("a"))));
    EXPECT_EQ(single(r.tx(r.pods)).dst6, kPod10v6);
    r.process(r.ext1, from_ext1_6(udp6_ip(kInternetV6, 53, kExt1V6, 40000, text("a")), kExt1GwMac));
    EXPECT_TRUE(r.tx(r.pods).empty());
}

// Two workers: the NAT port of a reply names the worker that owns its session, and a reply that
// arrives on the other one is handed over, as for IPv4.
TEST_F(Nat66Test, Napt66ReplyIsHandedToTheOwningWorker) {
    RigOptions o = dual_stack();
    o.workers = 2;
    Rig& r = start(o);
    // Worker 1 owns the upper half of the range: a pod port there is kept.
    uint16_t port = static_cast<uint16_t>(r.w(1).nat_port_lo + 5);
    r.process(1, {{r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, port, kServerV6, 53, text("q")))}});
    EXPECT_EQ(single(r.tx(r.ext1)).sport, port);
    ASSERT_EQ(r.sessions6(1).size(), 1u);
    r.process(0, {{r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, port, text("r")))}});
    EXPECT_EQ(r.w(0).counters.handed_off, 1u);
    EXPECT_EQ(r.handoff_pending(0, 1), 1u);
    EXPECT_TRUE(r.tx(r.pods).empty());
    r.poll(1);
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0], to_pod6(kPod10v6, udp6_ip(kServerV6, 53, kPod10v6, port, text("r"), Ip6Opt{63})));
}

// The hop limit: a pod's packet with hop limit 1 makes no session and does not leave; the pod gets
// Time Exceeded quoting its packet untranslated. A reply with hop limit 1 is answered to the
// remote the same way, quoting what the remote sent.
TEST_F(Nat66Test, Napt66HopLimitRunsOutBeforeTheSession) {
    Rig& r = start(dual_stack());
    Bytes sent = udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"), Ip6Opt{1});
    r.process(r.pods, from_pod6(kPod10v6, sent));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.sessions6().empty());
    auto frames = r.tx(r.pods);
    ASSERT_EQ(frames.size(), 1u);
    Parsed p = parse_frame(frames[0]);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.dst6, kPod10v6);
    EXPECT_EQ(p.icmp_type, 3);
    ASSERT_TRUE(p.inner);
    EXPECT_EQ(p.inner->src6, kPod10v6);
    EXPECT_EQ(p.inner->sport, 40000);
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::time_exceeded6)], 1u);

    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 40000, kServerV6, 53, text("q"))));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.process(r.ext1, from_ext1_6(udp6_ip(kServerV6, 53, kIngressV6, 40000, text("r"), Ip6Opt{1})));
    EXPECT_TRUE(r.tx(r.pods).empty());
    frames = r.tx(r.ext1);
    ASSERT_EQ(frames.size(), 1u);
    p = parse_frame(frames[0]);
    ASSERT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.dst6, kServerV6);
    EXPECT_EQ(p.icmp_type, 3);
    ASSERT_TRUE(p.inner);
    EXPECT_EQ(p.inner->dst6, kIngressV6) << "the quote is the reply as the remote sent it";
    EXPECT_EQ(r.w().counters.icmp_sent[static_cast<unsigned>(dp::IcmpError::time_exceeded6)], 2u);
}

}  // namespace
}  // namespace egw::test
