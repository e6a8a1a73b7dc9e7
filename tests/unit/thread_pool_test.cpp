#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ops/parallel.h"

namespace sqar {
namespace {

TEST(ThreadPool, RunsEveryIndexOnceOnItsWorkers) {
  ThreadPool pool(4);
  ASSERT_EQ(pool.threads(), 4u);
  std::vector<std::atomic<int>> hits(1000);
  std::vector<std::atomic<int>> by_worker(pool.threads());
  pool.parallel_for(hits.size(), [&](size_t i, unsigned w) {
    ASSERT_LT(w, 4u);
    hits[i].fetch_add(1);
    by_worker[w].fetch_add(1);
  });
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), 1) << "index " << i;
  int total = 0;
  for (auto& n : by_worker) total += n.load();
  EXPECT_EQ(total, 1000);
}

TEST(ThreadPool, UsesOtherThreadsThanTheCaller) {
  ThreadPool pool(3);
  std::atomic<int> elsewhere{0};
  const auto caller = std::this_thread::get_id();
  // Each item waits until some item ran on another thread (bounded, so a pool that runs
  // everything on the caller fails instead of hanging).
  pool.parallel_for(6, [&](size_t, unsigned w) {
    if (std::this_thread::get_id() != caller) {
      EXPECT_NE(w, 0u);
      elsewhere.fetch_add(1);
    }
    for (int spin = 0; spin < 2000 && elsewhere.load() == 0; ++spin)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_GT(elsewhere.load(), 0);
}

TEST(ThreadPool, RethrowsTheFirstErrorAndStopsStartingItems) {
  ThreadPool pool(4);
  std::atomic<size_t> started{0};
  EXPECT_THROW(pool.parallel_for(100000,
                                 [&](size_t i, unsigned) {
                                   started.fetch_add(1);
                                   if (i == 10) throw std::runtime_error("item 10 failed");
                                   // Slow items: all 100000 would take 25 s on 4 threads, so a
                                   // thread preempted between claiming item 10 and throwing
                                   // cannot see the others finish the loop on a loaded machine.
                                   std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                 }),
               std::runtime_error);
  EXPECT_LT(started.load(), 100000u);
  // The pool still works after a failed loop.
  std::atomic<size_t> done{0};
  pool.parallel_for(50, [&](size_t, unsigned) { done.fetch_add(1); });
  EXPECT_EQ(done.load(), 50u);
}

TEST(ThreadPool, ErrorMessageReachesTheCaller) {
  ThreadPool pool(2);
  try {
    pool.parallel_for(8, [](size_t i, unsigned) {
      if (i == 5) throw std::runtime_error("bad item 5");
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bad item 5");
  }
}

TEST(ThreadPool, OneThreadRunsInOrderOnTheCaller) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.threads(), 1u);
  std::vector<size_t> order;
  const auto caller = std::this_thread::get_id();
  pool.parallel_for(5, [&](size_t i, unsigned w) {
    EXPECT_EQ(w, 0u);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_THROW(pool.parallel_for(3, [](size_t, unsigned) { throw std::logic_error("x"); }), std::logic_error);
}

TEST(ThreadPool, EmptyLoopsAndManyLoops) {
  ThreadPool pool(3);
  pool.parallel_for(0, [](size_t, unsigned) { FAIL() << "called for an empty range"; });
  std::atomic<size_t> sum{0};
  for (int round = 0; round < 200; ++round) pool.parallel_for(7, [&](size_t i, unsigned) { sum.fetch_add(i); });
  EXPECT_EQ(sum.load(), 200u * 21u);
}

TEST(ThreadPool, DestroyedWithoutWorkJoins) {
  for (int i = 0; i < 20; ++i) ThreadPool pool(4);
}

TEST(OpsParallelFor, PropagatesErrorsAndCoversAllItems) {
  std::vector<std::atomic<int>> hits(300);
  ops::parallel_for(hits.size(), 3, [&](size_t i, unsigned w) {
    EXPECT_LT(w, 3u);
    hits[i].fetch_add(1);
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_THROW(ops::parallel_for(10, 2,
                                 [](size_t i, unsigned) {
                                   if (i == 3) throw std::runtime_error("x");
                                 }),
               std::runtime_error);
}

}  // namespace
}  // namespace sqar
