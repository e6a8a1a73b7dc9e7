#include "common/path_pattern.h"

#include <fnmatch.h>
#include <locale.h>

namespace sqar {

bool glob_match(const char* pattern, const char* name) {
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t(0));
  const locale_t previous = uselocale(c_locale);  // (locale_t)0 would leave it unchanged
  const bool match = fnmatch(pattern, name, 0) == 0;
  uselocale(previous);
  return match;
}

namespace {

std::vector<std::string> components(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    size_t j = s.find('/', i);
    if (j == std::string_view::npos) j = s.size();
    out.emplace_back(s.substr(i, j - i));
    if (j == s.size()) break;
    i = j + 1;
  }
  return out;
}

}  // namespace

bool path_pattern_match(std::string_view pattern, std::string_view path) {
  const std::vector<std::string> pat = components(pattern), name = components(path);
  const size_t np = pat.size(), nn = name.size();
  // can[i][j]: pattern components i.. match name components j.. ; filled from the end, so
  // "**" costs O(components²) however many of them a pattern has (no backtracking blow-up).
  std::vector<std::vector<char>> can(np + 1, std::vector<char>(nn + 1, 0));
  can[np][nn] = 1;
  for (size_t i = np; i-- > 0;) {
    const bool globstar = pat[i] == "**";
    // A trailing "**" needs at least one component: "a/**" is what lies inside a, not a.
    const bool trailing = globstar && i + 1 == np && np > 1;
    for (size_t j = nn + 1; j-- > 0;) {
      if (globstar) {
        const bool skip = !trailing && can[i + 1][j];  // "**" matches no component
        const bool eat = j < nn && (can[i][j + 1] || can[i + 1][j + 1]);
        can[i][j] = skip || eat;
      } else {
        can[i][j] = j < nn && can[i + 1][j + 1] && glob_match(pat[i].c_str(), name[j].c_str());
      }
    }
  }
  return can[0][0];
}

bool has_wildcard(std::string_view pattern) { return pattern.find_first_of("*?[\\") != std::string_view::npos; }

bool PathSelection::select(const std::string& path) {
  if (patterns_.empty()) return true;
  if (path.empty()) return false;
  const bool inside = have_selected_dir_ && path.size() > selected_dir_.size() && path[selected_dir_.size()] == '/' &&
                      path.compare(0, selected_dir_.size(), selected_dir_) == 0;
  // Every pattern is tried even inside a selected directory, so "a" and "a/b" both count as found.
  bool any = false;
  const std::span<const uint8_t> state = walk_.enter_in_walk_order(path);
  for (size_t i = 0; i < patterns_.size(); ++i) {
    // The literal comparison lets a name that contains glob characters be given as is.
    if (path == patterns_[i] || walk_.patterns().matches(state, i)) {
      hit_[i] = true;
      any = true;
    }
  }
  if (inside) return true;
  if (any) {
    selected_dir_ = path;
    have_selected_dir_ = true;
  }
  return any;
}

bool PathSelection::may_lead_to_match(const std::string& dir_path) const {
  if (patterns_.empty() || dir_path.empty()) return true;
  if (have_selected_dir_ && dir_path.compare(0, selected_dir_.size(), selected_dir_) == 0 &&
      (dir_path.size() == selected_dir_.size() || dir_path[selected_dir_.size()] == '/'))
    return true;
  for (const auto& p : patterns_) {
    if (has_wildcard(p)) return true;
    if (p.size() > dir_path.size() && p[dir_path.size()] == '/' && p.compare(0, dir_path.size(), dir_path) == 0)
      return true;
  }
  return false;
}

std::vector<std::string> PathSelection::unmatched() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < patterns_.size(); ++i)
    if (!hit_[i]) out.push_back(patterns_[i]);
  return out;
}

}  // namespace sqar
