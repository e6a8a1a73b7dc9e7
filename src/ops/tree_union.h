// The union of several trees (input images and scanned SOURCEs) for append and merge: one root
// holding every input's entries, directories present in several inputs merged.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scan/tree.h"

namespace sqar::ops {

struct UnionInput {
  const Tree* tree;
  std::string name;  // for messages: the image path or "SOURCE"
};

struct Origin {
  uint32_t input;
  uint32_t node;  // in that input's tree: the node that owns the inode (hard links resolved)
};

struct TreeUnion {
  Tree tree;
  std::vector<Origin> origin;  // per output node
  // Per output node: it won its name over an earlier input's entry (--replace). If it is then
  // left out (a SOURCE file that vanished or is unreadable), the earlier entry must not go with it.
  std::vector<bool> replaces_earlier;
};

// A name found in more than one input is an error (one error naming up to ten such names and
// counting the rest), unless all are directories (merged; their attributes are the first
// input's) or `replace` (the last input's entry wins; directories that follow it merge into
// it; a directory it replaces is named in a warning with the number of entries below it).
// Node::source is offset so that output source_dirs hold every input's, in input order.
TreeUnion union_trees(const std::vector<UnionInput>& inputs, bool replace,
                      const std::function<void(const std::string&)>& warn);

}  // namespace sqar::ops
