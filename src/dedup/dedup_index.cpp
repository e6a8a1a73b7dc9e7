#include "dedup/dedup_index.h"

namespace sqar {

std::optional<uint32_t> DedupIndex::find_or_add_file(uint64_t size, const Hash128& hash, uint32_t file) {
  auto [it, inserted] = files_.try_emplace(ContentKey{size, hash}, file);
  if (inserted) return std::nullopt;
  return it->second;
}

void DedupIndex::forget_file(uint64_t size, const Hash128& hash) { files_.erase(ContentKey{size, hash}); }

std::optional<DedupIndex::TailLocation> DedupIndex::find_tail(uint32_t len, const Hash128& hash) const {
  auto it = tails_.find(ContentKey{len, hash});
  if (it == tails_.end()) return std::nullopt;
  return it->second;
}

void DedupIndex::add_tail(uint32_t len, const Hash128& hash, TailLocation where) {
  tails_.try_emplace(ContentKey{len, hash}, where);
}

}  // namespace sqar
