#include "reader/block_list_budget.h"

#include "common/error.h"

namespace sqar::reader {

void BlockListBudget::count(Image& image, const Inode& file, const std::function<std::string()>& path_of) {
  if (!file.is_regular()) return;
  const uint64_t blocks = image.block_count(file);
  if (blocks < kLongList || !counted_.insert(file.ref).second) return;
  claimed_ += blocks * sizeof(uint32_t);
  if (claimed_ <= kCheckAbove || counted_.size() < 2) return;  // one list cannot overlap another
  const uint64_t table = image.inode_table_bytes();
  if (claimed_ > table) {
    const std::string path = path_of();
    throw Error(image.path() + ": " + (path.empty() ? "." : path) + ": block lists overlap: files claim " +
                std::to_string(claimed_) + " bytes of block lists in an inode table of " + std::to_string(table) +
                " bytes");
  }
}

}  // namespace sqar::reader
