#include "ops/safe_dir.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>

#include "common/error.h"

namespace sqar::ops {

std::pair<std::string_view, std::string_view> split_parent(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view(), path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

namespace {

UniqueFd open_below(int parent, const std::string& name) {
  return UniqueFd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

[[noreturn]] void throw_open_failure(const std::string& where, int err) {
  if (err == ELOOP || err == ENOTDIR)
    throw Error(where + ": is a symlink or not a directory in the target; refusing to follow it");
  throw_errno(where, err);
}

}  // namespace

size_t DirStack::open_descriptors() const {
  size_t n = 0;
  for (const auto& level : stack_) n += level.fd ? 1 : 0;
  return n;
}

std::string DirStack::path_to(size_t level) const {
  std::string path;
  for (size_t i = 0; i <= level && i < stack_.size(); ++i) path += (i ? "/" : "") + stack_[i].name;
  return path;
}

int DirStack::fd_at(size_t level) {
  if (stack_[level].fd) return stack_[level].fd.get();
  size_t from = level;
  while (from > 0 && !stack_[from - 1].fd) --from;
  int parent = from == 0 ? root_ : stack_[from - 1].fd.get();
  for (size_t i = from; i <= level; ++i) {
    stack_[i].fd = open_below(parent, stack_[i].name);
    if (!stack_[i].fd) throw_open_failure(path_to(i), errno);
    parent = stack_[i].fd.get();
  }
  // The levels reopened on the way that the bound does not keep are closed again, and those
  // it keeps for now are trimmed again once deeper levels push them out of the top.
  close_unkept(from, std::min(level, stack_.size() > kKeepTop ? stack_.size() - kKeepTop : 0));
  trimmed_ = std::min(trimmed_, from);
  return stack_[level].fd.get();
}

void DirStack::close_unkept(size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (stack_[i].fd && (i + 1) % kCheckpoint != 0) stack_[i].fd.reset();
}

void DirStack::trim() {
  const size_t top = stack_.size() > kKeepTop ? stack_.size() - kKeepTop : 0;
  if (top <= trimmed_) return;
  close_unkept(trimmed_, top);
  trimmed_ = top;
}

void DirStack::pop_to(size_t levels) {
  while (stack_.size() > levels) stack_.pop_back();
  trimmed_ = std::min(trimmed_, stack_.size());
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
  pop_to(keep);
  cur_.assign(dir.substr(0, keep ? pos - 1 : 0));
  while (pos < dir.size()) {
    size_t j = std::min(dir.find('/', pos), dir.size());
    int parent = stack_.empty() ? root_ : fd_at(stack_.size() - 1);
    std::string name(dir.substr(pos, j - pos));
    UniqueFd fd = open_below(parent, name);
    if (!fd) throw_open_failure(std::string(dir.substr(0, j)), errno);
    stack_.push_back({std::move(name), std::move(fd)});
    cur_.assign(dir.substr(0, j));
    pos = j + 1;
    trim();
  }
  return stack_.empty() ? root_ : fd_at(stack_.size() - 1);
}

int DirStack::open_node(uint64_t node, size_t depth, const NodeUp& up) {
  // Up from `node` to the deepest level held that is it or one of its ancestors: the stack is
  // always one chain from the root, so a level holding the ancestor at its depth holds all
  // the ancestors above it too.
  std::vector<std::pair<uint64_t, std::string_view>> below;  // nodes to open, deepest first
  size_t d = depth;
  for (uint64_t n = node; d > 0 && !(d <= stack_.size() && stack_[d - 1].node == n); --d) {
    const auto [parent, name] = up(n);
    below.emplace_back(n, name);
    n = parent;
  }
  pop_to(d);
  for (auto it = below.rbegin(); it != below.rend(); ++it) {
    const int parent = stack_.empty() ? root_ : fd_at(stack_.size() - 1);
    std::string name(it->second);
    UniqueFd fd = open_below(parent, name);
    if (!fd) {
      const int err = errno;
      throw_open_failure(path_to(stack_.size()) + (stack_.empty() ? "" : "/") + name, err);
    }
    stack_.push_back({std::move(name), std::move(fd), it->first});
    trim();
  }
  return stack_.empty() ? root_ : fd_at(stack_.size() - 1);
}

}  // namespace sqar::ops
