// The paths of a depth-first walk's entries, kept as links to their parent directory.
//
// Commands that gather entries during a walk and act on them after it (verify checks file
// contents in parallel, cat prints the files a pattern matches) need each entry's path for
// their messages. Held whole, those paths grow with the square of the depth: a crafted 104 KB
// image of 800 levels of 255-byte names made verify hold 1.57 GB of them. Here memory follows
// the names, and a path is rebuilt when it is asked for.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sqar::ops {

class PathTable {
 public:
  using Id = uint32_t;
  static constexpr Id kRoot = 0;

  PathTable();

  // The entry at `path` ("a/b"; "" is the root), met in walk order: every directory is added
  // (with is_dir) before what lies below it. Entries a caller does not need need not be added,
  // but directories must be, as they tell the entries below them where they are.
  Id add(std::string_view path, bool is_dir);

  std::string path(Id id) const;  // "" for the root

 private:
  struct Entry {
    Id parent;
    uint32_t name_length;
    uint64_t name_offset;  // in names_
  };
  std::vector<Entry> entries_;
  std::string names_;
  std::vector<std::pair<size_t, Id>> branch_;  // the open directories: path length and id
};

}  // namespace sqar::ops
