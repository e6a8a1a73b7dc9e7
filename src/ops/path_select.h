// The PATTERN selection shared by extract and extract --tar: a pattern selects an entry whose
// path inside the image equals it or matches it (common/path_pattern.h: '*' stays within a
// component, a '**' component spans any number).
#pragma once
#include <string>
#include <vector>

#include "common/path_pattern.h"

namespace sqar::ops {

// Marks in hits (one flag per pattern) each pattern that selects path; true when any does.
inline bool match_patterns(const std::vector<std::string>& patterns, const std::string& path, std::vector<bool>& hits) {
  bool any = false;
  for (size_t i = 0; i < patterns.size(); ++i) {
    // The literal comparison lets a name that contains glob characters be given as is.
    if (path == patterns[i] || path_pattern_match(patterns[i], path)) {
      hits[i] = true;
      any = true;
    }
  }
  return any;
}

}  // namespace sqar::ops
