// SPDX-License-Identifier: Apache-2.0
//
// The workers' session requests (dataplane/worker.h) and the control side that drives them
// (control/cli/worker_requests.h): a thread stands in for the worker lcore, serving listings and
// flushes between "bursts" the way worker_poll_once does, while the test plays the control thread.
#include <gtest/gtest.h>
#include <rte_byteorder.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "control/cli/worker_requests.h"

using namespace egw;

namespace {

struct TestWorker {
    std::unique_ptr<dp::Worker> w = std::make_unique<dp::Worker>();
    std::unique_ptr<dp::ServiceCounters[]> counters = std::make_unique<dp::ServiceCounters[]>(dp::kMaxServices);
    std::unique_ptr<dp::SessionRecord[]> dump;

    TestWorker(unsigned index, uint32_t capacity, uint32_t dump_capacity)
        : dump(std::make_unique<dp::SessionRecord[]>(dump_capacity)) {
        w->index = index;
        w->service_counters = counters.get();
        w->dump_buffer = dump.get();
        w->dump_capacity = dump_capacity;
        EXPECT_TRUE(w->sessions.init(("egw_cli_t" + std::to_string(index)).c_str(), capacity, 0));
    }

    // A UDP session of `service` with pod port `port`.
    void add(uint16_t service, uint16_t port) {
        dp::Session s{};
        s.pod_ip = rte_cpu_to_be_32(0x0af40100 + service);
        s.remote_ip = rte_cpu_to_be_32(0xc0000264);
        s.pod_port = rte_cpu_to_be_16(port);
        s.remote_port = rte_cpu_to_be_16(53);
        s.nat_ip = rte_cpu_to_be_32(0xc0000232);
        s.nat_port = s.pod_port;
        s.proto = 17;
        s.service_id = service;
        ASSERT_NE(w->sessions.create(s), dp::SessionTable::kNone);
        ++counters[service].sessions_created;
    }
};

// Serves requests like the worker's poll loop until stopped.
class FakeLcore {
public:
    explicit FakeLcore(std::vector<dp::Worker*> ws) : workers_(std::move(ws)), thread_([this] { run(); }) {}
    ~FakeLcore() {
        stop_ = true;
        thread_.join();
    }
private:
    void run() {
        while (!stop_) {
            for (dp::Worker* w : workers_) {
                dp::worker_serve_dump(*w);
                dp::worker_serve_flush(*w);
            }
        }
    }
    std::vector<dp::Worker*> workers_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

TEST(WorkerRequests, ListingPagesThroughEverySession) {
    // More sessions than one listing holds, spread over a table several pages long.
    TestWorker a(0, 3 * cli::kPageScan, 64), b(1, 1000, 64);
    std::set<uint16_t> want_a, want_b;
    for (uint16_t p = 1000; p < 1500; ++p) {
        a.add(1, p);
        want_a.insert(p);
    }
    for (uint16_t p = 2000; p < 2010; ++p) {
        b.add(2, p);
        want_b.insert(p);
    }
    FakeLcore lcore({a.w.get(), b.w.get()});
    std::map<unsigned, std::set<uint16_t>> seen;
    size_t visits = 0;
    std::string err = cli::for_each_session({a.w.get(), b.w.get()}, [&](const dp::Worker& w, const dp::SessionRecord& r) {
        seen[w.index].insert(rte_be_to_cpu_16(r.session.pod_port));
        ++visits;
        return true;
    });
    EXPECT_EQ(err, "");
    EXPECT_EQ(visits, want_a.size() + want_b.size()) << "each session exactly once";
    EXPECT_EQ(seen[0], want_a);
    EXPECT_EQ(seen[1], want_b);
    // The paging fields are back to "the whole table", as the status file expects.
    EXPECT_EQ(a.w->dump_start, 0u);
    EXPECT_EQ(a.w->dump_scan, 0u);
}

TEST(WorkerRequests, ListingStopsWhenTheVisitorSaysSo) {
    TestWorker a(0, 4096, 16), b(1, 4096, 16);
    for (uint16_t p = 1; p <= 100; ++p) {
        a.add(1, p);
        b.add(1, p);
    }
    FakeLcore lcore({a.w.get(), b.w.get()});
    size_t visits = 0;
    std::string err = cli::for_each_session({a.w.get(), b.w.get()}, [&](const dp::Worker& w, const dp::SessionRecord&) {
        EXPECT_EQ(w.index, 0u);
        return ++visits < 20;
    });
    EXPECT_EQ(err, "");
    EXPECT_EQ(visits, 20u);
}

TEST(WorkerRequests, ASilentWorkerIsReportedNotWaitedForever) {
    TestWorker a(0, 1024, 16);
    a.add(1, 1);
    std::string err = cli::for_each_session({a.w.get()}, [](const dp::Worker&, const dp::SessionRecord&) { return true; },
                                            50);
    EXPECT_EQ(err, "worker 0 did not answer");
    auto r = cli::flush_sessions({a.w.get()}, 1, 50);
    EXPECT_EQ(r.error, "worker 0 did not answer");
    // Its flush is still pending: a second one is refused rather than racing it.
    r = cli::flush_sessions({a.w.get()}, 1, 50);
    EXPECT_EQ(r.error, "worker 0 is still busy with an earlier clear");
    FakeLcore lcore({a.w.get()});  // the worker comes back and finishes the first one
    while (a.w->flush_done.load() != a.w->flush_request.load())
        std::this_thread::yield();
    EXPECT_EQ(a.w->sessions.active(), 0u);
}

TEST(WorkerRequests, FlushClosesOneServiceOnEveryWorker) {
    TestWorker a(0, 2 * dp::kFlushPerIteration + 100, 64), b(1, 512, 64);
    for (uint16_t p = 1; p <= 300; ++p)
        a.add(p % 3 == 0 ? 7 : 8, p);
    for (uint16_t p = 1; p <= 30; ++p)
        b.add(7, p);
    FakeLcore lcore({a.w.get(), b.w.get()});
    auto r = cli::flush_sessions({a.w.get(), b.w.get()}, 7);
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.closed, (std::vector<uint32_t>{100, 30}));
    EXPECT_EQ(a.w->sessions.active(), 200u);
    EXPECT_EQ(b.w->sessions.active(), 0u);
    EXPECT_EQ(a.counters[7].sessions_closed, 100u);
    EXPECT_EQ(a.w->counters.sessions_closed, 100u);
    // Every remaining session is Service 8's.
    size_t left = 0;
    cli::for_each_session({a.w.get()}, [&](const dp::Worker&, const dp::SessionRecord& rec) {
        EXPECT_EQ(rec.session.service_id, 8);
        ++left;
        return true;
    });
    EXPECT_EQ(left, 200u);
    r = cli::flush_sessions({a.w.get(), b.w.get()}, dp::kFlushAll);
    EXPECT_EQ(r.closed, (std::vector<uint32_t>{200, 0}));
    EXPECT_EQ(a.w->sessions.active(), 0u);
}

TEST(WorkerRequests, FlushedPortsCanBeReused) {
    TestWorker a(0, 64, 8);
    a.add(3, 4242);
    FakeLcore lcore({a.w.get()});
    EXPECT_EQ(cli::flush_sessions({a.w.get()}, 3).closed[0], 1u);
    a.add(3, 4242);  // same tuple again: the indexes forgot the old one
    EXPECT_EQ(cli::flush_sessions({a.w.get()}, 3).closed[0], 1u);
}

}  // namespace
