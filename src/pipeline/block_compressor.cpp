#include "pipeline/block_compressor.h"

#include <cstring>

#include "dedup/reuse_index.h"
#include "format/squashfs.h"
#include "pipeline/data_pipeline.h"
#include "pipeline/incompressible.h"

namespace sqar {

BlockCompressor::BlockCompressor(const DataOptions& opt)
    : opt_(opt), codec_(make_codec(opt.codec)), scratch_(opt.codec.block_size) {}

void BlockCompressor::process(BlockJob& job) {
  // Sparse blocks never come here: OrderedCompressor::submit finishes them.
  const bool from_old = job.reuse_block != kNoReuse;
  if (from_old && copy_from_old(job)) {
    ++(job.is_fragment ? fragments_reused_ : reused_);
    reused_bytes_ += job.len;
  } else {
    if (from_old) ++mismatches_;  // damaged OLD, or a collision: compress as usual
    const uint8_t* src = job.source();
    if (opt_.detect_incompressible && looks_incompressible(src, job.len)) {
      ++incompressible_;
      job.raw = true;
    } else {
      input_ += job.len;
      const size_t n = codec_->compress(src, job.len, scratch_.data(), job.len);
      if (n) {
        ++compressed_;
        job.packed.assign(scratch_.data(), scratch_.data() + n);
        job.size_word = uint32_t(n);
      } else {
        ++raw_;
        job.raw = true;
      }
    }
  }
  if (job.raw) {
    job.packed.clear();
    job.size_word = uint32_t(job.len) | fmt::kDataUncompressed;
  }
}

// Takes OLD's stored block in place of compressing the source when it decodes to exactly those
// bytes; with OLD's settings equal to this build's (ReuseIndex::open) it is then the block a
// fresh build writes. False (the caller compresses) on a read error, damage, a difference, or
// a block the kernel would refuse (an xz dictionary or zstd window larger than it allows:
// another tool's OLD, or a crafted one), which this build never writes.
bool BlockCompressor::copy_from_old(BlockJob& job) {
  const ReuseIndex::Block& b = opt_.reuse->block(job.reuse_block);
  if (!opt_.reuse->read(b, stored_)) return false;
  if (!(b.size_word & fmt::kDataUncompressed) &&
      !block_kernel_refusal(opt_.codec, stored_.data(), stored_.size()).empty())
    return false;
  if (b.size_word & fmt::kDataUncompressed) {
    if (stored_.size() != job.len || std::memcmp(stored_.data(), job.source(), job.len) != 0) return false;
    job.raw = true;  // stored as the source bytes, like a block that does not shrink
    return true;
  }
  const auto n = codec_->decompress(stored_.data(), stored_.size(), scratch_.data(), scratch_.size());
  if (!n || *n != job.len || std::memcmp(scratch_.data(), job.source(), job.len) != 0) return false;
  job.packed.assign(stored_.begin(), stored_.end());
  job.size_word = b.size_word;
  return true;
}

void BlockCompressor::add_stats_to(DataStats& stats) const {
  stats.codec_input_bytes += input_;
  stats.blocks_compressed += compressed_;
  stats.blocks_raw += raw_;
  stats.blocks_incompressible += incompressible_;
  stats.blocks_reused += reused_;
  stats.fragments_reused += fragments_reused_;
  stats.reused_bytes += reused_bytes_;
  stats.reuse_mismatches += mismatches_;
}

}  // namespace sqar
