// Path patterns (common/path_pattern.h) read one path component at a time. A walk meets a
// directory before what it holds, so an entry's match state is one step from its parent's and
// matching it costs the same at any depth; matching each entry's whole path again made a walk
// quadratic in the depth an image claims (`list` of a crafted 100,000-deep chain: 187 s).
// path_pattern_match stays the reference: these answer exactly as it does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sqar {

// One pattern as a nondeterministic machine over components. Its state is the set of live
// positions in the pattern's component list, one byte each (0 or 1) for positions 0..n:
// position i is live when the components read so far can match the pattern's first i. A "**"
// component stays live on any component it reads, and the path read matches when position n is
// live. Sets, not one position: with "**" several prefixes of the pattern can fit at once.
class ComponentPattern {
 public:
  explicit ComponentPattern(std::string_view pattern);

  // The bytes a state holds.
  size_t positions() const { return parts_.size() + 1; }
  // The state before any component is read (live has positions() bytes).
  void start(std::span<uint8_t> live) const;
  // The state after one more COMPONENT (no '/'), from the state `live`. A std::string: fnmatch
  // wants it NUL-terminated, and the caller makes that copy once for all its patterns.
  void step(std::span<const uint8_t> live, const std::string& component, std::span<uint8_t> next) const;
  bool matches(std::span<const uint8_t> live) const { return live[parts_.size()] != 0; }

 private:
  struct Part {
    std::string glob;
    bool globstar;  // the component is exactly "**"
    // A "**" that may match no component at all: every one but a trailing one ("a/**" is what
    // lies inside a, not a itself). Position i+1 is live whenever position i is.
    bool may_be_empty;
  };
  // Makes position i+1 live after each live position i whose part may match nothing; one pass
  // in order suffices, since a skip only ever moves one position forward.
  void skip_empty(std::span<uint8_t> live) const;

  std::vector<Part> parts_;
};

// Several patterns matched side by side, their states laid end to end in one byte string (so
// a walk keeps one buffer per directory, not one per pattern).
class PatternSet {
 public:
  PatternSet() = default;
  explicit PatternSet(const std::vector<std::string>& patterns);
  void add(std::string_view pattern);

  size_t size() const { return patterns_.size(); }
  // The bytes a state of the whole set holds (0 for no patterns).
  size_t state_size() const { return state_size_; }
  void start(std::span<uint8_t> state) const;
  std::vector<uint8_t> start() const;
  // Safe to call from several threads at once (the scan lists directories on several).
  void step(std::span<const uint8_t> state, std::string_view component, std::span<uint8_t> next) const;
  // Whether pattern i matches the path whose state this is.
  bool matches(std::span<const uint8_t> state, size_t i) const {
    return patterns_[i].matches(state.subspan(offsets_[i], patterns_[i].positions()));
  }

 private:
  std::vector<ComponentPattern> patterns_;
  std::vector<size_t> offsets_;  // where each pattern's state starts
  size_t state_size_ = 0;
};

}  // namespace sqar
