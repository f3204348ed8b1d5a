// SPDX-License-Identifier: Apache-2.0
//
// The workers' session requests (dataplane/worker.h) and the control side that drives them
// (control/cli/worker_requests.h): a thread stands in for the worker lcore, serving listings and
// flushes between "bursts" the way worker_poll_once does, while the test plays the control thread.
#include <gtest/gtest.h>
#include <rte_byteorder.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "control/cli/worker_requests.h"
#include "control/status/status_file.h"

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
    std::string err =
        cli::for_each_session({a.w.get(), b.w.get()}, [&](const dp::Worker& w, const dp::SessionRecord& r) {
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

TEST(WorkerRequests, ListingOfALargeTableHoldingFewSessionsTakesOnePage) {
    // Four pages of slots, ten sessions in the first ten: the first page says that nothing can
    // follow, so the listing asks once where walking sessions.max would ask four times.
    TestWorker a(0, 4 * cli::kPageScan, 64);
    std::set<uint16_t> want;
    for (uint16_t p = 1000; p < 1010; ++p) {
        a.add(1, p);
        want.insert(p);
    }
    FakeLcore lcore({a.w.get()});
    std::set<uint16_t> seen;
    std::string err = cli::for_each_session({a.w.get()}, [&](const dp::Worker&, const dp::SessionRecord& r) {
        seen.insert(rte_be_to_cpu_16(r.session.pod_port));
        return true;
    });
    EXPECT_EQ(err, "");
    EXPECT_EQ(seen, want);
    EXPECT_EQ(a.w->dump_request.load(), 1u) << "pages asked for";
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
    std::string err = cli::for_each_session(
        {a.w.get()}, [](const dp::Worker&, const dp::SessionRecord&) { return true; }, 50);
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

// The status file's listing (control/status/status_file.h) says when it is not the whole truth.
nlohmann::json status_listing(const std::vector<dp::Worker*>& ws, unsigned max, unsigned timeout_ms) {
    return control::list_sessions(ws, max, timeout_ms, false, [](const dp::Worker& w, const dp::SessionRecord& r) {
        return nlohmann::json{{"worker", w.index}, {"port", rte_be_to_cpu_16(r.session.pod_port)}};
    });
}

TEST(WorkerRequests, StatusListingNamesAWorkerThatDidNotAnswer) {
    // a: a table of many listing iterations; b: one that is held still (no lcore serves it).
    TestWorker a(0, 40 * dp::kDumpScanPerIteration, 64), b(1, 1024, 64);
    for (uint16_t p = 1; p <= 30; ++p)
        a.add(1, p);
    for (uint16_t p = 1; p <= 5; ++p)
        b.add(1, p);
    a.w->counters.sessions_created = 30;
    b.w->counters.sessions_created = 5;
    std::vector<dp::Worker*> ws{a.w.get(), b.w.get()};
    {
        FakeLcore lcore({a.w.get()});
        auto t0 = std::chrono::steady_clock::now();
        nlohmann::json j = status_listing(ws, 1000, 100);
        auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_GE(took, std::chrono::milliseconds(100));
        EXPECT_LT(took, std::chrono::milliseconds(2000));
        const auto& l = j["session_listing"];
        EXPECT_EQ(l["complete"], false);
        EXPECT_EQ(l["missing_workers"], nlohmann::json::array({1}));
        EXPECT_EQ(l["reason"], "worker 1 did not answer within 100 ms; its sessions are not listed");
        EXPECT_EQ(l["active"], 35u);
        EXPECT_EQ(l["listed"], 30u);
        ASSERT_EQ(j["sessions"].size(), 30u);
        for (const auto& row : j["sessions"])
            EXPECT_EQ(row["worker"], 0u);
    }
    // Both answer again: b first finishes the request it left pending, then a fresh one.
    FakeLcore lcore({a.w.get(), b.w.get()});
    nlohmann::json j = status_listing(ws, 1000, 1000);
    EXPECT_EQ(j["session_listing"]["complete"], true);
    EXPECT_EQ(j["session_listing"]["reason"], "");
    EXPECT_EQ(j["session_listing"]["missing_workers"], nlohmann::json::array());
    EXPECT_EQ(j["sessions"].size(), 35u);
    EXPECT_EQ(b.w->dump_done.load(), 2u);

    // Cut short by the row limit, and by a worker's listing buffer: said too.
    j = status_listing(ws, 10, 1000);
    EXPECT_EQ(j["session_listing"]["complete"], false);
    EXPECT_EQ(j["session_listing"]["reason"], "the listing stops at 10 sessions");
    EXPECT_EQ(j["sessions"].size(), 10u);
    for (uint16_t p = 100; p < 200; ++p)
        b.add(1, p);
    j = status_listing(ws, 1000, 1000);
    EXPECT_EQ(j["session_listing"]["complete"], false);
    EXPECT_EQ(j["session_listing"]["reason"], "worker 1 listed its first 64 sessions only (its listing buffer)");
    EXPECT_EQ(j["sessions"].size(), 30u + 64u);
}

}  // namespace
