// parallel_for: runs fn(index, worker) for index in [0, n) on `threads` threads of a
// ThreadPool (common/thread_pool.h), worker in [0, threads).
//
// The commands record their own per-item errors (a bad file must not stop the others from
// being processed and named); anything fn throws stops the loop and is rethrown here.
#pragma once
#include <algorithm>
#include <cstddef>

#include "common/thread_pool.h"

namespace sqar::ops {

template <typename Fn>
void parallel_for(size_t n, unsigned threads, Fn&& fn) {
  if (threads <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i, 0u);
    return;
  }
  ThreadPool pool(unsigned(std::min<size_t>(threads, n)));
  pool.parallel_for(n, [&](size_t i, unsigned w) { fn(i, w); });
}

}  // namespace sqar::ops
