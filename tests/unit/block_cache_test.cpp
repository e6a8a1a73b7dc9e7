// BlockCache: loads are counted as misses and found blocks as hits, the byte budget evicts the least recently used
// block, concurrent misses on one key load it once, a failed load caches nothing, and an
// erased block stays valid for whoever holds it.
#include "cache/block_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace sqar::cache {
namespace {

BlockPtr make_block(size_t size, uint8_t fill) {
  auto b = std::make_shared<Block>();
  b->bytes = Buffer(new uint8_t[size]);
  std::memset(b->bytes.get(), fill, size);
  b->size = size;
  return b;
}

TEST(BlockCacheTest, CountsHitsAndMisses) {
  BlockCache cache(1 << 20, 1);
  EXPECT_EQ(cache.find(7), nullptr);
  int loads = 0;
  cache.get_or_load(7, [&] {
    ++loads;
    return make_block(100, 7);
  });
  BlockPtr b = cache.get_or_load(7, [&] {
    ++loads;
    return make_block(100, 8);
  });
  EXPECT_EQ(loads, 1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->data()[99], 7);
  EXPECT_TRUE(cache.contains(7));
  EXPECT_FALSE(cache.contains(8));
  const CacheCounters c = cache.counters();
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.misses, 1u);
  EXPECT_GE(c.bytes, 100u);  // the block plus a fixed bookkeeping charge
  EXPECT_LT(c.bytes, 100u + 1024u);
}

TEST(BlockCacheTest, EvictsTheLeastRecentlyUsedWithinTheBudget) {
  BlockCache cache(4700, 1);  // one shard: four blocks of 1 KiB and their bookkeeping, not five
  for (uint64_t k = 0; k < 4; ++k) cache.insert(k, make_block(1024, uint8_t(k)));
  ASSERT_NE(cache.find(0), nullptr);  // 0 becomes the most recent; 1 is now the oldest
  cache.insert(4, make_block(1024, 4));
  EXPECT_TRUE(cache.contains(0));
  EXPECT_FALSE(cache.contains(1));
  EXPECT_TRUE(cache.contains(2));
  EXPECT_TRUE(cache.contains(4));
  EXPECT_LE(cache.counters().bytes, 4700u);
}

TEST(BlockCacheTest, ConcurrentMissesLoadOnce) {
  BlockCache cache(1 << 20, 4);
  std::atomic<int> loads{0};
  std::vector<std::thread> threads;
  std::vector<BlockPtr> got(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      got[size_t(t)] = cache.get_or_load(42, [&] {
        ++loads;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return make_block(10, 42);
      });
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(loads.load(), 1);
  for (const BlockPtr& b : got) EXPECT_EQ(b, got[0]);
}

TEST(BlockCacheTest, FailedLoadReachesTheCallerAndCachesNothing) {
  BlockCache cache(1 << 20, 1);
  EXPECT_THROW(cache.get_or_load(5, []() -> BlockPtr { throw std::runtime_error("bad block"); }), std::runtime_error);
  EXPECT_FALSE(cache.contains(5));
  BlockPtr b = cache.get_or_load(5, [] { return make_block(3, 5); });
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->data()[2], 5);
}

TEST(BlockCacheTest, EraseKeepsHeldBlocksValid) {
  BlockCache cache(1 << 20, 1);
  cache.insert(9, make_block(64, 9));
  BlockPtr held = cache.find(9);
  cache.erase(9);
  EXPECT_FALSE(cache.contains(9));
  EXPECT_EQ(held->data()[63], 9);
  cache.erase(12345);  // absent: no-op
}

}  // namespace
}  // namespace sqar::cache
