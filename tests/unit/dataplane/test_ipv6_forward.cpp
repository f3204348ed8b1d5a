// SPDX-License-Identifier: Apache-2.0
//
// IPv6 as a router forwards it (issue 11 §3): next hops resolved by Neighbor Solicitation on the
// control thread (the worker's side: held packets and advertisements handed over, the IPv6
// neighbour table read on output), hop limit, the routes of the packet's VRF, and the gateway's
// own ICMPv6 errors. Frames are compared byte for byte with what packet.cpp builds independently.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

const Ip6Addr kPodsV6 = ip6("fd00:10:244:1::1");
const Ip6Addr kExt1V6 = ip6("2001:db8:2::1");
const Ip6Addr kExt2V6 = ip6("2001:db8:3::1");
const Ip6Addr kServerV6 = ip6("2001:db8:2::100");
const Ip6Addr kExt1GwV6 = ip6("2001:db8:2::fe");
const Ip6Addr kPod10v6 = ip6("fd00:10:244:1::10");

net::IpAddr addr6(const Ip6Addr& a) { return net::IpAddr::from_v6(a.data()); }

// The rig with IPv6 on its ports (a /64 each), the default IPv6 route via ext1's router, and
// `neighbours6` as static IPv6 neighbours.
RigOptions dual_stack(std::vector<std::pair<Ip6Addr, Mac>> neighbours6 = {}) {
    RigOptions o;
    o.configure = [neighbours6](config::Config& c) {
        c.ports[0].addresses.push_back(net::IpPrefix{addr6(kPodsV6), 64});
        c.ports[1].addresses.push_back(net::IpPrefix{addr6(kExt1V6), 64});
        c.ports[2].addresses.push_back(net::IpPrefix{addr6(kExt2V6), 64});
        config::RouteConfig r;
        r.vrf = "default";
        r.prefix = net::IpPrefix{addr6(ip6("::")), 0};
        r.via = addr6(kExt1GwV6);
        r.port = "ext1";
        c.routes.push_back(r);
        for (const auto& [ip, mac] : neighbours6) {
            config::MacAddr m;
            std::copy(mac.begin(), mac.end(), m.bytes);
            c.neighbors.push_back(config::NeighborConfig{"ext1", addr6(ip), m});
        }
    };
    return o;
}

// ---------------------------------------------------------------------------------------------
// Neighbour resolution, the worker's side.

// A Neighbor Advertisement (any that passes RFC 4861 7.1.2) goes to the control thread as it came,
// marked as an advertisement in the dynfield, and is counted there; an unsolicited one to all
// nodes too. Nothing is sent back.
TEST_F(DataplaneTest, NeighborAdvertisementsGoToTheControlThread) {
    Rig& r = start(dual_stack());
    auto na = [&](const Ip6Addr& dst, const Mac& eth_dst, uint8_t flags) {
        Bytes body(4 + 16 + 8, 0);
        body[0] = flags;
        std::copy(kServerV6.begin(), kServerV6.end(), body.begin() + 4);
        body[20] = 2;
        body[21] = 1;
        std::copy(kServerMac.begin(), kServerMac.end(), body.begin() + 22);
        return ethernet(eth_dst, kServerMac, kEtherIpv6, icmp6_ip(kServerV6, dst, 136, 0, body, Ip6Opt{255}));
    };
    Bytes solicited = na(kExt1V6, kExt1Mac, 0x60);
    Bytes unsolicited = na(ip6("ff02::1"), Mac{0x33, 0x33, 0, 0, 0, 1}, 0x20);
    r.process(0, {{r.ext1, solicited}, {r.ext1, unsolicited}});
    auto got = r.to_control();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].frame, solicited);
    EXPECT_EQ(got[1].frame, unsolicited);
    for (const auto& c : got) {
        EXPECT_TRUE(c.advertisement);
        EXPECT_EQ(c.port, r.ext1);
    }
    EXPECT_EQ(r.w().counters.to_control, 2u);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_TRUE(r.tx(r.ext1).empty());
    // One whose hop limit says it was forwarded is not.
    Bytes forwarded = solicited;
    forwarded[14 + 7] = 254;
    r.process(r.ext1, forwarded);
    EXPECT_TRUE(r.to_control().empty());
    EXPECT_EQ(r.drops(DropReason::malformed), 1u);
}

}  // namespace
}  // namespace egw::test
