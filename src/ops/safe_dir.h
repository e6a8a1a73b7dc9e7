// Directory descriptors for writing inside an extraction root without ever following a
// symlink: every component is opened with openat(O_NOFOLLOW | O_DIRECTORY) relative to its
// parent, so an entry planted as a symlink (CVE-2021-40153 / CVE-2021-41072 style) makes the
// open fail instead of redirecting writes outside the root.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sqar::ops {

// Splits "a/b/c" into its parent "a/b" and name "c" ("" parent for top-level names).
std::pair<std::string_view, std::string_view> split_parent(std::string_view path);

// Keeps the descriptors of the directories on the current path open. Entries processed in
// walk order share long prefixes, so each open() costs about one openat on average.
// Not thread-safe: one DirStack per thread.
class DirStack {
 public:
  explicit DirStack(int root_fd) : root_(root_fd) {}
  ~DirStack();
  DirStack(const DirStack&) = delete;
  DirStack& operator=(const DirStack&) = delete;

  // Descriptor of the directory at relative path `dir` ("" is the root). The descriptor stays
  // valid until the next call. Throws sqar::Error naming `dir` when a component is missing,
  // not a directory, or a symlink.
  int open(std::string_view dir);

 private:
  int root_;
  std::vector<std::pair<std::string, int>> stack_;
  std::string cur_;  // the path of stack_'s top ("" is the root)
};

}  // namespace sqar::ops
