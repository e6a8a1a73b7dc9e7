#include "safe_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.h"

namespace sqar::cli {

std::pair<std::string_view, std::string_view> split_parent(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view(), path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

DirStack::~DirStack() {
  for (auto& [name, fd] : stack_) ::close(fd);
}

int DirStack::open(std::string_view dir) {
  std::vector<std::string_view> comps;
  for (size_t i = 0; i < dir.size();) {
    size_t j = dir.find('/', i);
    if (j == std::string_view::npos) j = dir.size();
    comps.push_back(dir.substr(i, j - i));
    i = j + 1;
  }
  size_t keep = 0;
  while (keep < comps.size() && keep < stack_.size() && stack_[keep].first == comps[keep]) ++keep;
  while (stack_.size() > keep) {
    ::close(stack_.back().second);
    stack_.pop_back();
  }
  for (size_t i = keep; i < comps.size(); ++i) {
    int parent = stack_.empty() ? root_ : stack_.back().second;
    std::string name(comps[i]);
    int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      std::string where(dir.substr(0, comps[i].data() + comps[i].size() - dir.data()));
      if (err == ELOOP || err == ENOTDIR)
        throw Error(where + ": is a symlink or not a directory in the target; refusing to follow it");
      throw_errno(where, err);
    }
    stack_.emplace_back(std::move(name), fd);
  }
  return stack_.empty() ? root_ : stack_.back().second;
}

}  // namespace sqar::cli
