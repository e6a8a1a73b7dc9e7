// The identity of a regular file's stored data: where its blocks start, their size words and
// its tail fragment. Two inodes with the same key share their data (dedup), which `info`
// counts as savings and `verify` uses to check duplicates that the manifest lists only once.
#pragma once
#include <cstdint>
#include <tuple>
#include <vector>

#include "common/hash.h"
#include "reader/image.h"

namespace sqar::ops {

struct DataKey {
  uint64_t blocks_start = 0;
  std::vector<uint32_t> sizes;
  uint32_t frag = 0, frag_offset = 0;
  uint64_t size = 0;

  explicit DataKey(const reader::Inode& ino)
      : blocks_start(ino.blocks_start), sizes(ino.block_sizes), frag(ino.fragment_index),
        frag_offset(ino.fragment_offset), size(ino.size) {}
  bool operator<(const DataKey& o) const {
    return std::tie(blocks_start, frag, frag_offset, size, sizes) <
           std::tie(o.blocks_start, o.frag, o.frag_offset, o.size, o.sizes);
  }
};

// XXH3-128 of a data key: a table keyed by it holds 16 bytes per stored content instead of a
// copy of its block list.
inline Hash128 fingerprint(const DataKey& k) {
  StreamHasher h;
  const uint64_t head[] = {k.blocks_start, k.size, uint64_t(k.frag) << 32 | k.frag_offset};
  h.update(head, sizeof head);
  h.update(k.sizes.data(), k.sizes.size() * sizeof(uint32_t));
  return h.digest();
}

}  // namespace sqar::ops
