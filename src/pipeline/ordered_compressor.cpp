#include "pipeline/ordered_compressor.h"

namespace sqar {

OrderedCompressor::OrderedCompressor(const DataOptions& opt, BlockWriter& writer, FirstError& errors, unsigned threads,
                                     size_t max_jobs)
    : writer_(writer), errors_(errors), max_jobs_(max_jobs) {
  errors_.on_failure([this] { wake_all(); });
  for (unsigned i = 0; i < threads; ++i) compressors_.push_back(std::make_unique<BlockCompressor>(opt));
  for (unsigned i = 0; i < threads; ++i)
    threads_.emplace_back([this, c = compressors_[i].get()] { errors_.guard([this, c] { compressor_loop(*c); }); });
  threads_.emplace_back([this] { errors_.guard([this] { writer_loop(); }); });
}

OrderedCompressor::~OrderedCompressor() {
  {
    std::lock_guard lk(mu_);
    closed_ = true;
  }
  wake_all();
  join();
}

void OrderedCompressor::wake_all() {
  { std::lock_guard lk(mu_); }
  compress_cv_.notify_all();
  done_cv_.notify_all();
  space_cv_.notify_all();
}

void OrderedCompressor::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void OrderedCompressor::submit(std::unique_ptr<BlockJob> job) {
  std::unique_lock lk(mu_);
  // A sparse block holds no buffer: up to kSparseRun of them may wait beyond max_jobs_.
  const size_t capacity = max_jobs_ + (job->sparse ? kSparseRun : 0);
  if (jobs_.size() >= capacity) {
    done_cv_.notify_one();  // the writer may sleep on sparse blocks it was not woken for
    space_cv_.wait(lk, [&] { return errors_.failed() || jobs_.size() < capacity; });
  }
  if (errors_.failed()) {
    lk.unlock();
    errors_.throw_if_failed();
  }
  if (job->sparse) {
    // A block of zeros needs no compressor: it is done as it comes. Nor is the writer woken
    // for it: the run is written when the queue fills (above), when a compressed block is
    // done, or at close. Handing each one to a compressor made a 16 GiB sparse file's build
    // mostly thread switches (131,072 blocks), and waking the writer for each made a 4 TiB
    // sparse tar member's (4 million blocks of 1 MiB) 26 s, two thirds of it in futex calls.
    job->size_word = 0;
    job->done = true;
    ++sparse_;
    jobs_.push_back(std::move(job));
    return;
  }
  to_compress_.push_back(job.get());
  jobs_.push_back(std::move(job));
  lk.unlock();
  compress_cv_.notify_one();
}

void OrderedCompressor::close(DataStats& stats) {
  {
    std::lock_guard lk(mu_);
    closed_ = true;
  }
  compress_cv_.notify_all();
  done_cv_.notify_all();
  join();
  for (const auto& c : compressors_) c->add_stats_to(stats);
  stats.blocks_sparse += sparse_;
}

void OrderedCompressor::compressor_loop(BlockCompressor& compressor) {
  for (;;) {
    BlockJob* job;
    {
      std::unique_lock lk(mu_);
      compress_cv_.wait(lk, [&] { return errors_.failed() || closed_ || !to_compress_.empty(); });
      if (errors_.failed() || to_compress_.empty()) return;
      job = to_compress_.front();
      to_compress_.pop_front();
    }
    compressor.process(*job);
    {
      std::lock_guard lk(mu_);
      job->done = true;
    }
    done_cv_.notify_one();
  }
}

void OrderedCompressor::writer_loop() {
  std::vector<std::unique_ptr<BlockJob>> batch;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      done_cv_.wait(lk, [&] {
        return errors_.failed() || (closed_ && jobs_.empty()) || (!jobs_.empty() && jobs_.front()->done);
      });
      if (errors_.failed() || jobs_.empty()) return;
      // The block to write, and the run of sparse blocks after it: they hold no buffer, so
      // taking them at once costs no memory, and the sequencer is woken once for the run.
      do {
        batch.push_back(std::move(jobs_.front()));
        jobs_.pop_front();
      } while (!jobs_.empty() && jobs_.front()->done && jobs_.front()->sparse && batch.size() < kSparseRun);
    }
    space_cv_.notify_one();
    for (const auto& job : batch) writer_.write(*job);
    batch.clear();
  }
}

}  // namespace sqar
