// Exclude patterns for `sqar create --exclude GLOB`.
#pragma once
#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/component_pattern.h"

namespace sqar {

// A pattern with a '/' inside or in front ("a/*.o", "/build", "./build") matches the path
// relative to the source root; one without matches the entry name at any depth ("*.tmp"). A trailing '/' matches
// directories only. Globs follow fnmatch(3): *, ?, [...]; in an anchored pattern a "**" component
// matches any number of directories (path_pattern_match).
class ExcludeList {
 public:
  void add(std::string pattern);
  // One pattern a line; '#' comments, blank lines skipped. "-" reads standard input.
  void add_from_file(const std::string& path);
  bool excluded(std::string_view relative_path, std::string_view name, bool is_dir) const;
  // The same for walks that meet a directory before its entries (the scan, extract): STATE is
  // the entry's state in anchored(), one step from its directory's, so a deep entry costs no
  // more than a shallow one (excluded(relative_path, ...) matches the whole path each time).
  bool excluded(std::span<const uint8_t> state, std::string_view name, bool is_dir) const;
  // The anchored patterns (those that match the relative path), in the order they were added.
  const PatternSet& anchored() const { return anchored_; }
  // Users write the paths they see on disk: a pattern with a leading '/' that starts with a
  // SOURCE's absolute path ("/var/log/journal" with SOURCE /var/log) is taken as that path in
  // the image ("/journal"). `sources` pairs each SOURCE's absolute path (no trailing '/') with
  // its path in the image ("" for the root); `note` hears of each pattern rewritten.
  void map_source_paths(const std::vector<std::pair<std::string, std::string>>& sources,
                        const std::function<void(const std::string&)>& note);
  bool empty() const { return patterns_.empty(); }
  // After the scan: an anchored pattern that excluded nothing is nearly always a path written
  // as on disk or relative to the wrong directory ('/log/journal', 'var/log/journal' with
  // SOURCE /var/log). warn hears of each, with the image path it probably meant when the
  // pattern starts with the last components of a SOURCE's path (sources as for map_source_paths).
  void warn_unmatched(const std::vector<std::pair<std::string, std::string>>& sources,
                      const std::function<void(const std::string&)>& warn) const;

 private:
  // Set by excluded() from the scan's threads; copies carry the value.
  struct Hit {
    mutable std::atomic<bool> set{false};
    Hit() = default;
    Hit(const Hit& o) : set(o.set.load()) {}
    Hit& operator=(const Hit& o) {
      set = o.set.load();
      return *this;
    }
  };
  struct Pattern {
    std::string glob;
    std::string written;  // as the user gave it, for messages
    bool anchored;        // contains a '/': match the relative path
    bool rooted;          // was written with a leading '/' (or './')
    bool dir_only;
    size_t anchored_index = 0;  // an anchored pattern's place in anchored_
    Hit hit;
  };
  // Matched in order, so the first that matches is the one counted as used.
  // path_matches(pattern) says whether an anchored pattern matches the entry's path.
  template <class PathMatches>
  bool excluded_by(std::string_view name, bool is_dir, const PathMatches& path_matches) const;
  std::vector<Pattern> patterns_;
  std::vector<std::string> root_patterns_;  // '', '/', '.': as written, for warn_unmatched
  PatternSet anchored_;                     // the anchored patterns' globs, kept in step with patterns_
};

}  // namespace sqar
