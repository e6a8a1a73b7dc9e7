// A long block list read a window at a time.
//
// A file's block list is one 32-bit size word per block; block k starts at blocks_start plus
// the stored sizes of blocks 0..k-1, so finding it needs every word before it. Holding the
// decoded list costs 12 bytes per block, and a crafted 0.5 MB image can claim 2^25 sparse
// blocks (400 MB). Instead a checkpoint every kWindow blocks records where decoding resumes
// (24 bytes per 1024 blocks, added only as reads reach them: work in proportion to memory),
// and the last window decoded is kept (12 KiB), so sequential readers decode each word once
// and a random read decodes at most kWindow words.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

namespace sqar::reader {

class BlockIndex {
 public:
  static constexpr uint64_t kWindow = 1024;
  struct Checkpoint {
    uint64_t meta_pos;     // metadata block holding the window's first size word (image-relative)
    uint32_t meta_offset;  // and its offset in the decompressed block
    uint64_t data_pos;     // image-relative start of the window's first block
  };
  explicit BlockIndex(Checkpoint first) { checkpoints.push_back(first); }

  std::mutex mu;                        // guards everything below
  std::vector<Checkpoint> checkpoints;  // [w]: where window w starts (known up to the furthest read)
  uint64_t window = UINT64_MAX;         // the window held in words/starts
  std::vector<uint32_t> words;
  std::vector<uint64_t> starts;
};

}  // namespace sqar::reader
