#include "ops/tree_union.h"

#include <deque>
#include <map>
#include <string_view>
#include <unordered_map>

#include "common/error.h"

namespace sqar::ops {
namespace {

class Union {
 public:
  Union(const std::vector<UnionInput>& in, bool replace) : in_(in), replace_(replace) {
    for (const auto& i : in_) {
      source_base_.push_back(uint16_t(out_.tree.source_dirs.size()));
      out_.tree.source_dirs.insert(out_.tree.source_dirs.end(), i.tree->source_dirs.begin(), i.tree->source_dirs.end());
    }
  }

  TreeUnion run() {
    std::vector<Origin> roots;
    for (uint32_t k = 0; k < in_.size(); ++k) roots.push_back({k, 0});
    const Origin attrs = replace_ ? roots.back() : roots.front();
    add_node(attrs, "", kNoNode);
    std::deque<std::pair<uint32_t, std::vector<Origin>>> todo{{0, roots}};
    while (!todo.empty()) {
      auto [dir, parts] = std::move(todo.front());
      todo.pop_front();
      merge_dir(dir, parts, todo);
    }
    link_and_list_files();
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
      const uint32_t i = add_node(replace_ ? take.back() : take.front(), name, dir);
      if (is_dir(take.front())) subdirs.emplace_back(i, std::move(take));
    }
    out_.tree.nodes[dir].first_child = first;
    out_.tree.nodes[dir].child_count = uint32_t(names.size());
    for (auto& s : subdirs) todo.push_back(std::move(s));
  }

  // The entries of one name that make up the output entry: one, or directories to merge.
  std::vector<Origin> resolve(uint32_t dir, std::string_view name, const std::vector<Origin>& list) const {
    if (list.size() == 1) return list;
    size_t last_other = SIZE_MAX;  // the last entry that is not a directory
    for (size_t i = 0; i < list.size(); ++i)
      if (!is_dir(list[i])) last_other = i;
    if (last_other == SIZE_MAX) return list;
    if (!replace_) {
      const Origin a = list[last_other == 0 ? 1 : 0], b = list[last_other];
      throw Error(where(dir, name) + ": in both " + in_[a.input].name + " and " + in_[b.input].name +
                  " (--replace lets the last one win)");
    }
    if (last_other == list.size() - 1) return {list.back()};
    return std::vector<Origin>(list.begin() + long(last_other) + 1, list.end());
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

  const std::vector<UnionInput>& in_;
  bool replace_;
  std::vector<uint16_t> source_base_;
  TreeUnion out_;
};

}  // namespace

TreeUnion union_trees(const std::vector<UnionInput>& inputs, bool replace) { return Union(inputs, replace).run(); }

}  // namespace sqar::ops
