#include "ops/safe_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/error.h"

namespace sqar::ops {

std::pair<std::string_view, std::string_view> split_parent(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view(), path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

DirStack::~DirStack() {
  for (auto& level : stack_)
    if (level.fd >= 0) ::close(level.fd);
}

namespace {

int open_below(int parent, const std::string& name, std::string_view where) {
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP || err == ENOTDIR)
      throw Error(std::string(where) + ": is a symlink or not a directory in the target; refusing to follow it");
    throw_errno(std::string(where), err);
  }
  return fd;
}

}  // namespace

size_t DirStack::open_descriptors() const {
  size_t n = 0;
  for (const auto& level : stack_) n += level.fd >= 0;
  return n;
}

int DirStack::fd_at(size_t level) {
  if (stack_[level].fd >= 0) return stack_[level].fd;
  size_t from = level;
  while (from > 0 && stack_[from - 1].fd < 0) --from;
  int parent = from == 0 ? root_ : stack_[from - 1].fd;
  std::string where;
  for (size_t i = 0; i < from; ++i) where += (i ? "/" : "") + stack_[i].name;
  for (size_t i = from; i <= level; ++i) {
    where += (i ? "/" : "") + stack_[i].name;
    stack_[i].fd = open_below(parent, stack_[i].name, where);
    parent = stack_[i].fd;
  }
  trim();
  return stack_[level].fd;
}

void DirStack::trim() {
  const size_t top = stack_.size() > kKeepTop ? stack_.size() - kKeepTop : 0;
  for (size_t i = 0; i < top; ++i)
    if (stack_[i].fd >= 0 && (i + 1) % kCheckpoint != 0) {
      ::close(stack_[i].fd);
      stack_[i].fd = -1;
    }
}

int DirStack::open(std::string_view dir) {
  // Consecutive calls mostly ask for the same directory (every entry of a batch).
  if (dir == cur_) return stack_.empty() ? root_ : fd_at(stack_.size() - 1);
  // Keep the leading components that match, without splitting the path into a vector.
  size_t keep = 0, pos = 0;
  while (pos < dir.size() && keep < stack_.size()) {
    size_t j = std::min(dir.find('/', pos), dir.size());
    if (dir.substr(pos, j - pos) != stack_[keep].name) break;
    ++keep;
    pos = j + 1;
  }
  while (stack_.size() > keep) {
    if (stack_.back().fd >= 0) ::close(stack_.back().fd);
    stack_.pop_back();
  }
  cur_.assign(dir.substr(0, keep ? pos - 1 : 0));
  while (pos < dir.size()) {
    size_t j = std::min(dir.find('/', pos), dir.size());
    int parent = stack_.empty() ? root_ : fd_at(stack_.size() - 1);
    std::string name(dir.substr(pos, j - pos));
    int fd = open_below(parent, name, dir.substr(0, j));
    stack_.push_back({std::move(name), fd});
    cur_.assign(dir.substr(0, j));
    pos = j + 1;
    trim();
  }
  return stack_.empty() ? root_ : fd_at(stack_.size() - 1);
}

}  // namespace sqar::ops
