// verify's problem lines of a damaged image, printed without burying the rest. One damaged
// metadata block can make every entry it describes fail alike ("id index 255 is outside the
// id table"): 2,000 identical causes printed 2,000 lines. Each cause is printed for its first
// kShownPerCause entries; the others are counted and summed up in one line at the end, and
// --json lists them all. (extract names every entry it loses: that list is what a recovery
// needs.)
#pragma once
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sqar::cli {

class RepeatedProblems {
 public:
  static constexpr size_t kShownPerCause = 10;

  // Prints "sqar CMD: IMAGE: PATH: cause" unless this cause was printed for kShownPerCause
  // entries already. Thread-safe.
  void report(const char* cmd, const std::string& image, const std::string& path, const std::string& cause);
  // "sqar CMD: IMAGE: N more entries: cause (HINT)" for each cause some entries were not named
  // for; the hint says where to find them all.
  void summarize(const char* cmd, const std::string& image, const std::string& hint);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, size_t> seen_;  // cause -> entries it was reported for
  std::vector<std::string> order_;                // causes in the order first seen
};

}  // namespace sqar::cli
