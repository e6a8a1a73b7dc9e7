// The in-memory model of the source tree that `sqar create` packs.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scan/chunked_array.h"

namespace sqar {

// "dir/name", without doubling the slash when dir is "/" (a SOURCE directly below the root).
inline std::string join_path(const std::string& dir, std::string_view name) {
  std::string p = dir;
  if (p.empty() || p.back() != '/') p += '/';
  p += name;
  return p;
}

constexpr uint32_t kNoNode = UINT32_MAX;

using Xattrs = std::vector<std::pair<std::string, std::string>>;
// A decoded set shared by every entry that has it: an input image's inodes share their set by
// its index, and merge's union tree shares its inputs' sets rather than copying them.
using SharedXattrs = std::shared_ptr<const Xattrs>;

// The memory a decoded set of xattrs takes: its pairs (as many as the vector has room for)
// and the heap bytes of their strings. Counting only names and values undercounts a set of
// many short names 19 times (9,362 pairs of "user.a" hold 1 MiB).
inline size_t memory_of(const Xattrs& xattrs) {
  constexpr size_t kInPlace = 15;  // libstdc++ keeps shorter strings inside the object
  size_t bytes = xattrs.capacity() * sizeof(Xattrs::value_type);
  for (const auto& [key, value] : xattrs)
    bytes += (key.size() > kInPlace ? key.capacity() + 1 : 0) + (value.size() > kInPlace ? value.capacity() + 1 : 0);
  return bytes;
}

// 56 bytes: one per entry, 10^5..10^7 of them for the whole build.
struct Node {
  // A regular file's size and a directory's child range share their bytes (8 of the 56 per
  // entry, 2 MB on a 270k-entry tree); read the range through Tree::children(), which is empty
  // for anything but a directory.
  union {
    uint64_t size = 0;  // regular files
    // Directories: children are the nodes [first_child, first_child + child_count), sorted by
    // name (byte order) as SquashFS requires. The scan adds a directory's entries contiguously.
    struct {
      uint32_t first_child;
      uint32_t child_count;
    };
  };
  uint32_t name_offset = 0;  // entry name in Tree::names (NUL-terminated); empty for the root
  uint16_t name_length = 0;
  uint16_t source = 0;  // which SOURCE argument it came from (see Tree::source_dirs)
  uint32_t parent = kNoNode;
  mode_t mode = 0;  // includes S_IFMT
  uint32_t uid = 0, gid = 0;
  uint32_t mtime = 0;              // SquashFS stores 32-bit unsigned times; the scan clamps
  uint32_t rdev = 0;               // devices: Linux "new" encoding (fmt::encode_dev)
  uint32_t link_target = kNoNode;  // a hard link: index of the node that owns the inode
  uint32_t link_count = 1;         // owner of a hard-linked inode: entries that name it
  uint32_t file_index = kNoNode;   // regular-file inode owners: index into Tree::files
  bool omitted = false;            // dropped after the scan (unreadable with --skip-unreadable)
  // A directory no source named, only implied by entries below it (a tar's parent with no
  // member of its own, or its root without "./"): its attributes are made up, so a union
  // takes another source's where one names the directory.
  bool implied = false;
};
static_assert(sizeof(Node) == 56, "Node grew: it is multiplied by 10^5..10^7 entries");

// Kept lean: a tree of 10^5..10^7 entries lives in memory for the whole build, so rare
// attributes (symlink targets, xattrs) sit in side tables and paths are derived, not stored.
struct Tree {
  // Chunked, not a vector: growing it never copies, so the scan does not briefly hold the
  // tree twice (that doubled peak RSS on 270k entries); see ChunkedArray for why not a deque.
  ChunkedArray<Node> nodes;  // nodes[0] is the root directory
  std::string names{'\0'};   // all entry names, each followed by a NUL; offset 0 is ""

  std::vector<std::string> source_dirs;  // per SOURCE: the directory its entries are found in
  std::unordered_map<uint32_t, std::string> symlink_targets;
  std::unordered_map<uint32_t, SharedXattrs> xattrs;  // never empty sets
  std::vector<uint32_t> files;                        // regular-file inode owners in image (depth-first, sorted) order
  // Directories that could not be listed (with ScanOptions::skip_unreadable): node and cause.
  // Their entries are unknown, not absent, to a reader that compares the tree.
  std::vector<std::pair<uint32_t, std::string>> unlisted_dirs;
  uint64_t total_file_bytes = 0;

  // A plain index range rather than std::views::iota, which clang 14 (the fuzz build) cannot
  // compile against libstdc++ 12's <ranges>.
  struct NodeRange {
    struct iterator {
      uint32_t i;
      uint32_t operator*() const { return i; }
      iterator& operator++() {
        ++i;
        return *this;
      }
      bool operator==(const iterator&) const = default;
    };
    uint32_t first, last;
    iterator begin() const { return {first}; }
    iterator end() const { return {last}; }
  };
  NodeRange children(const Node& n) const {
    const bool dir = S_ISDIR(n.mode);
    return {dir ? n.first_child : 0u, dir ? n.first_child + n.child_count : 0u};
  }
  std::string_view name(const Node& n) const { return {names.data() + n.name_offset, n.name_length}; }
  const char* name_cstr(const Node& n) const { return names.c_str() + n.name_offset; }
  void set_name(Node& n, std::string_view name) {
    n.name_offset = uint32_t(names.size());
    n.name_length = uint16_t(name.size());
    names.append(name);
    names.push_back('\0');
  }

  // The path on disk of a node, for reading and for messages.
  std::string path_of(const Node& n) const {
    if (n.parent == kNoNode) return source_dirs.empty() ? std::string(".") : source_dirs[0];
    const std::vector<const Node*> chain = chain_below_root(n);
    return join_path(source_dirs[chain.back()->source], joined_names(chain));
  }
  std::string path_of(uint32_t i) const { return path_of(nodes[i]); }
  // The path of a node below its SOURCE directory: "" for the root, "a/b" further down.
  std::string rel_path_of(const Node& n) const { return joined_names(chain_below_root(n)); }

 private:
  // n and its ancestors below the root, n first; the last one is in the root and names the
  // SOURCE. A loop, not recursion: a tree may be as deep as a tar member's path is long.
  std::vector<const Node*> chain_below_root(const Node& n) const {
    std::vector<const Node*> chain;
    for (const Node* p = &n; p->parent != kNoNode; p = &nodes[p->parent]) chain.push_back(p);
    return chain;
  }
  std::string joined_names(const std::vector<const Node*>& chain) const {
    std::string path;
    for (size_t k = chain.size(); k-- > 0;) {
      path += name(*chain[k]);
      if (k) path += '/';
    }
    return path;
  }
};

// Fills Tree::files with the regular-file inode owners depth-first in sorted order (the image
// order mksquashfs uses, and the order data is written in), numbering them in Node::file_index.
inline void collect_file_owners(Tree& tree) {
  std::vector<uint32_t> stack{0};
  while (!stack.empty()) {
    const uint32_t i = stack.back();
    stack.pop_back();
    Node& n = tree.nodes[i];
    if (n.link_target == kNoNode && S_ISREG(n.mode)) {
      n.file_index = uint32_t(tree.files.size());
      tree.files.push_back(i);
      tree.total_file_bytes += n.size;
    }
    if (S_ISDIR(n.mode))
      for (uint32_t c = n.first_child + n.child_count; c-- > n.first_child;) stack.push_back(c);
  }
}

}  // namespace sqar
