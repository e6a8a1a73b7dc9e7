#include "ops/path_table.h"

#include <gtest/gtest.h>

namespace sqar::ops {
namespace {

TEST(PathTable, RebuildsThePathsOfADepthFirstWalk) {
  PathTable t;
  EXPECT_EQ(t.add("", true), PathTable::kRoot);
  t.add("a", true);
  const auto ab = t.add("a/b", true);
  const auto abf = t.add("a/b/f", false);
  // "a-c" sorts between "a" and "a/..." in byte order; a walk in listing order meets it after
  // a's subtree, and an entry whose name extends a directory's must not be put below it.
  t.add("a-c", true);
  const auto acg = t.add("a-c/g", false);
  const auto top = t.add("top", false);
  t.add("z", true);
  t.add("z/y", true);
  const auto deep = t.add("z/y/x", false);
  const auto zw = t.add("z/w", false);  // back up one level
  EXPECT_EQ(t.path(PathTable::kRoot), "");
  EXPECT_EQ(t.path(ab), "a/b");
  EXPECT_EQ(t.path(abf), "a/b/f");
  EXPECT_EQ(t.path(acg), "a-c/g");
  EXPECT_EQ(t.path(top), "top");
  EXPECT_EQ(t.path(deep), "z/y/x");
  EXPECT_EQ(t.path(zw), "z/w");
}

TEST(PathTable, RebuildsThePathsOfADeepBranch) {
  PathTable t;
  std::string path;
  PathTable::Id last = 0;
  const std::string name(255, 'n');
  for (int level = 0; level < 2000; ++level) {
    path += (path.empty() ? "" : "/") + name;
    t.add(path, true);
    last = t.add(path + "/f", false);
  }
  EXPECT_EQ(t.path(last).size(), 2000 * 256 + 1);
}

}  // namespace
}  // namespace sqar::ops
