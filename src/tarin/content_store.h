// The content of a tar stream's regular members, kept from the pass that reads the stream to
// the data pipeline, which needs the whole tree (and so the end of the stream) before it can
// write in image order.
//
// Each member is hashed (XXH3-128) as it streams in. Content already stored is not stored
// again: the member is rolled back and shares the earlier one. What remains sits in memory up
// to a limit, then in an unlinked scratch file beside the image. Holes of sparse members are
// not stored at all: a member is a list of data extents, and reads fill the gaps with zeros.
// Zeros written out in full are not stored either: each 64 KiB of a member (by offset) that a
// data block holds only zeros of is left a gap, so a database file's empty pages or a disk
// image cost neither memory nor scratch space (kept, 8 GiB of zeros would need 8 GiB of it).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/content_hash.h"
#include "common/hash.h"
#include "pipeline/content_source.h"

namespace sqar {

class ScratchFile;

class ContentStore final : public ContentSource {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // `scratch_dir`: where the spill file is made once `memory_limit` bytes are held.
  // `keep_duplicates`: store every member, even content already held (--verify-dedup, which
  // compares the bytes of files before they share data, needs both copies).
  ContentStore(std::string scratch_dir, uint64_t memory_limit, bool keep_duplicates);
  ~ContentStore() override;
  ContentStore(const ContentStore&) = delete;
  ContentStore& operator=(const ContentStore&) = delete;

  // One member: begin(), add() for each data extent in increasing offset order (the gaps are
  // holes), finish() with its size. Returns the content's id. Throws sqar::Error (naming the
  // scratch file) when spilling fails.
  void begin();
  void add(uint64_t offset, const uint8_t* data, size_t len);
  uint32_t finish(uint64_t size);
  // After the stream: tree node `node` (a regular file) has content `id`. The pipeline reads
  // by node. Call seal() before the first read.
  void bind(uint32_t node, uint32_t id);
  void seal();

  int read(uint32_t node, uint64_t offset, uint64_t len, uint8_t* out) const override;
  bool range_is_hole(uint32_t node, uint64_t offset, uint64_t len) const override;
  Hash128 hash(uint32_t node) const override { return contents_[content_of(node)].hash; }

  uint64_t memory_bytes() const { return std::min(end_, memory_limit_); }
  uint64_t spilled_bytes() const { return end_ > memory_limit_ ? end_ - memory_limit_ : 0; }
  uint64_t duplicate_members() const { return duplicates_; }

 private:
  struct Extent {
    uint64_t offset;  // in the member
    uint64_t where;   // in the store
    uint64_t len;
  };
  // A contiguous content (no holes; first_extent == kNone) is `size` bytes at `where`; one
  // with holes is the extents [first_extent, first_extent + extent_count), zeros between them.
  struct Content {
    uint64_t size = 0;
    uint64_t where = 0;
    Hash128 hash;
    uint32_t first_extent = kNone;
    uint32_t extent_count = 0;
  };

  uint32_t content_of(uint32_t node) const { return node < node_content_.size() ? node_content_[node] : kNone; }
  void append(const uint8_t* p, size_t len);
  void keep(uint64_t offset, const uint8_t* data, size_t len);  // one data extent of the member
  void flush_spill();
  void read_store(uint64_t where, uint8_t* out, size_t len) const;
  void hash_zeros(uint64_t len);

  const std::string scratch_dir_;
  const uint64_t memory_limit_;
  const bool keep_duplicates_;
  std::vector<std::unique_ptr<uint8_t[]>> chunks_;  // the first memory_limit_ bytes of the store
  std::unique_ptr<ScratchFile> spill_;              // the rest, at (where - memory_limit_)
  std::vector<uint8_t> spill_buf_;                  // not yet written, from spill_buf_at_
  uint64_t spill_buf_at_ = 0;
  uint64_t end_ = 0;  // store bytes in use

  std::vector<Content> contents_;
  std::vector<Extent> extents_;
  std::unordered_map<Hash128, uint32_t, Hash128Hasher> by_hash_;
  std::vector<uint32_t> node_content_;
  uint64_t duplicates_ = 0;

  // The member being added.
  ContentHasher hasher_;
  uint64_t member_start_ = 0;  // end_ when it began
  uint64_t member_pos_ = 0;    // bytes of it seen (data and holes)
  std::vector<Extent> member_extents_;
};

}  // namespace sqar
