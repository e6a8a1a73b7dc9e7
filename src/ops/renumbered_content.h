// A ContentSource read under other node numbers: `append --tar` joins the tar stream's tree
// into the union with the image's, so the pipeline asks for union nodes while the stream's
// ContentStore knows its own tree's.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/content_source.h"

namespace sqar::ops {

class RenumberedContent : public ContentSource {
 public:
  // `inner` outlives this. `node_map[n]` is the inner node of union node n.
  RenumberedContent(const ContentSource& inner, std::vector<uint32_t> node_map)
      : inner_(inner), map_(std::move(node_map)) {}

  int read(uint32_t node, uint64_t offset, uint64_t len, uint8_t* out) const override {
    return inner_.read(map_.at(node), offset, len, out);
  }
  Hash128 hash(uint32_t node) const override { return inner_.hash(map_.at(node)); }

 private:
  const ContentSource& inner_;
  std::vector<uint32_t> map_;
};

}  // namespace sqar::ops
