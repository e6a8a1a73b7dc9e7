// A queue of items in a fixed order whose data blocks are decoded ahead, on worker threads,
// of the one consumer that takes the items and their blocks in that order.
//
// One producer pushes items (and how many blocks each carries); the workers decode blocks
// into a ring of `slots` buffers, block g into slot g % slots once block g - slots has been
// taken; the consumer takes each item, then each of its blocks, in push order. What the
// consumer sees therefore never depends on the thread count, and memory is bounded: `slots`
// blocks, at most `max_items` items queued, no new item while 2 x `slots` blocks wait, and
// none while the items queued weigh `max_weight` (their paths: a crafted deep image names
// entries by paths of megabytes) unless the queue is empty.
// With no worker thread the consumer decodes each block itself when it takes it.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace sqar::ops {

struct DecodedBlock {
  size_t len = 0;      // bytes of content the block holds (0: the content ended early)
  bool zeros = false;  // len zero bytes (a hole), nothing was written to the buffer
};

template <class Item>
class DecodeAheadQueue {
 public:
  // Decodes block `index` of `item` into `out` (block_size bytes). May throw: the error is
  // rethrown to the consumer when it takes that block.
  using Decode = std::function<DecodedBlock(const Item& item, uint64_t index, uint8_t* out)>;

  DecodeAheadQueue(size_t block_size, unsigned threads, size_t slots, size_t max_items, Decode decode,
                   size_t max_weight = SIZE_MAX)
      : bs_(block_size),
        slots_(slots < 1 ? 1 : slots),
        max_items_(max_items < 1 ? 1 : max_items),
        max_weight_(max_weight),
        decode_(std::move(decode)),
        ring_(slots_),
        bytes_(slots_ * block_size) {
    for (unsigned t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
  }
  // Stops the producer and the workers (an error on the consumer's side ends everything).
  ~DecodeAheadQueue() {
    stop();
    for (auto& t : workers_) t.join();
  }
  DecodeAheadQueue(const DecodeAheadQueue&) = delete;
  DecodeAheadQueue& operator=(const DecodeAheadQueue&) = delete;

  // Producer: queues an item with `blocks` blocks to decode, weighing `weight` (the bytes it
  // holds). Waits for room; false once the queue was stopped (the producer should give up).
  bool push(Item item, uint64_t blocks, size_t weight = 0) {
    std::unique_lock lock(mu_);
    const bool room = q_.size() < max_items_ && planned_ - taken_ < 2 * slots_ &&
                      (q_.empty() || weight <= max_weight_ - std::min(weight_, max_weight_));
    if (!stopped_ && !room) {
      // Full: wait until half of it was taken, so that producer and consumer do not wake
      // each other for every item.
      producer_waiting_ = true;
      item_ready_.notify_one();
      room_.wait(lock, [&] { return stopped_ || has_room_again(); });
      producer_waiting_ = false;
    }
    if (stopped_) return false;
    q_.push_back({std::move(item), blocks, planned_, weight});
    planned_ += blocks;
    weight_ += weight;
    const bool wake = consumer_waiting_ && worth_waking_consumer();
    lock.unlock();
    if (wake) item_ready_.notify_one();
    if (blocks > 1)
      work_ready_.notify_all();
    else if (blocks)
      work_ready_.notify_one();
    return true;
  }
  // Producer: no more items. With an error, the consumer gets it after the items before it.
  void close(std::exception_ptr error = nullptr) {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      error_ = std::move(error);
    }
    item_ready_.notify_all();
    work_ready_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    room_.notify_all();
    item_ready_.notify_all();
    work_ready_.notify_all();
    block_ready_.notify_all();
  }

  // Consumer: the next item, nullptr once the producer closed the queue and all were taken.
  // Stays valid until pop(). Rethrows the producer's error once the items before it were taken.
  Item* front() {
    std::unique_lock lock(mu_);
    if (q_.empty() && !stopped_ && !closed_) {
      // Empty: wait for a batch of items rather than waking for each one.
      consumer_waiting_ = true;
      item_ready_.wait(lock, [&] { return stopped_ || closed_ || worth_waking_consumer(); });
      consumer_waiting_ = false;
    }
    if (q_.empty() && error_) std::rethrow_exception(error_);
    return q_.empty() ? nullptr : &q_.front().item;
  }
  // Consumer: the front item's next block, in order; its bytes stay valid until the next call
  // to next_block() or pop(). Rethrows the error its decoding threw.
  std::pair<const uint8_t*, DecodedBlock> next_block() {
    release_taken();
    std::unique_lock lock(mu_);
    const Entry& e = q_.front();
    const uint64_t job = e.first_job + front_taken_++;
    uint8_t* out = bytes_.data() + (job % slots_) * bs_;
    Slot& s = ring_[job % slots_];
    if (workers_.empty()) {
      lock.unlock();
      s = Slot{};
      try {
        s.block = decode_(e.item, job - e.first_job, out);
      } catch (...) {
        s.error = std::current_exception();
      }
      s.job = job;
      lock.lock();
    }
    block_ready_.wait(lock, [&] { return s.job == job || stopped_; });
    if (s.job != job) throw std::runtime_error("decoding stopped");
    holding_ = true;
    if (s.error) std::rethrow_exception(s.error);
    return {out, s.block};
  }
  // Consumer: done with the front item; blocks of it not taken are waited for and dropped.
  void pop() {
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (front_taken_ >= q_.front().blocks) break;
      }
      try {
        next_block();
      } catch (...) {
      }
    }
    release_taken();
    bool wake_producer;
    {
      std::lock_guard lock(mu_);
      weight_ -= q_.front().weight;
      q_.pop_front();
      ++popped_;
      front_taken_ = 0;
      wake_producer = producer_waiting_ && has_room_again();
    }
    if (wake_producer) room_.notify_one();
  }

 private:
  struct Entry {
    Item item;
    uint64_t blocks;
    uint64_t first_job;  // number of its first block in the whole sequence
    size_t weight;
  };
  struct Slot {
    uint64_t job = UINT64_MAX;  // the block held, once decoded
    DecodedBlock block;
    std::exception_ptr error;
  };

  static constexpr size_t kBatch = 32;
  bool worth_waking_consumer() const {
    return q_.size() >= kBatch || (!q_.empty() && (producer_waiting_ || planned_ - taken_ >= slots_));
  }
  bool has_room_again() const {
    return q_.size() <= max_items_ / 2 && planned_ - taken_ <= slots_ && (q_.empty() || weight_ <= max_weight_ / 2);
  }

  // The block handed out last is no longer needed: its slot may take block job + slots.
  void release_taken() {
    if (!holding_) return;
    bool wake_producer, wake_worker;
    {
      std::lock_guard lock(mu_);
      holding_ = false;
      ++taken_;
      wake_producer = producer_waiting_ && has_room_again();
      // One slot came free: a waiting worker can use it if a block is there to claim. Waking
      // one regardless cost a futex call and a context switch per block taken, mostly for
      // nothing on small-file images (99k entries: 7% of the consumer's time in wake-ups).
      wake_worker = idle_workers_ > 0 && claimable();
    }
    if (wake_worker) work_ready_.notify_one();
    if (wake_producer) room_.notify_one();
  }

  // A queued block not yet claimed whose slot is free.
  bool claimable() { return next_claim() && q_[claim_item_ - popped_].first_job + claim_block_ < taken_ + slots_; }

  // Moves the claim cursor to the next block not yet claimed; false when none is queued.
  bool next_claim() {
    if (claim_item_ < popped_) claim_item_ = popped_, claim_block_ = 0;
    while (claim_item_ - popped_ < q_.size() && claim_block_ >= q_[claim_item_ - popped_].blocks)
      ++claim_item_, claim_block_ = 0;
    return claim_item_ - popped_ < q_.size();
  }

  void work() {
    for (;;) {
      std::unique_lock lock(mu_);
      ++idle_workers_;
      work_ready_.wait(lock, [&] {
        if (stopped_) return true;
        if (!next_claim()) return closed_;
        return claimable();
      });
      --idle_workers_;
      if (stopped_ || !next_claim()) return;
      // The entry cannot be popped meanwhile: the consumer waits for this block first.
      const Entry& e = q_[claim_item_ - popped_];
      const uint64_t index = claim_block_++;
      const uint64_t job = e.first_job + index;
      lock.unlock();
      Slot result;
      result.job = job;
      try {
        result.block = decode_(e.item, index, bytes_.data() + (job % slots_) * bs_);
      } catch (...) {
        result.error = std::current_exception();
      }
      lock.lock();
      ring_[job % slots_] = std::move(result);
      lock.unlock();
      block_ready_.notify_one();  // only the consumer waits for blocks
    }
  }

  const size_t bs_;
  const size_t slots_;
  const size_t max_items_;
  const size_t max_weight_;
  const Decode decode_;
  std::mutex mu_;
  std::condition_variable room_, item_ready_, work_ready_, block_ready_;
  std::deque<Entry> q_;  // references stay valid across push_back and pop_front
  uint64_t popped_ = 0;  // items popped: the sequence number of q_.front()
  uint64_t planned_ = 0, taken_ = 0;
  size_t weight_ = 0;  // of the items queued
  uint64_t claim_item_ = 0, claim_block_ = 0;
  uint64_t front_taken_ = 0;
  bool holding_ = false;  // consumer side only
  bool producer_waiting_ = false, consumer_waiting_ = false;
  bool closed_ = false, stopped_ = false;
  unsigned idle_workers_ = 0;  // workers waiting for a block to claim
  std::exception_ptr error_;   // the producer's, given to close()
  std::vector<Slot> ring_;
  std::vector<uint8_t> bytes_;
  std::vector<std::thread> workers_;
};

}  // namespace sqar::ops
