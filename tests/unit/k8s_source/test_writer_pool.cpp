// SPDX-License-Identifier: Apache-2.0
//
// The leader's status writers (control/k8s_source/writer_pool.h): every job once, at most
// `concurrency` at a time, on the same threads batch after batch, and a batch that stops early.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "control/k8s_source/writer_pool.h"

using egw::k8s_source::WriterPool;
using namespace std::chrono_literals;

TEST(WriterPool, RunsEveryJobOnceAtMostConcurrencyAtATime) {
    WriterPool pool(4);
    EXPECT_EQ(pool.concurrency(), 4u);
    std::vector<std::atomic<int>> runs(64);
    std::atomic<int> in_flight{0}, most{0};
    const size_t ran = pool.run(runs.size(), [&](size_t k) {
        const int now = ++in_flight;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(2ms);  // long enough for the others to start theirs
        ++runs[k];
        --in_flight;
        return true;
    });
    EXPECT_EQ(ran, runs.size());
    for (size_t k = 0; k < runs.size(); ++k)
        EXPECT_EQ(runs[k].load(), 1) << "job " << k;
    EXPECT_LE(most.load(), 4);
    EXPECT_GE(most.load(), 2) << "the jobs never ran in parallel";
    EXPECT_EQ(in_flight.load(), 0) << "run() returned before every job had";
}

TEST(WriterPool, KeepsItsThreadsFromBatchToBatch) {
    WriterPool pool(3);
    std::mutex mu;
    std::set<std::thread::id> threads;
    for (int batch = 0; batch < 20; ++batch) {
        EXPECT_EQ(pool.run(12,
                           [&](size_t) {
                               std::this_thread::sleep_for(1ms);
                               std::lock_guard lk(mu);
                               threads.insert(std::this_thread::get_id());
                               return true;
                           }),
                  12u);
    }
    // The caller and the pool's two threads, whatever the number of batches.
    EXPECT_LE(threads.size(), 3u);
    EXPECT_TRUE(threads.count(std::this_thread::get_id()));
}

TEST(WriterPool, AJobThatSaysStopEndsTheBatch) {
    WriterPool one(1);
    std::vector<size_t> done;
    EXPECT_EQ(one.run(10,
                      [&](size_t k) {
                          done.push_back(k);
                          return k < 2;
                      }),
              3u);
    EXPECT_EQ(done, (std::vector<size_t>{0, 1, 2}));
    // The next batch starts afresh.
    EXPECT_EQ(one.run(5, [](size_t) { return true; }), 5u);
    EXPECT_EQ(one.run(0, [](size_t) { return true; }), 0u);

    WriterPool four(4);
    std::atomic<size_t> count{0};
    const size_t ran = four.run(1000, [&](size_t) {
        ++count;
        return false;
    });
    EXPECT_EQ(ran, count.load());
    EXPECT_LE(ran, 4u) << "jobs kept starting after one said stop";
}

TEST(WriterPool, ZeroConcurrencyIsTheCallerAlone) {
    WriterPool pool(0);
    EXPECT_EQ(pool.concurrency(), 1u);
    std::set<std::thread::id> threads;
    EXPECT_EQ(pool.run(5,
                       [&](size_t) {
                           threads.insert(std::this_thread::get_id());
                           return true;
                       }),
              5u);
    EXPECT_EQ(threads, (std::set<std::thread::id>{std::this_thread::get_id()}));
}
