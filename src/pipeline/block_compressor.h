// The work of one compressor thread: decides how each block is stored and produces its bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "codec/codec.h"
#include "pipeline/block_job.h"

namespace sqar {

struct DataOptions;
struct DataStats;

class BlockCompressor {
 public:
  explicit BlockCompressor(const DataOptions& opt);

  // Fills job.raw, job.packed and job.size_word. In order of preference the block is: copied
  // from --reuse OLD when OLD's block decodes to exactly these bytes; a hole when all zero;
  // stored raw when it looks incompressible or does not shrink; compressed otherwise.
  void process(BlockJob& job);

  // Adds what this compressor did to `stats` (its codec_input_bytes and blocks_* counters).
  void add_stats_to(DataStats& stats) const;

 private:
  bool copy_from_old(BlockJob& job);

  const DataOptions& opt_;
  std::unique_ptr<Codec> codec_;
  // Compressed into one scratch block, keeping only the compressed bytes in the job: many jobs
  // wait for the writer when the codec is slow, and a block-sized buffer each was ~1.6 MiB of
  // peak RSS on the ports set.
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> stored_;  // a block read from --reuse OLD
  uint64_t input_ = 0, compressed_ = 0, raw_ = 0, incompressible_ = 0;
  uint64_t reused_ = 0, fragments_reused_ = 0, reused_bytes_ = 0, mismatches_ = 0;
};

}  // namespace sqar
