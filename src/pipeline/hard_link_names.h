// The other names of hard-linked files, for reading a file through one of them when the name
// it is read through vanished after the scan: the inode lives on under its other names, which
// must not be lost with the one that went.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "scan/tree.h"

namespace sqar {

class HardLinkNames {
 public:
  // Collects the entries that link to a regular file's inode owner. A tree without hard-linked
  // files costs one pass over Tree::files.
  explicit HardLinkNames(const Tree& tree);

  // The entries (not omitted) that are hard links to the inode owner `node`, in tree order; null
  // when there are none.
  const std::vector<uint32_t>* of(uint32_t node) const {
    if (links_.empty()) return nullptr;
    const auto it = links_.find(node);
    return it == links_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<uint32_t, std::vector<uint32_t>> links_;
};

// Makes the hard link `link` own the inode of file `file` in place of the entry the scan found
// first, whose name is gone: `link` takes its attributes, size, xattrs and file index, the
// other links (`links`, HardLinkNames::of the former owner) point at `link`, and the former
// owner is left out of the image.
void move_inode_to_link(Tree& tree, uint32_t file, uint32_t link, const std::vector<uint32_t>& links);

}  // namespace sqar
