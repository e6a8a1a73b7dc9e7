// One walk's account of the block lists its regular files claim.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>

#include "reader/image.h"

namespace sqar::reader {

// A regular file's block list follows its inode in the inode table, so the lists of distinct
// inodes are distinct stretches of that table and together hold no more bytes than it does. A
// crafted image can let each file's list run on over the next files' inodes and lists instead:
// 40 files claiming 2^25 blocks each over one real list of 128 MB kept `info` reading for 104 s
// from a 544 KB image, and every command that reads lists pays the same. A walk hands each
// regular file it meets to count(); once the long lists claim more than the table holds, the
// walk ends. Lists shorter than kLongList blocks are left out: together they cost no more than
// a fixed multiple of the entries that name them. Single-threaded, like its walk.
class BlockListBudget {
 public:
  // Throws sqar::Error naming the image and the file (path_of(), called only then) when the
  // long lists met so far, this one included, claim more bytes than the inode table holds. The
  // table's size is learned (by decoding it once) only when two or more lists claim more than
  // kCheckAbove.
  void count(Image& image, const Inode& file, const std::function<std::string()>& path_of);

 private:
  static constexpr uint64_t kLongList = 1024;
  static constexpr uint64_t kCheckAbove = uint64_t(64) << 20;

  std::unordered_set<InodeRef> counted_;  // hard links name one list
  uint64_t claimed_ = 0;
};

}  // namespace sqar::reader
