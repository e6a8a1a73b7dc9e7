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
  space_cv_.wait(lk, [&] { return errors_.failed() || jobs_.size() < max_jobs_; });
  if (errors_.failed()) {
    lk.unlock();
    errors_.throw_if_failed();
  }
  if (job->sparse) {
    // A block of zeros needs no compressor: it is done as it comes, and the writer is woken
    // only when it is the block the writer waits for. Handing each one to a compressor made
    // a 16 GiB sparse file's build mostly thread switches (131,072 blocks).
    job->size_word = 0;
    job->done = true;
    ++sparse_;
    const bool next_to_write = jobs_.empty();
    jobs_.push_back(std::move(job));
    lk.unlock();
    if (next_to_write) done_cv_.notify_one();
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
  for (;;) {
    std::unique_ptr<BlockJob> job;
    {
      std::unique_lock lk(mu_);
      done_cv_.wait(lk, [&] {
        return errors_.failed() || (closed_ && jobs_.empty()) || (!jobs_.empty() && jobs_.front()->done);
      });
      if (errors_.failed() || jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    space_cv_.notify_one();
    writer_.write(*job);
  }
}

}  // namespace sqar
