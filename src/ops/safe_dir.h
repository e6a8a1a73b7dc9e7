// Directory descriptors for writing inside an extraction root without ever following a
// symlink: every component is opened with openat(O_NOFOLLOW | O_DIRECTORY) relative to its
// parent, so an entry planted as a symlink (CVE-2021-40153 / CVE-2021-41072 style) makes the
// open fail instead of redirecting writes outside the root.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/unique_fd.h"

namespace sqar::ops {

// Splits "a/b/c" into its parent "a/b" and name "c" ("" parent for top-level names).
std::pair<std::string_view, std::string_view> split_parent(std::string_view path);

// Opens directories below the root in walk order. Entries processed in walk order share
// long prefixes, so each open() costs about one openat on average. Descriptors are bounded:
// the deepest kKeepTop levels of the current path stay open, and above them every
// kCheckpoint-th level, so a 1000-deep tree holds about 60 descriptors per DirStack, not
// 1000 (which ran into `ulimit -n 1024` with two threads). A level whose descriptor was closed
// is reopened from the nearest open level above it, one O_NOFOLLOW component at a time.
// Not thread-safe: one DirStack per thread.
class DirStack {
 public:
  static constexpr size_t kKeepTop = 32, kCheckpoint = 32;

  explicit DirStack(int root_fd) : root_(root_fd) {}
  DirStack(const DirStack&) = delete;
  DirStack& operator=(const DirStack&) = delete;

  // Descriptor of the directory at relative path `dir` ("" is the root). The descriptor stays
  // valid until the next call. Throws sqar::Error naming `dir` when a component is missing,
  // not a directory, or a symlink.
  int open(std::string_view dir);

  // The same for a caller that names directories by the nodes of its own tree: `node` lies
  // `depth` levels below the root (0: the root itself), and up(n) gives node n's parent and
  // name. Only the levels that differ from the last call are visited, where open(path)
  // compares the whole path: a 10,000-deep image took seconds there. One DirStack is used
  // either by path or by node, never both.
  using NodeUp = std::function<std::pair<uint64_t, std::string_view>(uint64_t)>;
  int open_node(uint64_t node, size_t depth, const NodeUp& up);

  size_t open_descriptors() const;  // for tests: how many this stack holds now

 private:
  struct Level {
    std::string name;
    UniqueFd fd;        // empty while closed (see the class comment)
    uint64_t node = 0;  // open_node's key
  };
  int fd_at(size_t level);  // reopens when closed
  void trim();              // closes what the bound does not keep
  void close_unkept(size_t from, size_t to);
  void pop_to(size_t levels);               // drops (and so closes) the levels from `levels` on
  std::string path_to(size_t level) const;  // for messages
  int root_;
  std::vector<Level> stack_;
  size_t trimmed_ = 0;  // levels below this were trimmed already (trim is incremental)
  std::string cur_;     // the path of stack_'s top ("" is the root), for open(path)
};

}  // namespace sqar::ops
