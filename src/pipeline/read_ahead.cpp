#include "pipeline/read_ahead.h"

#include <algorithm>
#include <array>

namespace sqar {

ReadAhead::ReadAhead(UnitReader& units, size_t total_units, FirstError& errors, size_t window, uint64_t byte_budget)
    : units_(units),
      total_units_(total_units),
      errors_(errors),
      window_(window),
      byte_budget_(byte_budget),
      slots_(window) {
  errors_.on_failure([this] { wake_all(); });
}

ReadAhead::~ReadAhead() {
  // Readers end when every unit is claimed or the pipeline failed; a sequencer that stops early
  // without a failure leaves them waiting for room, so they are woken to see the end.
  {
    std::lock_guard lk(mu_);
    next_unit_ = total_units_;
  }
  wake_all();
  for (auto& t : threads_) t.join();
}

void ReadAhead::start(unsigned threads) {
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { errors_.guard([this] { reader_loop(); }); });
}

void ReadAhead::wake_all() {
  { std::lock_guard lk(mu_); }
  read_cv_.notify_all();
  ready_cv_.notify_all();
}

// Under mu_: may a reader claim another batch?
bool ReadAhead::room_to_read() const {
  const size_t room = consumed_ + window_ - next_unit_;
  const size_t want = std::min(kBatchUnits, total_units_ - next_unit_);
  return room >= want && (bytes_in_flight_ == 0 || bytes_in_flight_ + kBatchBytes <= byte_budget_);
}

void ReadAhead::reader_loop() {
  DirectoryHandle dir;
  std::vector<size_t> batch;
  std::array<SourceRead, kBatchUnits> pending;
  std::array<ReadSlot*, kBatchUnits> pending_slots{};
  for (;;) {
    batch.clear();
    {
      std::unique_lock lk(mu_);
      ++readers_waiting_;
      read_cv_.wait(lk, [&] { return errors_.failed() || next_unit_ >= total_units_ || room_to_read(); });
      --readers_waiting_;
      if (errors_.failed() || next_unit_ >= total_units_) return;
      uint64_t bytes = 0;
      while (next_unit_ < total_units_ && next_unit_ < consumed_ + window_ && batch.size() < kBatchUnits &&
             bytes < kBatchBytes && (bytes_in_flight_ == 0 || bytes_in_flight_ < byte_budget_)) {
        const size_t i = next_unit_++;
        ReadSlot& s = slots_[i % window_];
        s.unit = units_.next_unit();
        bytes += s.unit.buffered_bytes();
        bytes_in_flight_ += s.unit.buffered_bytes();
        batch.push_back(i);
      }
    }
    // Start every read of the batch, then wait for those whose data was not cached: their I/O
    // runs side by side (SourceRead).
    size_t npending = 0;
    for (size_t i : batch) {
      ReadSlot& s = slots_[i % window_];
      s.changed.clear();
      s.err = units_.start_read(dir, s, pending[npending]);
      if (s.err == SourceRead::kReadPending)
        pending_slots[npending++] = &s;
      else
        s.ready.store(true);
    }
    for (size_t k = 0; k < npending; ++k) {
      ReadSlot& s = *pending_slots[k];
      s.err = pending[k].finish(s.data, s.changed);
      s.ready.store(true);
    }
    // Wake the sequencer once per batch, and only when it sleeps on a unit of this batch. Both
    // sides store, then load the other's flag (sequentially consistent), so one of them always
    // sees the other: the sequencer finds the unit ready, or this reader finds it waiting.
    const size_t waits_for = sequencer_waits_for_.load();
    if (waits_for >= batch.front() && waits_for <= batch.back()) {
      { std::lock_guard lk(mu_); }
      ready_cv_.notify_one();
    }
  }
}

ReadSlot* ReadAhead::wait(size_t i) {
  ReadSlot& s = slots_[i % window_];
  if (!s.ready.load(std::memory_order_acquire)) {
    std::unique_lock lk(mu_);
    sequencer_waits_for_.store(i);
    ready_cv_.wait(lk, [&] { return errors_.failed() || s.ready.load(); });
    sequencer_waits_for_.store(kNobody);
  }
  return errors_.failed() ? nullptr : &s;
}

void ReadAhead::release(size_t i) {
  ReadSlot& s = slots_[i % window_];
  if (s.data.capacity() > kSlotKeepBytes) SourceBytes().swap(s.data);
  bool wake;
  {
    std::lock_guard lk(mu_);
    s.ready = false;
    consumed_ = i + 1;
    bytes_in_flight_ -= s.unit.buffered_bytes();
    wake = readers_waiting_ > 0 && next_unit_ < total_units_ && room_to_read();
  }
  if (wake) read_cv_.notify_all();
}

}  // namespace sqar
