// One walk's account of the directory listing bytes it reads.
#pragma once
#include <cstdint>
#include <unordered_set>

namespace sqar::reader {

// Every writer gives each directory a stretch of the directory table of its own, so a walk
// that lists each directory once reads each listing byte once: the listing bytes it reads never
// exceed the bytes of the distinct metadata blocks it reads them from. A crafted image can point
// directories at overlapping stretches instead (N directories each listing a suffix of one long
// listing: ~N^2/2 entries from a table of N, 26.5 million entries from a 212 KB image), and
// keying visited directories by where their listing starts does not see it. Walks that list
// every directory hand one ListingBudget to every listing they open. A listing byte read beyond
// the account ends the walk, whatever its layout, after reading about twice the directory table
// at most. (It ends the walk, not one listing: the bytes read first may have been another
// listing's, so which listing overlaps which is not known.) Single-threaded, like its walk.
class ListingBudget {
 public:
  // A metadata block (image-relative position, decompressed size) a listing was read from;
  // blocks are counted once however often they are read again.
  void count_block(uint64_t position, uint32_t size) {
    if (blocks_.insert(position).second) block_bytes_ += size;
  }
  // Listing bytes just read; false once they exceed the blocks they came from.
  bool spend(uint32_t bytes) {
    listing_bytes_ += bytes;
    return !overdrawn();
  }
  bool overdrawn() const { return listing_bytes_ > block_bytes_; }
  uint64_t listing_bytes() const { return listing_bytes_; }
  uint64_t block_bytes() const { return block_bytes_; }

 private:
  std::unordered_set<uint64_t> blocks_;
  uint64_t block_bytes_ = 0;
  uint64_t listing_bytes_ = 0;
};

}  // namespace sqar::reader
