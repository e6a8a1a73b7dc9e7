// ThreadPool: a fixed set of worker threads for parallel loops over independent items.
//
// The loops over a known count of items (extract, verify, diff, the --reuse index, create's
// hashing pass of large files that share a size) share this one pool instead of each starting
// its own threads. Long-lived roles (the builder's pipeline
// stages, the scanner's directory listers, sqarfs's listeners) keep dedicated threads: they
// wait on their own queues and are not loops over a known count.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace sqar {

class ThreadPool {
 public:
  // `threads` workers in all, the calling thread included (0 counts as 1: no extra thread).
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();  // joins every worker
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned threads() const { return unsigned(workers_.size()) + 1; }

  // Runs fn(index, worker) for every index in [0, n), worker in [0, threads()); the caller
  // works as worker 0 and returns when all items are done. Items are claimed one at a time, so
  // one slow item does not hold up a batch of fast ones. If fn throws, no further items are
  // started and the first exception is rethrown here once the running ones have finished.
  // One loop at a time: not to be called concurrently or from inside fn.
  void parallel_for(size_t n, const std::function<void(size_t index, unsigned worker)>& fn);

 private:
  void worker_loop(unsigned worker);
  void drain(unsigned worker);

  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;
  // The current loop, published under mu_ with a new generation.
  const std::function<void(size_t, unsigned)>* fn_ = nullptr;
  size_t n_ = 0;
  uint64_t generation_ = 0;
  unsigned running_ = 0;  // workers still inside the current loop
  bool stop_ = false;
  std::atomic<size_t> next_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

}  // namespace sqar
