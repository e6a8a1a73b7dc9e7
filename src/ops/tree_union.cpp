#include "ops/tree_union.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string_view>
#include <unordered_map>

#include "common/error.h"
#include "common/file_type_name.h"

namespace sqar::ops {
namespace {

class Union {
 public:
  Union(const std::vector<UnionInput>& in, bool replace, const std::function<void(const std::string&)>& warn)
      : in_(in), replace_(replace), warn_(warn) {
    for (const auto& i : in_) {
      source_base_.push_back(uint16_t(out_.tree.source_dirs.size()));
      out_.tree.source_dirs.insert(out_.tree.source_dirs.end(), i.tree->source_dirs.begin(), i.tree->source_dirs.end());
    }
  }

  TreeUnion run() {
    std::vector<Origin> roots;
    for (uint32_t k = 0; k < in_.size(); ++k) roots.push_back({k, 0});
    add_node(attributes_of(roots), "", kNoNode);
    std::deque<std::pair<uint32_t, std::vector<Origin>>> todo{{0, roots}};
    while (!todo.empty()) {
      auto [dir, parts] = std::move(todo.front());
      todo.pop_front();
      merge_dir(dir, parts, todo);
    }
    report_conflicts();
    link_and_list_files();
    out_.replaces_earlier.resize(out_.tree.nodes.size(), false);
    return std::move(out_);
  }

 private:
  const Node& node(Origin o) const { return in_[o.input].tree->nodes[o.node]; }
  Origin owner(Origin o) const {
    const Node& n = node(o);
    return n.link_target == kNoNode ? o : Origin{o.input, n.link_target};
  }
  bool is_dir(Origin o) const { return S_ISDIR(node(owner(o)).mode); }
  bool present(Origin o) const { return !node(o).omitted && !node(owner(o)).omitted; }

  // Whose attributes the output entry takes: the last of `take` with --replace, else the
  // first; but never a directory only implied by a tar's members (0755, the owner and time
  // of a member below) where another input names it: appending a tar with dir/new must not
  // open up IMAGE's dir of mode 0700.
  Origin attributes_of(const std::vector<Origin>& take) const {
    auto named = [&](Origin o) { return !node(o).implied; };
    if (replace_) {
      auto it = std::find_if(take.rbegin(), take.rend(), named);
      return it != take.rend() ? *it : take.back();
    }
    auto it = std::find_if(take.begin(), take.end(), named);
    return it != take.end() ? *it : take.front();
  }

  uint32_t add_node(Origin from, std::string_view name, uint32_t parent) {
    const Origin o = owner(from);
    const Node& src = node(o);
    Node n;
    n.mode = src.mode;
    n.uid = src.uid;
    n.gid = src.gid;
    n.mtime = src.mtime;
    n.rdev = src.rdev;
    if (S_ISREG(src.mode)) n.size = src.size;
    n.source = uint16_t(source_base_[o.input] + src.source);
    n.parent = parent;
    out_.tree.set_name(n, name);
    out_.tree.nodes.push_back(n);
    out_.origin.push_back(o);
    return uint32_t(out_.tree.nodes.size() - 1);
  }

  std::string where(uint32_t dir, std::string_view name) const {
    std::string p = out_.tree.rel_path_of(out_.tree.nodes[dir]);
    return (p.empty() ? std::string() : p + "/") + std::string(name);
  }

  void merge_dir(uint32_t dir, const std::vector<Origin>& parts,
                 std::deque<std::pair<uint32_t, std::vector<Origin>>>& todo) {
    // std::string_view compares bytes as unsigned chars: SquashFS's order.
    std::map<std::string_view, std::vector<Origin>> names;
    for (Origin p : parts) {
      const Tree& t = *in_[p.input].tree;
      for (uint32_t c : t.children(t.nodes[p.node])) {
        const Origin o{p.input, c};
        if (present(o)) names[t.name(t.nodes[c])].push_back(o);
      }
    }
    const uint32_t first = uint32_t(out_.tree.nodes.size());
    std::vector<std::pair<uint32_t, std::vector<Origin>>> subdirs;
    for (auto& [name, list] : names) {
      std::vector<Origin> take = resolve(dir, name, list);
      const uint32_t i = add_node(attributes_of(take), name, dir);
      out_.replaces_earlier.resize(out_.tree.nodes.size(), false);
      out_.replaces_earlier[i] = !is_dir(take.front()) && take.front().input != list.front().input;
      if (is_dir(take.front())) subdirs.emplace_back(i, std::move(take));
    }
    out_.tree.nodes[dir].first_child = first;
    out_.tree.nodes[dir].child_count = uint32_t(names.size());
    for (auto& s : subdirs) todo.push_back(std::move(s));
  }

  // The entries of one name that make up the output entry: one, or directories to merge.
  std::vector<Origin> resolve(uint32_t dir, std::string_view name, const std::vector<Origin>& list) {
    if (list.size() == 1) return list;
    size_t last_other = SIZE_MAX;  // the last entry that is not a directory
    for (size_t i = 0; i < list.size(); ++i)
      if (!is_dir(list[i])) last_other = i;
    if (last_other == SIZE_MAX) return list;
    if (!replace_) {
      // Every clash is found before the error, so that one run names them all.
      // Named in the inputs' order: the directory may come from the later one.
      const Origin x = list[last_other == 0 ? 1 : 0], y = list[last_other];
      const Origin a = x.input < y.input ? x : y, b = x.input < y.input ? y : x;
      if (conflicts_.size() < kConflictsNamed)
        conflicts_.push_back({where(dir, name), "in both " + in_[a.input].name + " and " + in_[b.input].name});
      ++conflict_count_;
      return {list.front()};
    }
    // The last non-directory wins: directories before it go, with everything below them.
    for (size_t i = 0; i < last_other; ++i) {
      if (!is_dir(list[i]) || !warn_) continue;
      const uint64_t below = entries_below(list[i]);
      warn_(where(dir, name) + ": the directory from " + in_[list[i].input].name +
            (below ? " and the " + std::to_string(below) + " entries below it are" : " is") + " replaced by the " +
            file_type_name(node(owner(list[last_other])).mode) + " from " + in_[list[last_other].input].name +
            " (--replace)");
    }
    if (last_other == list.size() - 1) return {list.back()};
    return std::vector<Origin>(list.begin() + long(last_other) + 1, list.end());
  }

  // The entries (at any depth) below directory `d` of its input.
  uint64_t entries_below(Origin d) const {
    const Tree& t = *in_[d.input].tree;
    uint64_t count = 0;
    std::vector<uint32_t> todo{d.node};
    while (!todo.empty()) {
      const Node& n = t.nodes[todo.back()];
      todo.pop_back();
      for (uint32_t c : t.children(n)) {
        if (!present({d.input, c})) continue;
        ++count;
        if (S_ISDIR(t.nodes[c].mode) && t.nodes[c].link_target == kNoNode) todo.push_back(c);
      }
    }
    return count;
  }

  // "a: in both X and Y", or for several names of the same two inputs (the usual case)
  // "in both X and Y: a, b/c and 3 more".
  void report_conflicts() const {
    if (conflicts_.empty()) return;
    const bool one_pair = std::all_of(conflicts_.begin(), conflicts_.end(),
                                      [&](const auto& c) { return c.second == conflicts_.front().second; });
    std::string msg;
    if (conflicts_.size() == 1 || !one_pair) {
      for (const auto& [path, where] : conflicts_) msg += (msg.empty() ? "" : "; ") + path + ": " + where;
    } else {
      msg = conflicts_.front().second + ": ";
      for (size_t i = 0; i < conflicts_.size(); ++i) msg += (i ? ", " : "") + conflicts_[i].first;
    }
    if (conflict_count_ > conflicts_.size())
      msg += " and " + std::to_string(conflict_count_ - conflicts_.size()) + " more names";
    throw Error(msg + " (--replace lets the last one win)");
  }

  // Entries of one input inode become hard links to the first; regular-file inodes are listed
  // in Tree::files in depth-first, name order, as the scanner lists them.
  void link_and_list_files() {
    Tree& t = out_.tree;
    std::unordered_map<uint64_t, uint32_t> first_of;
    for (uint32_t i = 1; i < t.nodes.size(); ++i) {
      if (S_ISDIR(t.nodes[i].mode)) continue;
      const Origin o = out_.origin[i];
      auto [it, added] = first_of.emplace(uint64_t(o.input) << 32 | o.node, i);
      if (!added) {
        t.nodes[i].link_target = it->second;
        ++t.nodes[it->second].link_count;
      }
    }
    for (uint32_t i = 0; i < t.nodes.size(); ++i) {
      if (t.nodes[i].link_target != kNoNode) continue;
      const Origin o = out_.origin[i];
      const Tree& src = *in_[o.input].tree;
      if (auto s = src.symlink_targets.find(o.node); s != src.symlink_targets.end()) t.symlink_targets[i] = s->second;
      if (auto x = src.xattrs.find(o.node); x != src.xattrs.end()) t.xattrs[i] = x->second;
    }
    collect_file_owners(t);
  }

  static constexpr size_t kConflictsNamed = 10;

  const std::vector<UnionInput>& in_;
  bool replace_;
  const std::function<void(const std::string&)>& warn_;
  std::vector<std::pair<std::string, std::string>> conflicts_;  // the first kConflictsNamed: (path, inputs)
  uint64_t conflict_count_ = 0;
  std::vector<uint16_t> source_base_;
  TreeUnion out_;
};

}  // namespace

TreeUnion union_trees(const std::vector<UnionInput>& inputs, bool replace,
                      const std::function<void(const std::string&)>& warn) {
  return Union(inputs, replace, warn).run();
}

}  // namespace sqar::ops
