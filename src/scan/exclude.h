// Exclude patterns for `sqar create --exclude GLOB`.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sqar {

// A pattern with a '/' inside or in front ("a/*.o", "/build", "./build") matches the path
// relative to the source root; one without matches the entry name at any depth ("*.tmp"). A trailing '/' matches
// directories only. Globs follow fnmatch(3): *, ?, [...]; in an anchored pattern a "**" component
// matches any number of directories (path_pattern_match).
class ExcludeList {
 public:
  void add(std::string pattern);
  void add_from_file(const std::string& path);  // one pattern a line; '#' comments, blank lines skipped
  bool excluded(std::string_view relative_path, std::string_view name, bool is_dir) const;
  bool empty() const { return patterns_.empty(); }

 private:
  struct Pattern {
    std::string glob;
    bool anchored;   // contains a '/': match the relative path
    bool dir_only;
  };
  std::vector<Pattern> patterns_;
};

}  // namespace sqar
