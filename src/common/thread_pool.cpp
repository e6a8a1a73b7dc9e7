#include "common/thread_pool.h"

namespace sqar {

ThreadPool::ThreadPool(unsigned threads) {
  for (unsigned w = 1; w < threads; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, unsigned)>& fn) {
  if (workers_.empty() || n <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    n_ = n;
    next_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    running_ = unsigned(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  drain(0);
  std::exception_ptr error;
  {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return running_ == 0; });
    fn_ = nullptr;
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop(unsigned worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(worker);
    {
      std::lock_guard lock(mu_);
      if (--running_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::drain(unsigned worker) {
  for (size_t i;
       !failed_.load(std::memory_order_relaxed) && (i = next_.fetch_add(1, std::memory_order_relaxed)) < n_;) {
    try {
      (*fn_)(i, worker);
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
}

}  // namespace sqar
