#include "reader/walk_guard.h"

#include "common/error.h"

namespace sqar::reader {

void WalkGuard::enter_directory(const Inode& dir, const std::function<std::string()>& path_of) {
  if (dir.dir_file_size <= 3) return;  // an empty listing: nothing to list twice
  const uint64_t start = (uint64_t(dir.dir_block_start) << 16) | dir.dir_offset;
  if (listed_.insert(start).second) return;
  const std::string path = path_of();
  throw Error(image_.path() + ": \"" + (path.empty() ? "." : path) +
              "\": a directory listed twice in the tree (a directory loop, or a directory with two parents)");
}

}  // namespace sqar::reader
