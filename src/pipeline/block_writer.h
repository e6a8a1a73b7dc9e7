// The last stage of the data pipeline: appends finished blocks to the image in sequence order
// and records where each one landed. One thread, so the image layout is the sequence order
// whatever the number of compressors.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/block_job.h"
#include "pipeline/data_pipeline.h"

namespace sqar {

class ImageFile;

class BlockWriter {
 public:
  // `files` receive blocks_start, `block_sizes` the data blocks' size words and `fragments`
  // the fragment table entries; none of them is touched by another thread while blocks are
  // written (the sequencer writes other fields of `files`).
  BlockWriter(ImageFile& out, std::vector<FileLocation>& files, std::vector<uint32_t>& block_sizes,
              std::vector<FragmentLocation>& fragments)
      : out_(out), files_(files), block_sizes_(block_sizes), fragments_(fragments) {}

  void write(const BlockJob& job);
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  ImageFile& out_;
  std::vector<FileLocation>& files_;
  std::vector<uint32_t>& block_sizes_;
  std::vector<FragmentLocation>& fragments_;
  uint64_t bytes_written_ = 0;
};

}  // namespace sqar
