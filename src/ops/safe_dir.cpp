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
  for (auto& [name, fd] : stack_) ::close(fd);
}

int DirStack::open(std::string_view dir) {
  // Consecutive calls mostly ask for the same directory (every entry of a batch).
  if (dir == cur_) return stack_.empty() ? root_ : stack_.back().second;
  // Keep the leading components that match, without splitting the path into a vector.
  size_t keep = 0, pos = 0;
  while (pos < dir.size() && keep < stack_.size()) {
    size_t j = std::min(dir.find('/', pos), dir.size());
    if (dir.substr(pos, j - pos) != stack_[keep].first) break;
    ++keep;
    pos = j + 1;
  }
  while (stack_.size() > keep) {
    ::close(stack_.back().second);
    stack_.pop_back();
  }
  cur_.assign(dir.substr(0, keep ? pos - 1 : 0));
  while (pos < dir.size()) {
    size_t j = std::min(dir.find('/', pos), dir.size());
    int parent = stack_.empty() ? root_ : stack_.back().second;
    std::string name(dir.substr(pos, j - pos));
    int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      std::string where(dir.substr(0, j));
      if (err == ELOOP || err == ENOTDIR)
        throw Error(where + ": is a symlink or not a directory in the target; refusing to follow it");
      throw_errno(where, err);
    }
    stack_.emplace_back(std::move(name), fd);
    cur_.assign(dir.substr(0, j));
    pos = j + 1;
  }
  return stack_.empty() ? root_ : stack_.back().second;
}

}  // namespace sqar::ops
