// The PATH|GLOB selection shared by extract and extract --tar: a pattern selects an entry
// whose path inside the image equals it or matches it as a glob ('*' does not cross '/').
#pragma once
#include <fnmatch.h>

#include <string>
#include <vector>

namespace sqar::ops {

// Marks in hits (one flag per pattern) each pattern that selects path; true when any does.
inline bool match_patterns(const std::vector<std::string>& patterns, const std::string& path,
                           std::vector<bool>& hits) {
  bool any = false;
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (path == patterns[i] || fnmatch(patterns[i].c_str(), path.c_str(), FNM_PATHNAME) == 0) {
      hits[i] = true;
      any = true;
    }
  }
  return any;
}

}  // namespace sqar::ops
