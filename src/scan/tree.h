// The in-memory model of the source tree that `sqar create` packs.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sqar {

constexpr uint32_t kNoNode = UINT32_MAX;

using Xattrs = std::vector<std::pair<std::string, std::string>>;

struct Node {
  std::string name;  // entry name; empty for the root
  uint32_t parent = kNoNode;
  uint16_t source = 0;  // which SOURCE argument it came from (see Tree::source_dirs)
  mode_t mode = 0;  // includes S_IFMT
  uint32_t uid = 0, gid = 0;
  int64_t mtime = 0;
  uint64_t size = 0;      // regular files
  uint32_t rdev_major = 0, rdev_minor = 0;
  std::vector<uint32_t> children;  // directories: sorted by name (byte order), as SquashFS requires
  uint32_t link_target = kNoNode;  // a hard link: index of the node that owns the inode
  uint32_t link_count = 1;         // owner of a hard-linked inode: entries that name it
  uint32_t file_index = kNoNode;   // regular-file inode owners: index into Tree::files
  bool omitted = false;            // dropped after the scan (unreadable with --skip-unreadable)
};

// Kept lean: a tree of 10^5..10^7 entries lives in memory for the whole build, so rare
// attributes (symlink targets, xattrs) sit in side tables and paths are derived, not stored.
struct Tree {
  std::vector<Node> nodes;       // nodes[0] is the root directory
  std::vector<std::string> source_dirs;  // per SOURCE: the directory its entries are found in
  std::unordered_map<uint32_t, std::string> symlink_targets;
  std::unordered_map<uint32_t, Xattrs> xattrs;
  std::vector<uint32_t> files;   // regular-file inode owners in image (depth-first, sorted) order
  uint64_t total_file_bytes = 0;

  // The path on disk of a node, for reading and for messages.
  std::string path_of(const Node& n) const {
    if (n.parent == kNoNode) return source_dirs.empty() ? std::string(".") : source_dirs[0];
    if (n.parent == 0) return source_dirs[n.source] + "/" + n.name;
    return path_of(nodes[n.parent]) + "/" + n.name;
  }
  std::string path_of(uint32_t i) const { return path_of(nodes[i]); }
};

}  // namespace sqar
