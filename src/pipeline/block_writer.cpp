#include "pipeline/block_writer.h"

#include "writer/image_file.h"

namespace sqar {

void BlockWriter::write(const BlockJob& job) {
  const uint64_t pos = out_.position();
  if (job.is_fragment) {
    if (fragments_.size() <= job.index) fragments_.resize(job.index + 1);
    fragments_[job.index] = {pos, job.size_word};
  } else {
    FileLocation& loc = files_[job.file];
    if (job.index == 0) loc.blocks_start = pos;
    const size_t at = size_t(loc.first_block) + job.index;
    if (at >= block_sizes_.size()) block_sizes_.resize(at + 1);  // a file read again (its words go last)
    block_sizes_[at] = job.size_word;
  }
  const size_t n = job.stored_size();
  if (n == 0) return;
  out_.append(job.stored_bytes(), n);
  bytes_written_ += n;
}

}  // namespace sqar
