// The middle of the data pipeline: blocks submitted in sequence order are compressed on N
// threads (BlockCompressor) and handed to one writer thread (BlockWriter) in that same order;
// sparse blocks (all zero) skip the compressors.
// At most `max_jobs` blocks are in flight, so a slow codec holds the sequencer back instead of
// letting memory grow.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pipeline/block_compressor.h"
#include "pipeline/block_job.h"
#include "pipeline/block_writer.h"
#include "pipeline/first_error.h"

namespace sqar {

class OrderedCompressor {
 public:
  // Starts `threads` compressors and the writer. A failure in any of them is reported to
  // `errors`, which also wakes this stage when another stage fails.
  OrderedCompressor(const DataOptions& opt, BlockWriter& writer, FirstError& errors, unsigned threads, size_t max_jobs);
  ~OrderedCompressor();  // joins the threads (after close() or a failure)
  OrderedCompressor(const OrderedCompressor&) = delete;
  OrderedCompressor& operator=(const OrderedCompressor&) = delete;

  // Queues the next block; waits while max_jobs are in flight. Throws once the pipeline failed.
  void submit(std::unique_ptr<BlockJob> job);
  // No more blocks: waits until every block is written and the threads have ended, then adds
  // the compressors' counters to `stats`.
  void close(DataStats& stats);

 private:
  void compressor_loop(BlockCompressor& compressor);
  void writer_loop();
  void wake_all();
  void join();

  BlockWriter& writer_;
  FirstError& errors_;
  const size_t max_jobs_;
  static constexpr size_t kSparseRun = 4096;                   // sparse blocks the writer takes at once, at most
  std::vector<std::unique_ptr<BlockCompressor>> compressors_;  // one per compressor thread

  std::mutex mu_;
  std::condition_variable compress_cv_, done_cv_, space_cv_;
  std::deque<std::unique_ptr<BlockJob>> jobs_;  // in sequence order; front is the next to write
  std::deque<BlockJob*> to_compress_;
  bool closed_ = false;
  uint64_t sparse_ = 0;  // blocks of zeros, done in submit (under mu_)
  std::vector<std::thread> threads_;
};

}  // namespace sqar
