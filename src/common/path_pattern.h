// Glob patterns for paths inside an image, shared by extract, list, cat and create --exclude.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "common/pattern_walk.h"

namespace sqar {

// fnmatch(3) on bytes, whatever the calling thread's locale: '?' and '[...]' match one byte,
// and a name that is not UTF-8 matches like any other. (Threads that read or write tar
// streams run in C.UTF-8, where glibc's fnmatch matches characters and fails on such names.)
bool glob_match(const char* pattern, const char* name);

// Matches PATH ("etc/ssh/sshd_config", no leading '/') against PATTERN component by component.
// Within a component, fnmatch(3) rules apply (*, ?, [...], '\' escapes); no wildcard crosses
// a '/'. A component that is exactly "**" matches any number of whole components, as in
// gitignore and rsync: "a/**/b" matches a/b, a/x/b and a/x/y/b; a leading "**/" matches at any
// depth; a trailing "/**" matches everything inside (one or more components, not the
// directory itself). "**" next to other characters ("a**") is an ordinary '*'. Its cost grows
// with the path's depth: a walk matches with PatternWalk (common/pattern_walk.h) instead, one
// component from the parent's state, and this stays the reference those answers must equal.
bool path_pattern_match(std::string_view pattern, std::string_view path);

// True when PATTERN has a character that path_pattern_match treats specially; without one it
// names a single path, so a caller may look it up instead of walking the whole image.
bool has_wildcard(std::string_view pattern);

// Which entries a list of PATTERNs selects in a walk that visits parents before their
// contents: an entry a pattern matches (or whose path equals a pattern literally), and all
// that lies below a selected directory, as tar and unsquashfs select. Remembers which patterns
// matched something, so callers can name those that matched nothing. Each entry is matched one
// component on from its parent (common/pattern_walk.h), so a deep tree costs no more per entry.
class PathSelection {
 public:
  explicit PathSelection(std::vector<std::string> patterns)
      : patterns_(std::move(patterns)), hit_(patterns_.size(), false), walk_(PatternSet(patterns_)) {}
  // PATH as the walk gives it; the root ("") is selected only when there are no patterns.
  bool select(const std::string& path);
  // True while PATH might still lead to a selected entry (false: a walk may skip its contents).
  bool may_lead_to_match(const std::string& dir_path) const;
  std::vector<std::string> unmatched() const;

 private:
  std::vector<std::string> patterns_;
  std::vector<bool> hit_;
  PatternWalk walk_;          // patterns_ matched along the walk
  std::string selected_dir_;  // the last selected entry, whose contents are selected too
  bool have_selected_dir_ = false;
};

}  // namespace sqar
