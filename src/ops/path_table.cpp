#include "ops/path_table.h"

namespace sqar::ops {

PathTable::PathTable() {
  entries_.push_back({kRoot, 0, 0});
  branch_.push_back({0, kRoot});
}

PathTable::Id PathTable::add(std::string_view path, bool is_dir) {
  if (path.empty()) return kRoot;
  // The walk is depth-first, so the entry's directory is the innermost open one whose path
  // is a prefix of this one followed by '/' (the root: any path).
  while (branch_.size() > 1) {
    const size_t length = branch_.back().first;
    if (path.size() > length && path[length] == '/') break;
    branch_.pop_back();
  }
  const auto [parent_length, parent] = branch_.back();
  const std::string_view name = parent == kRoot ? path : path.substr(parent_length + 1);
  const Id id = Id(entries_.size());
  entries_.push_back({parent, uint32_t(name.size()), names_.size()});
  names_.append(name);
  if (is_dir) branch_.push_back({path.size(), id});
  return id;
}

std::string PathTable::path(Id id) const {
  std::vector<Id> chain;
  for (; id != kRoot; id = entries_[id].parent) chain.push_back(id);
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (!out.empty()) out += '/';
    out.append(names_, entries_[*it].name_offset, entries_[*it].name_length);
  }
  return out;
}

}  // namespace sqar::ops
