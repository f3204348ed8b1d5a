// SPDX-License-Identifier: Apache-2.0
//
// The leader's status writers: a fixed set of threads, started once, that run the PATCHes of one
// decision batch in parallel (the API server answers them in parallel). The decider used to start
// and join a new set of threads for every batch; at 10,000 Services that is thousands of thread
// starts during a failover.
//
// run(n, job) calls job(0) .. job(n-1), each index once, on the pool's threads and the caller's,
// and returns when all have returned. One caller at a time (the decider thread).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace egw::k8s_source {

class WriterPool {
public:
    // `concurrency` jobs at once at most: the caller and concurrency - 1 threads (0 counts as 1).
    explicit WriterPool(unsigned concurrency);
    ~WriterPool();
    WriterPool(const WriterPool&) = delete;
    WriterPool& operator=(const WriterPool&) = delete;

    // A job that returns false ends the batch: the jobs not yet begun are skipped (a leader that
    // lost its Lease writes nothing more). Returns how many jobs ran.
    size_t run(size_t n, const std::function<bool(size_t)>& job);

    unsigned concurrency() const { return static_cast<unsigned>(threads_.size()) + 1; }

private:
    void thread_main();
    // Takes indices until none are left or a job says stop; counts the jobs it ran.
    void drain();

    std::mutex mu_;
    std::condition_variable work_cv_;  // a batch begins, or the pool stops
    std::condition_variable done_cv_;  // a thread finished its part of the batch
    const std::function<bool(size_t)>* job_ = nullptr;
    size_t n_ = 0;
    size_t next_ = 0;  // the next index to hand out
    size_t ran_ = 0;
    bool stop_batch_ = false;  // a job returned false
    size_t busy_ = 0;          // pool threads still inside the current batch
    unsigned long batch_ = 0;  // increases with every run()
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace egw::k8s_source
