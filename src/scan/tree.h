// The in-memory model of the source tree that `sqar create` packs.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sqar {

constexpr uint32_t kNoNode = UINT32_MAX;

using Xattrs = std::vector<std::pair<std::string, std::string>>;

struct Node {
  std::string name;         // entry name; empty for the root
  std::string source_path;  // where it was found on disk (for reading and for messages)
  uint32_t parent = kNoNode;
  mode_t mode = 0;  // includes S_IFMT
  uint32_t uid = 0, gid = 0;
  int64_t mtime = 0;
  uint64_t size = 0;      // regular files
  uint32_t rdev_major = 0, rdev_minor = 0;
  std::string symlink_target;
  Xattrs xattrs;
  std::vector<uint32_t> children;  // directories: sorted by name (byte order), as SquashFS requires
  uint32_t link_target = kNoNode;  // a hard link: index of the node that owns the inode
  uint32_t link_count = 1;         // owner of a hard-linked inode: entries that name it
  uint32_t file_index = kNoNode;   // regular-file inode owners: index into Tree::files
  bool omitted = false;            // dropped after the scan (unreadable with --skip-unreadable)
};

struct Tree {
  std::vector<Node> nodes;       // nodes[0] is the root directory
  std::vector<uint32_t> files;   // regular-file inode owners in image (depth-first, sorted) order
  uint64_t total_file_bytes = 0;
};

}  // namespace sqar
