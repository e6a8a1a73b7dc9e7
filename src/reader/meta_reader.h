// Sequential reads through a chain of metadata blocks (inode and directory tables, xattrs).
//
// Structures in those tables may straddle 8 KiB block boundaries; the reader follows the
// chain block by block through the shared metadata cache. Error messages name what is
// being read and where it started, formatted only when something is wrong.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "common/endian.h"
#include "format/squashfs.h"
#include "reader/image_impl.h"
#include "reader/listing_budget.h"

namespace sqar::reader {

class MetaReader {
 public:
  // block_pos is image-relative; offset is inside the decompressed block.
  MetaReader(ImageImpl& image, uint64_t block_pos, uint32_t offset, const char* what)
      : img_(image), pos_(block_pos), off_(offset), what_(what), start_pos_(block_pos), start_off_(offset) {}

  // Counts every block this reader loads into `budget` (a walk's directory listings).
  void count_blocks_in(ListingBudget* budget) { budget_ = budget; }

  void read(void* dst, size_t n) {
    uint8_t* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (!cur_) load();
      if (off_ > cur_->size) fail("offset " + std::to_string(off_) + " is past the end of its metadata block");
      if (off_ == cur_->size) {
        next_block();
        continue;
      }
      size_t take = std::min<size_t>(n, cur_->size - off_);
      std::memcpy(out, cur_->data() + off_, take);
      out += take;
      off_ += uint32_t(take);
      n -= take;
    }
  }
  void skip(size_t n) {
    while (n > 0) {
      if (!cur_) load();
      if (off_ >= cur_->size) {
        if (off_ > cur_->size) fail("offset is past the end of its metadata block");
        next_block();
        continue;
      }
      size_t take = std::min<size_t>(n, cur_->size - off_);
      off_ += uint32_t(take);
      n -= take;
    }
  }
  uint16_t u16() {
    uint8_t b[2];
    read(b, 2);
    return load_le16(b);
  }
  uint32_t u32() {
    uint8_t b[4];
    read(b, 4);
    return load_le32(b);
  }
  uint64_t u64() {
    uint8_t b[8];
    read(b, 8);
    return load_le64(b);
  }

  // Drops the block held (it is fetched again from the cache on the next read).
  void release() { cur_.reset(); }

  // Current position, normalised so that the offset lies inside a block.
  uint64_t block_pos() {
    normalise();
    return pos_;
  }
  uint32_t offset() {
    normalise();
    return off_;
  }

  [[noreturn]] void fail(const std::string& why) const {
    img_.fail(std::string(what_) + " at " + hex(start_pos_) + "+" + std::to_string(start_off_) + ": " + why);
  }

 private:
  void next_block() {
    if (cur_->next >= img_.super().bytes_used) fail("runs past the end of the image");
    pos_ = cur_->next;
    off_ = 0;
    load();
  }
  void load() {
    cur_ = img_.meta_block(pos_);
    if (budget_) budget_->count_block(pos_, uint32_t(cur_->size));
  }
  void normalise() {
    if (!cur_) load();
    if (off_ == cur_->size && cur_->next < img_.super().bytes_used) next_block();
  }

  ImageImpl& img_;
  uint64_t pos_;
  uint32_t off_;
  cache::BlockPtr cur_;
  const char* what_;
  uint64_t start_pos_;
  uint32_t start_off_;
  ListingBudget* budget_ = nullptr;
};

}  // namespace sqar::reader
