// SPDX-License-Identifier: Apache-2.0
//
// egw-bench: pushes pre-built traffic through one worker context on this lcore and prints, in
// one run, the plain forwarding rate of the same packets beside the SNAT pipeline's.
//
// Each burst is made the way net_pcap's replay makes it (allocate mbufs, copy stored 60-byte
// frames in), so "io-forward" is this rig's ceiling: generate + transmit to net_null. "snat"
// is generate + the full pipeline (parse, bulk session lookup, translate, route, neighbour,
// transmit to net_null). The difference is what egw costs per packet.
//
//   egw-bench [--flows N[,N...]] [--services M] [--seconds S] [--rounds R] [--destinations D]
//             [--workers N[,N...]] [--packets P] [--family 4|6|mix] [--capacity N] [--seed S]
//
// --rounds (1 to 1000, 30 by default) splits each timed measurement into R rounds of S / R seconds,
// io-forward and SNAT taking turns (io-forward first in odd rounds, SNAT in even ones). Each
// figure is the median over the rounds, and "spread of the rounds" the highest minus the lowest
// of the rounds' SNAT / io-forward ratios as a share of their median: a neighbour that takes the
// core during one round then moves no figure, and a host too busy to judge by shows there.
// Before each round and after the last a fixed loop checks whether the core is the bench's alone
// (core_check_cycles()). The last three columns give the checks' range and the medians over the
// rounds between two checks at the lowest: on a host whose cores other tenants share, those are
// the figures to judge by. --packets runs no checks.
//
// --family 6 makes the traffic IPv6 (62-byte UDP frames, NAPT66 to the Services' IPv6 ingress
// IPs, the IPv6 session table); mix makes half of the flows IPv4 and half IPv6, shuffled together
// (a dual-stack cluster). 4, the default, is the IPv4 rig as it always was.
// With --workers, it prints instead the cost of replies with N workers (hand-off or not).
// --capacity sizes each family's session table as a gateway's `sessions.max` does; by default it
// holds the flows and an eighth more, which keeps 10,000 sessions' buckets within a few hundred
// KiB, where a table for 2,000,000 spreads them over 64 MiB (a line each).
// --seed fixes the session tables' hash keys (a gateway draws them at random, as the bench does by
// default): which flows share a bucket then stays the same from run to run and build to build,
// which an instruction count comparing two builds needs (the lookup's count moved by 16 per
// packet between two random draws).
// With --packets, io-forward and SNAT each replay exactly P packets instead of running for
// --seconds: the same work every run, for instruction counts. scripts/bench-instructions.sh runs
// it under callgrind, which dumps a profile part at every call of phase_boundary(): the parts
// are then, per --flows value, [setup] [first pass] [checks] [io-forward] [SNAT].
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include <array>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/held.h"
#include "config/config.h"
#include "control/policy/policy_builder.h"
#include "control/runtime/mbuf_pool.h"
#include "dataplane/checksum.h"
#include "dataplane/worker.h"
#include "tests/bench/bench_args.h"

namespace {

using namespace egw;

constexpr uint32_t kFrameLen = 60;
constexpr uint32_t kFrameLen6 = 62;  // Ethernet + IPv6 + UDP, no payload: the smallest IPv6 UDP frame
constexpr uint32_t kFrameCopy = 64;  // what generate() copies of every frame, either family (its last byte: the length)
constexpr uint16_t kMaxBenchWorkers = 4;
constexpr uint8_t kInsideMac[6] = {0x02, 0, 0, 0, 0, 0x02};
constexpr uint8_t kOutsideMac[6] = {0x02, 0, 0, 0, 0, 0x03};
constexpr uint8_t kGatewayMac[6] = {0x02, 0, 0, 0, 0, 0x04};
constexpr uint32_t kPodBase = 0x0a800000;           // 10.128.0.0/14
constexpr uint32_t kDstBase = 0xc6336400 + 10;      // 198.51.100.10
constexpr uint32_t kIngressBase = 0xcb007100 + 10;  // 203.0.113.10..
constexpr uint32_t kGateway = 0xcb007101;           // 203.0.113.1
constexpr uint32_t kPodRouter = 0x0a7f00fe;         // 10.127.0.254, inside

// The IPv6 rig (--family 6 or mix): the same shape in IPv6. Pods in fd00:10:128::/48 behind a
// router on the inside, destinations and Service ingress IPs outside, one gateway.
using Ip6Bytes = std::array<uint8_t, 16>;
Ip6Bytes ip6(uint16_t w0, uint16_t w1, uint16_t w2, uint32_t low) {
    Ip6Bytes a{};
    a[0] = static_cast<uint8_t>(w0 >> 8), a[1] = static_cast<uint8_t>(w0);
    a[2] = static_cast<uint8_t>(w1 >> 8), a[3] = static_cast<uint8_t>(w1);
    a[4] = static_cast<uint8_t>(w2 >> 8), a[5] = static_cast<uint8_t>(w2);
    for (int i = 0; i < 4; ++i)
        a[12 + i] = static_cast<uint8_t>(low >> (24 - 8 * i));
    return a;
}
const Ip6Bytes kPodBase6 = ip6(0xfd00, 0x10, 0x128, 0);           // fd00:10:128::/48, pod i at ::(1 + i)
const Ip6Bytes kDstBase6 = ip6(0x2001, 0xdb8, 0x100, 10);         // 2001:db8:100::a..
const Ip6Bytes kIngressBase6 = ip6(0x2001, 0xdb8, 0x113, 0x100);  // 2001:db8:113::100..
const Ip6Bytes kOutsideAddr6 = ip6(0x2001, 0xdb8, 0x113, 10);     // 2001:db8:113::a/64
const Ip6Bytes kGateway6 = ip6(0x2001, 0xdb8, 0x113, 1);          // 2001:db8:113::1
const Ip6Bytes kInsideAddr6 = ip6(0xfd00, 0x127, 0, 1);           // fd00:127::1/64
const Ip6Bytes kPodRouter6 = ip6(0xfd00, 0x127, 0, 0xfe);         // fd00:127::fe, inside

Ip6Bytes plus(Ip6Bytes a, uint32_t n) {
    uint32_t low = uint32_t{a[12]} << 24 | uint32_t{a[13]} << 16 | uint32_t{a[14]} << 8 | a[15];
    low += n;
    for (int i = 0; i < 4; ++i)
        a[12 + i] = static_cast<uint8_t>(low >> (24 - 8 * i));
    return a;
}
net::IpAddr addr6(const Ip6Bytes& a) {
    return net::IpAddr::from_v6(a.data());
}

enum class Family { v4, v6, mix };

struct Args {
    std::vector<uint32_t> flows{10000, 1000000};
    unsigned services = 64;
    unsigned destinations = 64;
    double seconds = 3;
    unsigned rounds = 30;           // --rounds: io-forward and SNAT take turns this many times
    std::vector<uint32_t> workers;  // --workers: the many-worker table, for these worker counts
    uint64_t packets = 0;           // --packets: replay exactly this many (rounded up to bursts) per mode
    Family family = Family::v4;     // --family
    uint32_t capacity = 0;          // --capacity: session table size per family (0: the flows and an eighth)
};

// --seed: the session tables' hash seed (0: random, as a gateway's).
uint64_t table_seed = 0;

// A stored frame: IPv4 ones are kFrameLen long, IPv6 ones kFrameLen6. 64 bytes each, so that
// generate() copies one aligned block whatever the family; the last byte, beyond both frames,
// holds the frame's length (the mbuf gets it too, past data_len, where nothing reads it).
struct Frame {
    uint8_t bytes[kFrameCopy];
};
static_assert(sizeof(Frame) == 64);

void set_len(Frame& f, uint8_t len) {
    f.bytes[kFrameCopy - 1] = len;
}
uint8_t len_of(const Frame& f) {
    return f.bytes[kFrameCopy - 1];
}

// Flow i: pod = i mod P (P pods, P = min(N, 16384)), each pod in service pod mod M, source port
// 1024 + (i div P), destination kDstBase + i mod D, port 53. Every 5-tuple is distinct.
std::vector<Frame> make_frames(uint32_t flows, unsigned dsts, uint32_t pods) {
    std::vector<Frame> out(flows);
    for (uint32_t i = 0; i < flows; ++i) {
        uint8_t* b = out[i].bytes;
        std::memset(b, 0, kFrameCopy);
        set_len(out[i], kFrameLen);
        auto* eth = reinterpret_cast<rte_ether_hdr*>(b);
        std::memcpy(eth->dst_addr.addr_bytes, kInsideMac, 6);
        uint8_t src_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
        std::memcpy(eth->src_addr.addr_bytes, src_mac, 6);
        eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
        auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
        ip->version_ihl = 0x45;
        ip->total_length = rte_cpu_to_be_16(kFrameLen - 14);
        ip->time_to_live = 64;
        ip->next_proto_id = IPPROTO_UDP;
        ip->src_addr = rte_cpu_to_be_32(kPodBase + 1 + i % pods);
        ip->dst_addr = rte_cpu_to_be_32(kDstBase + i % dsts);
        ip->hdr_checksum = rte_ipv4_cksum(ip);
        auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
        udp->src_port = rte_cpu_to_be_16(static_cast<uint16_t>(1024 + i / pods));
        udp->dst_port = rte_cpu_to_be_16(53);
        udp->dgram_len = rte_cpu_to_be_16(kFrameLen - 14 - 20);
        udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
    }
    std::mt19937 rng(1);
    std::shuffle(out.begin(), out.end(), rng);
    return out;
}

// The same flows in IPv6: pod fd00:10:128::(1 + i mod P), source port 1024 + (i div P),
// destination 2001:db8:100::a + i mod D, port 53.
std::vector<Frame> make_frames6(uint32_t flows, unsigned dsts, uint32_t pods) {
    std::vector<Frame> out(flows);
    for (uint32_t i = 0; i < flows; ++i) {
        uint8_t* b = out[i].bytes;
        std::memset(b, 0, kFrameCopy);
        set_len(out[i], kFrameLen6);
        auto* eth = reinterpret_cast<rte_ether_hdr*>(b);
        std::memcpy(eth->dst_addr.addr_bytes, kInsideMac, 6);
        uint8_t src_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
        std::memcpy(eth->src_addr.addr_bytes, src_mac, 6);
        eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
        auto* ip = reinterpret_cast<rte_ipv6_hdr*>(eth + 1);
        ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
        ip->payload_len = rte_cpu_to_be_16(kFrameLen6 - 14 - 40);
        ip->proto = IPPROTO_UDP;
        ip->hop_limits = 64;
        Ip6Bytes src = plus(kPodBase6, 1 + i % pods), dst = plus(kDstBase6, i % dsts);
        std::memcpy(ip->src_addr, src.data(), 16);
        std::memcpy(ip->dst_addr, dst.data(), 16);
        auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
        udp->src_port = rte_cpu_to_be_16(static_cast<uint16_t>(1024 + i / pods));
        udp->dst_port = rte_cpu_to_be_16(53);
        udp->dgram_len = rte_cpu_to_be_16(kFrameLen6 - 14 - 40);
        udp->dgram_cksum = rte_ipv6_udptcp_cksum(ip, udp);
    }
    std::mt19937 rng(1);
    std::shuffle(out.begin(), out.end(), rng);
    return out;
}

// The frames of a family: IPv4, IPv6, or half of each (IPv4 the first half of the flows,
// rounded down), shuffled together.
std::vector<Frame> make_family_frames(Family family, uint32_t flows, unsigned dsts) {
    if (family == Family::v4) return make_frames(flows, dsts, std::min<uint32_t>(flows, 16384));
    if (family == Family::v6) return make_frames6(flows, dsts, std::min<uint32_t>(flows, 16384));
    uint32_t n4 = flows / 2, n6 = flows - n4;
    auto out = make_frames(n4, dsts, std::min<uint32_t>(n4, 16384));
    auto six = make_frames6(n6, dsts, std::min<uint32_t>(n6, 16384));
    out.insert(out.end(), six.begin(), six.end());
    std::shuffle(out.begin(), out.end(), std::mt19937(4));
    return out;
}

struct Rig {
    rte_mempool* pool = nullptr;
    uint16_t inside = 0, outside = 0;
    dp::DataplaneShared shared;
    dp::Worker* worker = nullptr;  // workers[0]
    std::vector<dp::Worker*> workers;
    std::vector<rte_ring*> rings;  // hand-off rings
    config::Config cfg;
    std::unique_ptr<control::PolicyBuilder> builder;
    const dp::PolicySnapshot* snap = nullptr;
    size_t session_bytes = 0;
    size_t session_bytes6 = 0;
};

// `flows` sizes the session table of each family that carries traffic; `pods` and `pods6` are
// how many pods of each family have a Service (0: none of that family).
void setup_rig(Rig& r, uint32_t flows, unsigned services, uint32_t pods, unsigned n_workers = 1, uint32_t pods6 = 0,
               uint32_t flows6 = 0) {
    static unsigned instance = 0;
    ++instance;
    r.cfg = config::Config{};
    config::PortConfig in, out;
    in.name = "inside";
    in.role = config::PortRole::inside;
    // The pods sit behind a router on the inside (as on a node's pod network), so replies need
    // one neighbour, not one per pod.
    in.addresses = {net::IpPrefix::from_v4(kPodRouter - 0xfd, 24)};
    out.name = "outside";
    out.role = config::PortRole::outside;
    out.addresses = {net::IpPrefix::from_v4(0xcb00710a, 24)};
    r.cfg.ports = {in, out};
    r.cfg.vrfs = {{"default", 254}};
    config::RouteConfig def;
    def.prefix = net::IpPrefix::from_v4(0, 0);
    def.via = net::IpAddr::from_v4(kGateway);
    def.port = "outside";
    config::RouteConfig pods_route;
    pods_route.prefix = net::IpPrefix::from_v4(kPodBase, 14);
    pods_route.via = net::IpAddr::from_v4(kPodRouter);
    pods_route.port = "inside";
    r.cfg.routes = {def, pods_route};
    r.cfg.cluster.pod_cidrs = {net::IpPrefix::from_v4(kPodBase, 14)};
    if (flows6) {
        r.cfg.ports[0].addresses.push_back(net::IpPrefix{addr6(kInsideAddr6), 64});
        r.cfg.ports[1].addresses.push_back(net::IpPrefix{addr6(kOutsideAddr6), 64});
        config::RouteConfig def6;
        def6.prefix = net::IpPrefix{net::IpAddr::from_v6(Ip6Bytes{}.data()), 0};
        def6.via = addr6(kGateway6);
        def6.port = "outside";
        config::RouteConfig pods6_route;
        pods6_route.prefix = net::IpPrefix{addr6(kPodBase6), 48};
        pods6_route.via = addr6(kPodRouter6);
        pods6_route.port = "inside";
        r.cfg.routes.push_back(def6);
        r.cfg.routes.push_back(pods6_route);
        r.cfg.cluster.pod_cidrs.push_back(net::IpPrefix{addr6(kPodBase6), 48});
    }
    r.cfg.default_action = config::DefaultAction::masquerade;

    std::vector<std::array<uint8_t, 6>> macs(dp::kMaxPorts);
    std::copy(kInsideMac, kInsideMac + 6, macs[r.inside].begin());
    std::copy(kOutsideMac, kOutsideMac + 6, macs[r.outside].begin());
    r.builder = std::make_unique<control::PolicyBuilder>(r.cfg, std::vector<uint16_t>{r.inside, r.outside}, macs);
    std::vector<model::ServiceState> states(services);
    for (unsigned s = 0; s < services; ++s) {
        auto& st = states[s];
        st.key = "bench/svc-" + std::to_string(s);
        st.status_host = "bench";
        st.serve_here = true;
        st.ingress_ipv4 = kIngressBase + s;
        if (flows6) st.ingress_ipv6 = addr6(plus(kIngressBase6, s));
    }
    for (uint32_t p = 0; p < pods; ++p)
        states[p % services].endpoint_ipv4s.push_back(kPodBase + 1 + p);
    for (uint32_t p = 0; p < pods6; ++p)
        states[p % services].endpoint_ipv6s.push_back(addr6(plus(kPodBase6, 1 + p)));
    r.snap = r.builder->build(states).release();
    r.shared.policy.current.store(r.snap);
    r.shared.n_workers = n_workers;
    dp::flow_owners_init(r.shared.flow_owners, n_workers, dp::kMaxRetaEntries);
    r.shared.nat_port_min = 1024;
    r.shared.nat_port_max = 65535;
    uint64_t hz = rte_get_tsc_hz();
    r.shared.timeouts = dp::Timeouts{7440 * hz, 240 * hz, 300 * hz, 60 * hz};
    r.shared.neighbors = new dp::NeighborTable(64);
    uint32_t slot = r.shared.neighbors->insert(r.outside, kGateway);
    r.shared.neighbors->set_mac(slot, kGatewayMac);
    slot = r.shared.neighbors->insert(r.inside, kPodRouter);
    r.shared.neighbors->set_mac(slot, kGatewayMac);
    if (flows6) {
        r.shared.neighbors6 = new dp::NeighborTable6(64);
        slot = r.shared.neighbors6->insert(r.outside, kGateway6.data());
        r.shared.neighbors6->set_mac(slot, kGatewayMac);
        slot = r.shared.neighbors6->insert(r.inside, kPodRouter6.data());
        r.shared.neighbors6->set_mac(slot, kGatewayMac);
    }
    r.shared.to_control = rte_ring_create(("bench_ctl" + std::to_string(instance)).c_str(), 1024, 0, RING_F_SC_DEQ);

    for (unsigned i = 0; i < n_workers; ++i) {
        void* mem = rte_zmalloc("bench_worker", sizeof(dp::Worker), 64);
        auto* w = new (mem) dp::Worker();
        w->index = i;
        w->shared = &r.shared;
        w->n_ports = static_cast<uint16_t>(std::max(r.inside, r.outside) + 1);
        dp::worker_assign_port_block(*w);
        w->service_counters = static_cast<dp::ServiceCounters*>(
            rte_zmalloc("bench_svc", sizeof(dp::ServiceCounters) * dp::kMaxServices, 64));
        std::string name = "bench" + std::to_string(instance) + "_" + std::to_string(i);
        if (!w->sessions.init(name.c_str(), flows, 0, table_seed)) {
            std::fprintf(stderr, "egw-bench: cannot allocate %u sessions (raise -m)\n", flows);
            std::exit(1);
        }
        if (flows6 && !w->sessions6.init((name + "_6").c_str(), flows6, 0, table_seed)) {
            std::fprintf(stderr, "egw-bench: cannot allocate %u IPv6 sessions (raise -m)\n", flows6);
            std::exit(1);
        }
        r.workers.push_back(w);
    }
    for (unsigned a = 0; a < n_workers && n_workers > 1; ++a)
        for (unsigned b = 0; b < n_workers; ++b) {
            if (a == b) continue;
            std::string rn = "bench_ho" + std::to_string(instance) + "_" + std::to_string(a) + "_" + std::to_string(b);
            rte_ring* ring = rte_ring_create(rn.c_str(), 2048, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
            r.rings.push_back(ring);
            r.workers[a]->handoff_out[b] = ring;
            r.workers[b]->handoff_in[a] = ring;
        }
    r.worker = r.workers[0];
    r.session_bytes = r.worker->sessions.memory_bytes();
    r.session_bytes6 = flows6 ? r.worker->sessions6.memory_bytes() : 0;
}

void teardown_rig(Rig& r) {
    for (auto* w : r.workers) {
        rte_free(w->service_counters);
        w->~Worker();
        rte_free(w);
    }
    for (auto* ring : r.rings)
        rte_ring_free(ring);
    rte_ring_free(r.shared.to_control);
    delete r.shared.neighbors;
    delete r.shared.neighbors6;
    r.shared.neighbors6 = nullptr;
    r.shared.policy.current.store(nullptr);
    delete r.snap;
}

// Fills `pkts` with the next burst of frames, as a pcap replay would.
inline bool generate(rte_mempool* pool, const std::vector<Frame>& frames, size_t& cursor, rte_mbuf** pkts, unsigned n,
                     uint16_t port) {
    if (rte_pktmbuf_alloc_bulk(pool, pkts, n) != 0) return false;
    for (unsigned i = 0; i < n; ++i) {
        rte_mbuf* m = pkts[i];
        std::memcpy(rte_pktmbuf_mtod(m, void*), frames[cursor].bytes, kFrameCopy);
        m->data_len = m->pkt_len = len_of(frames[cursor]);
        m->port = port;
        if (++cursor == frames.size()) cursor = 0;
    }
    return true;
}

struct Result {
    double mpps;
    double cycles_per_packet;
};

enum class Mode { io_forward, snat };

// Called between the measured phases, only so that a profiler can cut its profile there.
__attribute__((noinline)) void phase_boundary() {
    asm volatile("");
}

// Exactly `packets` packets (whole bursts) through `mode`. Kept out of line and named per mode so
// that a profiler can tell the two apart.
// flatten: the DPDK inlines (mbuf allocation and free, the transmit) stay inlined here however
// large this file grows, so that io-forward's count does not move with unrelated code (gcc's
// unit-growth limit had begun to leave rte_pktmbuf_alloc_bulk and rte_pktmbuf_free as calls).
template <Mode M>
__attribute__((noinline, flatten)) Result replay_count(Rig& r, const std::vector<Frame>& frames, uint64_t packets,
                                                       size_t& cursor) {
    rte_mbuf* pkts[dp::kBurst];
    uint64_t start = rte_rdtsc(), done = 0;
    while (done < packets) {
        if (!generate(r.pool, frames, cursor, pkts, dp::kBurst, r.inside)) break;
        if (M == Mode::io_forward) {
            uint16_t sent = rte_eth_tx_burst(r.outside, 0, pkts, dp::kBurst);
            for (uint16_t i = sent; i < dp::kBurst; ++i)
                rte_pktmbuf_free(pkts[i]);
        } else {
            r.worker->now = rte_rdtsc();
            dp::worker_process_burst(*r.worker, *r.snap, pkts, dp::kBurst);
            dp::worker_flush(*r.worker);
            dp::worker_grow_step(*r.worker);
        }
        done += dp::kBurst;
    }
    uint64_t ticks = rte_rdtsc() - start;
    double secs = static_cast<double>(ticks) / static_cast<double>(rte_get_tsc_hz());
    return Result{static_cast<double>(done) / secs / 1e6, static_cast<double>(ticks) / static_cast<double>(done)};
}

__attribute__((noinline)) Result replay_io_forward(Rig& r, const std::vector<Frame>& frames, uint64_t packets,
                                                   size_t& cursor) {
    return replay_count<Mode::io_forward>(r, frames, packets, cursor);
}

__attribute__((noinline)) Result replay_snat(Rig& r, const std::vector<Frame>& frames, uint64_t packets,
                                             size_t& cursor) {
    return replay_count<Mode::snat>(r, frames, packets, cursor);
}

__attribute__((flatten)) Result run(Rig& r, const std::vector<Frame>& frames, Mode mode, double seconds,
                                    size_t& cursor) {
    rte_mbuf* pkts[dp::kBurst];
    uint64_t hz = rte_get_tsc_hz();
    uint64_t start = rte_rdtsc(), end = start + static_cast<uint64_t>(seconds * static_cast<double>(hz));
    uint64_t packets = 0, now = start;
    while (now < end) {
        for (int k = 0; k < 64; ++k) {
            if (!generate(r.pool, frames, cursor, pkts, dp::kBurst, r.inside)) continue;
            if (mode == Mode::io_forward) {
                uint16_t sent = rte_eth_tx_burst(r.outside, 0, pkts, dp::kBurst);
                for (uint16_t i = sent; i < dp::kBurst; ++i)
                    rte_pktmbuf_free(pkts[i]);
            } else {
                r.worker->now = rte_rdtsc();
                dp::worker_process_burst(*r.worker, *r.snap, pkts, dp::kBurst);
                dp::worker_flush(*r.worker);
                dp::worker_grow_step(*r.worker);
            }
            packets += dp::kBurst;
        }
        now = rte_rdtsc();
    }
    double secs = static_cast<double>(now - start) / static_cast<double>(hz);
    return Result{static_cast<double>(packets) / secs / 1e6,
                  static_cast<double>(now - start) / static_cast<double>(packets)};
}

// Whether the core was the bench's own: TSC cycles per iteration of a fixed loop of integer work,
// eight independent chains of additions and four exclusive-ors, which a core alone overlaps to
// several operations per cycle. When another thread shares the core (on a shared host, a
// sibling hyperthread running another tenant) or the core's clock falls, the loop takes more
// cycles, and so does egw's pipeline, which runs several instructions per cycle too, while
// io-forward (copies, the mempool) hardly slows: the ratio then falls with nothing changed in
// egw. The spread of the rounds does not show a neighbour that stays for the whole run; this
// does. The empty asm statements keep each chain in a register and the loop from being folded.
__attribute__((noinline)) double core_check_cycles() {
    constexpr unsigned kIterations = 1000000;  // one or two milliseconds
    uint64_t a0 = 1, a1 = 2, a2 = 3, a3 = 4, a4 = 5, a5 = 6, a6 = 7, a7 = 8, step = 3;
    asm volatile("" : "+r"(step));
    uint64_t start = rte_rdtsc();
    for (unsigned i = 0; i < kIterations; ++i) {
        a0 += step;
        a1 += step;
        a2 += step;
        a3 += step;
        a4 += step;
        a5 += step;
        a6 += step;
        a7 += step;
        a1 ^= a0;
        a3 ^= a2;
        a5 ^= a4;
        a7 ^= a6;
        asm volatile("" : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(a4), "+r"(a5), "+r"(a6), "+r"(a7));
    }
    uint64_t ticks = rte_rdtsc() - start;
    asm volatile("" ::"r"(a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7));
    return static_cast<double>(ticks) / kIterations;
}

// The rounds of one measurement: io-forward's and SNAT's result in each, and the medians the
// table prints (of each figure on its own, so a round slowed by a neighbour moves none of them).
// With core checks, check k is taken before round k and the last one after the last round.
class Rounds {
public:
    void add(const Result& io, const Result& snat) {
        io_.push_back(io.cycles_per_packet);
        snat_.push_back(snat.cycles_per_packet);
        ratio_.push_back(io.cycles_per_packet / snat.cycles_per_packet);
        own_.push_back(snat.cycles_per_packet - io.cycles_per_packet);
    }
    void add_core_check(double cycles) { check_.push_back(cycles); }
    bool has_core_check() const { return !check_.empty(); }
    // The lowest and the highest check: a range that is not narrow says some rounds shared the core.
    std::pair<double, double> core_check() const {
        auto [lo, hi] = std::minmax_element(check_.begin(), check_.end());
        return {*lo, *hi};
    }
    // The rounds between two checks within a tenth of the lowest: as far as the checks can tell,
    // the core was the bench's alone through them. Relative to this run's lowest, so on a host
    // shared throughout they are all of them, and the check's range is what tells.
    std::vector<size_t> at_lowest_check() const {
        std::vector<size_t> out;
        if (check_.size() != io_.size() + 1) return out;
        double limit = core_check().first * 1.1;
        for (size_t k = 0; k < io_.size(); ++k)
            if (check_[k] <= limit && check_[k + 1] <= limit) out.push_back(k);
        return out;
    }
    size_t count() const { return io_.size(); }
    Result io() const { return at_cycles(median(io_, all())); }
    Result snat() const { return at_cycles(median(snat_, all())); }
    // SNAT's rate as a share of io-forwarding's, and egw's own cycles per packet, over `of`.
    double ratio(const std::vector<size_t>& of) const { return median(ratio_, of); }
    double ratio() const { return ratio(all()); }
    double own_cycles(const std::vector<size_t>& of) const { return median(own_, of); }
    double own_cycles() const { return own_cycles(all()); }
    // The ratio's highest minus its lowest, as a share of its median.
    double spread() const {
        auto [lo, hi] = std::minmax_element(ratio_.begin(), ratio_.end());
        return (*hi - *lo) / ratio();
    }

private:
    std::vector<size_t> all() const {
        std::vector<size_t> k(io_.size());
        for (size_t i = 0; i < k.size(); ++i)
            k[i] = i;
        return k;
    }
    static double median(const std::vector<double>& v, const std::vector<size_t>& of) {
        std::vector<double> w;
        for (size_t k : of)
            w.push_back(v[k]);
        std::sort(w.begin(), w.end());
        size_t n = w.size();
        return n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
    }
    static Result at_cycles(double cycles) {
        return Result{static_cast<double>(rte_get_tsc_hz()) / cycles / 1e6, cycles};
    }
    std::vector<double> io_, snat_, ratio_, own_, check_;
};

// Every flow's first packet, each opening a session; returns sessions per second.
__attribute__((noinline, flatten)) double first_pass(Rig& r, const std::vector<Frame>& frames, uint32_t flows) {
    size_t cursor = 0;
    rte_mbuf* pkts[dp::kBurst];
    uint64_t t0 = rte_rdtsc();
    uint64_t sent = 0;
    while (sent < flows) {
        unsigned n = static_cast<unsigned>(std::min<uint64_t>(dp::kBurst, flows - sent));
        if (!generate(r.pool, frames, cursor, pkts, n, r.inside)) break;
        r.worker->now = rte_rdtsc();
        dp::worker_process_burst(*r.worker, *r.snap, pkts, static_cast<uint16_t>(n));
        dp::worker_flush(*r.worker);
        dp::worker_grow_step(*r.worker);
        sent += n;
    }
    return static_cast<double>(flows) / (static_cast<double>(rte_rdtsc() - t0) / static_cast<double>(rte_get_tsc_hz()));
}

#ifdef EGW_STAGE_PROFILE
// The profiling build's TSC cycles per stage over the SNAT replay (dp::StageProfile).
void print_profile(const dp::Worker& w, uint32_t flows) {
    const dp::StageProfile& pr = w.profile;
    uint64_t replayed = pr.packets[static_cast<unsigned>(dp::ProfiledStage::input)];
    if (!replayed) return;
    std::printf(
        "\n  stage profile, SNAT replay at %u flows (TSC around each stage of each burst; %lu stage runs over "
        "%lu ticks dropped as preempted)\n\n  | stage | packets | cycles/packet in the stage | cycles per "
        "replayed packet |\n  |---|---:|---:|---:|\n",
        flows, static_cast<unsigned long>(pr.preempted), static_cast<unsigned long>(dp::kProfilePreempted));
    double sum = 0;
    for (unsigned k = 0; k < dp::kProfiledStages; ++k) {
        if (!pr.packets[k]) continue;
        double per_replayed = static_cast<double>(pr.cycles[k]) / static_cast<double>(replayed);
        sum += per_replayed;
        std::printf("  | %s | %lu | %.1f | %.1f |\n", dp::kProfiledStageNames[k],
                    static_cast<unsigned long>(pr.packets[k]),
                    static_cast<double>(pr.cycles[k]) / static_cast<double>(pr.packets[k]), per_replayed);
    }
    std::printf("  | all stages | | | %.1f |\n\n", sum);
}
#endif

uint64_t total_drops(const dp::Worker& w) {
    uint64_t n = 0;
    for (unsigned i = 0; i < dp::kDropReasonCount; ++i)
        n += w.counters.drops[i];
    return n;
}

// --- Several workers on this one lcore --------------------------------------------------------
//
// What a reply costs when it lands on another worker's queue and is handed off, against the
// same reply landing on its owner's queue (as rte_flow steering makes it). The N worker contexts
// run one after another on this lcore: this measures cost per packet, not scaling.

// RSS as a NIC egwd programmed does it: the Toeplitz hash of the UDP 4-tuple in the frame with
// egw's key, through egw's redirection table (dataplane/flow_owner.h), picks the queue, so a flow
// from inside arrives on its owner and a reply on the queue of its own tuple.
unsigned rss_queue(const Rig& r, const uint8_t* frame) {
    auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(frame + sizeof(rte_ether_hdr));
    auto* udp = reinterpret_cast<const rte_udp_hdr*>(ip + 1);
    dp::FlowKey k{ip->src_addr, ip->dst_addr, udp->src_port, udp->dst_port, IPPROTO_UDP, {}};
    return dp::flow_owner(r.shared.flow_owners, k);
}

// A reply to every session of every worker (remote -> NAT address and port), and its owner.
std::vector<Frame> reply_frames(const Rig& r, std::vector<uint8_t>& owner) {
    std::vector<Frame> out;
    for (const auto* w : r.workers)
        for (uint32_t i = 0; i < w->sessions.slots_handed_out(); ++i) {
            const dp::Session& s = w->sessions.at(i);
            if (!(s.in_use & dp::kSessionInUse)) continue;
            Frame f{};
            set_len(f, kFrameLen);
            uint8_t* b = f.bytes;
            auto* eth = reinterpret_cast<rte_ether_hdr*>(b);
            std::memcpy(eth->dst_addr.addr_bytes, kOutsideMac, 6);
            std::memcpy(eth->src_addr.addr_bytes, kGatewayMac, 6);
            eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
            auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
            ip->version_ihl = 0x45;
            ip->total_length = rte_cpu_to_be_16(kFrameLen - 14);
            ip->time_to_live = 64;
            ip->next_proto_id = IPPROTO_UDP;
            ip->src_addr = s.remote_ip;
            ip->dst_addr = s.nat_ip;
            ip->hdr_checksum = rte_ipv4_cksum(ip);
            auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
            udp->src_port = s.remote_port;
            udp->dst_port = s.nat_port;
            udp->dgram_len = rte_cpu_to_be_16(kFrameLen - 14 - 20);
            udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
            out.push_back(f);
            owner.push_back(static_cast<uint8_t>(w->index));
        }
    return out;
}

enum class Delivery { rss, owner };

// Replies in bursts of 32, each packet given to the worker `delivery` picks, every worker's
// share processed, then every worker polled once (its hand-off rings, transmit, expiry), as the
// N poll loops would do between them.
Result run_replies(Rig& r, const std::vector<Frame>& frames, const std::vector<uint8_t>& owner, Delivery delivery,
                   double seconds, uint64_t& handed) {
    unsigned n = static_cast<unsigned>(r.workers.size());
    rte_mbuf* pkts[dp::kBurst];
    rte_mbuf* per[kMaxBenchWorkers][dp::kBurst];
    uint64_t hz = rte_get_tsc_hz(), packets = 0;
    uint64_t handed0 = 0;
    for (const auto* w : r.workers)
        handed0 += w->counters.handed_off;
    size_t cursor = 0;
    uint64_t start = rte_rdtsc(), end = start + static_cast<uint64_t>(seconds * static_cast<double>(hz)), now = start;
    while (now < end) {
        for (int k = 0; k < 64; ++k) {
            size_t first = cursor;
            if (!generate(r.pool, frames, cursor, pkts, dp::kBurst, r.outside)) continue;
            unsigned cnt[kMaxBenchWorkers] = {};
            for (unsigned i = 0; i < dp::kBurst; ++i) {
                size_t at = (first + i) % frames.size();
                unsigned q = delivery == Delivery::owner ? owner[at] : rss_queue(r, frames[at].bytes);
                per[q][cnt[q]++] = pkts[i];
            }
            for (unsigned q = 0; q < n; ++q) {
                r.workers[q]->now = rte_rdtsc();
                if (cnt[q]) dp::worker_process_burst(*r.workers[q], *r.snap, per[q], static_cast<uint16_t>(cnt[q]));
            }
            for (auto* w : r.workers)
                dp::worker_poll_once(*w);
            packets += dp::kBurst;
        }
        now = rte_rdtsc();
    }
    handed = 0;
    for (const auto* w : r.workers)
        handed += w->counters.handed_off;
    handed -= handed0;
    double secs = static_cast<double>(now - start) / static_cast<double>(hz);
    return Result{static_cast<double>(packets) / secs / 1e6,
                  static_cast<double>(now - start) / static_cast<double>(packets)};
}

int many_workers(rte_mempool* pool, uint16_t inside, uint16_t outside, int field, const Args& a) {
    uint32_t flows = a.flows.empty() ? 10000 : a.flows.front();
    std::printf(
        "egw-bench --workers: %u flows, replies (outside -> pod) through N worker contexts run one after another "
        "on lcore %u, %.1f s per measurement.\nThis machine shows the cost per packet, not scaling: the N workers "
        "share one core.\n\n",
        flows, rte_lcore_id(), a.seconds);
    std::printf(
        "| workers | io-forward cycles/pkt | replies by RSS: cycles/pkt | handed off | replies to their owner "
        "(rte_flow): cycles/pkt | cost of a hand-off, cycles |\n|---:|---:|---:|---:|---:|---:|\n");
    int rc = 0;
    for (uint32_t n : a.workers) {
        if (n < 1 || n > kMaxBenchWorkers) {
            std::fprintf(stderr, "egw-bench: --workers takes 1 to %u\n", kMaxBenchWorkers);
            return 2;
        }
        uint32_t pods = std::min<uint32_t>(flows, 16384);
        auto frames = make_frames(flows, a.destinations, pods);
        Rig r;
        r.pool = pool;
        r.inside = inside;
        r.outside = outside;
        r.shared.next_hop_field = field;
        setup_rig(r, flows + flows / 8, a.services, pods, n);
        // Outgoing flows spread as a programmed NIC spreads them: the receiving worker owns each.
        rte_mbuf* pkts[dp::kBurst];
        rte_mbuf* per[kMaxBenchWorkers][dp::kBurst];
        size_t cursor = 0;
        for (uint32_t sent = 0; sent < flows;) {
            unsigned cnt = static_cast<unsigned>(std::min<uint32_t>(dp::kBurst, flows - sent));
            size_t first = cursor;
            if (!generate(pool, frames, cursor, pkts, cnt, inside)) break;
            unsigned c[kMaxBenchWorkers] = {};
            for (unsigned i = 0; i < cnt; ++i) {
                unsigned q = rss_queue(r, frames[first + i].bytes);
                per[q][c[q]++] = pkts[i];
            }
            for (unsigned q = 0; q < n; ++q)
                if (c[q]) {
                    r.workers[q]->now = rte_rdtsc();
                    dp::worker_process_burst(*r.workers[q], *r.snap, per[q], static_cast<uint16_t>(c[q]));
                    dp::worker_flush(*r.workers[q]);
                    dp::worker_grow_step(*r.workers[q]);
                }
            sent += cnt;
        }
        std::vector<uint8_t> owner;
        auto replies = reply_frames(r, owner);
        if (replies.size() != flows) {
            std::fprintf(stderr, "egw-bench: %zu sessions for %u flows\n", replies.size(), flows);
            rc = 1;
        }
        // Shuffle replies and owners alike.
        std::vector<size_t> order(replies.size());
        for (size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        std::shuffle(order.begin(), order.end(), std::mt19937(3));
        std::vector<Frame> rf(replies.size());
        std::vector<uint8_t> ro(replies.size());
        for (size_t i = 0; i < order.size(); ++i) {
            rf[i] = replies[order[i]];
            ro[i] = owner[order[i]];
        }
        cursor = 0;
        Result io = run(r, rf, Mode::io_forward, a.seconds, cursor);
        uint64_t handed_rss = 0, handed_owner = 0;
        Result rss = run_replies(r, rf, ro, Delivery::rss, a.seconds, handed_rss);
        Result own = run_replies(r, rf, ro, Delivery::owner, a.seconds, handed_owner);
        uint64_t rss_packets = static_cast<uint64_t>(rss.mpps * 1e6 * a.seconds);
        double fraction = rss_packets ? static_cast<double>(handed_rss) / static_cast<double>(rss_packets) : 0;
        uint64_t drops = 0;
        for (const auto* w : r.workers)
            drops += total_drops(*w);
        if (handed_owner != 0 || drops != 0) {
            std::fprintf(stderr, "egw-bench: %lu hand-offs with replies sent to their owner, %lu drops\n",
                         static_cast<unsigned long>(handed_owner), static_cast<unsigned long>(drops));
            rc = 1;
        }
        double per_handoff = fraction > 0 ? (rss.cycles_per_packet - own.cycles_per_packet) / fraction : 0;
        std::printf("| %u | %.0f | %.0f | %.0f%% | %.0f | %s |\n", n, io.cycles_per_packet, rss.cycles_per_packet,
                    100.0 * fraction, own.cycles_per_packet,
                    fraction > 0 ? std::to_string(static_cast<long>(per_handoff)).c_str() : "-");
        std::fflush(stdout);
        teardown_rig(r);
    }
    std::printf(
        "\nreplies by RSS = each reply given to the worker the Toeplitz hash of its tuple picks (software hand-off "
        "when it is "
        "not the owner);\nreplies to their owner = each reply given to the worker owning its NAT port, as "
        "rte_flow steering does.\ncycles/pkt include making the frame (io-forward column) and the N workers' "
        "poll iterations.\n");
    return rc;
}

using egw::bench::parse_list;

}  // namespace

int main(int argc, char** argv) {
    int consumed = rte_eal_init(argc, argv);
    if (consumed < 0) {
        std::fprintf(stderr, "egw-bench: EAL init failed\n");
        return 1;
    }
    argc -= consumed;
    argv += consumed;
    spdlog::set_level(spdlog::level::warn);
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "egw-bench: %s needs a value\n", k.c_str());
            return 2;
        }
        const char* v = argv[++i];
        if (k == "--flows")
            a.flows = parse_list(v);
        else if (k == "--services")
            a.services = static_cast<unsigned>(std::stoul(v));
        else if (k == "--destinations")
            a.destinations = static_cast<unsigned>(std::stoul(v));
        else if (k == "--seconds")
            a.seconds = std::stod(v);
        else if (unsigned long rounds; k == "--rounds" && (rounds = std::stoul(v)) >= 1 && rounds <= 1000)
            a.rounds = static_cast<unsigned>(rounds);
        else if (k == "--workers")
            a.workers = parse_list(v);
        else if (k == "--packets")
            a.packets = std::stoull(v);
        else if (k == "--capacity")
            a.capacity = static_cast<uint32_t>(std::stoul(v));
        else if (k == "--seed")
            table_seed = std::stoull(v);
        else if (k == "--family" && (std::string(v) == "4" || std::string(v) == "6" || std::string(v) == "mix"))
            a.family = std::string(v) == "4" ? Family::v4 : std::string(v) == "6" ? Family::v6 : Family::mix;
        else {
            std::fprintf(stderr,
                         "usage: egw-bench [EAL args --] [--flows N,...] [--services M] [--destinations D] [--seconds "
                         "S] [--rounds 1-1000] [--workers N,...] [--packets P] [--family 4|6|mix] [--capacity N] "
                         "[--seed S]\n");
            return 2;
        }
    }

    int field = rte_mbuf_dynfield_register(&egw::dp::next_hop_dynfield());

    uint16_t inside = 0, outside = 0;
    if (rte_eth_dev_get_port_by_name("net_null0", &inside) != 0 ||
        rte_eth_dev_get_port_by_name("net_null1", &outside) != 0) {
        std::fprintf(stderr, "egw-bench: needs --vdev=net_null0,no-rx=1 --vdev=net_null1,no-rx=1\n");
        return 1;
    }
    // Laid out as egwd lays out its own (control/runtime/mbuf_pool.h), for both modes: the
    // difference between them stays egw's pipeline alone.
    rte_mempool* pool = control::create_mbuf_pool("bench_pool", 65535, 512, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    if (!pool) {
        std::fprintf(stderr, "egw-bench: cannot create the mbuf pool\n");
        return 1;
    }
    rte_eth_conf conf{};
    for (uint16_t p : {inside, outside}) {
        // A transmit queue per worker of the --workers table.
        bool ok = rte_eth_dev_configure(p, 1, kMaxBenchWorkers, &conf) == 0 &&
                  rte_eth_rx_queue_setup(p, 0, 1024, 0, nullptr, pool) == 0;
        for (uint16_t q = 0; ok && q < kMaxBenchWorkers; ++q)
            ok = rte_eth_tx_queue_setup(p, q, 1024, 0, nullptr) == 0;
        if (!ok || rte_eth_dev_start(p) != 0) {
            std::fprintf(stderr, "egw-bench: cannot start port %u\n", p);
            return 1;
        }
    }
    if (!a.workers.empty()) {
        if (a.family != Family::v4) {
            std::fprintf(stderr, "egw-bench: --workers measures IPv4 replies only (--family 4)\n");
            return 2;
        }
        int rc = many_workers(pool, inside, outside, field, a);
        rte_eal_cleanup();
        return rc;
    }
    double ghz = static_cast<double>(rte_get_tsc_hz()) / 1e9;
    const char* traffic = a.family == Family::v4   ? "60-byte UDP frames (64 on the wire)"
                          : a.family == Family::v6 ? "IPv6: 62-byte UDP frames (66 on the wire), NAPT66"
                                                   : "dual-stack mix: half the flows 60-byte IPv4 UDP, half 62-byte "
                                                     "IPv6 UDP (NAPT66), shuffled together";
    char measurement[128];
    if (a.packets)
        std::snprintf(measurement, sizeof measurement, "%llu packets per measurement",
                      static_cast<unsigned long long>(a.packets));
    else
        std::snprintf(measurement, sizeof measurement,
                      "%.1f s per measurement in %u rounds, io-forward and SNAT taking turns; medians of the rounds",
                      a.seconds, a.rounds);
    std::printf("egw-bench: one worker on lcore %u, TSC %.2f GHz, %s, %u Services, %u destinations, %s\n\n",
                rte_lcore_id(), ghz, traffic, a.services, a.destinations, measurement);
    std::printf(
        "| flows = sessions | io-forward Mpps | SNAT Mpps | SNAT / io-forward | cycles/pkt io | cycles/pkt SNAT | "
        "egw cycles/pkt | new sessions/s | memory/session | spread of the rounds | core check | rounds at the "
        "lowest check | SNAT / io-forward there | egw cycles/pkt there |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int rc = 0;
    for (uint32_t flows : a.flows) {
        // Flows of each family, and the session table of each sized as IPv4's always was. An IPv6
        // run keeps a small IPv4 table (no IPv4 traffic); an IPv4 run sets no IPv6 table up.
        uint32_t n4 = a.family == Family::v4 ? flows : a.family == Family::v6 ? 0 : flows / 2, n6 = flows - n4;
        auto frames = make_family_frames(a.family, flows, a.destinations);
        Rig r;
        r.pool = pool;
        r.inside = inside;
        r.outside = outside;
        r.shared.next_hop_field = field;
        // Each family's table holds its flows and an eighth more, or --capacity sessions.
        auto table_for = [&](uint32_t n) { return a.capacity ? std::max(a.capacity, n) : n + n / 8; };
        setup_rig(r, n4 ? table_for(n4) : 1024, a.services, std::min<uint32_t>(n4, 16384), 1,
                  std::min<uint32_t>(n6, 16384), n6 ? table_for(n6) : 0);
        auto active_sessions = [&] { return r.worker->sessions.active() + r.worker->sessions6.active(); };

        // First pass: every packet opens a session.
        phase_boundary();
        double cps = first_pass(r, frames, flows);
        phase_boundary();
        uint32_t active = active_sessions();
        if (active != flows || total_drops(*r.worker) != 0) {
            std::fprintf(stderr, "egw-bench: first pass made %u sessions of %u (%lu drops:", active, flows,
                         static_cast<unsigned long>(total_drops(*r.worker)));
            for (unsigned d = 0; d < dp::kDropReasonCount; ++d)
                if (r.worker->counters.drops[d])
                    std::fprintf(stderr, " %s=%lu", dp::kDropReasonNames[d],
                                 static_cast<unsigned long>(r.worker->counters.drops[d]));
            std::fprintf(stderr, ")\n");
            rc = 1;
        }
        // The table handed out slots in creation order, so replaying the flows in that
        // order would read the session pool front to back and let the hardware prefetcher hide
        // the misses. Established traffic comes in no such order: replay it shuffled again.
        std::shuffle(frames.begin(), frames.end(), std::mt19937(2));
        size_t cursor = 0;
        r.worker->profile = {};
        Rounds rounds;
        if (a.packets) {
            phase_boundary();
            Result io = replay_io_forward(r, frames, a.packets, cursor);
            phase_boundary();
            Result snat = replay_snat(r, frames, a.packets, cursor);
            phase_boundary();
            rounds.add(io, snat);
        } else {
            double each = a.seconds / a.rounds;
            for (unsigned k = 0; k < a.rounds; ++k) {
                rounds.add_core_check(core_check_cycles());
                Result io{}, snat{};
                if (k % 2 == 0) {
                    io = run(r, frames, Mode::io_forward, each, cursor);
                    snat = run(r, frames, Mode::snat, each, cursor);
                } else {
                    snat = run(r, frames, Mode::snat, each, cursor);
                    io = run(r, frames, Mode::io_forward, each, cursor);
                }
                rounds.add(io, snat);
            }
            rounds.add_core_check(core_check_cycles());
        }
        Result io = rounds.io(), snat = rounds.snat();
        if (active_sessions() != flows || total_drops(*r.worker) != 0) {
            std::fprintf(stderr, "egw-bench: established pass changed the session count or dropped packets\n");
            rc = 1;
        }
        // Bytes per session of the tables the traffic uses (both, in the mix).
        double table_bytes = static_cast<double>((n4 ? r.session_bytes : 0) + r.session_bytes6);
        double table_capacity =
            static_cast<double>((n4 ? r.worker->sessions.capacity() : 0) + r.worker->sessions6.capacity());
        double per_session = table_bytes / table_capacity;
        // The core check's range, and the rounds it vouches for (--packets runs none).
        char check[32] = "-", lowest[32] = "-", ratio_there[16] = "-", own_there[16] = "-";
        if (rounds.has_core_check()) {
            auto [lo, hi] = rounds.core_check();
            std::snprintf(check, sizeof check, "%.2f-%.2f", lo, hi);
            auto there = rounds.at_lowest_check();
            std::snprintf(lowest, sizeof lowest, "%zu of %zu", there.size(), rounds.count());
            if (!there.empty()) {
                std::snprintf(ratio_there, sizeof ratio_there, "%.0f%%", 100.0 * rounds.ratio(there));
                std::snprintf(own_there, sizeof own_there, "%.0f", rounds.own_cycles(there));
            }
        }
        std::printf(
            "| %u | %.2f | %.2f | %.0f%% | %.0f | %.0f | %.0f | %.0f | %.0f B (%.0f MiB for 1M) | %.0f%% "
            "| %s | %s | %s | %s |\n",
            flows, io.mpps, snat.mpps, 100.0 * rounds.ratio(), io.cycles_per_packet, snat.cycles_per_packet,
            rounds.own_cycles(), cps, per_session, per_session * 1e6 / 1048576.0, 100.0 * rounds.spread(), check,
            lowest, ratio_there, own_there);
        std::fflush(stdout);
#ifdef EGW_STAGE_PROFILE
        print_profile(*r.worker, flows);
#endif
        teardown_rig(r);
    }
    std::printf(
        "\nio-forward = allocate + copy the frame (as net_pcap replay does) + transmit to net_null.\n"
        "SNAT = the same + egw's pipeline (parse, bulk session lookup, translate, route, neighbour).\n"
        "new sessions/s = first pass over the flows, every packet opening a session.\n"
        "io-forward and SNAT replay the flows in another random order than the one they were created in.\n"
        "memory/session = bytes of the session table (both hash indexes, 64-byte sessions, TCP windows, pod counts) / "
        "capacity"
        "%s.\n"
        "core check = TSC cycles per iteration of a fixed integer loop run before each round and after the last,\n"
        "lowest-highest: it rises when another thread shares this core or its clock falls, which slows SNAT far more\n"
        "than io-forward. \"there\": the medians of the rounds between two checks within a tenth of the lowest.\n"
        "Compare the check with the lowest this host has shown (docs/performance.md §1).\n",
        a.family == Family::v4 ? "" : " (IPv6: 128-byte sessions; mix: both tables)");
    rte_eal_cleanup();
    return rc;
}
