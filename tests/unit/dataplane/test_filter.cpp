// SPDX-License-Identifier: Apache-2.0
//
// Addresses the gateway never translates, forwards or answers (dataplane/address_filter.h, applied
// by input, or by nat_slow to the packets input's common path takes): multicast, limited and
// directed broadcast, the martian ranges, link-local, and unicast datagrams sent as link-layer
// broadcasts. Each is counted by its own reason, makes no session and leaves no port; the
// addresses just outside each range go through.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

Bytes text(const char* s) {
    return Bytes(s, s + std::strlen(s));
}

const Mac kAllHostsMac{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
const Mac kMdnsMac{0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb};

struct Filtered {
    const char* what;
    bool from_pod;  // else from ext1
    Mac eth_dst;    // the port's MAC unless a broadcast or multicast one
    uint32_t src, dst;
    DropReason reason;
};

// Every case once from a pod and, where it makes sense, from outside: nothing leaves any port, no
// session is made, and exactly its own reason counts it.
void expect_filtered(Rig& r, const std::vector<Filtered>& cases) {
    for (const Filtered& c : cases) {
        SCOPED_TRACE(c.what);
        uint64_t before = r.drops(c.reason), total = r.total_drops();
        Bytes ip = udp_ip(c.src, 5353, c.dst, 5353, text(c.what));
        if (c.from_pod)
            r.process(r.pods, ethernet(c.eth_dst, kPod10Mac, kEtherIpv4, ip));
        else
            r.process(r.ext1, ethernet(c.eth_dst, kServerMac, kEtherIpv4, ip));
        EXPECT_EQ(r.drops(c.reason), before + 1) << dp::kDropReasonNames[static_cast<unsigned>(c.reason)];
        EXPECT_EQ(r.total_drops(), total + 1);
        EXPECT_TRUE(r.tx(r.pods).empty());
        EXPECT_TRUE(r.tx(r.ext1).empty());
        EXPECT_TRUE(r.tx(r.ext2).empty());
        EXPECT_TRUE(r.to_control().empty());
        EXPECT_TRUE(r.sessions().empty());
    }
}

std::vector<Filtered> all_cases() {
    return {
        // a pod's mDNS and DHCP, the examples
        {"mDNS from a pod", true, kMdnsMac, kPod10, ip4(224, 0, 0, 251), DropReason::multicast},
        {"DHCP discover", true, kBroadcast, 0, ip4(255, 255, 255, 255), DropReason::broadcast},
        {"limited broadcast from a pod", true, kBroadcast, kPod10, ip4(255, 255, 255, 255), DropReason::broadcast},
        {"all-hosts from outside", false, kAllHostsMac, kServer, ip4(224, 0, 0, 1), DropReason::multicast},
        {"the top of multicast", true, kAllHostsMac, kPod10, ip4(239, 255, 255, 255), DropReason::multicast},
        // the subnets of every port, from either side
        {"the pods subnet's broadcast", true, kBroadcast, kPod10, ip4(10, 244, 1, 255), DropReason::directed_broadcast},
        {"ext1's subnet's broadcast from a pod", true, kPodsMac, kPod10, ip4(192, 0, 2, 255),
         DropReason::directed_broadcast},
        {"ext2's subnet's broadcast from outside", false, kExt1Mac, kServer, ip4(198, 51, 100, 255),
         DropReason::directed_broadcast},
        {"the pods subnet's broadcast from outside", false, kExt1Mac, kServer, ip4(10, 244, 1, 255),
         DropReason::directed_broadcast},
        // martian destinations
        {"to 0.0.0.0/8", true, kPodsMac, kPod10, ip4(0, 1, 2, 3), DropReason::martian_destination},
        {"to loopback", true, kPodsMac, kPod10, ip4(127, 0, 0, 1), DropReason::martian_destination},
        {"to 240.0.0.0/4", true, kPodsMac, kPod10, ip4(240, 0, 0, 1), DropReason::martian_destination},
        {"to 255.255.255.254", false, kExt1Mac, kServer, ip4(255, 255, 255, 254), DropReason::martian_destination},
        // martian sources
        {"from 0.0.0.0 to a server", true, kPodsMac, 0, kServer, DropReason::martian_source},
        {"from loopback", true, kPodsMac, ip4(127, 0, 0, 1), kServer, DropReason::martian_source},
        {"from multicast", false, kExt1Mac, ip4(224, 1, 2, 3), kIngress, DropReason::martian_source},
        {"from 240.0.0.0/4", false, kExt1Mac, ip4(250, 0, 0, 1), kIngress, DropReason::martian_source},
        {"from a subnet's broadcast", false, kExt1Mac, ip4(192, 0, 2, 255), kIngress, DropReason::martian_source},
        // link-local, either end
        {"to the metadata address", true, kPodsMac, kPod10, ip4(169, 254, 169, 254), DropReason::link_local},
        {"from link-local", false, kExt1Mac, ip4(169, 254, 1, 1), kIngress, DropReason::link_local},
        // a unicast datagram in a link-layer broadcast or multicast frame
        {"unicast in a broadcast frame", true, kBroadcast, kPod10, kServer, DropReason::link_broadcast},
        {"unicast in a multicast frame", false, kAllHostsMac, kServer, kIngress, DropReason::link_broadcast},
    };
}

TEST_F(DataplaneTest, FilteredAddressesAreNeverTranslatedOrForwarded) {
    Rig& r = start();
    expect_filtered(r, all_cases());
    EXPECT_EQ(r.w().counters.sessions_created, 0u);
}

// With the default action `route` nothing is translated anyway: the filter still stops these
// (224.0.0.1 from outside went back out before it).
TEST_F(DataplaneTest, FilteredAddressesAreNotRoutedUnderTheDefaultActionRoute) {
    RigOptions o;
    o.configure = [](config::Config& c) { c.default_action = config::DefaultAction::route; };
    o.services = {};
    Rig& r = start(o);
    expect_filtered(r, all_cases());
    EXPECT_EQ(r.w().counters.routed, 0u);
}

// Input's common path takes a frame for the receiving port by comparing its first six bytes
// with the port's MAC in one word: a destination one bit off in any byte, or another port's MAC,
// is foreign, in either family; the source MAC, loaded in the same word, plays no part.
TEST_F(DataplaneTest, OnlyFramesToTheReceivingPortsOwnMacAreTaken) {
    using namespace std_rig6;
    Rig& r = start(dual_stack());
    const Bytes v4 = udp_ip(kPod10, 40000, kServer, 53, text("mac"));
    const Bytes v6 = udp6_ip(kPod10v6, 40000, kServerV6, 53, text("mac"));
    std::vector<std::pair<std::string, Mac>> foreign;
    for (size_t k = 0; k < 6; ++k) {
        Mac m = kPodsMac;
        m[k] ^= 0x40;
        foreign.push_back({"byte " + std::to_string(k) + " off", m});
    }
    foreign.push_back({"the ext1 port's MAC", kExt1Mac});
    uint64_t foreign_drops = 0;
    for (const auto& [what, mac] : foreign) {
        SCOPED_TRACE(what);
        r.process(r.pods, ethernet(mac, kPod10Mac, kEtherIpv4, v4));
        r.process(r.pods, ethernet(mac, kPod10Mac, kEtherIpv6, v6));
        foreign_drops += 2;
        EXPECT_EQ(r.drops(DropReason::foreign_mac), foreign_drops);
        EXPECT_EQ(r.total_drops(), foreign_drops);
        EXPECT_TRUE(r.tx(r.ext1).empty());
        EXPECT_TRUE(r.tx(r.pods).empty());
    }
    EXPECT_EQ(r.w().counters.sessions_created, 0u);
    // Any source MAC, its first two bytes included, with the port's MAC as the destination.
    const Mac odd_source{0xfe, 0xdc, 0x00, 0x00, 0x00, 0x10};
    r.process(r.pods, ethernet(kPodsMac, odd_source, kEtherIpv4, v4));
    r.process(r.pods, ethernet(kPodsMac, odd_source, kEtherIpv6, v6));
    EXPECT_EQ(r.tx(r.ext1).size(), 2u);
    EXPECT_EQ(r.total_drops(), foreign_drops);
    EXPECT_EQ(r.w().counters.sessions_created, 2u);
}

// A port whose MAC is a group address (a device refusing the configured MAC keeps it in
// software, rte_ethdev refuses group addresses) takes no frame as unicast: a datagram sent to that
// MAC is in a multicast frame, never translated.
TEST_F(DataplaneTest, APortWithAGroupMacTakesNoFrameAsUnicast) {
    const Mac group{0x03, 0x00, 0x00, 0x00, 0x00, 0x01};
    RigOptions o;
    o.configure = [&](config::Config& c) {
        for (auto& p : c.ports)
            if (p.name == "pods") {
                config::MacAddr m;
                std::copy(group.begin(), group.end(), m.bytes);
                p.mac = m;
            }
    };
    Rig& r = start(o);
    r.process(r.pods, ethernet(group, kPod10Mac, kEtherIpv4, udp_ip(kPod10, 40000, kServer, 53, text("group"))));
    EXPECT_TRUE(r.tx(r.ext1).empty());
    EXPECT_EQ(r.drops(DropReason::link_broadcast), 1u);
    EXPECT_EQ(r.total_drops(), 1u);
    EXPECT_EQ(r.w().counters.sessions_created, 0u);
}

// The addresses next to every range are ordinary unicast and go through: the ranges are no wider
// than they should be. Each leaves as any packet to such an address does: translated to the
// Service's ingress IP toward ext1's gateway (or to the gateway itself, on ext1's link), or, for
// a cluster destination, routed untranslated toward the pods' router.
TEST_F(DataplaneTest, AddressesBesideTheFilteredRangesGoThrough) {
    Rig& r = start();
    const uint32_t outside_ranges[] = {
        ip4(223, 255, 255, 255),  // below multicast
        ip4(1, 0, 0, 0),          // above 0.0.0.0/8
        ip4(126, 255, 255, 255),  // below loopback (and a broadcast of no port's subnet)
        ip4(128, 0, 0, 0),        // above loopback
        ip4(169, 253, 255, 255),  // below link-local
        ip4(169, 255, 0, 0),      // above link-local
        ip4(192, 0, 2, 254),      // ext1's subnet, not its broadcast (ext1's gateway)
    };
    uint16_t port = 40000;
    // The one frame the packet to `dst` leaves as: `want`, on `out` and nowhere else.
    auto leaves_as = [&](uint32_t dst, uint16_t out, uint16_t other, const Bytes& want) {
        SCOPED_TRACE(ip_str(dst));
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, port, dst, 53, text("unicast"))));
        auto frames = r.tx(out);
        ASSERT_EQ(frames.size(), 1u);
        EXPECT_TRUE(checksums_valid(parse_frame(frames[0])));
        EXPECT_EQ(frames[0], want);
        EXPECT_TRUE(r.tx(other).empty());
        EXPECT_TRUE(r.to_control().empty());
    };
    for (uint32_t dst : outside_ranges) {
        leaves_as(dst, r.ext1, r.pods,
                  ethernet(kExt1GwMac, kExt1Mac, kEtherIpv4,
                           udp_ip(kIngress, port, dst, 53, text("unicast"), IpOpt{.ttl = 63})));
        ++port;
    }
    EXPECT_EQ(r.sessions().size(), std::size(outside_ranges));
    EXPECT_EQ(r.svc(kWeb).packets_out, std::size(outside_ranges));
    // A broadcast-looking address of the pod CIDR, not of a port's subnet: a cluster destination,
    // routed as it is (no session).
    const uint32_t pod_cidr_dst = ip4(10, 244, 2, 255);
    leaves_as(pod_cidr_dst, r.pods, r.ext1,
              ethernet(kPodsRouterMac, kPodsMac, kEtherIpv4,
                       udp_ip(kPod10, port, pod_cidr_dst, 53, text("unicast"), IpOpt{.ttl = 63})));
    EXPECT_EQ(r.sessions().size(), std::size(outside_ranges));
    EXPECT_EQ(r.total_drops(), 0u);
}

// Input's common path clears the directed broadcasts by the last octet of every port subnet's
// broadcast (PolicySnapshot::broadcast_last_octet) and leaves an address that ends like one to
// the exact comparison. With a /27 on ext1 (broadcast 203.0.113.95): that broadcast is dropped
// from either side, and an ordinary host ending in .95 is translated like any other, first packet
// and session hits alike.
TEST_F(DataplaneTest, AddressesEndingLikeASubnetsBroadcastAreJudgedExactly) {
    RigOptions o;
    o.configure = [](config::Config& c) {
        c.ports[1].addresses.push_back(net::IpPrefix::from_v4(ip4(203, 0, 113, 65), 27));
    };
    Rig& r = start(o);
    const dp::PolicySnapshot& snap = r.policy();
    EXPECT_TRUE(snap.broadcast_last_octet[95]);
    EXPECT_TRUE(snap.broadcast_last_octet[255]);
    EXPECT_FALSE(snap.broadcast_last_octet[94]);
    expect_filtered(r, {
                           {"the /27's broadcast from a pod", true, kPodsMac, kPod10, ip4(203, 0, 113, 95),
                            DropReason::directed_broadcast},
                           {"the /27's broadcast as a source", false, kExt1Mac, ip4(203, 0, 113, 95), kIngress,
                            DropReason::martian_source},
                       });
    const uint32_t host = ip4(8, 8, 8, 95);
    const uint64_t drops = r.total_drops();
    for (int k = 0; k < 3; ++k) {
        SCOPED_TRACE(k);
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 41000, host, 53, text("ends in .95"))));
        auto out = r.tx(r.ext1);
        ASSERT_EQ(out.size(), 1u);
        Parsed p = parse_frame(out[0]);
        ASSERT_TRUE(p.ok) << p.error;
        EXPECT_EQ(p.src, kIngress);
        EXPECT_EQ(p.dst, host);
        EXPECT_EQ(p.dport, 53);
        EXPECT_TRUE(checksums_valid(p));
    }
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.total_drops(), drops);
}

// Input's common path leaves the address filter to the slow path, and a session hit skips it when
// the session was checked under the current snapshot (dataplane/nat_session.h). A Service whose
// ingress IP is ext1's directed broadcast makes a session whose NAT address is filtered: its pod's
// packets are translated every time, and every reply to that address is dropped, not only the
// first; a hit of such a session must not vouch for its NAT address.
TEST_F(DataplaneTest, RepliesToANatAddressTheFilterRejectsAreDroppedEveryTime) {
    const uint32_t broadcast = ip4(192, 0, 2, 255);
    RigOptions o;
    o.services = {lb_service(kWeb, broadcast, {kPod10})};
    Rig& r = start(o);
    uint16_t nat_port = 0;
    for (int k = 0; k < 3; ++k) {
        SCOPED_TRACE(k);
        r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 41000, kInternet, 53, text("out"))));
        auto out = r.tx(r.ext1);
        ASSERT_EQ(out.size(), 1u);
        Parsed p = parse_frame(out[0]);
        ASSERT_TRUE(p.ok) << p.error;
        EXPECT_EQ(p.src, broadcast);
        EXPECT_TRUE(checksums_valid(p));
        if (k == 0) nat_port = p.sport;
        EXPECT_EQ(p.sport, nat_port);
    }
    ASSERT_EQ(r.sessions().size(), 1u);
    for (int k = 0; k < 3; ++k) {
        SCOPED_TRACE(k);
        uint64_t before = r.drops(DropReason::directed_broadcast);
        r.process(r.ext1, r.from_ext1(udp_ip(kInternet, 53, broadcast, nat_port, text("back"))));
        EXPECT_EQ(r.drops(DropReason::directed_broadcast), before + 1);
        EXPECT_TRUE(r.tx(r.pods).empty());
        EXPECT_TRUE(r.tx(r.ext1).empty());
    }
    EXPECT_EQ(r.sessions().size(), 1u);
    EXPECT_EQ(r.total_drops(), 3u);
}

// The same path for a reply whose source the filter rejects: a session to a remote host ending
// like no broadcast, answered from the subnet's broadcast address instead, matches no session and
// is dropped for its source, from the first reply on.
TEST_F(DataplaneTest, AReplyFromAFilteredSourceIsDroppedForItsSource) {
    Rig& r = start({});
    r.process(r.pods, r.from_pod(kPod10, udp_ip(kPod10, 41000, kInternet, 53, text("out"))));
    auto out = r.tx(r.ext1);
    ASSERT_EQ(out.size(), 1u);
    Parsed p = parse_frame(out[0]);
    ASSERT_TRUE(p.ok) << p.error;
    for (uint32_t src : {ip4(192, 0, 2, 255), ip4(127, 0, 0, 1), ip4(224, 0, 0, 9)}) {
        SCOPED_TRACE(src);
        uint64_t before = r.drops(DropReason::martian_source);
        r.process(r.ext1, r.from_ext1(udp_ip(src, 53, kIngress, p.sport, text("back"))));
        EXPECT_EQ(r.drops(DropReason::martian_source), before + 1);
        EXPECT_TRUE(r.tx(r.pods).empty());
    }
}

// The IPv6 twin: a Service whose IPv6 ingress IP is a link-local address (not the port's). Its
// pod's packets are translated every time; every reply to that address is dropped as link_local,
// since a hit of such a session must not vouch for its NAT address.
TEST_F(DataplaneTest, Ipv6RepliesToANatAddressTheFilterRejectsAreDroppedEveryTime) {
    using namespace std_rig6;
    const Ip6Addr link_local = ip6("fe80::50");
    RigOptions o = dual_stack();
    model::ServiceState web = web6();
    web.ingress_ipv6 = addr6(link_local);
    o.services = {web};
    Rig& r = start(o);
    uint16_t nat_port = 0;
    for (int k = 0; k < 3; ++k) {
        SCOPED_TRACE(k);
        r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 41000, kInternetV6, 53, text("out"))));
        Parsed p = single(r.tx(r.ext1));
        ASSERT_TRUE(p.ok) << p.error;
        EXPECT_EQ(p.src6, link_local);
        EXPECT_TRUE(checksums_valid(p));
        if (k == 0) nat_port = p.sport;
        EXPECT_EQ(p.sport, nat_port);
    }
    ASSERT_EQ(r.sessions6().size(), 1u);
    for (int k = 0; k < 3; ++k) {
        SCOPED_TRACE(k);
        uint64_t before = r.drops(DropReason::link_local);
        r.process(r.ext1, from_ext1_6(udp6_ip(kInternetV6, 53, link_local, nat_port, text("back"))));
        EXPECT_EQ(r.drops(DropReason::link_local), before + 1);
        EXPECT_TRUE(r.tx(r.pods).empty());
        EXPECT_TRUE(r.tx(r.ext1).empty());
    }
    EXPECT_EQ(r.sessions6().size(), 1u);
    EXPECT_EQ(r.total_drops(), 3u);
}

// Replies from IPv6 sources the filter rejects, shaped as the common path takes them (UDP right
// behind the fixed header, unicast to the port): each is dropped for its source, not as a reply
// with no session.
TEST_F(DataplaneTest, Ipv6ReplyFromAFilteredSourceIsDroppedForItsSource) {
    using namespace std_rig6;
    RigOptions o = dual_stack();
    o.services = {web6()};
    Rig& r = start(o);
    r.process(r.pods, from_pod6(kPod10v6, udp6_ip(kPod10v6, 41000, kInternetV6, 53, text("out"))));
    Parsed p = single(r.tx(r.ext1));
    ASSERT_TRUE(p.ok) << p.error;
    for (const char* src : {"::1", "ff0e::1", "::ffff:203.0.113.9", "::"}) {
        SCOPED_TRACE(src);
        uint64_t before = r.drops(DropReason::martian_source);
        r.process(r.ext1, from_ext1_6(udp6_ip(ip6(src), 53, kIngressV6, p.sport, text("back"))));
        EXPECT_EQ(r.drops(DropReason::martian_source), before + 1);
        EXPECT_TRUE(r.tx(r.pods).empty());
    }
}

}  // namespace
}  // namespace egw::test
