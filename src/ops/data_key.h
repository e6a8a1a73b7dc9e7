// The identity of a regular file's stored data: where its blocks start, their size words and
// its tail fragment. Two inodes with the same key share their data (dedup), which `info`
// counts as savings and `verify` uses to check duplicates that the manifest lists only once.
// The size words are kept as their XXH3-128, read from the image a slice at a time, so a key
// is small whatever number of blocks the file claims.
#pragma once
#include <cstdint>
#include <tuple>

#include "common/hash.h"
#include "reader/image.h"

namespace sqar::ops {

struct DataKey {
  uint64_t blocks_start = 0;
  uint64_t sizes_low = 0, sizes_high = 0;  // XXH3-128 of the size words
  uint32_t frag = 0, frag_offset = 0;
  uint64_t size = 0;
  bool stores_data = false;  // a tail fragment or a block that is not sparse

  DataKey(reader::Image& image, const reader::Inode& ino)
      : blocks_start(ino.blocks_start), frag(ino.fragment_index), frag_offset(ino.fragment_offset), size(ino.size) {
    StreamHasher h;
    stores_data = frag != 0xFFFFFFFF;
    image.for_each_block_slice(ino, [&](const uint32_t* words, const uint64_t*, size_t n) {
      h.update(words, n * sizeof(uint32_t));
      for (size_t i = 0; i < n && !stores_data; ++i) stores_data = words[i] != 0;
    });
    const Hash128 d = h.digest();
    sizes_low = d.low;
    sizes_high = d.high;
  }
  bool operator<(const DataKey& o) const {
    return std::tie(blocks_start, frag, frag_offset, size, sizes_low, sizes_high) <
           std::tie(o.blocks_start, o.frag, o.frag_offset, o.size, o.sizes_low, o.sizes_high);
  }
};

// XXH3-128 of a data key: a table keyed by it holds 16 bytes per stored content instead of a
// copy of its block list.
inline Hash128 fingerprint(const DataKey& k) {
  StreamHasher h;
  const uint64_t head[] = {k.blocks_start, k.size, uint64_t(k.frag) << 32 | k.frag_offset};
  h.update(head, sizeof head);
  const uint64_t sizes[] = {k.sizes_low, k.sizes_high};
  h.update(sizes, sizeof sizes);
  return h.digest();
}

}  // namespace sqar::ops
