// SPDX-License-Identifier: Apache-2.0
//
// Workers on threads of their own, as in egwd: each runs dp::worker_main (poll loop, RCU
// quiescent state after every iteration) while this thread, the control thread, feeds frames,
// takes what comes out and changes what the workers read:
// - thousands of policy snapshots published with RCU QSBR in use, each replaced one freed as
//   soon as dp::publish_policy returns (a worker still reading it reads freed memory: the
//   AddressSanitizer build reports it, the ThreadSanitizer build reports the race);
// - the neighbour table's MAC of the destination rewritten in place, and its slot given to another
//   next hop while sessions cache it;
// - two workers, one receiving every flow and owning it;
// - the pod budget of sessions.max_per_pod, drawn on by four threads at once;
// - EgressFirewall policies rebuilt and published while a worker forwards and sweeps, their hits
//   read by another thread;
// - two and four workers each polling its own queue of every port, flows spread over the queues
//   by the Toeplitz hash of the 4-tuple as a NIC egwd programmed does: the receiver owns each
//   flow, with no hand-off, replies that hash to another queue are handed to the owner, counted
//   exactly;
// - the counters read while the workers write them, as the metrics thread reads them;
// - each family's neighbour table alone, a slot handed between next hops under a reader thread.
// Every frame sent must come out exactly once, translated as the policy says at every moment
// (the translation of the flows under test never changes), with valid checksums.
//
// A program of their own (test_dataplane_threads), so that the ThreadSanitizer build
// (scripts/test.sh, build-tsan) compiles only what it runs; every build runs them.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_rcu_qsbr.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "control/firewall/firewall_state.h"
#include "dataplane/tables/neighbor_table.h"
#include "dataplane/tables/neighbor_table6.h"
#include "dataplane/tables/pod_budget.h"
#include "dataplane/publish.h"
#include "dataplane/tables/port_reservations.h"
#include "dataplane/trace.h"
#include "tests/unit/dataplane/rig.h"

namespace egw::test {
namespace {

using namespace std_rig;
using dp::DropReason;

constexpr uint16_t kDport = 9000;
constexpr unsigned kWindow = 64;  // frames in flight at most (rings hold 1024, the pool 4095)
// How long no frame may come out before the frames in flight count as lost. A lost frame never
// comes out, so a generous bound costs a passing run nothing; under ThreadSanitizer on a loaded
// two-core machine a worker thread can go unscheduled for seconds.
constexpr auto kStallLimit = std::chrono::seconds(120);

// Runs dp::worker_main for each worker on a thread; stops and joins them when it goes.
class WorkerThreads {
public:
    explicit WorkerThreads(Rig& r) : rig_(r) {
        rig_.shared.stop.store(false);
        for (auto* w : rig_.workers)
            threads_.emplace_back([w] { dp::worker_main(w); });
    }
    ~WorkerThreads() { stop(); }
    void stop() {
        rig_.shared.stop.store(true);
        for (auto& t : threads_)
            if (t.joinable()) t.join();
    }

private:
    Rig& rig_;
    std::vector<std::thread> threads_;
};

Bytes seq_payload(uint32_t seq) {
    Bytes b(8, 0);
    std::memcpy(b.data(), &seq, 4);
    std::memcpy(b.data() + 4, "egw!", 4);
    return b;
}

uint32_t seq_of(const Bytes& payload) {
    uint32_t seq = ~0u;
    if (payload.size() == 8 && std::memcmp(payload.data() + 4, "egw!", 4) == 0) std::memcpy(&seq, payload.data(), 4);
    return seq;
}

// Sends `total` UDP datagrams from pod 10 over `sports` (round robin) to kServer, keeps at most
// kWindow in flight, calls `between()` once per loop round (a publication, a neighbour update)
// and checks every frame leaving ext1. Returns once all arrived, the round count reached
// `min_rounds`, or nothing arrived for kStallLimit (a lost frame).
struct Traffic {
    Rig& r;
    std::vector<uint16_t> sports;
    uint32_t total = 0;
    std::vector<Mac> allowed_dst_macs{kServerMac};

    uint32_t sent = 0, received = 0, rounds = 0;
    std::vector<uint8_t> seen;
    std::map<uint16_t, uint16_t> nat_port_of;  // pod source port -> translated port
    std::map<Mac, unsigned> dst_macs;

    void check(const Bytes& frame) {
        Parsed p = parse_frame(frame);
        ASSERT_TRUE(p.ok) << p.error;
        EXPECT_TRUE(checksums_valid(p));
        EXPECT_EQ(p.src, kIngress) << "a frame left with a source the policy never gave it";
        EXPECT_EQ(p.dst, kServer);
        EXPECT_EQ(p.proto, 17);
        EXPECT_EQ(p.dport, kDport);
        EXPECT_EQ(p.ttl, 63);
        EXPECT_EQ(p.eth_src, kExt1Mac);
        bool mac_ok = false;
        for (const auto& m : allowed_dst_macs)
            mac_ok = mac_ok || p.eth_dst == m;
        EXPECT_TRUE(mac_ok) << "destination MAC is neither the old nor the new one (torn?)";
        ++dst_macs[p.eth_dst];
        uint32_t seq = seq_of(p.payload);
        ASSERT_LT(seq, total) << "payload changed";
        EXPECT_FALSE(seen[seq]) << "frame " << seq << " came out twice";
        seen[seq] = 1;
        // Every frame of one pod flow carries the flow's one translated port.
        uint16_t sport = sports[seq % sports.size()];
        auto [it, fresh] = nat_port_of.emplace(sport, p.sport);
        EXPECT_EQ(it->second, p.sport) << "flow " << sport << " changed its translated port";
    }

    void run(unsigned min_rounds, const std::function<void(unsigned)>& between) {
        seen.assign(total, 0);
        auto last_progress = std::chrono::steady_clock::now();
        while (received < total || rounds < min_rounds) {
            while (sent < total && sent - received < kWindow) {
                uint16_t sport = sports[sent % sports.size()];
                if (!r.try_rx(r.pods, r.from_pod(kPod10, udp_ip(kPod10, sport, kServer, kDport, seq_payload(sent)))))
                    break;
                ++sent;
            }
            if (between) between(rounds);
            ++rounds;
            auto frames = r.tx(r.ext1);
            for (const auto& f : frames) {
                check(f);
                if (::testing::Test::HasFatalFailure()) return;
            }
            if (!frames.empty()) {
                received += static_cast<uint32_t>(frames.size());
                last_progress = std::chrono::steady_clock::now();
            } else if (received < total && std::chrono::steady_clock::now() - last_progress > kStallLimit) {
                FAIL() << "no frame came out for " << kStallLimit.count() << " s: " << sent - received << " of " << sent
                       << " sent are lost";
            }
        }
    }
};

// Workers on threads run dp::worker_main, whose expiry sweep reads the TSC: a session idles once a
// test's frames are through while its remaining rounds (publications, table changes) go on, and
// goes when that outlasts its timeout. Under ThreadSanitizer on a loaded machine one test took
// 552 s, past UDP's 300 s, and found no session left to count. Every timeout here is the longest
// a configuration may give (a week), so none can elapse during a test, however slowly it runs.
RigOptions threaded(unsigned workers) {
    RigOptions o;
    o.workers = workers;
    o.qsbr = true;
    o.configure = [](config::Config& c) {
        constexpr unsigned kWeek = 7 * 24 * 3600;
        c.sessions.timeouts = {kWeek, kWeek, kWeek, kWeek, kWeek};
    };
    return o;
}

// An unrelated Service that comes and goes: the snapshots differ, the flows under test do not.
std::vector<model::ServiceState> churn(unsigned round) {
    std::vector<model::ServiceState> s = {lb_service(kWeb, kIngress, {kPod10, kPod11})};
    for (unsigned i = 0; i < round % 4; ++i)
        s.push_back(lb_service("default/other-" + std::to_string((round + i) % 16), ip4(192, 0, 2, 60 + i), {kPod20}));
    return s;
}

TEST_F(DataplaneTest, ThousandsOfPoliciesPublishedWhileAWorkerForwards) {
    Rig& r = start(threaded(1));
    Traffic t{r, {40000, 40001, 40002, 40003}, 10000};
    unsigned published = 0;
    {
        WorkerThreads threads(r);
        t.run(2000, [&](unsigned round) {
            r.publish(churn(round));
            ++published;
        });
    }
    EXPECT_EQ(t.received, t.total);
    EXPECT_GE(published, 2000u);
    EXPECT_EQ(r.w().counters.rx_packets, t.total);
    EXPECT_EQ(r.w().counters.tx_packets, t.total);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.svc(kWeb).packets_out, t.total);
    EXPECT_EQ(r.sessions().size(), t.sports.size());
}

// Session sync's reserved ports (port_reservations.h) republished, a new set each round, while a
// worker creates sessions: the old sets are freed as soon as publish_reservations returns (a
// worker still reading one reads freed memory), and a port every set reserves is never given.
TEST_F(DataplaneTest, ReservedPortsRepublishedWhileAWorkerAllocates) {
    RigOptions o = threaded(1);
    o.sessions_per_worker = 4096;  // a session per pod port below
    Rig& r = start(o);
    std::vector<uint16_t> sports;
    for (uint16_t p = 41000; p < 43000; ++p)
        sports.push_back(p);
    Traffic t{r, sports, 4000};
    auto key = [](uint16_t port) {
        return dp::FlowKey{nbo32(kServer), nbo32(kIngress), nbo16(kDport), nbo16(port), kProtoUdp, {}};
    };
    unsigned published = 0;
    {
        WorkerThreads threads(r);
        t.run(1000, [&](unsigned round) {
            // The first half of the pods' ports always, and some churn that differs every round.
            std::vector<dp::FlowKey> keys;
            for (uint16_t p = 41000; p < 42000; ++p)
                keys.push_back(key(p));
            for (unsigned i = 0; i < round % 64; ++i)
                keys.push_back(key(static_cast<uint16_t>(50000 + (round + i) % 1000)));
            delete dp::publish_reservations(r.shared, new dp::PortReservations(keys, {}));
            ++published;
        });
        delete dp::publish_reservations(r.shared, nullptr);
    }
    EXPECT_EQ(t.received, t.total);
    EXPECT_GE(published, 1000u);
    EXPECT_EQ(r.total_drops(), 0u);
    ASSERT_EQ(t.nat_port_of.size(), sports.size());
    std::set<uint16_t> given;
    for (auto [sport, nat] : t.nat_port_of)
        given.insert(nat);
    EXPECT_EQ(given.size(), sports.size()) << "two flows share a port";
    for (auto [sport, nat] : t.nat_port_of) {
        if (sport < 42000) {
            EXPECT_NE(nat, sport) << "a reserved port went to a local flow";
        } else if (nat != sport) {  // only when a flow whose own port was reserved drew it at random
            EXPECT_TRUE(given.count(sport)) << "pod port " << sport << " was free but not kept";
        }
    }
}

// EgressFirewall policies rebuilt and published every round while a worker forwards (each new
// version starts the worker's sweep over its sessions) and another thread reads the hits as the
// metrics thread does. The flows under test are allowed by every rule set: none is cut, each
// frame comes out once, and each flow counts as allowed exactly once (at its creation).
TEST_F(DataplaneTest, EgressFirewallRebuiltWhileAWorkerForwardsAndHitsAreRead) {
    Rig& r = start(threaded(1));
    firewall::EgressFirewallState state(1);
    model::ObjectSet objs;
    model::Pod pod;
    pod.meta.namespace_ = "shop";
    pod.meta.name = "web-10";
    pod.ips = {net::IpAddr::from_v4(kPod10)};
    pod.phase = model::PodPhase::running;
    objs.upsert(pod);
    auto rules = [](unsigned round) {
        nlohmann::json deny = {{"type", "Deny"},
                               {"to", {{"cidrSelector", round % 2 ? "198.51.100.0/24" : "203.0.113.0/24"}}}};
        nlohmann::json allow = {{"type", "Allow"}, {"to", {{"cidrSelector", "192.0.2.0/24"}}}};
        return model::parse_egress_firewall({{"apiVersion", "k8s.ovn.org/v1"},
                                             {"kind", "EgressFirewall"},
                                             {"metadata", {{"name", "default"}, {"namespace", "shop"}}},
                                             {"spec", {{"egress", {allow, deny}}}}});
    };
    Traffic t{r, {40000, 40001, 40002, 40003}, 4000};
    std::atomic<bool> reading{true};
    uint64_t reads = 0;
    unsigned published = 0;
    // In force before the first frame: Traffic::run queues frames before it calls `between`, so a
    // policy published there could come after the worker made the flows' sessions, unclassified.
    objs.upsert(rules(0));
    ASSERT_TRUE(state.update(objs, {}, true, false));
    r.builder().set_egress_firewall(state.policy());
    r.publish(churn(0));
    {
        WorkerThreads threads(r);
        std::thread reader([&] {
            uint64_t last = 0;
            while (reading.load()) {
                for (const auto& v : state.views()) {
                    EXPECT_GE(v.allowed, last) << "the allowed count went back";
                    last = v.allowed;
                    EXPECT_EQ(v.denied, 0u);
                }
                ++reads;
            }
        });
        t.run(300, [&](unsigned round) {
            objs.upsert(rules(round + 1));
            ASSERT_TRUE(state.update(objs, {}, true, false));
            r.builder().set_egress_firewall(state.policy());
            r.publish(churn(round));
            state.collect();
            ++published;
        });
        reading.store(false);
        reader.join();
    }
    EXPECT_EQ(t.received, t.total);
    EXPECT_GE(published, 300u);
    EXPECT_GT(reads, 0u);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.sessions().size(), t.sports.size()) << "no allowed session was cut";
    auto views = state.views();
    ASSERT_EQ(views.size(), 1u);
    EXPECT_EQ(views[0].allowed, t.sports.size()) << "each flow classified once, at its creation";
    EXPECT_EQ(views[0].denied, 0u);
}

TEST_F(DataplaneTest, NeighbourMacRewrittenInPlaceWhileAWorkerForwards) {
    Rig& r = start(threaded(1));
    const Mac moved{0x52, 0x54, 0x00, 0x00, 0x10, 0x64};
    uint32_t slot = r.shared.neighbors->find(r.ext1, kServer);
    ASSERT_NE(slot, dp::NeighborTable::kNone);
    Traffic t{r, {40000, 40001}, 10000};
    t.allowed_dst_macs = {kServerMac, moved};
    {
        WorkerThreads threads(r);
        t.run(4000, [&](unsigned round) {
            r.shared.neighbors->set_mac(slot, (round & 1) ? moved.data() : kServerMac.data());
        });
    }
    EXPECT_EQ(t.received, t.total);
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.w().counters.held, 0u) << "a frame found the neighbour unresolved while only its MAC changed";
    // Both MACs were used: the worker read the rewritten entry, not a copy of its first MAC.
    EXPECT_GT(t.dst_macs[moved], 0u) << "no frame left with the rewritten MAC";
    EXPECT_GT(t.dst_macs[kServerMac], 0u) << "no frame left with the first MAC";
}

// The control thread takes the destination's neighbour entry out and gives its slot to another
// next hop with another MAC, thousands of times, as aging and recycling do (erase, an RCU grace
// period, release, insert), while a worker forwards with the slot cached in its sessions. Every
// frame leaves with the destination's own MAC, or waits for ARP (taken here from the control
// ring) while the destination has no entry; none goes to the stranger.
TEST_F(DataplaneTest, NeighbourSlotGivenToAnotherNextHopWhileAWorkerForwardsNeverLendsItsMac) {
    Rig& r = start(threaded(1));
    dp::NeighborTable& nt = *r.shared.neighbors;
    const uint32_t home = nt.find(r.ext1, kServer);
    ASSERT_NE(home, dp::NeighborTable::kNone);
    auto grace = [&] {
        uint64_t token = rte_rcu_qsbr_start(r.shared.qsbr);
        while (!rte_rcu_qsbr_check(r.shared.qsbr, token, false))
            std::this_thread::yield();
    };
    // A next hop that takes the destination's slot once it is free (found before the workers run).
    nt.erase(home);
    nt.release(home);
    uint32_t stranger = 0;
    for (uint32_t ip = ip4(192, 0, 2, 2); !stranger && ip < ip4(192, 0, 2, 2) + 1000000; ++ip) {
        if (ip == kServer || nt.find(r.ext1, ip) != dp::NeighborTable::kNone) continue;  // a static neighbour
        uint32_t s = nt.insert(r.ext1, ip);
        ASSERT_NE(s, dp::NeighborTable::kNone);
        if (s == home) {
            stranger = ip;
        } else {
            nt.erase(s);
            nt.release(s);
        }
    }
    ASSERT_NE(stranger, 0u);
    nt.erase(home);
    nt.release(home);
    ASSERT_EQ(nt.insert(r.ext1, kServer), home);
    nt.set_mac(home, kServerMac.data());
    static const Mac kStrangerMac{0x52, 0x54, 0x00, 0x00, 0x0d, 0x0d};

    Traffic t{r, {40000, 40001}, 10000};
    uint32_t held = 0, moved = 0;
    auto take_held = [&] {
        for (const auto& h : r.to_control()) {
            Parsed p = parse_frame(h.frame);
            ASSERT_TRUE(p.ok) << p.error;
            EXPECT_EQ(h.next_hop, kServer);
            EXPECT_EQ(p.dst, kServer);
            uint32_t seq = seq_of(p.payload);
            ASSERT_LT(seq, t.total);
            EXPECT_FALSE(t.seen[seq]) << "frame " << seq << " came out twice";
            t.seen[seq] = 1;
            ++t.received;
            ++held;
        }
    };
    {
        WorkerThreads threads(r);
        // The table changes every 4th round; in the others the worker gets to run a poll
        // iteration (a grace period) with the table as it is, so frames also flow between changes.
        t.run(4000, [&](unsigned round) {
            if (round % 4 != 0) {
                grace();
                take_held();
                return;
            }
            if (round % 8 == 0) {
                // The destination's entry goes; after the grace period its slot takes the stranger,
                // and the destination is learned again in another slot.
                nt.erase(home);
                grace();
                nt.release(home);
                ASSERT_EQ(nt.insert(r.ext1, stranger), home);
                nt.set_mac(home, kStrangerMac.data());
                uint32_t other = nt.insert(r.ext1, kServer);
                ASSERT_NE(other, dp::NeighborTable::kNone);
                ASSERT_NE(other, home);
                nt.set_mac(other, kServerMac.data());
                ++moved;
            } else {
                // Both go, and the destination comes back to its first slot.
                uint32_t other = nt.find(r.ext1, kServer);
                nt.erase(other);
                nt.erase(home);
                grace();
                nt.release(home);
                nt.release(other);
                ASSERT_EQ(nt.insert(r.ext1, kServer), home);
                nt.set_mac(home, kServerMac.data());
            }
            take_held();
        });
    }
    take_held();
    EXPECT_EQ(t.received, t.total);
    EXPECT_EQ(t.dst_macs.count(kStrangerMac), 0u);
    EXPECT_GE(moved, 500u);
    EXPECT_GT(t.dst_macs[kServerMac], 0u) << "no frame left while the destination had an entry";
    EXPECT_EQ(r.total_drops(), 0u);
    EXPECT_EQ(r.w().counters.held, held);
    std::printf("%u frames sent, %u held while the destination had no entry, %u slot changes\n", t.total, held, moved);
}

TEST_F(DataplaneTest, TwoWorkerThreadsWhilePoliciesChangeTheReceiverOwnsEveryFlow) {
    Rig& r = start(threaded(2));
    // 2000-2001 lie in worker 0's port block, 40000-40001 in worker 1's: worker 0 receives all
    // and owns all (its redirection table names it for every flow from inside), with NAT ports of
    // its block.
    r.own_flows_from_inside_on(0);
    Traffic t{r, {2000, 40000, 2001, 40001}, 10000};
    {
        WorkerThreads threads(r);
        t.run(2000, [&](unsigned round) { r.publish(churn(round)); });
    }
    EXPECT_EQ(t.received, t.total);
    EXPECT_EQ(r.w(0).counters.handed_off, 0u);
    EXPECT_EQ(r.w(0).counters.tx_packets, t.total);
    EXPECT_EQ(r.w(1).counters.tx_packets, 0u);
    EXPECT_EQ(r.total_drops(0) + r.total_drops(1), 0u);
    EXPECT_EQ(r.sessions(0).size(), 4u);
    EXPECT_EQ(r.sessions(1).size(), 0u);
    for (const auto& [pod_port, nat_port] : t.nat_port_of) {
        EXPECT_GE(nat_port, r.w(0).nat_port_lo) << pod_port;
        EXPECT_LE(nat_port, r.w(0).nat_port_hi) << pod_port;
    }
}

// RSS as a NIC egwd programmed does it: the Toeplitz hash of the 4-tuple with egw's key, through
// egw's redirection table, picks the queue (flow_owner.h), the same for every packet of a flow in
// one direction; a reply's tuple is another one and generally hashes elsewhere.
unsigned rss_queue(const Rig& r, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport) {
    dp::FlowKey k{nbo32(src), nbo32(dst), nbo16(sport), nbo16(dport), 17 /* UDP */, {}};
    return dp::flow_owner(r.shared.flow_owners, k);
}

struct Flow {
    uint32_t pod;
    uint16_t sport;
    unsigned out_queue;     // where its outgoing packets arrive: the owner
    uint16_t nat = 0;       // its translated port, once seen
    unsigned in_queue = 0;  // where its replies arrive
};

// Puts every frame of `frames` (queue, frame) into `port`'s queues with at most kWindow in
// flight, and hands what leaves `out` to `check` (which returns the frame's sequence number)
// until every frame came out once; fails when nothing comes out for kStallLimit.
void pump(Rig& r, uint16_t port, uint16_t out, const std::vector<std::pair<unsigned, Bytes>>& frames,
          const std::function<uint32_t(const Bytes&)>& check) {
    std::vector<uint8_t> seen(frames.size(), 0);
    size_t sent = 0, received = 0;
    auto last_progress = std::chrono::steady_clock::now();
    while (received < frames.size()) {
        while (sent < frames.size() && sent - received < kWindow &&
               r.try_rx_queue(port, frames[sent].first, frames[sent].second))
            ++sent;
        auto got = r.tx(out);
        for (const auto& f : got) {
            uint32_t seq = check(f);
            ASSERT_LT(seq, frames.size());
            ASSERT_FALSE(seen[seq]) << "frame " << seq << " came out twice";
            seen[seq] = 1;
        }
        if (!got.empty()) {
            received += got.size();
            last_progress = std::chrono::steady_clock::now();
        } else if (std::chrono::steady_clock::now() - last_progress > kStallLimit) {
            FAIL() << "no frame came out for " << kStallLimit.count() << " s: " << sent - received << " of " << sent
                   << " sent are lost";
        }
    }
}

void RssSpreadFlowsOverWorkerThreads(Rig& r, unsigned n) {
    constexpr unsigned kFlows = 96, kRounds = 12;
    std::vector<Flow> flows;
    for (unsigned i = 0; i < kFlows; ++i) {
        uint32_t pod = i % 2 ? kPod11 : kPod10;
        auto sport = static_cast<uint16_t>(1100 + i * 677);  // across every worker's block and below it
        flows.push_back({pod, sport, rss_queue(r, pod, kServer, sport, kDport)});
    }
    std::vector<std::pair<unsigned, Bytes>> out, back;
    for (uint32_t seq = 0; seq < kFlows * kRounds; ++seq) {
        const Flow& f = flows[seq % kFlows];
        out.push_back({f.out_queue, r.from_pod(f.pod, udp_ip(f.pod, f.sport, kServer, kDport, seq_payload(seq)))});
    }
    std::vector<uint64_t> to_queue(n, 0), handoffs(n, 0);
    for (const auto& [q, frame] : out)
        ++to_queue[q];
    {
        WorkerThreads threads(r);
        pump(r, r.pods, r.ext1, out, [&](const Bytes& frame) {
            Parsed p = parse_frame(frame);
            EXPECT_TRUE(checksums_valid(p));
            EXPECT_EQ(p.src, kIngress);
            EXPECT_EQ(p.dst, kServer);
            EXPECT_EQ(p.dport, kDport);
            uint32_t seq = seq_of(p.payload);
            if (seq >= out.size()) return seq;
            Flow& f = flows[seq % kFlows];
            if (!f.nat) f.nat = p.sport;
            EXPECT_EQ(p.sport, f.nat) << "flow " << f.sport << " changed its translated port";
            // The worker that received the flow, its owner, took a port of its own block.
            EXPECT_GE(p.sport, r.w(f.out_queue).nat_port_lo) << f.sport;
            EXPECT_LE(p.sport, r.w(f.out_queue).nat_port_hi) << f.sport;
            return seq;
        });
        if (::testing::Test::HasFatalFailure()) return;
        for (Flow& f : flows)
            f.in_queue = rss_queue(r, kServer, kIngress, kDport, f.nat);
        for (uint32_t seq = 0; seq < kFlows * kRounds; ++seq) {
            const Flow& f = flows[seq % kFlows];
            back.push_back({f.in_queue, r.from_ext1(udp_ip(kServer, kDport, kIngress, f.nat, seq_payload(seq)))});
            ++to_queue[f.in_queue];
            if (f.in_queue != f.out_queue) ++handoffs[f.in_queue];
        }
        pump(r, r.ext1, r.pods, back, [&](const Bytes& frame) {
            Parsed p = parse_frame(frame);
            EXPECT_TRUE(checksums_valid(p));
            uint32_t seq = seq_of(p.payload);
            if (seq >= back.size()) return seq;
            const Flow& f = flows[seq % kFlows];
            EXPECT_EQ(p.src, kServer);
            EXPECT_EQ(p.sport, kDport);
            EXPECT_EQ(p.dst, f.pod);
            EXPECT_EQ(p.dport, f.sport);
            EXPECT_EQ(p.eth_dst, f.pod == kPod10 ? kPod10Mac : kPod11Mac);
            return seq;
        });
    }
    if (::testing::Test::HasFatalFailure()) return;
    // The workers have stopped: their tables and counters may be read.
    uint64_t total_handoffs = 0;
    std::map<std::pair<uint32_t, uint16_t>, unsigned> owner_of_flow;
    for (unsigned w = 0; w < n; ++w) {
        SCOPED_TRACE(testing::Message() << "worker " << w);
        unsigned owned = 0;
        for (const Flow& f : flows)
            owned += f.out_queue == w;
        EXPECT_GT(owned, 0u) << "the hash gave this worker no flow";
        auto ss = r.sessions(w);
        EXPECT_EQ(ss.size(), owned);
        for (const auto& s : ss) {
            auto [it, fresh] = owner_of_flow.emplace(std::make_pair(s.pod_ip, s.pod_port), w);
            EXPECT_TRUE(fresh) << "a flow has sessions on workers " << it->second << " and " << w;
        }
        const auto& c = r.w(w).counters;
        EXPECT_EQ(c.rx_packets, to_queue[w]);
        EXPECT_EQ(c.handed_off, handoffs[w]);
        EXPECT_EQ(c.sessions_created, owned);
        EXPECT_EQ(r.total_drops(w), 0u);
        // The owner translates both directions of its flows.
        EXPECT_EQ(r.svc(kWeb, w).packets_out, owned * kRounds);
        EXPECT_EQ(r.svc(kWeb, w).packets_in, owned * kRounds);
        total_handoffs += c.handed_off;
    }
    for (const Flow& f : flows) {
        auto it = owner_of_flow.find({nbo32(f.pod), nbo16(f.sport)});
        ASSERT_NE(it, owner_of_flow.end()) << "no session for flow " << f.sport;
        EXPECT_EQ(it->second, f.out_queue) << "flow " << f.sport;
    }
    EXPECT_EQ(owner_of_flow.size(), kFlows);
    EXPECT_GT(total_handoffs, 0u) << "no reply hashed to another worker: the hand-off went untested";
}

TEST_F(DataplaneTest, TwoWorkerThreadsWithAQueueEachOwnWhatTheyReceiveAndGetTheirReplies) {
    RigOptions o = threaded(2);
    o.queue_per_worker = true;
    RssSpreadFlowsOverWorkerThreads(start(o), 2);
}

TEST_F(DataplaneTest, FourWorkerThreadsWithAQueueEachOwnWhatTheyReceiveAndGetTheirReplies) {
    RigOptions o = threaded(4);
    o.queue_per_worker = true;
    RssSpreadFlowsOverWorkerThreads(start(o), 4);
}

// The packet trace while two workers forward: the control thread reads the records the workers
// publish as they go, and replaces the trace (its buffers freed after an RCU grace period, as
// control/cli/packet_trace.cpp does) while they run. Every record it reads is whole: the frame a
// pod sent, input first. Under ThreadSanitizer a record read before its publication, or a buffer
// freed while a worker still writes it, is a reported race.
TEST_F(DataplaneTest, PacketTraceReadAndReplacedWhileWorkersForward) {
    Rig& r = start(threaded(2));
    struct Trace {
        dp::TraceShared shared;
        std::vector<std::unique_ptr<dp::TracePacket[]>> storage;
        std::vector<std::unique_ptr<dp::TraceBuffer>> buffers;
    };
    constexpr uint32_t kLimit = 40;
    auto begin = [&] {
        auto t = std::make_unique<Trace>();
        t->shared.limit = kLimit;
        for (dp::Worker* w : r.workers) {
            t->storage.push_back(std::make_unique<dp::TracePacket[]>(kLimit));
            auto b = std::make_unique<dp::TraceBuffer>();
            b->shared = &t->shared;
            b->capacity = kLimit;
            b->packets = t->storage.back().get();
            w->trace.store(b.get(), std::memory_order_release);
            t->buffers.push_back(std::move(b));
        }
        return t;
    };
    auto end = [&](std::unique_ptr<Trace>& t) {
        for (dp::Worker* w : r.workers)
            w->trace.store(nullptr, std::memory_order_release);
        uint64_t token = rte_rcu_qsbr_start(r.shared.qsbr);
        while (!rte_rcu_qsbr_check(r.shared.qsbr, token, false))
            std::this_thread::yield();
        t.reset();
    };
    uint64_t records_read = 0;
    auto read = [&](const Trace& t) {
        for (const auto& b : t.buffers) {
            uint32_t n = b->published.load(std::memory_order_acquire);
            ASSERT_LE(n, kLimit);
            for (uint32_t k = 0; k < n; ++k) {
                const dp::TracePacket& p = b->packets[k];
                Parsed f = parse_frame(Bytes(p.before, p.before + p.before_len));
                EXPECT_EQ(f.src, kPod10);
                EXPECT_EQ(f.dport, kDport);
                ASSERT_GE(p.n_steps, 2u);
                EXPECT_EQ(p.steps[0].stage, static_cast<uint8_t>(dp::ProfiledStage::input));
            }
            records_read += n;
        }
    };
    Traffic traffic{r, {40000, 40001, 40002, 40003}, 4000};
    std::unique_ptr<Trace> trace = begin();
    unsigned restarts = 0;
    {
        WorkerThreads threads(r);
        traffic.run(0, [&](unsigned) {
            read(*trace);
            // Replaced once full, so that each trace has had workers writing it.
            if (trace->shared.taken.load(std::memory_order_relaxed) >= kLimit) {
                read(*trace);
                end(trace);
                trace = begin();
                ++restarts;
            }
        });
    }
    read(*trace);
    end(trace);
    EXPECT_EQ(traffic.received, traffic.total) << "tracing loses no packet";
    EXPECT_GE(restarts, 10u);
    EXPECT_GE(records_read, 10u * kLimit);
    EXPECT_EQ(r.total_drops(), 0u);
}

TEST_F(DataplaneTest, CountersReadWhileWorkersCountNeverGoBackwards) {
    Rig& r = start(threaded(2));
    Traffic t{r, {2000, 40000}, 10000};
    std::atomic<bool> done{false};
    uint64_t reads = 0;
    // Reads that found the traffic under way (some packets received, not all): they show that the
    // reader ran while the workers counted, not only before or after.
    std::atomic<uint64_t> reads_under_way{0};
    bool backwards = false;
    const uint32_t web = r.service_id(kWeb);
    // The metrics thread's way of reading a worker's counters (control/metrics/state.h).
    std::thread reader([&] {
        uint64_t last_rx = 0, last_tx = 0, last_web = 0;
        while (!done.load()) {
            uint64_t rx = __atomic_load_n(&r.w(0).counters.rx_packets, __ATOMIC_RELAXED);
            if (rx > 0 && rx < t.total) reads_under_way.fetch_add(1);
            uint64_t tx = __atomic_load_n(&r.w(0).counters.tx_packets, __ATOMIC_RELAXED) +
                          __atomic_load_n(&r.w(1).counters.tx_packets, __ATOMIC_RELAXED);
            uint64_t out = __atomic_load_n(&r.w(0).service_counters[web].packets_out, __ATOMIC_RELAXED) +
                           __atomic_load_n(&r.w(1).service_counters[web].packets_out, __ATOMIC_RELAXED);
            backwards = backwards || rx < last_rx || tx < last_tx || out < last_web;
            last_rx = rx;
            last_tx = tx;
            last_web = out;
            ++reads;
        }
    });
    {
        WorkerThreads threads(r);
        // Half way, the sender waits (kStallLimit at most) until the reader has read the counts under
        // way at least once, so that a busy machine cannot schedule the reader only around the
        // traffic.
        bool waited = false;
        t.run(0, [&](unsigned) {
            if (waited || t.received < t.total / 2) return;
            waited = true;
            auto give_up = std::chrono::steady_clock::now() + kStallLimit;
            while (reads_under_way.load() == 0 && std::chrono::steady_clock::now() < give_up)
                std::this_thread::yield();
        });
    }
    done.store(true);
    reader.join();
    EXPECT_EQ(t.received, t.total);
    EXPECT_FALSE(backwards);
    EXPECT_GT(reads, 0u);
    EXPECT_GT(reads_under_way.load(), 0u) << "the reader never ran while the workers counted";
    EXPECT_EQ(r.svc(kWeb, 0).packets_out + r.svc(kWeb, 1).packets_out, t.total);
}

// The neighbour table alone, per family: a reader thread resolves one next hop through the slot it
// cached and through find(), as output does, and reports a quiescent state after each pass, while
// this thread hands that slot to another next hop and back, as aging and recycling do (erase, a
// grace period, release, insert). The reader gets the next hop's own MAC or nothing, never the
// other's; and at least once per round, while the entry is there, its own.
struct NeighbourFamily4 {
    using Table = dp::NeighborTable;
    uint32_t ip;
    static NeighbourFamily4 nth(uint32_t n) { return {ip4(192, 0, 2, 0) + n}; }
    uint32_t addr() const { return ip; }
};

struct NeighbourFamily6 {
    using Table = dp::NeighborTable6;
    std::array<uint8_t, 16> ip;
    static NeighbourFamily6 nth(uint32_t n) {
        NeighbourFamily6 f{{0x20, 0x01, 0x0d, 0xb8}};
        std::memcpy(f.ip.data() + 12, &n, 4);
        return f;
    }
    const uint8_t* addr() const { return ip.data(); }
};

template <class F>
class NeighbourTableThreads : public ::testing::Test {};
using NeighbourFamilies = ::testing::Types<NeighbourFamily4, NeighbourFamily6>;
TYPED_TEST_SUITE(NeighbourTableThreads, NeighbourFamilies);

TYPED_TEST(NeighbourTableThreads, SlotGivenToAnotherNextHopUnderAReaderNeverLendsItsMac) {
    using F = TypeParam;
    using Table = typename F::Table;
    constexpr uint16_t kPort = 1;
    constexpr unsigned kRounds = 1000;
    const Mac own{0x52, 0x54, 0x00, 0x00, 0x00, 0x01};
    const Mac strangers{0x52, 0x54, 0x00, 0x00, 0x0d, 0x0d};
    Table nt(8);
    const F hop = F::nth(1);
    const uint32_t home = nt.insert(kPort, hop.addr());
    ASSERT_NE(home, Table::kNone);
    nt.erase(home);
    nt.release(home);
    // A next hop whose key takes the same slot once it is free.
    std::optional<F> stranger;
    for (uint32_t n = 2; !stranger && n < 1000000; ++n) {
        F f = F::nth(n);
        uint32_t s = nt.insert(kPort, f.addr());
        ASSERT_NE(s, Table::kNone);
        if (s == home) stranger = f;
        nt.erase(s);
        nt.release(s);
    }
    ASSERT_TRUE(stranger);
    ASSERT_EQ(nt.insert(kPort, hop.addr()), home);
    nt.set_mac(home, own.data());

    const size_t size = (rte_rcu_qsbr_get_memsize(1) + 63) / 64 * 64;
    std::unique_ptr<rte_rcu_qsbr, decltype(&std::free)> q(static_cast<rte_rcu_qsbr*>(std::aligned_alloc(64, size)),
                                                          &std::free);
    ASSERT_TRUE(q);
    ASSERT_EQ(rte_rcu_qsbr_init(q.get(), 1), 0);
    ASSERT_EQ(rte_rcu_qsbr_thread_register(q.get(), 0), 0);
    rte_rcu_qsbr_thread_online(q.get(), 0);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> resolved{0}, lent{0};
    std::thread reader([&] {
        Mac m{};
        while (!stop.load(std::memory_order_acquire)) {
            const uint32_t found = nt.find(kPort, hop.addr());
            for (uint32_t slot : {home, found}) {
                if (slot == Table::kNone || !nt.resolve(slot, kPort, hop.addr(), m.data())) continue;
                resolved.fetch_add(1, std::memory_order_relaxed);
                if (m != own) lent.fetch_add(1, std::memory_order_relaxed);
            }
            rte_rcu_qsbr_quiescent(q.get(), 0);
        }
        rte_rcu_qsbr_thread_offline(q.get(), 0);
    });
    auto grace = [&] {
        uint64_t token = rte_rcu_qsbr_start(q.get());
        while (!rte_rcu_qsbr_check(q.get(), token, false))
            std::this_thread::yield();
    };
    unsigned rounds = 0;
    for (; rounds < kRounds; ++rounds) {
        nt.erase(home);
        grace();
        nt.release(home);
        if (nt.insert(kPort, stranger->addr()) != home) {
            ADD_FAILURE() << "round " << rounds << ": the other next hop did not take the freed slot";
            break;
        }
        nt.set_mac(home, strangers.data());
        grace();
        nt.erase(home);
        grace();
        nt.release(home);
        if (nt.insert(kPort, hop.addr()) != home) {
            ADD_FAILURE() << "round " << rounds << ": the next hop did not come back to its slot";
            break;
        }
        nt.set_mac(home, own.data());
        // The reader's pass that ends the first grace period may have begun before the MAC was
        // set; the one that ends the second began after it, with the entry in place.
        grace();
        grace();
    }
    stop.store(true, std::memory_order_release);
    reader.join();
    EXPECT_EQ(rounds, kRounds);
    EXPECT_EQ(lent.load(), 0u) << "the reader took the other next hop's MAC for its own";
    EXPECT_GE(resolved.load(), rounds);
}

}  // namespace
}  // namespace egw::test

namespace egw::test {
namespace {

// The pod budget (dataplane/tables/pod_budget.h) as workers share it: four threads admit and
// release sessions of one pod with a limit well below what they try together. Never more than the
// limit are held at once (each thread counts what it holds in an atomic beside the budget), every
// admission is given back in the end, and a pod sharing no counter with it is not held back by it.
TEST(PodBudgetThreads, AdmissionsOfOnePodOnFourThreadsNeverPassTheLimit) {
    constexpr uint32_t kRow = 1024, kLimit = 5;
    constexpr unsigned kThreads = 4, kRounds = 20000;
    std::vector<std::atomic<uint32_t>> counts(2 * kRow);
    dp::PodBudget budget{counts.data(), kRow - 1};
    const uint64_t pod = dp::pod_budget_key(uint32_t{0x0af4010a});
    std::atomic<uint32_t> held{0}, most{0};
    std::atomic<uint64_t> admitted{0}, refused{0};
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (unsigned i = 0; i < kRounds; ++i) {
                if (!budget.admit(pod, kLimit)) {
                    refused.fetch_add(1);
                    continue;
                }
                uint32_t now = held.fetch_add(1) + 1;
                for (uint32_t m = most.load(); now > m && !most.compare_exchange_weak(m, now);)
                    ;
                admitted.fetch_add(1);
                held.fetch_sub(1);
                budget.release(pod);
            }
        });
    for (auto& t : threads)
        t.join();
    EXPECT_LE(most.load(), kLimit);
    EXPECT_EQ(admitted.load() + refused.load(), uint64_t{kThreads} * kRounds);
    EXPECT_GT(admitted.load(), 0u);
    EXPECT_EQ(budget.held(pod), 0u);

    // Filled to the limit: the next one is refused, another pod is not.
    for (uint32_t i = 0; i < kLimit; ++i)
        EXPECT_TRUE(budget.admit(pod, kLimit)) << i;
    EXPECT_FALSE(budget.admit(pod, kLimit));
    EXPECT_EQ(budget.held(pod), kLimit);
    uint64_t other = 0;
    for (uint32_t a = 0x0af40114;; ++a) {
        other = dp::pod_budget_key(a);
        if ((other & (kRow - 1)) != (pod & (kRow - 1)) && ((other >> 32) & (kRow - 1)) != ((pod >> 32) & (kRow - 1)))
            break;
    }
    EXPECT_TRUE(budget.admit(other, kLimit));
}

}  // namespace
}  // namespace egw::test
