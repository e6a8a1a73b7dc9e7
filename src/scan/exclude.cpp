#include "scan/exclude.h"

#include <fnmatch.h>

#include <cerrno>
#include <fstream>

#include "common/error.h"
#include "common/path_pattern.h"

namespace sqar {

void ExcludeList::add(std::string pattern) {
  Pattern p;
  p.dir_only = !pattern.empty() && pattern.back() == '/';
  while (!pattern.empty() && pattern.back() == '/') pattern.pop_back();
  // A leading '/' or './' anchors the pattern at the source root ("/build" is the top-level
  // build only), as a '/' inside it does; it is then dropped, since relative paths have none.
  bool rooted = false;
  while (true) {
    if (!pattern.empty() && pattern.front() == '/') {
      pattern.erase(0, 1);
    } else if (pattern.rfind("./", 0) == 0) {
      pattern.erase(0, 2);
    } else {
      break;
    }
    rooted = true;
  }
  if (pattern.empty() || pattern == ".") return;  // the source root itself is never excluded
  p.anchored = rooted || pattern.find('/') != std::string::npos;
  p.glob = std::move(pattern);
  patterns_.push_back(std::move(p));
}

void ExcludeList::add_from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_errno(path, errno);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    add(line);
  }
}

bool ExcludeList::excluded(std::string_view relative_path, std::string_view name, bool is_dir) const {
  const std::string rel(relative_path), base(name);
  for (const auto& p : patterns_) {
    if (p.dir_only && !is_dir) continue;
    if (p.anchored ? path_pattern_match(p.glob, rel)
                   : fnmatch(p.glob.c_str(), base.c_str(), 0) == 0)
      return true;
  }
  return false;
}

}  // namespace sqar
