#include "reader/stored_content.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "format/squashfs.h"

namespace sqar::reader {

void hash_stored_content(Image& image, const Inode& ino, uint8_t* buf, std::initializer_list<ContentHasher*> hashers,
                         std::atomic<uint64_t>* bytes_done) {
  const uint64_t bs = image.super().block_size;
  const uint64_t full_blocks = image.block_count(ino);
  for (uint64_t off = 0, index = 0; off < ino.size; ++index) {
    if (index < full_blocks && ino.blocks_loaded && fmt::is_hole_word(image.block_location(ino, index).size_word)) {
      const uint64_t n = std::min(bs, ino.size - off);
      for (ContentHasher* h : hashers)
        if (h) h->update_zeros(n);
      off += n;
      if (bytes_done) bytes_done->fetch_add(n, std::memory_order_relaxed);
      continue;
    }
    const size_t n = image.read_block(ino, index, buf);
    if (n == 0) throw Error("content ends at byte " + std::to_string(off) + " of " + std::to_string(ino.size));
    for (ContentHasher* h : hashers)
      if (h) h->update(buf, n);
    off += n;
    if (bytes_done) bytes_done->fetch_add(n, std::memory_order_relaxed);
  }
}

Hash128 stored_content_hash(Image& image, const Inode& ino, HashScheme scheme) {
  std::vector<uint8_t> block(image.super().block_size);
  ContentHasher hasher(scheme);
  hash_stored_content(image, ino, block.data(), {&hasher});
  return hasher.digest();
}

}  // namespace sqar::reader
