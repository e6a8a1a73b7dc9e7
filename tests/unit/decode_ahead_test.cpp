// DecodeAheadQueue: items and their blocks come out in push order whatever the thread count
// and however long each block takes; errors reach the consumer at their block; stopping early
// never hangs.
#include "ops/decode_ahead.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sqar::ops {
namespace {

constexpr size_t kBlock = 64;

struct Item {
  int id = 0;
  uint64_t blocks = 0;
};

// Block `index` of item `id`: a fixed pattern, after a delay that varies from block to block
// so that workers finish out of order.
DecodedBlock fill(const Item& it, uint64_t index, uint8_t* out) {
  std::this_thread::sleep_for(std::chrono::microseconds((it.id * 7 + index * 13) % 5 * 10));
  if (it.id == 3 && index == 1) return {0, true};  // a hole
  const size_t len = index + 1 == it.blocks ? 10 + size_t(it.id) % 50 : kBlock;
  for (size_t i = 0; i < len; ++i) out[i] = uint8_t(it.id * 31 + index * 7 + i);
  return {len, false};
}

std::vector<Item> items() {
  std::vector<Item> v;
  for (int id = 0; id < 200; ++id) v.push_back({id, uint64_t(id % 7 == 0 ? 0 : id % 5 == 0 ? 40 : id % 3 + 1)});
  return v;
}

// What the consumer sees, as one string: item ids, then each block's length and bytes.
std::string consume(unsigned threads, size_t slots, size_t max_items) {
  DecodeAheadQueue<Item> q(kBlock, threads, slots, max_items, fill);
  std::thread producer([&] {
    for (const Item& it : items())
      if (!q.push(it, it.blocks)) return;
    q.close();
  });
  std::string seen;
  while (Item* it = q.front()) {
    seen += "item " + std::to_string(it->id) + ":";
    for (uint64_t i = 0; i < it->blocks; ++i) {
      auto [data, block] = q.next_block();
      seen += std::to_string(block.len) + (block.zeros ? "z" : "") + ",";
      if (!block.zeros) seen.append(reinterpret_cast<const char*>(data), block.len);
    }
    q.pop();
  }
  producer.join();
  return seen;
}

TEST(DecodeAhead, SameSequenceForAnyThreadCount) {
  const std::string want = consume(0, 1, 1);
  // The expected content, built without the queue.
  std::string direct;
  std::vector<uint8_t> buf(kBlock);
  for (const Item& it : items()) {
    direct += "item " + std::to_string(it.id) + ":";
    for (uint64_t i = 0; i < it.blocks; ++i) {
      DecodedBlock b = fill(it, i, buf.data());
      direct += std::to_string(b.len) + (b.zeros ? "z" : "") + ",";
      if (!b.zeros) direct.append(reinterpret_cast<const char*>(buf.data()), b.len);
    }
  }
  EXPECT_EQ(want, direct);
  for (unsigned threads : {1u, 3u, 8u})
    for (size_t slots : {1u, 5u, 64u})
      for (size_t max_items : {1u, 4096u})
        EXPECT_EQ(consume(threads, slots, max_items), want)
            << threads << " threads, " << slots << " slots, " << max_items << " items";
}

TEST(DecodeAhead, ErrorReachesTheConsumerAtItsBlock) {
  for (unsigned threads : {0u, 1u, 4u}) {
    DecodeAheadQueue<Item> q(kBlock, threads, 4, 16, [](const Item& it, uint64_t index, uint8_t* out) {
      if (it.id == 5 && index == 2) throw std::runtime_error("damaged block 2 of item 5");
      return fill(it, index, out);
    });
    std::thread producer([&] {
      for (int id = 0; id < 50; ++id)
        if (!q.push({id, 4}, 4)) return;
      q.close();
    });
    int last_item = -1;
    uint64_t last_block = 0;
    try {
      while (Item* it = q.front()) {
        last_item = it->id;
        for (last_block = 0; last_block < it->blocks; ++last_block) q.next_block();
        q.pop();
      }
      ADD_FAILURE() << "no error with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "damaged block 2 of item 5");
      EXPECT_EQ(last_item, 5);
      EXPECT_EQ(last_block, 2u);
    }
    q.stop();  // the producer may be waiting for room
    producer.join();
  }
}

TEST(DecodeAhead, ProducerErrorComesAfterTheItemsBeforeIt) {
  for (unsigned threads : {0u, 2u}) {
    DecodeAheadQueue<Item> q(kBlock, threads, 4, 3, fill);
    std::thread producer([&] {
      for (int id = 0; id < 10; ++id)
        if (!q.push({id, 2}, 2)) return;
      q.close(std::make_exception_ptr(std::runtime_error("damaged listing after item 9")));
    });
    int items = 0;
    try {
      while (Item* it = q.front()) {
        EXPECT_EQ(it->id, items);
        for (uint64_t i = 0; i < it->blocks; ++i) q.next_block();
        q.pop();
        ++items;
      }
      ADD_FAILURE() << "the producer's error was lost";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "damaged listing after item 9");
    }
    EXPECT_EQ(items, 10);
    producer.join();
  }
}

// Items weighing 40 (the bytes of their paths) against a bound of 100: however far the
// consumer lags, the producer never gets more than the bound plus one item ahead; one item
// heavier than the whole bound still passes when the queue is empty.
TEST(DecodeAhead, QueuedWeightStaysBounded) {
  DecodeAheadQueue<Item> q(kBlock, 2, 4, /*max_items=*/1000, fill, /*max_weight=*/100);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (int id = 0; id < 50; ++id)
      if (!q.push(Item{id, 0}, 0, id == 25 ? 500 : 40))
        return;
      else
        pushed.fetch_add(1);
    q.close();
  });
  int popped = 0;
  while (Item* it = q.front()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a slow consumer
    // Queued: at most 100 / 40 + 1 = 3 items of 40 (the front one included).
    EXPECT_LE(pushed.load() - popped, 3) << "at item " << it->id;
    q.pop();
    ++popped;
  }
  producer.join();
  EXPECT_EQ(popped, 50);
}

TEST(DecodeAhead, ConsumerStoppingEarlyEndsEverything) {
  for (unsigned threads : {0u, 2u, 8u}) {
    auto q = std::make_unique<DecodeAheadQueue<Item>>(kBlock, threads, 3, 2, fill);
    bool producer_gave_up = false;
    std::thread producer([&] {
      for (int id = 0; id < 100000; ++id)
        if (!q->push({id, 3}, 3)) {
          producer_gave_up = true;
          return;
        }
      q->close();
    });
    Item* it = q->front();
    ASSERT_NE(it, nullptr);
    q->next_block();  // take one block, then leave with the rest in flight
    q->stop();
    producer.join();
    EXPECT_TRUE(producer_gave_up);
    q.reset();  // joins the workers
  }
}

}  // namespace
}  // namespace sqar::ops
