#include "common/component_pattern.h"

#include <algorithm>

#include "common/path_pattern.h"

namespace sqar {

ComponentPattern::ComponentPattern(std::string_view pattern) {
  // Split as path_pattern_match splits: on every '/', keeping empty components ("a//b", "a/").
  for (size_t i = 0;;) {
    const size_t slash = std::min(pattern.find('/', i), pattern.size());
    const std::string_view part = pattern.substr(i, slash - i);
    parts_.push_back({std::string(part), part == "**", part == "**"});
    if (slash == pattern.size()) break;
    i = slash + 1;
  }
  if (parts_.size() > 1 && parts_.back().globstar) parts_.back().may_be_empty = false;
}

void ComponentPattern::skip_empty(std::span<uint8_t> live) const {
  for (size_t i = 0; i < parts_.size(); ++i)
    if (live[i] && parts_[i].may_be_empty) live[i + 1] = 1;
}

void ComponentPattern::start(std::span<uint8_t> live) const {
  std::fill(live.begin(), live.end(), 0);
  live[0] = 1;
  skip_empty(live);
}

void ComponentPattern::step(std::span<const uint8_t> live, const std::string& component,
                            std::span<uint8_t> next) const {
  std::fill(next.begin(), next.end(), 0);
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (!live[i]) continue;
    const Part& part = parts_[i];
    if (part.globstar) {
      // "**" takes the component and may take more. A "**" that may be empty also moves on
      // (skip_empty below); a trailing one, having taken one, may end here.
      next[i] = 1;
      if (!part.may_be_empty) next[i + 1] = 1;
    } else if (glob_match(part.glob.c_str(), component.c_str())) {
      next[i + 1] = 1;
    }
  }
  skip_empty(next);
}

PatternSet::PatternSet(const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) add(p);
}

void PatternSet::add(std::string_view pattern) {
  patterns_.emplace_back(pattern);
  offsets_.push_back(state_size_);
  state_size_ += patterns_.back().positions();
}

void PatternSet::start(std::span<uint8_t> state) const {
  for (size_t i = 0; i < patterns_.size(); ++i)
    patterns_[i].start(state.subspan(offsets_[i], patterns_[i].positions()));
}

std::vector<uint8_t> PatternSet::start() const {
  std::vector<uint8_t> state(state_size_);
  start(state);
  return state;
}

void PatternSet::step(std::span<const uint8_t> state, std::string_view component, std::span<uint8_t> next) const {
  if (patterns_.empty()) return;      // (no copy of the name for an empty --exclude list)
  const std::string name(component);  // NUL-terminated once for every pattern's fnmatch
  for (size_t i = 0; i < patterns_.size(); ++i) {
    const size_t at = offsets_[i], n = patterns_[i].positions();
    patterns_[i].step(state.subspan(at, n), name, next.subspan(at, n));
  }
}

}  // namespace sqar
