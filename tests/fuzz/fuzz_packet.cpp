// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the packet path. Arbitrary bytes become a frame received on an inside or an
// outside port and go through the real burst function (worker_process_burst + worker_flush, as
// the packet tests drive it) of a worker set up by the packet-test rig on net_ring ports, with a
// policy from the real PolicyBuilder: the rig's LoadBalancerIP Service default/web (ingress
// 192.0.2.50, pods .10 and .11), a Network Service default/blue (pod .20, VRF blue, out of ext2)
// and the default action masquerade (everything else, e.g. pod .30, leaves as 192.0.2.1).
//
// Input, byte 0:
//   bits 0-1  what the rest is: 0 a whole Ethernet frame; 1 an IPv4 datagram (its header and L4
//             checksums are made right, so that the mutations get past the checksum checks);
//             2 the quote of an ICMP error sent from outside to one of the gateway's addresses;
//             3 the quote of an ICMP error sent by a pod toward a server
//   bits 2-3  modes 0/1: the receiving port (pods, ext1, ext2, pods); modes 2/3: the ICMP type
//   bit 4     first open sessions (TCP, UDP and echo, one through each kind of policy) with
//             their replies
//   bit 5     then let the UDP and ICMP sessions time out (the sweep frees them)
//   bits 6-7  receive offload flags as a NIC sets them (none, checksums good, IP bad, IP none)
// byte 1: modes 2/3: who sends the error (which address it goes to, which pod sends it); bit 7:
//   IPv6 (mode 1: the rest is an IPv6 packet whose transport checksum is made right; modes 2/3:
//   an ICMPv6 error, types 1 to 4, quoting it); mode 1 with IPv6, bit 6: the packet (at most
//   1,400 bytes) arrives in fragments of 8 × (1 + bits 0-4) bytes in one burst, the first last
//   when bit 5 is set; modes 2/3, bit 5: the error arrives in 2 + (bits 3-4) IPv4 or IPv6
//   fragments in one burst; modes 0, 2 and 3, bit 6: each frame arrives as a chain of mbufs of
//   16 × (1 + bits 3-5) bytes, as a scattering NIC delivers it (with bit 5, each fragment so)
//
// The rig is dual-stack for NAPT66: the ports have IPv6 addresses, web has the IPv6 ingress IP
// 2001:db8:2::50 (pods ::10 and ::11 of fd00:10:244:1::/64), blue pod ::20, the IPv6 default route
// via ext1's router; bit 4's priming opens IPv6 sessions of each policy too.
//
// Every input starts from an empty session table and the same clock. Invariants, on every frame
// that leaves (and on the priming traffic too):
//   - it parses; IPv4 total length matches the frame; the source MAC is the port's
//   - the IPv4 header checksum is right (unless the NIC flags vouched for a wrong one), and every
//     L4 checksum, also inside an ICMP error's quote, is right when it was right on the way in
//   - out of an outside port, the IPv4 source is one of the gateway's NAT addresses (never a pod
//     or anything else), and a quote never names a pod; traffic of the LoadBalancerIP Service's
//     pods leaves from its ingress IP through ext1, the Network Service's to blue's network
//     through ext2 from ext2's address (elsewhere through ext1, masqueraded), other pods'
//     masqueraded through ext1
//   - into the inside port, no destination (or quoted source) is a NAT address: what comes back
//     is translated
//   - TTL never leaves as 0
//   - IPv6 leaves as the gateway's own answer (a Neighbor Advertisement or an echo reply out of
//     the port it came in on, from that port's link-local or global address) or translated
//     (NAPT66): out of an outside port from one of the IPv6 NAT addresses (web's ingress IP,
//     ext1's or ext2's address), a quote never naming a pod; into the inside port never to a NAT
//     address, a quote never from one; hop limit never 0; every transport checksum (ICMPv6 over
//     the pseudo-header) and quoted one right when it was right on the way in
//   - each frame received is sent, given to the control thread or counted as a drop: exactly one
//     (a fragment taken into reassembly counts once, its datagram once more when it is whole)
//   - IPv6 fragments in: what leaves (fragments put together again, each within 1,280 bytes or
//     the largest fragment received) is what the same packet sent whole gives, an ICMPv6 error
//     quoting no more of it; a datagram in more fragments than reassembly takes leaves nothing
//   - an ICMP or ICMPv6 error in fragments, or any frame in a chain of mbufs: what leaves is what
//     the same frame sent whole in one mbuf gives (an ICMPv6 error of the gateway's own may quote
//     less of a chain: what its first mbuf holds)
//   - no mbuf is lost or freed twice
//
// Inputs of odd length run with the packet trace on (dataplane/trace.h: every packet taken, the
// priming traffic too), so that its frame parser and its reading of every stage's decisions see
// whatever the stages see; the invariants above hold the same with it, and every record it
// publishes begins at input, holds at most kTraceMaxSteps steps and 128 bytes of each frame.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dataplane/held.h"
#include "dataplane/reassembly.h"
#include "dataplane/trace.h"
#include "tests/fuzz/fuzz.h"
#include "tests/unit/dataplane/rig.h"

namespace {

using namespace egw;
using namespace egw::test;
using namespace egw::test::std_rig;
using namespace egw::test::std_rig6;

constexpr uint32_t kPod30 = ip4(10, 244, 1, 30);  // in no Service: default action
const std::string kBlue = "default/blue";
constexpr size_t kMaxFrame = 1900;              // fits one mbuf of the rig's pool
constexpr uint64_t kClock = uint64_t{1} << 40;  // every input starts at this TSC value

std::unique_ptr<Rig> g_rig;
std::string g_runtime_dir;

// A short description of a frame for messages.
std::string hex(const Bytes& b) {
    std::string s;
    char x[4];
    for (size_t i = 0; i < b.size() && i < 96; ++i) {
        std::snprintf(x, sizeof x, "%02x", b[i]);
        s += x;
    }
    if (b.size() > 96) s += "...";
    return s;
}

bool in_pods(uint32_t a) {
    return (a & 0xffff0000) == ip4(10, 244, 0, 0);
}
bool is_nat_address(uint32_t a) {
    return a == kIngress || a == kExt1Addr || a == kExt2Addr;
}

// IPv6 of the rig (init()).
const Ip6Addr kPod30v6 = ip6("fd00:10:244:1::30");  // in no Service: default action

bool in_pods6(const Ip6Addr& a) {
    static const Ip6Addr kPods = ip6("fd00:10:244::");
    return std::equal(a.begin(), a.begin() + 6, kPods.begin());
}
bool is_nat_address6(const Ip6Addr& a) {
    return a == kIngressV6 || a == kExt1V6 || a == kExt2V6;
}

[[noreturn]] void broken(const std::string& what, const std::string& port, const Bytes& frame) {
    fuzz::fail(what + " (frame out of " + port + ": " + hex(frame) + ")");
}

// An ICMP error whose own headers are right, and whose quote is not a well-formed start of a
// datagram (lengths, TCP data offset): the gateway forwards what a remote quoted as it is, only
// its addresses and ports translated. The parser has filled in the outer headers and the quoted
// IPv4 header.
bool quote_only(const Parsed& p) {
    return !p.ok && p.inner && p.error.rfind("quoted datagram: ", 0) == 0 &&
           p.error != "quoted datagram: IPv4 header truncated" && p.error != "quoted datagram: not IPv4";
}

// A UDP length below the IPv4 or IPv6 payload (bytes after the datagram) is legal, and passed on
// as the kernel's conntrack does (Linux's UDP trims the payload to the UDP length in both
// families); the parser stops there with the IP header filled in.
bool short_udp(const Parsed& p) {
    return !p.ok && (p.error == "UDP length disagrees with the IPv4 length" ||
                     p.error == "UDP length disagrees with the IPv6 length");
}

bool usable(const Parsed& p) {
    return p.ok || quote_only(p) || short_udp(p);
}

// What was right about the frame received.
struct Received {
    std::string port;    // where it arrived
    bool valid = false;  // it parsed as IPv4 (`p` is also kept for IPv6)
    Parsed p;
    bool ip_flagged_good = false;
};

// `held`: given to the control thread to wait for ARP (its Ethernet header is not written yet).
void check_frame(const Received& in, const std::string& port, const Bytes& f, bool held) {
    Parsed p = parse_frame(f);
    if (!usable(p) || (short_udp(p) && !short_udp(in.p))) broken("a frame that does not parse: " + p.error, port, f);
    const Mac& mac = port == "pods" ? kPodsMac : port == "ext1" ? kExt1Mac : kExt2Mac;
    if (!held && p.eth_src != mac) broken("the source MAC is not the port's", port, f);
    if (p.ether_type == kEtherArp) {
        if (p.arp_op == 2 && !held) {
            uint32_t mine = port == "pods" ? kPodsAddr : port == "ext1" ? kExt1Addr : kExt2Addr;
            // The ingress IP of web (default network) is answered on ext1 only, the port of its
            // network (docs/architecture.md).
            if (p.arp_spa != mine && !(port == "ext1" && p.arp_spa == kIngress))
                broken("an ARP reply for " + ip_str(p.arp_spa) + ", not an address of the port", port, f);
        }
        return;
    }
    if (p.ether_type == kEtherIpv6) {
        if (p.hop_limit == 0) broken("hop limit 0", port, f);
        const bool sum_was_ok = in.p.ether_type == kEtherIpv6 && in.p.ok && in.p.l4_csum_ok;
        // The gateway's own answer, back out of the port it came in on, from that port's
        // link-local or global address: a Neighbor Advertisement, an echo reply, whose checksum
        // stays right when the request's was, or an ICMPv6 error (RFC 4443) to the sender,
        // quoting the start of the packet it answers, within 1280 bytes.
        const Ip6Addr& mine6 = port == "pods" ? kPodsV6 : port == "ext1" ? kExt1V6 : kExt2V6;
        const bool own =
            !held && port == in.port && p.proto == kProtoIcmp6 && (p.src6 == link_local_of(mac) || p.src6 == mine6);
        if (own) {
            const bool error = p.icmp_type >= 1 && p.icmp_type <= 3;
            if (p.icmp_type != 136 && p.icmp_type != 129 && !error)
                broken(
                    "ICMPv6 from the port's own address other than a Neighbor Advertisement, an echo reply or an "
                    "ICMPv6 error",
                    port, f);
            if (error) {
                if (in.p.ether_type != kEtherIpv6 || in.p.l3.empty() || p.dst6 != in.p.src6)
                    broken("an ICMPv6 error not to the sender of a valid IPv6 packet", port, f);
                if (in.p.proto == kProtoIcmp6 && in.p.icmp_type < 128)
                    broken("an ICMPv6 error answering an ICMPv6 error", port, f);
                if (f.size() > 14 + 1280 || p.payload.empty() || p.payload.size() > in.p.l3.size() ||
                    !std::equal(p.payload.begin(), p.payload.end(), in.p.l3.begin()))
                    broken("an ICMPv6 error whose quote is not the start of the packet it answers, within 1280 bytes",
                           port, f);
            }
            if (!p.l4_csum_ok && (p.icmp_type == 136 || error || sum_was_ok)) broken("wrong ICMPv6 checksum", port, f);
            return;
        }
        // Otherwise translated (NAPT66; held ones wait for a Neighbor Solicitation's answer).
        if (sum_was_ok && !p.l4_csum_ok && p.proto == in.p.proto)
            broken("wrong IPv6 transport checksum (it was right on the way in)", port, f);
        if (p.inner && in.p.ether_type == kEtherIpv6 && in.p.inner && in.p.inner->l4_complete &&
            in.p.inner->l4_csum_ok && p.inner->l4_complete && !p.inner->l4_csum_ok)
            broken("wrong quoted transport checksum (it was right on the way in)", port, f);
        if (port == "ext1" || port == "ext2") {
            if (!is_nat_address6(p.src6))
                broken("IPv6 source " + ip6_str(p.src6) + " out of an outside port, not a NAT address", port, f);
            if (p.inner && (in_pods6(p.inner->src6) || in_pods6(p.inner->dst6)))
                broken("a quote naming a pod out of an outside port", port, f);
            // A pod's own traffic leaves where its policy says (errors follow the session they quote).
            if (in.p.ether_type == kEtherIpv6 && in.p.ok && !in.p.inner && in_pods6(in.p.src6)) {
                const Ip6Addr& pod = in.p.src6;
                static const Ip6Addr kBlueNet = ip6("2001:db8:3::");
                bool blue = pod == kPod20v6 && std::equal(kBlueNet.begin(), kBlueNet.begin() + 8, in.p.dst6.begin());
                const Ip6Addr& want = pod == kPod10v6 || pod == kPod11v6 ? kIngressV6 : blue ? kExt2V6 : kExt1V6;
                std::string want_port = blue ? "ext2" : "ext1";
                if (p.src6 != want || port != want_port)
                    broken("IPv6 traffic of " + ip6_str(pod) + " left " + port + " from " + ip6_str(p.src6) +
                               " (policy: " + want_port + " from " + ip6_str(want) + ")",
                           port, f);
            }
        } else {
            if (is_nat_address6(p.dst6))
                broken("untranslated destination " + ip6_str(p.dst6) + " into the inside port", port, f);
            if (p.inner && is_nat_address6(p.inner->src6))
                broken("a quote with untranslated source " + ip6_str(p.inner->src6) + " into the inside port", port, f);
        }
        return;
    }
    if (p.ether_type != kEtherIpv4) broken("a frame that is neither IPv4, IPv6 nor ARP", port, f);
    if (!p.ip_csum_ok && !in.ip_flagged_good) broken("wrong IPv4 header checksum", port, f);
    if (p.ttl == 0) broken("TTL 0", port, f);
    // Checksums stay right when they were right.
    if (in.valid && in.p.l4_csum_ok && !p.l4_csum_ok && p.proto == in.p.proto)
        broken("wrong L4 checksum (it was right on the way in)", port, f);
    if (p.inner && in.valid && in.p.inner) {
        if (in.p.inner->ip_csum_ok && !p.inner->ip_csum_ok)
            broken("wrong quoted IPv4 header checksum (it was right on the way in)", port, f);
        if (in.p.inner->l4_complete && in.p.inner->l4_csum_ok && p.inner->l4_complete && !p.inner->l4_csum_ok)
            broken("wrong quoted L4 checksum (it was right on the way in)", port, f);
    }
    if (port == "ext1" || port == "ext2") {
        uint32_t allowed = port == "ext1" ? kExt1Addr : kExt2Addr;
        if (p.src != allowed && !(port == "ext1" && p.src == kIngress))
            broken("source " + ip_str(p.src) + " out of an outside port", port, f);
        if (p.inner && (in_pods(p.inner->src) || in_pods(p.inner->dst)))
            broken("a quote naming a pod out of an outside port", port, f);
        // Who sent it decides the source address (ICMP errors follow the session they quote).
        // The gateway answering a packet itself (an echo reply, its own ICMP error) sends it back
        // out of the port it arrived on, from that port's address, whatever source the packet
        // claimed: a pod's address arriving from outside gets its answer outside.
        const bool answered = p.proto == kProtoIcmp && p.src == allowed && port == in.port;
        if (in.valid && !in.p.inner && in_pods(in.p.src) && !answered) {
            uint32_t pod = in.p.src;
            // The Network Service routes in VRF blue (only 198.51.100.0/24, connected), falling
            // through to the default table, and masquerades to the address of the port it leaves.
            bool blue = pod == kPod20 && (in.p.dst & 0xffffff00) == ip4(198, 51, 100, 0);
            uint32_t want = pod == kPod10 || pod == kPod11 ? kIngress : blue ? kExt2Addr : kExt1Addr;
            std::string want_port = blue ? "ext2" : "ext1";
            if (p.src != want || port != want_port)
                broken("traffic of " + ip_str(pod) + " left " + port + " from " + ip_str(p.src) +
                           " (policy: " + want_port + " from " + ip_str(want) + ")",
                       port, f);
        }
    }
    if (port == "pods") {
        if (is_nat_address(p.dst))
            broken("untranslated destination " + ip_str(p.dst) + " into the inside port", port, f);
        if (p.inner && is_nat_address(p.inner->src))
            broken("a quote with untranslated source " + ip_str(p.inner->src) + " into the inside port", port, f);
    }
}

struct Outcome {
    size_t out = 0;  // frames transmitted or given to the control thread
    std::vector<Bytes> pods, ext1, ext2, held;
};

// Every received frame is counted once; a datagram cut for the egress MTU is transmitted as
// several frames and counted as one.
uint64_t accounted(const Rig& r) {
    const dp::WorkerCounters& c = r.workers.at(0)->counters;
    return r.total_drops() + c.tx_packets - (c.fragments_out - c.fragmented) + c.held + c.to_control + c.fragments_in -
           c.reassembled;
}

Bytes reassemble6_any(const std::vector<Bytes>& fragments, std::string* why);

// The frames that left one port, with the fragments of a datagram egw cut for the port's MTU
// (1500 on every port of the rig) put together again behind the first one's Ethernet header:
// each fragment within the MTU, with a right header checksum, the set covering the datagram
// exactly once.
std::vector<Bytes> datagrams(const std::vector<Bytes>& frames, const std::string& port) {
    std::vector<Bytes> out, ips, ips6;
    for (const Bytes& f : frames) {
        if (f.size() > 1514) broken("a frame longer than the port's MTU", port, f);
        if (f.size() >= 34 && get16(&f[12]) == kEtherIpv4 && (get16(&f[20]) & 0x3fff) != 0)
            ips.emplace_back(f.begin() + 14, f.end());
        else if (f.size() >= 62 && get16(&f[12]) == kEtherIpv6 && f[14 + 6] == 44 && (get16(&f[14 + 42]) & 0xfff9) != 0)
            ips6.emplace_back(f.begin() + 14, f.end());
        else
            out.push_back(f);
    }
    for (auto [list, put_together] : {std::pair{&ips, &reassemble}, std::pair{&ips6, &reassemble6_any}}) {
        if (list->empty()) continue;
        std::string why;
        Bytes d = put_together(*list, &why);
        if (d.empty()) broken("fragments that do not make one datagram: " + why, port, frames.front());
        Bytes f(frames.front().begin(), frames.front().begin() + 14);
        f.insert(f.end(), d.begin(), d.end());
        out.push_back(std::move(f));
    }
    return out;
}

// The IPv6 fragments egw cut leave within the largest fragment it received, and never need to be
// cut below 1,280 bytes.
size_t g_largest_fragment6 = 0;

Bytes reassemble6_any(const std::vector<Bytes>& fragments, std::string* why) {
    for (const Bytes& f : fragments)
        if (f.size() > std::max<size_t>(g_largest_fragment6, 1280)) {
            *why = "an IPv6 fragment larger than the largest received and than 1,280 bytes";
            return {};
        }
    return reassemble6(fragments, why);
}

std::string port_name(const Rig& r, uint16_t port) {
    return port == r.pods ? "pods" : port == r.ext1 ? "ext1" : port == r.ext2 ? "ext2" : "port " + std::to_string(port);
}

// Sends frames through one burst and checks what came out: one frame, or the fragments of
// `as_received` (what the checks take for the frame received). Each frame is one counted outcome;
// with `refused_later`, a fragment the table took in and then dropped with the others of its
// datagram (more than it holds) counts twice, taken in and dropped.
Outcome send_frames(uint16_t port, const std::vector<Bytes>& frames, const Bytes& as_received, uint64_t ol_flags,
                    bool refused_later = false, unsigned segment = 0) {
    Rig& r = *g_rig;
    Received in;
    in.port = port_name(r, port);
    Parsed p = parse_frame(as_received);
    if (usable(p) && p.ether_type == kEtherIpv4) {
        in.valid = true;
        in.p = p;
    } else if (p.ether_type == kEtherIpv6) {
        in.p = p;
    }
    in.ip_flagged_good = (ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
    uint64_t before = accounted(r);
    std::vector<In> burst;
    for (const Bytes& f : frames)
        burst.push_back(In{port, f, ol_flags, segment});
    r.process(0, burst);
    Outcome o;
    o.pods = datagrams(r.tx(r.pods), "pods");
    o.ext1 = datagrams(r.tx(r.ext1), "ext1");
    o.ext2 = datagrams(r.tx(r.ext2), "ext2");
    for (const auto& f : o.pods)
        check_frame(in, "pods", f, false);
    for (const auto& f : o.ext1)
        check_frame(in, "ext1", f, false);
    for (const auto& f : o.ext2)
        check_frame(in, "ext2", f, false);
    for (auto& c : r.to_control()) {
        // ARP requests and replies for the control thread come as they were received.
        if (c.port == port && std::find(frames.begin(), frames.end(), c.frame) != frames.end())
            ;
        else
            check_frame(in, port_name(r, c.port), c.frame, true);
        o.held.push_back(std::move(c.frame));
    }
    o.out = o.pods.size() + o.ext1.size() + o.ext2.size() + o.held.size();
    uint64_t after = accounted(r);
    // A fragment is held for reassembly (counted once, in fragments_in); dropped now, after the
    // count, so that no mbuf stays in use between inputs.
    dp::reassembly_clear(r.w());
    const uint64_t counted = after - before;
    if (counted < frames.size() || counted > (refused_later ? 2 : 1) * frames.size() || o.out > 1)
        fuzz::fail(std::to_string(frames.size()) + " frame(s) received on " + port_name(r, port) + " gave " +
                   std::to_string(o.out) + " frames out and " + std::to_string(counted) +
                   " counted outcomes: " + hex(as_received));
    if (r.mbufs_in_use() != 0)
        fuzz::fail(std::to_string(r.mbufs_in_use()) +
                   " mbufs in use after a burst (lost, or freed twice): " + hex(as_received));
    return o;
}

Outcome send(uint16_t port, const Bytes& frame, uint64_t ol_flags = 0) {
    return send_frames(port, {frame}, frame, ol_flags);
}

// Priming traffic must come out exactly once, where the policy sends it.
Parsed one(const Outcome& o, const std::vector<Bytes>& where, const char* what) {
    if (o.out != 1 || where.size() != 1)
        fuzz::fail(std::string("priming: ") + what + " did not come out where the policy sends it");
    return parse_frame(where[0]);
}

// Opens sessions of every kind of policy and answers them as the remotes would: TCP through the
// LoadBalancerIP Service, UDP through the Network Service, an echo through the default action
// (whose reply waits for ARP: pod .30 has no neighbour entry), and a one-way UDP flow.
void prime() {
    Rig& r = *g_rig;
    Outcome o = send(r.pods, r.from_pod(kPod10, tcp_ip(kPod10, 40000, kServer, 80, kSyn)));
    Parsed syn = one(o, o.ext1, "a SYN of default/web");
    o = send(r.ext1, r.from_ext1(tcp_ip(kServer, 80, kIngress, syn.sport, kSyn | kAck)));
    one(o, o.pods, "the SYN-ACK to default/web");

    o = send(r.pods, r.from_pod(kPod20, udp_ip(kPod20, 5353, kBlueServer, 53, {1, 2, 3})));
    Parsed q = one(o, o.ext2, "a UDP query of default/blue");
    o = send(r.ext2, r.from_ext2(udp_ip(kBlueServer, 53, kExt2Addr, q.sport, {4, 5, 6})));
    one(o, o.pods, "the UDP answer to default/blue");

    Bytes echo = ethernet(kPodsMac, kPod20Mac, kEtherIpv4, echo_ip(true, kPod30, kInternet, 0x77, 1, {9, 9}));
    o = send(r.pods, echo);
    Parsed e = one(o, o.ext1, "an echo request of the default action");
    o = send(r.ext1, r.from_ext1(echo_ip(false, kInternet, kExt1Addr, e.icmp_ident, 1, {9, 9}), kExt1GwMac));
    one(o, o.held, "the echo reply held for ARP");

    o = send(r.pods, r.from_pod(kPod11, udp_ip(kPod11, 6000, kServerB, 7000, {7})));
    one(o, o.ext1, "a one-way UDP flow of default/web");

    // IPv6, with the flows test_nat66.cpp takes through each policy (packet.h): TCP through web's
    // IPv6 ingress IP, UDP through blue, an echo through the default action.
    auto pod6 = [](const Mac& m, const Bytes& ip) { return ethernet(kPodsMac, m, kEtherIpv6, ip); };
    const std::vector<Flow6> flows = flows6();
    const Flow6 &tcp = flows[0], &udp = flows[1], &echo6 = flows[2];
    o = send(r.pods, pod6(kPod10Mac, tcp.out(kPod10v6, 40000, kServerV6, 80, 64)));
    Parsed syn6 = one(o, o.ext1, "an IPv6 SYN of default/web");
    o = send(r.ext1, ethernet(kExt1Mac, kServerMac, kEtherIpv6, tcp.back(kServerV6, 80, kIngressV6, syn6.sport, 64)));
    one(o, o.pods, "the IPv6 SYN-ACK to default/web");
    o = send(r.pods, pod6(kPod20Mac, udp.out(kPod20v6, 5353, kBlueServerV6, 53, 64)));
    Parsed q6 = one(o, o.ext2, "an IPv6 UDP query of default/blue");
    o = send(r.ext2,
             ethernet(kExt2Mac, kBlueServerMac, kEtherIpv6, udp.back(kBlueServerV6, 53, kExt2V6, q6.sport, 64)));
    one(o, o.pods, "the IPv6 UDP answer to default/blue");
    o = send(r.pods, pod6(kPod20Mac, echo6.out(kPod30v6, 0x77, kInternetV6, 0, 64)));
    one(o, o.ext1, "an ICMPv6 echo request of the default action");
}

// An empty session table and the same clock, whatever the previous input did.
void reset() {
    Rig& r = *g_rig;
    dp::Worker& w = r.w();
    w.flush_service = dp::kFlushAll;
    uint32_t want = w.flush_request.load() + 1;
    w.flush_request.store(want);
    for (int i = 0; i < 1000 && w.flush_done.load() != want; ++i)
        dp::worker_serve_flush(w);
    if (w.flush_done.load() != want || !r.sessions().empty() || !r.sessions6().empty())
        fuzz::fail("the session table did not empty between inputs");
    w.now = kClock;
    w.sweep_cursor = 0;
    w.sweep_cursor6 = 0;
    w.icmp_tat = 0;
}

Bytes fix_checksums6(Bytes ip);

// The state an input starts from: empty, primed (bit 4), then aged (bit 5).
// The trace of an odd-length input, over the one worker.
struct FuzzTrace {
    dp::TraceShared shared;
    std::unique_ptr<dp::TracePacket[]> packets = std::make_unique<dp::TracePacket[]>(dp::kTraceMaxPackets);
    dp::TraceBuffer buffer;
};
FuzzTrace g_trace;

void set_trace(bool on) {
    dp::Worker& w = g_rig->w();
    w.trace.store(nullptr);
    if (!on) return;
    g_trace.shared.limit = dp::kTraceMaxPackets;
    g_trace.shared.taken.store(0);
    g_trace.buffer.shared = &g_trace.shared;
    g_trace.buffer.capacity = dp::kTraceMaxPackets;
    g_trace.buffer.packets = g_trace.packets.get();
    g_trace.buffer.used = 0;
    g_trace.buffer.published.store(0);
    w.trace.store(&g_trace.buffer);
}

void check_trace(const uint8_t* data, size_t size) {
    if (!g_rig->w().trace.load()) return;
    uint32_t n = g_trace.buffer.published.load();
    if (n > dp::kTraceMaxPackets || n != g_trace.buffer.used)
        fuzz::fail("trace published " + std::to_string(n) + " of " + std::to_string(g_trace.buffer.used) + ": " +
                   hex(Bytes(data, data + size)));
    for (uint32_t k = 0; k < n; ++k) {
        const dp::TracePacket& p = g_trace.packets[k];
        if (p.n_steps < 1 || p.n_steps > dp::kTraceMaxSteps || p.steps[0].stage != 0 ||
            p.before_len > dp::kTraceHeadBytes || p.after_len > dp::kTraceHeadBytes)
            fuzz::fail("trace record " + std::to_string(k) + " malformed (" + std::to_string(p.n_steps) +
                       " steps): " + hex(Bytes(data, data + size)));
        dp::summarize_frame(p.before, p.before_len);
        dp::summarize_frame(p.after, p.after_len);
    }
}

void start_state(uint8_t ctl) {
    Rig& r = *g_rig;
    reset();
    if (ctl & 0x10) prime();
    if (ctl & 0x20) {
        r.advance(r.shared.timeouts.udp + r.shared.timeouts.icmp + 1);
        r.sweep();
    }
}

bool is_icmp6_error(const Bytes& f) {
    return f.size() >= 62 && get16(&f[12]) == kEtherIpv6 && f[20] == kProtoIcmp6 && f[54] >= 1 && f[54] <= 4;
}

// What fragments or a chain (`how`) gave against what the packet sent whole in one mbuf gave,
// port by port: the same frames, but that an ICMPv6 error about the datagram put together may
// quote less of it (only what its first buffer holds).
void same_outcome(const Outcome& got, const Outcome& want, const Bytes& whole, const char* how = "IPv6 fragments") {
    auto same = [&](const std::vector<Bytes>& a, const std::vector<Bytes>& b, const char* where) {
        if (a.size() != b.size())
            fuzz::fail(std::string(how) + " gave " + std::to_string(a.size()) + " frame(s) out of " + where +
                       ", the packet whole " + std::to_string(b.size()) + ": " + hex(whole));
        for (size_t k = 0; k < a.size(); ++k) {
            if (a[k] == b[k]) continue;
            const Bytes& x = a[k].size() <= b[k].size() ? a[k] : b[k];
            const Bytes& y = a[k].size() <= b[k].size() ? b[k] : a[k];
            bool quote_shorter = is_icmp6_error(x) && is_icmp6_error(y) &&
                                 std::equal(x.begin(), x.begin() + 18, y.begin()) &&
                                 std::equal(x.begin() + 20, x.begin() + 56, y.begin() + 20) &&
                                 std::equal(x.begin() + 58, x.end(), y.begin() + 58);
            if (!quote_shorter)
                fuzz::fail(std::string(how) + " gave another frame out of " + where +
                           " than the packet whole: " + hex(a[k]) + " against " + hex(b[k]));
        }
    };
    same(got.pods, want.pods, "pods");
    same(got.ext1, want.ext1, "ext1");
    same(got.ext2, want.ext2, "ext2");
    same(got.held, want.held, "the control thread");
}

// Mode 1, IPv6, byte 1 bit 6: the packet `ip` (checksums made right) in fragments, then whole from
// the same state.
void fragmented6(uint16_t port, const Mac& mine, const Mac& peer, Bytes ip, uint8_t who, uint8_t ctl, uint64_t flags) {
    if (ip.size() > 1400) {
        ip.resize(1400);
        ip = fix_checksums6(ip);
    }
    const size_t payload = ip.size() - 40;
    size_t piece = 8 * (1 + (who & 0x1f));
    while ((payload + piece - 1) / piece > 32)
        piece += 8;
    // A single fragment would be an atomic one (RFC 6946): the whole datagram, forwarded with its
    // Fragment header, so not what the packet whole gives. Two fragments at least, or no test.
    if (payload <= 8) return;
    if (piece >= payload) piece = (payload - 1) / 8 * 8;
    std::vector<Bytes> f = fragments6(ip, piece, 0x5eed);
    if (who & 0x20) std::rotate(f.begin(), f.begin() + 1, f.end());
    std::vector<Bytes> frames;
    g_largest_fragment6 = 0;
    for (const Bytes& x : f) {
        frames.push_back(ethernet(mine, peer, kEtherIpv6, x));
        g_largest_fragment6 = std::max(g_largest_fragment6, x.size());
    }
    const Bytes whole = ethernet(mine, peer, kEtherIpv6, ip);
    Outcome got = send_frames(port, frames, whole, flags, f.size() > dp::kMaxFragmentsPerDatagram);
    g_largest_fragment6 = 0;
    if (f.size() > dp::kMaxFragmentsPerDatagram) {
        if (got.out != 0) fuzz::fail("a datagram in more fragments than reassembly takes left: " + hex(whole));
        return;
    }
    start_state(ctl);
    same_outcome(got, send(port, whole, flags), whole);
}

// Byte 1 bit 6 (modes 0, 2, 3): the chain's segment size; 0 for one mbuf.
unsigned segment_of(uint8_t who) {
    return who & 0x40 ? 16u * (1u + ((who >> 3) & 7u)) : 0u;
}

// A frame in a chain of mbufs of `segment` bytes, then whole in one mbuf from the same state.
void chained(uint16_t port, const Bytes& frame, unsigned segment, uint8_t ctl, uint64_t flags) {
    Outcome got = send_frames(port, {frame}, frame, flags, false, segment);
    start_state(ctl);
    same_outcome(got, send(port, frame, flags), frame, "a chain of mbufs");
}

// Modes 2/3: the error `ip` (IPv4 with a 20-byte header, or IPv6 with none: as ipv4() and
// icmp6_ip() build it) from `peer` to `mine` on `port`, whole, chained (bit 6) or in 2 to 5
// fragments (bit 5), each fragment maybe chained; fragments and chains are checked against the
// error sent whole. An IPv6 error longer than the ports' MTU is not compared: whole it may not
// leave (Packet Too Big is never sent about an error), in fragments it leaves as it came.
void send_error(uint16_t port, const Mac& mine, const Mac& peer, const Bytes& ip, bool v6, uint8_t who, uint8_t ctl,
                uint64_t flags) {
    const uint16_t type = v6 ? kEtherIpv6 : kEtherIpv4;
    const Bytes whole = ethernet(mine, peer, type, ip);
    const unsigned segment = segment_of(who);
    const size_t header = v6 ? 40 : 20;
    if (!(who & 0x20) || ip.size() <= header + 16) {
        if (segment)
            chained(port, whole, segment, ctl, flags);
        else
            send(port, whole, flags);
        return;
    }
    const size_t payload = ip.size() - header, n = 2 + ((who >> 3) & 3);
    const size_t piece = ((payload + n - 1) / n + 7) / 8 * 8;
    std::vector<Bytes> f = v6 ? fragments6(ip, piece, 0xfeed) : fragments(ip, piece);
    std::vector<Bytes> frames;
    g_largest_fragment6 = 0;
    for (const Bytes& x : f) {
        frames.push_back(ethernet(mine, peer, type, x));
        g_largest_fragment6 = std::max(g_largest_fragment6, x.size());
    }
    Outcome got = send_frames(port, frames, whole, flags, false, segment);
    g_largest_fragment6 = 0;
    if (v6 && ip.size() > 1500) return;
    start_state(ctl);
    same_outcome(got, send(port, whole, flags), whole, v6 ? "ICMPv6 error fragments" : "ICMP error fragments");
}

// RFC 1071 checksum field value over `len` bytes at `p`, plus `sum`.
uint16_t csum(const uint8_t* p, size_t len, uint32_t sum = 0) {
    return finish(sum16(p, len, sum));
}

// Makes the IPv4 header checksum of a datagram right, and its TCP/UDP/ICMP checksum when the
// lengths allow (a UDP checksum of 0, "none", stays).
Bytes fix_checksums(Bytes ip) {
    if (ip.size() < 20) return ip;
    size_t hl = (ip[0] & 0x0f) * 4u;
    if (hl < 20 || hl > ip.size()) return ip;
    ip[10] = ip[11] = 0;
    put16(&ip[10], csum(ip.data(), hl));
    size_t total = get16(&ip[2]);
    if (total < hl || total > ip.size()) return ip;
    uint8_t* l4 = ip.data() + hl;
    size_t l4_len = total - hl;
    uint32_t src = get32(&ip[12]), dst = get32(&ip[16]);
    size_t off = ip[9] == kProtoTcp ? 16 : ip[9] == kProtoUdp ? 6 : ip[9] == kProtoIcmp ? 2 : 0;
    if (off == 0 || l4_len < off + 2) return ip;
    if (ip[9] == kProtoUdp && l4[6] == 0 && l4[7] == 0) return ip;
    l4[off] = l4[off + 1] = 0;
    uint32_t pseudo = ip[9] == kProtoIcmp ? 0 : pseudo_sum(src, dst, ip[9], static_cast<uint32_t>(l4_len));
    uint16_t c = csum(l4, l4_len, pseudo);
    if (ip[9] == kProtoUdp && c == 0) c = 0xffff;
    put16(l4 + off, c);
    return ip;
}

// Makes an IPv6 packet's version and payload length fit and its TCP/UDP/ICMPv6 checksum right
// (no extension headers: the transport header right behind the fixed one) when it is long enough.
Bytes fix_checksums6(Bytes ip) {
    if (ip.size() < 40) return ip;
    ip[0] = static_cast<uint8_t>(0x60 | (ip[0] & 0x0f));
    put16(&ip[4], static_cast<uint16_t>(ip.size() - 40));
    uint8_t proto = ip[6];
    uint8_t* l4 = ip.data() + 40;
    size_t l4_len = ip.size() - 40;
    size_t off = proto == kProtoTcp ? 16 : proto == kProtoUdp ? 6 : proto == kProtoIcmp6 ? 2 : 0;
    if (off == 0 || l4_len < off + 2) return ip;
    if (proto == kProtoUdp && l4_len >= 8) put16(l4 + 4, static_cast<uint16_t>(l4_len));
    Ip6Addr src, dst;
    std::copy(ip.begin() + 8, ip.begin() + 24, src.begin());
    std::copy(ip.begin() + 24, ip.begin() + 40, dst.begin());
    l4[off] = l4[off + 1] = 0;
    uint16_t c = csum(l4, l4_len, pseudo_sum6(src, dst, proto, static_cast<uint32_t>(l4_len)));
    if (proto == kProtoUdp && c == 0) c = 0xffff;
    put16(l4 + off, c);
    return ip;
}

void cleanup() {
    g_rig.reset();
    rte_eal_cleanup();
    std::error_code ec;
    if (!g_runtime_dir.empty()) std::filesystem::remove_all(g_runtime_dir, ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    const char* prog = argc && *argc > 0 ? (*argv)[0] : "fuzz_packet";
    std::vector<std::string> args = {prog, "--no-huge", "--no-pci",
                                     "-m", "128",       "--file-prefix=egw-fuzz-" + std::to_string(getpid()),
                                     "-l", "0",         "--log-level=error"};
    std::vector<char*> eal_argv;
    for (auto& a : args)
        eal_argv.push_back(a.data());
    eal_argv.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(args.size()), eal_argv.data()) < 0) {
        std::fprintf(stderr, "fuzz_packet: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    g_runtime_dir = rte_eal_get_runtime_dir();
    int field = rte_mbuf_dynfield_register(&egw::dp::next_hop_dynfield());
    if (field < 0) {
        std::fprintf(stderr, "fuzz_packet: cannot register the next-hop dynfield: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    set_next_hop_field(field);
    // The rig reports with GoogleTest assertions; make them fatal outside a test too.
    GTEST_FLAG_SET(throw_on_failure, true);

    RigOptions o;
    model::ServiceState web = web6();
    model::ServiceState blue = network_service(kBlue, {kPod20}, "blue");
    blue.endpoint_ipv6s = {addr6(kPod20v6)};
    o.services = {web, blue};
    o.configure = [](config::Config& c) { configure_ipv6(c); };
    g_rig = std::make_unique<Rig>(o);
    std::atexit(cleanup);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Rig& r = *g_rig;
    fuzz::Reader in(data, size);
    const uint8_t ctl = in.byte();
    const uint8_t who = in.byte();
    Bytes rest;
    while (!in.empty() && rest.size() < kMaxFrame - 64)
        rest.push_back(in.byte());
    static const uint64_t kFlags[] = {0, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD,
                                      RTE_MBUF_F_RX_IP_CKSUM_BAD, RTE_MBUF_F_RX_IP_CKSUM_NONE};
    const uint64_t flags = kFlags[ctl >> 6];
    const unsigned sel = (ctl >> 2) & 3;

    set_trace(size % 2 == 1);
    start_state(ctl);

    const uint16_t ports[] = {r.pods, r.ext1, r.ext2, r.pods};
    static const uint8_t kErrors[][2] = {{3, 3}, {11, 0}, {12, 0}, {3, 4}};
    switch (ctl & 3) {
    case 0:
        if (unsigned segment = segment_of(who); segment)
            chained(ports[sel], rest, segment, ctl, flags);
        else
            send(ports[sel], rest, flags);
        break;
    case 1: {
        uint16_t port = ports[sel];
        Mac peer = port == r.pods ? kPod10Mac : port == r.ext1 ? kServerMac : kBlueServerMac;
        Mac mine = port == r.pods ? kPodsMac : port == r.ext1 ? kExt1Mac : kExt2Mac;
        // Only a packet with no extension header (one that already holds a Fragment header, cut
        // again, nests two; the data plane takes neither form whole: TCP, UDP, ICMPv6) and no
        // bytes past its payload length (the pieces would carry them as payload) is cut.
        if ((who & 0xc0) == 0xc0 && rest.size() > 48 && (rest[6] == 6 || rest[6] == 17 || rest[6] == 58) &&
            rest.size() == 40u + (size_t{rest[4]} << 8 | rest[5]))
            fragmented6(port, mine, peer, fix_checksums6(rest), who, ctl, flags);
        else if (who & 0x80)
            send(port, ethernet(mine, peer, kEtherIpv6, fix_checksums6(rest)), flags);
        else
            send(port, ethernet(mine, peer, kEtherIpv4, fix_checksums(rest)), flags);
        break;
    }
    case 2:
        if (who & 0x80) {
            // ICMPv6 from outside to the IPv6 ingress IP, ext1's or ext2's address, or a pod.
            const Ip6Addr& src = who & 4 ? kExt1GwV6 : kServerV6;
            const Ip6Addr dsts[] = {kIngressV6, kExt1V6, kExt2V6, kPod10v6};
            Bytes body(4 + rest.size());
            std::copy(rest.begin(), rest.end(), body.begin() + 4);
            Bytes ip =
                icmp6_ip((who & 3) == 2 ? kBlueServerV6 : src, dsts[who & 3], static_cast<uint8_t>(1 + sel), 0, body);
            if ((who & 3) == 2)
                send_error(r.ext2, kExt2Mac, kBlueServerMac, ip, true, who, ctl, flags);
            else
                send_error(r.ext1, kExt1Mac, who & 4 ? kExt1GwMac : kServerMac, ip, true, who, ctl, flags);
            break;
        }
        {
            // From outside, to the ingress IP, ext1's or ext2's address, or straight to a pod.
            uint32_t src = who & 4 ? kExt1Gw : kServer;
            uint32_t dst = kIngress;
            switch (who & 3) {
            case 1:
                dst = kExt1Addr;
                break;
            case 2:
                dst = kExt2Addr;
                break;
            case 3:
                dst = kPod10;
                break;
            }
            Bytes icmp = icmp_error(kErrors[sel][0], kErrors[sel][1], rest);
            if ((who & 3) == 2)
                send_error(r.ext2, kExt2Mac, kBlueServerMac, ipv4(kBlueServer, dst, kProtoIcmp, icmp), false, who, ctl,
                           flags);
            else
                send_error(r.ext1, kExt1Mac, kServerMac, ipv4(src, dst, kProtoIcmp, icmp), false, who, ctl, flags);
            break;
        }
    case 3: {
        if (who & 0x80) {
            // An ICMPv6 error from a pod (of each kind of policy) toward a server.
            const Ip6Addr pods6[] = {kPod10v6, kPod20v6, kPod30v6, kPod11v6};
            Bytes body(4 + rest.size());
            std::copy(rest.begin(), rest.end(), body.begin() + 4);
            Bytes ip =
                icmp6_ip(pods6[who & 3], who & 4 ? kBlueServerV6 : kServerV6, static_cast<uint8_t>(1 + sel), 0, body);
            send_error(r.pods, kPodsMac, kPod10Mac, ip, true, who, ctl, flags);
            break;
        }
        // From a pod (of each kind of policy) toward a server.
        static const uint32_t kPods[] = {kPod10, kPod20, kPod30, kPod11};
        uint32_t pod = kPods[who & 3];
        uint32_t dst = who & 4 ? kBlueServer : kServer;
        Bytes icmp = icmp_error(kErrors[sel][0], kErrors[sel][1], rest);
        send_error(r.pods, kPodsMac, kPod10Mac, ipv4(pod, dst, kProtoIcmp, icmp), false, who, ctl, flags);
        break;
    }
    }
    check_trace(data, size);
    return 0;
}
