#include "common/pattern_walk.h"

#include <algorithm>
#include <utility>

namespace sqar {

PatternWalk::PatternWalk(PatternSet patterns) : patterns_(std::move(patterns)), states_(patterns_.start()) {}

std::span<const uint8_t> PatternWalk::top() const {
  const size_t n = patterns_.state_size();
  return std::span<const uint8_t>(states_).subspan(ends_.size() * n, n);
}

void PatternWalk::push(std::string_view component, size_t end) {
  const size_t n = patterns_.state_size(), parent = ends_.size() * n;
  states_.resize(parent + 2 * n);  // first: it may move the buffer the spans below point into
  const std::span<uint8_t> all(states_);
  patterns_.step(all.subspan(parent, n), component, all.subspan(parent + n, n));
  ends_.push_back(end);
}

void PatternWalk::rebuild(std::string_view path) {
  ends_.clear();
  states_.resize(patterns_.state_size());  // the root's frame: the start state, never changed
  path_.assign(path);
  for (size_t i = 0;;) {
    const size_t slash = std::min(path.find('/', i), path.size());
    push(path.substr(i, slash - i), slash);
    if (slash == path.size()) break;
    i = slash + 1;
  }
}

std::span<const uint8_t> PatternWalk::enter(std::string_view path) { return step_in(path, /*walk_order=*/false); }

std::span<const uint8_t> PatternWalk::enter_in_walk_order(std::string_view path) {
  return step_in(path, /*walk_order=*/true);
}

std::span<const uint8_t> PatternWalk::step_in(std::string_view path, bool walk_order) {
  // The parent is the root for a path of one component. Otherwise it is the frame whose path
  // is as long as PATH's parent path (frames' lengths grow with depth, so a binary search
  // finds the only candidate), if its bytes are that path's: all of them, or in walk order
  // the parent's own name (from the end of the frame above it).
  const size_t slash = path.rfind('/');
  size_t parent = 0;  // a frame
  if (slash != std::string_view::npos) {
    const auto it = std::lower_bound(ends_.begin(), ends_.end(), slash);
    const size_t from = !walk_order || it == ends_.begin() || it == ends_.end() ? 0 : *(it - 1) + 1;
    if (it == ends_.end() || *it != slash || path_.compare(from, slash - from, path.substr(from, slash - from)) != 0) {
      rebuild(path);
      return top();
    }
    parent = size_t(it - ends_.begin()) + 1;
  }
  // Deeper frames are not PATH's ancestors: the walk has left them. path_ keeps the parent's
  // path and takes PATH's last component.
  ends_.resize(parent);
  const size_t kept = slash == std::string_view::npos ? 0 : slash;
  path_.resize(kept);
  path_.append(path.substr(kept));
  push(path.substr(slash == std::string_view::npos ? 0 : slash + 1), path.size());
  return top();
}

}  // namespace sqar
