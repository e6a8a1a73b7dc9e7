// Content identity for dedup: whole files by (size, XXH3-128), fragment tails by (length, XXH3-128).
// Decisions are made in image order by one thread, so the first file of a content always owns
// the data and the output does not depend on thread timing.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "common/hash.h"
#include "dedup/content_key.h"

namespace sqar {

class DedupIndex {
 public:
  // Sizes the file table for about `files` lookups up front: rehashing while the sequencer
  // (one thread) dedups 10^5 files showed in profiles.
  void reserve(size_t files) { files_.reserve(files); }
  // Returns the earlier file with the same content, or records `file` as its owner.
  std::optional<uint32_t> find_or_add_file(uint64_t size, const Hash128& hash, uint32_t file);
  // Undo a find_or_add_file that recorded `file` (used when --verify-dedup finds a collision).
  void forget_file(uint64_t size, const Hash128& hash);

  struct TailLocation {
    uint32_t fragment;
    uint32_t offset;
  };
  std::optional<TailLocation> find_tail(uint32_t len, const Hash128& hash) const;
  void add_tail(uint32_t len, const Hash128& hash, TailLocation where);

 private:
  std::unordered_map<ContentKey, uint32_t, ContentKeyHasher> files_;
  std::unordered_map<ContentKey, TailLocation, ContentKeyHasher> tails_;
};

}  // namespace sqar
