// SPDX-License-Identifier: Apache-2.0
#include "control/k8s_source/writer_pool.h"

#include <algorithm>

namespace egw::k8s_source {

WriterPool::WriterPool(unsigned concurrency) {
    const unsigned extra = std::max(1u, concurrency) - 1;
    threads_.reserve(extra);
    for (unsigned i = 0; i < extra; ++i)
        threads_.emplace_back([this] { thread_main(); });
}

WriterPool::~WriterPool() {
    {
        std::lock_guard lk(mu_);
        stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_)
        t.join();
}

void WriterPool::drain() {
    std::unique_lock lk(mu_);
    while (!stop_batch_ && next_ < n_) {
        const size_t k = next_++;
        const auto& job = *job_;
        lk.unlock();
        const bool go_on = job(k);
        lk.lock();
        ++ran_;
        if (!go_on) stop_batch_ = true;
    }
}

void WriterPool::thread_main() {
    unsigned long seen = 0;
    for (;;) {
        {
            std::unique_lock lk(mu_);
            work_cv_.wait(lk, [&] { return stopping_ || batch_ != seen; });
            if (stopping_) return;
            seen = batch_;
            ++busy_;
        }
        drain();
        {
            std::lock_guard lk(mu_);
            --busy_;
        }
        done_cv_.notify_one();
    }
}

size_t WriterPool::run(size_t n, const std::function<bool(size_t)>& job) {
    if (n == 0) return 0;
    {
        std::lock_guard lk(mu_);
        job_ = &job;
        n_ = n;
        next_ = 0;
        ran_ = 0;
        stop_batch_ = false;
        ++batch_;
    }
    // A single job the caller runs alone; no thread is woken for it.
    if (n > 1) work_cv_.notify_all();
    drain();
    std::unique_lock lk(mu_);
    // Every index is handed out (or the batch stopped); wait for the threads still running one.
    done_cv_.wait(lk, [&] { return busy_ == 0; });
    job_ = nullptr;
    n_ = 0;
    return ran_;
}

}  // namespace egw::k8s_source
