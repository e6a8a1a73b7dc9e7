#include "scan/directory_cursor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace sqar {

namespace {
constexpr int kReadableFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
constexpr int kPathFlags = O_PATH | O_DIRECTORY | O_CLOEXEC;
}  // namespace

DirectoryCursor::~DirectoryCursor() { close_above(0); }

void DirectoryCursor::close_above(size_t keep) {
  while (levels_.size() > keep) {
    if (levels_.back().fd >= 0) ::close(levels_.back().fd);
    levels_.pop_back();
  }
  rel_.resize(levels_.empty() ? 0 : levels_.back().end);
}

size_t DirectoryCursor::open_descriptors() const {
  size_t n = 0;
  for (const Level& l : levels_) n += l.fd >= 0;
  return n;
}

void DirectoryCursor::trim() {
  const size_t top = levels_.size() > kKeepTop ? levels_.size() - kKeepTop : 0;
  for (size_t i = 1; i < top; ++i)  // level 0, the base, stays open
    if (levels_[i].fd >= 0 && i % kCheckpoint != 0) {
      ::close(levels_[i].fd);
      levels_[i].fd = -1;
      levels_[i].readable = false;
    }
}

int DirectoryCursor::fd_at(size_t level) {
  size_t j = level;
  while (levels_[j].fd < 0) --j;  // the base is always open
  for (++j; j <= level; ++j) {
    const size_t start = levels_[j - 1].end + (j > 1 ? 1 : 0);  // past the '/'
    const std::string name = rel_.substr(start, levels_[j].end - start);
    levels_[j].fd = ::openat(levels_[j - 1].fd, name.c_str(), kPathFlags | O_NOFOLLOW);
    if (levels_[j].fd < 0) return -1;
  }
  return levels_[level].fd;
}

int DirectoryCursor::open(const std::string& base, std::string_view rel, bool readable) {
  if (levels_.empty() || base != base_) {
    close_above(0);
    base_ = base;
    int fd = ::open(base.c_str(), readable ? kReadableFlags : kPathFlags);
    if (fd < 0) return -1;
    levels_.push_back({0, fd, readable});
  }
  // The deepest open level that is an ancestor of (or equal to) rel.
  size_t keep = 1;
  for (size_t i = levels_.size(); i-- > 1;) {
    const size_t end = levels_[i].end;
    if (rel.size() >= end && rel_.compare(0, end, rel.substr(0, end)) == 0 && (rel.size() == end || rel[end] == '/')) {
      keep = i + 1;
      break;
    }
  }
  close_above(keep);
  if (fd_at(levels_.size() - 1) < 0) return -1;
  // Open the remaining components one by one.
  size_t pos = levels_.back().end;
  while (pos < rel.size()) {
    if (rel[pos] == '/') ++pos;
    const size_t slash = rel.find('/', pos);
    const size_t end = slash == std::string_view::npos ? rel.size() : slash;
    const std::string name(rel.substr(pos, end - pos));
    const bool last = end == rel.size();
    int fd = ::openat(levels_.back().fd, name.c_str(), (last && readable ? kReadableFlags : kPathFlags) | O_NOFOLLOW);
    if (fd < 0) return -1;
    levels_.push_back({end, fd, last && readable});
    rel_.append(rel.substr(rel_.size(), end - rel_.size()));
    pos = end;
    trim();
  }
  Level& target = levels_.back();
  if (readable && !target.readable) {
    // Opened earlier as a mere path: reopen it for listing.
    int fd = ::openat(target.fd, ".", kReadableFlags);
    if (fd < 0) return -1;
    ::close(target.fd);
    target.fd = fd;
    target.readable = true;
  }
  return target.fd;
}

}  // namespace sqar
