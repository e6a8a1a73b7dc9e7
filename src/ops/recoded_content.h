// The content of files from input images that merge decodes and compresses again (another
// compressor or block size than the output's): the data pipeline reads them through the
// reader, as it reads a tar stream's members through tarin/content_store.h.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/input_image.h"
#include "pipeline/content_source.h"

namespace sqar::ops {

class RecodedContent : public ContentSource {
 public:
  // `inputs` outlive this. add() maps a node of the tree being written to file `file` of
  // inputs[input].
  explicit RecodedContent(const std::vector<InputImage>& inputs) : inputs_(inputs) {}
  void add(uint32_t node, uint32_t input, uint32_t file);
  bool empty() const { return count_ == 0; }

  int read(uint32_t node, uint64_t offset, uint64_t len, uint8_t* out) const override;
  Hash128 hash(uint32_t node) const override;

 private:
  struct Origin {
    uint32_t input = UINT32_MAX, file = 0;
  };
  const Origin& origin(uint32_t node) const;
  const std::vector<InputImage>& inputs_;
  std::vector<Origin> by_node_;
  size_t count_ = 0;
};

}  // namespace sqar::ops
