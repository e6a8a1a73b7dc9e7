// A block on its way from the sequencer through a compressor to the writer: one full data block
// of a file, or one fragment block of packed tails.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/source_bytes.h"

namespace sqar {

// Source bytes shared by the jobs cut from one read unit.
using BlockBuffer = std::shared_ptr<SourceBytes>;

constexpr uint32_t kNoReuse = UINT32_MAX;

struct BlockJob {
  // Set by the sequencer.
  bool is_fragment = false;
  uint32_t file = 0;                // file index (data block) ...
  uint32_t index = 0;               // ... block index within the file, or fragment index
  BlockBuffer buf;                  // none for a sparse block of a hole that was not read
  size_t off = 0, len = 0;          // the block's bytes in buf
  bool sparse = false;              // all zero: stored as a hole, nothing written
  uint32_t reuse_block = kNoReuse;  // its counterpart in --reuse OLD (ReuseIndex::block)

  // Set by the compressor.
  bool raw = false;             // stored as the source bytes
  std::vector<uint8_t> packed;  // the stored bytes unless raw or sparse
  uint32_t size_word = 0;       // the block list or fragment table word
  bool done = false;            // the writer may take it (under the queue's lock)

  const uint8_t* source() const { return buf->data() + off; }
  // The bytes the image stores for this block (none when sparse).
  const uint8_t* stored_bytes() const { return raw ? source() : packed.data(); }
  size_t stored_size() const { return sparse ? 0 : raw ? len : packed.size(); }
};

}  // namespace sqar
