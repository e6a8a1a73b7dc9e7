#include "pipeline/hard_link_names.h"

#include <sys/stat.h>

#include <utility>

namespace sqar {

HardLinkNames::HardLinkNames(const Tree& tree) {
  bool any = false;
  for (uint32_t f : tree.files) any = any || tree.nodes[f].link_count > 1;
  if (!any) return;
  for (uint32_t i = 0; i < tree.nodes.size(); ++i) {
    const Node& n = tree.nodes[i];
    if (n.link_target == kNoNode || n.omitted || !S_ISREG(n.mode)) continue;
    if (tree.nodes[n.link_target].file_index != kNoNode) links_[n.link_target].push_back(i);
  }
}

void move_inode_to_link(Tree& tree, uint32_t file, uint32_t link, const std::vector<uint32_t>& links) {
  const uint32_t gone = tree.files[file];
  Node& was = tree.nodes[gone];
  Node& now = tree.nodes[link];
  Node owner = was;  // the inode's attributes, under the link's name and place
  owner.name_offset = now.name_offset;
  owner.name_length = now.name_length;
  owner.source = now.source;
  owner.parent = now.parent;
  owner.link_count = was.link_count - 1;  // the name that vanished no longer names it
  now = owner;
  was.omitted = true;
  was.link_target = link;
  was.link_count = 1;
  was.file_index = kNoNode;
  for (uint32_t other : links)
    if (other != link) tree.nodes[other].link_target = link;
  if (const auto x = tree.xattrs.find(gone); x != tree.xattrs.end()) {
    SharedXattrs set = std::move(x->second);
    tree.xattrs.erase(x);
    tree.xattrs[link] = std::move(set);
  }
  tree.files[file] = link;
}

}  // namespace sqar
