#include "pipeline/hard_link_names.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>

namespace sqar {
namespace {

// The root with the entries a (owner of a regular file's inode, with xattrs), b and d/c (its
// hard links) and e (a file of its own).
Tree linked_tree() {
  Tree t;
  t.source_dirs.push_back("/src");
  Node& root = t.nodes.emplace_back();
  root.mode = S_IFDIR | 0755;
  root.first_child = 1;
  root.child_count = 4;
  auto add = [&](const char* name, uint32_t parent, mode_t mode) -> Node& {
    Node& n = t.nodes.emplace_back();
    t.set_name(n, name);
    n.parent = parent;
    n.mode = mode;
    return n;
  };
  Node& a = add("a", 0, S_IFREG | 0640);  // node 1
  a.uid = 7;
  a.gid = 8;
  a.mtime = 1234;
  a.size = 5000;
  a.link_count = 3;
  a.file_index = 0;
  add("b", 0, S_IFREG | 0640).link_target = 1;  // node 2
  Node& d = add("d", 0, S_IFDIR | 0755);        // node 3
  Node& e = add("e", 0, S_IFREG | 0644);        // node 4
  e.file_index = 1;
  d.first_child = 5;
  d.child_count = 1;
  add("c", 3, S_IFREG | 0640).link_target = 1;  // node 5
  t.files = {1, 4};
  t.xattrs[1] = std::make_shared<const Xattrs>(Xattrs{{"user.k", "v"}});
  return t;
}

TEST(HardLinkNames, ListsTheLinksOfEachInodeOwner) {
  const Tree t = linked_tree();
  const HardLinkNames names(t);
  ASSERT_NE(names.of(1), nullptr);
  EXPECT_EQ(*names.of(1), (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(names.of(4), nullptr);
}

TEST(HardLinkNames, NoTableWithoutLinkedFiles) {
  Tree t = linked_tree();
  t.nodes[1].link_count = 1;
  t.nodes[2].link_target = kNoNode;
  t.nodes[5].link_target = kNoNode;
  EXPECT_EQ(HardLinkNames(t).of(1), nullptr);
}

TEST(HardLinkNames, MovingTheInodeToALinkKeepsItUnderTheNamesLeft) {
  Tree t = linked_tree();
  const HardLinkNames names(t);
  move_inode_to_link(t, 0, 2, *names.of(1));
  const Node& b = t.nodes[2];
  EXPECT_EQ(t.files[0], 2u);
  EXPECT_EQ(b.link_target, kNoNode);
  EXPECT_EQ(b.file_index, 0u);
  EXPECT_EQ(b.link_count, 2u);  // b and d/c
  EXPECT_EQ(b.mode, mode_t(S_IFREG | 0640));
  EXPECT_EQ(b.uid, 7u);
  EXPECT_EQ(b.gid, 8u);
  EXPECT_EQ(b.mtime, 1234u);
  EXPECT_EQ(b.size, 5000u);
  EXPECT_EQ(t.name(b), "b");  // its own name and place
  EXPECT_EQ(b.parent, 0u);
  EXPECT_EQ(t.nodes[5].link_target, 2u);
  EXPECT_TRUE(t.nodes[1].omitted);
  EXPECT_FALSE(b.omitted);
  EXPECT_EQ(t.xattrs.count(1), 0u);
  ASSERT_EQ(t.xattrs.count(2), 1u);
  EXPECT_EQ(t.xattrs.at(2)->at(0).first, "user.k");
  EXPECT_EQ(t.path_of(5), "/src/d/c");
}

}  // namespace
}  // namespace sqar
