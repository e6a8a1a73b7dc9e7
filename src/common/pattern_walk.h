// A PatternSet's match states along a walk that visits each directory before what it holds
// (the image walks of list, cat and extract). The callers name entries by their whole paths;
// this finds each one's parent among the directories leading to the entry before it, and takes
// one step from the parent's state, so an entry costs O(pattern positions) whatever its depth
// (plus a comparison of its parent's path: the whole path in enter(), only the parent's own
// name in enter_in_walk_order()).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/component_pattern.h"

namespace sqar {

class PatternWalk {
 public:
  explicit PatternWalk(PatternSet patterns);
  const PatternSet& patterns() const { return patterns_; }

  // The state of PATH ("a/b", no leading '/'; not the root ""), valid until the next call.
  // When PATH's parent is the path entered last or a directory above it, the state is one step
  // from the parent's; otherwise PATH is matched from the start. So the answers never depend
  // on the order paths come in, only the cost does.
  std::span<const uint8_t> enter(std::string_view path);
  // As enter(), for a caller that walks in pre-order, as Image::walk does: PATH's parent was
  // entered before it, and since then only paths below that parent. The parent's frame is then
  // the one as long as PATH's parent path, and only the parent's own name is compared, so an
  // entry costs O(its name) rather than O(its path): a 300,000-deep chain is matched in linear
  // time, not in 90 GB of comparisons. Out of that order, the answer may be another path's
  // whose parent has the same length and last name.
  std::span<const uint8_t> enter_in_walk_order(std::string_view path);

 private:
  // enter() and enter_in_walk_order(): which bytes of PATH's parent path are compared with
  // its frame's differs (all of them, or the parent's own name).
  std::span<const uint8_t> step_in(std::string_view path, bool walk_order);
  // Pushes the state after `component` read from the top frame's, as the frame of the path
  // that ends at `end` in path_.
  void push(std::string_view component, size_t end);
  // PATH matched component by component from the root, each of its ancestors becoming a frame.
  void rebuild(std::string_view path);
  std::span<const uint8_t> top() const;

  PatternSet patterns_;
  // A stack of frames: the root (reading nothing), then the path entered last and each
  // directory above it, so every frame's path is a prefix of path_. Frame d (d >= 1) is the
  // path path_[0, ends_[d - 1]), and its state is states_[d * state_size, (d + 1) * state_size).
  std::string path_;
  std::vector<size_t> ends_;
  std::vector<uint8_t> states_;
};

}  // namespace sqar
