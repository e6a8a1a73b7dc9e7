// Where the data pipeline reads file content from when it is not the files on disk the scan
// found: a tar stream's members, kept by the ingest (tarin/content_store.h) until the tree is
// complete and the image order known.
#pragma once
#include <cstdint>

#include "common/hash.h"

namespace sqar {

class ContentSource {
 public:
  virtual ~ContentSource() = default;
  // Copies [offset, offset + len) of the regular file `node` (a Tree node index) to `out`.
  // Called from several reader threads at once. Returns 0 or an errno value.
  virtual int read(uint32_t node, uint64_t offset, uint64_t len, uint8_t* out) const = 0;
  // Whether [offset, offset + len) of the node lies wholly in a hole (a sparse tar member's
  // zeros): the pipeline then stores sparse blocks without asking read() for a buffer of zeros
  // and scanning it, so a hole costs per block what its block list costs, not per byte.
  virtual bool range_is_hole(uint32_t, uint64_t, uint64_t) const { return false; }
  // The content hash of the node's whole content, computed while it came in: the pipeline takes
  // it instead of hashing the content a second time.
  virtual Hash128 hash(uint32_t node) const = 0;
  // Byte comparison of two files' content (--verify-dedup), through read() a piece at a time.
  virtual bool identical(uint32_t a, uint32_t b, uint64_t size) const;
};

}  // namespace sqar
