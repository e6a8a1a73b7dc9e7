// Opens directories of a source tree relative to the ones opened last.
//
// The scan and the readers visit directories in breadth-first or depth-first order, so
// consecutive directories share most of their path. Opening each by its full path walked every
// component again: on the ports set (72k directories) those walks were 13% of the build's CPU.
// The cursor keeps the chain of open directories from the source down to the last one and
// opens only the components that differ, one openat(2) each. Descriptors are bounded: the
// deepest kKeepTop levels stay open and above them every kCheckpoint-th, so a 1000-deep tree
// costs ~60 per cursor, not 1000 (several listers ran into `ulimit -n 1024`); a closed level
// is reopened from the nearest open one above it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sqar {

class DirectoryCursor {
 public:
  DirectoryCursor() = default;
  ~DirectoryCursor();
  DirectoryCursor(const DirectoryCursor&) = delete;
  DirectoryCursor& operator=(const DirectoryCursor&) = delete;

  // The directory `rel` ("" or "a/b/c") below the source directory `base`. `base` is opened as
  // given (symlinks in it are followed, as the user named it); components of `rel` never
  // follow a symlink. With `readable` the fd can be listed (getdents); otherwise it may be an
  // O_PATH fd, enough for openat/fstatat below it and needing only search permission.
  // Returns an fd owned by the cursor, valid until the next call, or -1 with errno set.
  int open(const std::string& base, std::string_view rel, bool readable);

  static constexpr size_t kKeepTop = 32, kCheckpoint = 32;
  size_t open_descriptors() const;  // for tests

 private:
  struct Level {
    size_t end;  // rel_.substr(0, end) is open as fd (0: the base itself)
    int fd;      // -1 while closed by trim()
    bool readable;
  };
  void close_above(size_t keep);
  int fd_at(size_t level);  // reopens a closed level; -1 with errno on failure
  void trim();

  std::string base_;
  std::string rel_;  // the deepest open directory below base_
  std::vector<Level> levels_;
};

}  // namespace sqar
