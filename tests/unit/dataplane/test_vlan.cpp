// SPDX-License-Identifier: Apache-2.0
//
// 802.1Q VLANs as sub-ports (dataplane/vlan.h): tagged frames taken to their VLAN's logical port
// on input, the tag put back on the way out of the parent's device, for translated, routed and
// the gateway's own frames alike; unknown VLAN ids dropped and counted.
#include <gtest/gtest.h>

#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/stages.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

// VLAN 100 of ext1: an outside port of VRF "red" (table 200) with 100.64.100.1/24 and a default
// route via .254 there; server .100 and the router are static neighbours on it.
constexpr uint16_t kVid = 100;
constexpr uint32_t kRedAddr = ip4(100, 64, 100, 1);
constexpr uint32_t kRedServer = ip4(100, 64, 100, 100);
constexpr uint32_t kRedGw = ip4(100, 64, 100, 254);
constexpr uint32_t kFar = ip4(198, 18, 0, 9);  // behind red's router
const Mac kRedServerMac{0x52, 0x54, 0x00, 0x00, 0x02, 0x64};
const Mac kRedGwMac{0x52, 0x54, 0x00, 0x00, 0x02, 0xfe};
const std::string kRedService = "default/red";

RigOptions vlan_rig() {
    RigOptions o;
    o.configure = [](config::Config& c) {
        c.vrfs.push_back(config::VrfConfig{"red", 200});
        config::PortConfig v;
        v.name = "ext1-v100";
        v.parent = "ext1";
        v.vlan = kVid;
        v.role = config::PortRole::outside;
        v.vrf = "red";
        v.addresses = {net::IpPrefix::from_v4(kRedAddr, 24)};
        c.ports.push_back(v);
        config::RouteConfig r;
        r.vrf = "red";
        r.prefix = net::IpPrefix::from_v4(0, 0);
        r.via = net::IpAddr::from_v4(kRedGw);
        r.port = "ext1-v100";
        c.routes.push_back(r);
        for (auto [ip, mac] : {std::pair{kRedServer, kRedServerMac}, std::pair{kRedGw, kRedGwMac}}) {
            config::NeighborConfig n;
            n.port = "ext1-v100";
            n.ip = net::IpAddr::from_v4(ip);
            std::copy(mac.begin(), mac.end(), n.mac.bytes);
            c.neighbors.push_back(n);
        }
    };
    o.services = {lb_service(kWeb, kIngress, {kPod10, kPod11}), network_service(kRedService, {kPod20}, "red")};
    return o;
}

// `frame` with an 802.1Q tag of `vid` (priority `pcp`) after its addresses.
Bytes tagged(uint16_t vid, const Bytes& frame, uint8_t pcp = 0) {
    Bytes out(frame.begin(), frame.begin() + 12);
    out.push_back(0x81);
    out.push_back(0x00);
    out.push_back(static_cast<uint8_t>(pcp << 5 | vid >> 8));
    out.push_back(static_cast<uint8_t>(vid & 0xff));
    out.insert(out.end(), frame.begin() + 12, frame.end());
    return out;
}

// The VLAN id of a tagged frame, and the frame without its tag; -1 when it has none.
int untag(Bytes& frame) {
    if (frame.size() < 18 || get16(frame.data() + 12) != 0x8100) return -1;
    int vid = get16(frame.data() + 14) & 0x0fff;
    frame.erase(frame.begin() + 12, frame.begin() + 16);
    return vid;
}

Bytes to_vlan_port(const Bytes& ip, const Mac& src = kRedServerMac, uint16_t ether_type = kEtherIpv4) {
    return tagged(kVid, ethernet(kExt1Mac, src, ether_type, ip));
}

TEST_F(DataplaneTest, VlanEgressLeavesTaggedFromTheVlanAddressAndRepliesComeBack) {
    Rig& r = start(vlan_rig());
    // pod .20 is an endpoint of the Network Service of VRF red: masqueraded to the VLAN's address.
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 4000, kFar, 53, {1, 2, 3})));
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].size(), 14u + 4 + 20 + 8 + 3);
    EXPECT_EQ(get16(out[0].data() + 14) >> 12, 0) << "no priority set";
    ASSERT_EQ(untag(out[0]), kVid);
    Parsed p = single(out);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_TRUE(checksums_valid(p));
    EXPECT_EQ(p.eth_dst, kRedGwMac);
    EXPECT_EQ(p.eth_src, kExt1Mac);
    EXPECT_EQ(p.ether_type, kEtherIpv4);
    EXPECT_EQ(p.src, kRedAddr);
    EXPECT_EQ(p.dst, kFar);
    EXPECT_EQ(p.ttl, 63);
    const uint16_t nat_port = p.sport;

    // The reply comes back tagged on ext1, is translated back and leaves to the pod untagged.
    r.process(r.ext1, to_vlan_port(udp_ip(kFar, 53, kRedAddr, nat_port, {4, 5}), kRedGwMac));
    Parsed back = single(r.tx(r.pods));
    ASSERT_TRUE(back.ok) << back.error;
    EXPECT_TRUE(checksums_valid(back));
    EXPECT_EQ(back.ether_type, kEtherIpv4);
    EXPECT_EQ(back.src, kFar);
    EXPECT_EQ(back.dst, kPod20);
    EXPECT_EQ(back.dport, 4000);
    EXPECT_EQ(r.svc(kRedService).packets_out, 1u);
    EXPECT_EQ(r.svc(kRedService).packets_in, 1u);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, UntaggedFramesOfTheParentStayOnTheParent) {
    Rig& r = start(vlan_rig());
    // web's pod leaves untagged through ext1 with the ingress IP, on the same device as the VLAN.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 5000, kServer, 53)));
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    Parsed p = single(out);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.ether_type, kEtherIpv4) << "untagged";
    EXPECT_EQ(p.src, kIngress);
    EXPECT_EQ(p.eth_dst, kServerMac);
    // Its reply, untagged, reaches the pod.
    r.process(r.ext1, r.from_ext1(udp_ip(kServer, 53, kIngress, p.sport)));
    Parsed back = single(r.tx(r.pods));
    ASSERT_TRUE(back.ok) << back.error;
    EXPECT_EQ(back.dst, kPod10);
    // A priority-tagged frame (VLAN id 0) is the parent's too.
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 5000, kServer, 53)));
    ASSERT_EQ(r.tx(r.ext1).size(), 1u);
    r.process(r.ext1, tagged(0, r.from_ext1(udp_ip(kServer, 53, kIngress, p.sport)), 5));
    Parsed prio = single(r.tx(r.pods));
    ASSERT_TRUE(prio.ok) << prio.error;
    EXPECT_EQ(prio.dst, kPod10);
    EXPECT_TRUE(checksums_valid(prio));
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, UnknownVlanIdIsDroppedAndCounted) {
    Rig& r = start(vlan_rig());
    r.process(r.ext1, tagged(101, ethernet(kExt1Mac, kRedServerMac, kEtherIpv4, udp_ip(kRedServer, 53, kRedAddr, 9))));
    // A tagged frame on a device without VLANs, and a second tag inside a known VLAN.
    r.process(r.ext2, tagged(kVid, r.from_ext2(udp_ip(kBlueServer, 53, kExt2Addr, 9))));
    r.process(
        r.ext1,
        tagged(kVid, tagged(7, ethernet(kExt1Mac, kRedServerMac, kEtherIpv4, udp_ip(kRedServer, 53, kRedAddr, 9)))));
    EXPECT_EQ(r.drops(DropReason::unknown_vlan), 3u);
    EXPECT_EQ(r.total_drops(), 3u);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_TRUE(r.tx(r.ext2).empty());
    EXPECT_TRUE(r.tx(r.pods).empty());
}

TEST_F(DataplaneTest, VlanTagStrippedByTheDeviceIsTakenFromTheMbuf) {
    Rig& r = start(vlan_rig());
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 4000, kFar, 53)));
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(untag(out[0]), kVid);
    Parsed p = single(out);
    // As a device that strips tags delivers the reply: the frame untagged, the tag in the mbuf.
    In in{r.ext1, ethernet(kExt1Mac, kRedGwMac, kEtherIpv4, udp_ip(kFar, 53, kRedAddr, p.sport))};
    in.ol_flags = RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
    in.vlan_tci = kVid;
    r.process(0, {in});
    Parsed back = single(r.tx(r.pods));
    ASSERT_TRUE(back.ok) << back.error;
    EXPECT_EQ(back.dst, kPod20);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, ArpForTheVlanAddressIsAnsweredTagged) {
    Rig& r = start(vlan_rig());
    r.process(r.ext1, tagged(kVid, ethernet(kBroadcast, kRedServerMac, kEtherArp,
                                            arp_body(1, kRedServerMac, kRedServer, Mac{}, kRedAddr))));
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(untag(out[0]), kVid);
    Parsed p = single(out);
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.ether_type, kEtherArp);
    EXPECT_EQ(p.arp_op, 2);
    EXPECT_EQ(p.arp_spa, kRedAddr);
    EXPECT_EQ(p.arp_sha, kExt1Mac);
    EXPECT_EQ(p.arp_tpa, kRedServer);
    EXPECT_EQ(p.eth_dst, kRedServerMac);
    // The parent's address is not the VLAN's: not answered there, nor the VLAN's on the parent.
    r.process(r.ext1, tagged(kVid, ethernet(kBroadcast, kRedServerMac, kEtherArp,
                                            arp_body(1, kRedServerMac, kRedServer, Mac{}, kExt1Addr))));
    r.process(r.ext1, ethernet(kBroadcast, kServerMac, kEtherArp, arp_body(1, kServerMac, kServer, Mac{}, kRedAddr)));
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

TEST_F(DataplaneTest, EchoAndTimeExceededOfAVlanLeaveTaggedFromItsAddress) {
    Rig& r = start(vlan_rig());
    r.process(r.ext1, to_vlan_port(echo_ip(true, kRedServer, kRedAddr, 77, 3)));
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(untag(out[0]), kVid);
    Parsed echo = single(out);
    ASSERT_TRUE(echo.ok) << echo.error;
    EXPECT_TRUE(checksums_valid(echo));
    EXPECT_EQ(echo.icmp_type, 0);
    EXPECT_EQ(echo.src, kRedAddr);
    EXPECT_EQ(echo.dst, kRedServer);

    // A reply of a session on the VLAN whose TTL runs out here: Time Exceeded from the VLAN's
    // address, quoting the sender's header, back toward the sender's next hop on the VLAN.
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 4000, kFar, 53)));
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(untag(out[0]), kVid);
    const uint16_t nat_port = single(out).sport;
    r.process(r.ext1, to_vlan_port(udp_ip(kFar, 53, kRedAddr, nat_port, {}, IpOpt{.ttl = 1}), kRedGwMac));
    EXPECT_TRUE(r.tx(r.pods).empty());
    out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(untag(out[0]), kVid);
    Parsed te = single(out);
    ASSERT_TRUE(te.ok) << te.error;
    EXPECT_TRUE(checksums_valid(te));
    EXPECT_EQ(te.icmp_type, 11);
    EXPECT_EQ(te.src, kRedAddr);
    EXPECT_EQ(te.dst, kFar);
    EXPECT_EQ(te.eth_src, kExt1Mac);
    EXPECT_EQ(te.eth_dst, kRedGwMac);
    ASSERT_TRUE(te.inner);
    EXPECT_EQ(te.inner->src, kFar);
    EXPECT_EQ(te.inner->dst, kRedAddr);
}

TEST_F(DataplaneTest, VlanMtuHoldsItsOwnDatagrams) {
    RigOptions o = vlan_rig();
    auto base = o.configure;
    o.configure = [base](config::Config& c) {
        base(c);
        c.ports.back().mtu = 1400;
    };
    Rig& r = start(o);
    // 1,420 bytes of IPv4 with DF from the pod: Fragmentation Needed with the VLAN's MTU.
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 4000, kFar, 53, Bytes(1392, 0xab), IpOpt{.frag = 0x4000})));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    Parsed ptb = single(r.tx(r.pods));
    ASSERT_TRUE(ptb.ok) << ptb.error;
    EXPECT_EQ(ptb.icmp_type, 3);
    EXPECT_EQ(ptb.icmp_code, 4);
    EXPECT_EQ(ptb.icmp_seq, 1400) << "the next-hop MTU field";
    // Without DF it leaves in two tagged fragments of at most 1,400 bytes.
    r.process(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 4000, kFar, 53, Bytes(1392, 0xab))));
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 2u);
    for (Bytes& f : out) {
        ASSERT_EQ(untag(f), kVid);
        EXPECT_LE(f.size(), 14u + 1400);
        Parsed p = parse_frame(f);
        EXPECT_EQ(p.src, kRedAddr);
        EXPECT_TRUE(p.ip_csum_ok);
    }
}

// Neighbor Discovery per VLAN: a Solicitation for the VLAN's IPv6 address, tagged, is answered
// with an Advertisement tagged the same, from the parent's MAC; the parent does not answer for it.
TEST_F(DataplaneTest, NeighborSolicitationForTheVlanAddressIsAnsweredTagged) {
    const Ip6Addr vlan6 = ip6("2001:db8:64::1"), host6 = ip6("2001:db8:64::100");
    RigOptions o = vlan_rig();
    auto base = o.configure;
    o.configure = [base, vlan6](config::Config& c) {
        base(c);
        c.ports.back().addresses.push_back(net::IpPrefix{net::IpAddr::from_v6(vlan6.data()), 64});
    };
    Rig& r = start(o);
    const Ip6Addr group = solicited_node(vlan6);
    Bytes ns = ethernet(multicast_mac(group), kRedServerMac, kEtherIpv6, ns6_ip(host6, group, vlan6, kRedServerMac));
    r.process(r.ext1, tagged(kVid, ns));
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(untag(out[0]), kVid);
    Parsed na = single(out);
    ASSERT_TRUE(na.ok) << na.error;
    EXPECT_TRUE(checksums_valid(na));
    EXPECT_EQ(na.ether_type, kEtherIpv6);
    EXPECT_EQ(na.eth_dst, kRedServerMac);
    EXPECT_EQ(na.eth_src, kExt1Mac);
    EXPECT_EQ(na.icmp_type, 136);
    EXPECT_EQ(na.src6, vlan6);
    EXPECT_EQ(na.dst6, host6);
    // Untagged, on the parent, the VLAN's address is not the parent's.
    r.process(r.ext1, ns);
    EXPECT_TRUE(r.tx(r.ext1).empty());
}

// A frame for the VLAN in an mbuf with no headroom left for the tag (a pod's datagram received
// into the start of its buffer): dropped and counted, never sent untagged.
TEST_F(DataplaneTest, VlanFrameWithoutHeadroomForTheTagIsDropped) {
    Rig& r = start(vlan_rig());
    Bytes frame = r.from_pod(kPod20, udp_ip(kPod20, 4000, kFar, 53, {1}));
    rte_mbuf* m = rte_pktmbuf_alloc(r.pool());
    ASSERT_NE(m, nullptr);
    m->data_off = 0;
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    m->port = r.pods;
    dp::worker_process_burst(r.w(), r.policy(), &m, 1);
    dp::worker_flush(r.w());
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::vlan_no_headroom), 1u);
    EXPECT_EQ(r.total_drops(), 1u);
    // With headroom, the same datagram leaves tagged.
    r.process(r.pods, frame);
    std::vector<Bytes> out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(untag(out[0]), kVid);
}

}  // namespace
}  // namespace egw::test
