// parallel_for: runs fn(index, worker) for index in [0, n) on `threads` threads.
//
// Items are handed out one at a time from an atomic counter, so one huge file does not hold
// up a batch of small ones. fn must not throw: each command records its own per-item errors
// (a bad file must not stop the others from being processed and named).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace sqar::ops {

template <typename Fn>
void parallel_for(size_t n, unsigned threads, Fn&& fn) {
  if (threads <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i, 0u);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::jthread> pool;
  unsigned count = unsigned(std::min<size_t>(threads, n));
  for (unsigned w = 0; w < count; ++w) {
    pool.emplace_back([&, w] {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i, w);
    });
  }
}

}  // namespace sqar::ops
