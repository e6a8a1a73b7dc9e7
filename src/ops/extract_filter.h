// Which entries extract and extract --tar take: those a PATTERN selects (an entry whose path
// inside the image equals it or matches it, common/path_pattern.h: '*' stays within a
// component, a '**' component spans any number), with everything below a selected directory,
// minus what --exclude leaves out (with everything below an excluded directory). Both walks
// decide each entry from its parent's mark as they go, parents first; the patterns follow the
// walk too (common/pattern_walk.h), matching each entry one component on from its parent, so a
// deep entry costs no more than a shallow one. (list and cat select with PathSelection,
// common/path_pattern.h, which has no --exclude.)
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/path_pattern.h"
#include "common/pattern_walk.h"
#include "scan/exclude.h"

namespace sqar::ops {

class ExtractFilter {
 public:
  ExtractFilter(const std::vector<std::string>& patterns, const ExcludeList& excludes)
      : patterns_(patterns),
        excludes_(excludes),
        hits_(patterns.size(), false),
        pattern_walk_(PatternSet(patterns)),
        exclude_walk_(excludes.anchored()) {}

  struct Mark {
    bool excluded = false;  // by --exclude, or below an excluded directory
    bool selected = false;  // taken (a PATTERN matched it or a directory above it)
  };
  // The root: never excluded, and selecting everything when there are no patterns.
  Mark root() const { return {false, patterns_.empty()}; }
  // An entry (its path inside the image, and its name) below a directory marked `parent`.
  Mark entry(const Mark& parent, const std::string& path, std::string_view name, bool is_dir) {
    Mark m;
    m.excluded = parent.excluded ||
                 (!excludes_.empty() && excludes_.excluded(exclude_walk_.enter_in_walk_order(path), name, is_dir));
    // Matched even below a selected or excluded directory: a PATTERN naming such an entry
    // has found it ("d d/f" is no error, as extract --tar's check of the patterns finds).
    const bool matched = !patterns_.empty() && match(path);
    m.selected = !m.excluded && (patterns_.empty() || parent.selected || matched);
    return m;
  }
  // Marks each pattern that selects `path`; true when any does. The literal comparison lets a
  // name that contains glob characters be given as is.
  bool match(const std::string& path) {
    bool any = false;
    const std::span<const uint8_t> state = pattern_walk_.enter_in_walk_order(path);
    for (size_t i = 0; i < patterns_.size(); ++i) {
      if (path == patterns_[i] || pattern_walk_.patterns().matches(state, i)) {
        hits_[i] = true;
        any = true;
      }
    }
    return any;
  }
  // The patterns that matched nothing so far, in command-line order.
  std::vector<std::string> unmatched() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < patterns_.size(); ++i)
      if (!hits_[i]) out.push_back(patterns_[i]);
    return out;
  }
  bool has_patterns() const { return !patterns_.empty(); }

 private:
  const std::vector<std::string>& patterns_;
  const ExcludeList& excludes_;
  std::vector<bool> hits_;
  PatternWalk pattern_walk_;  // patterns_ along the walk
  PatternWalk exclude_walk_;  // the anchored --exclude patterns along the walk
};

}  // namespace sqar::ops
