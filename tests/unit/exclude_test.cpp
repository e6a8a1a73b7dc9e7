// ExcludeList: which patterns match names at any depth and which match the path from the root.
#include "scan/exclude.h"

#include <gtest/gtest.h>

namespace sqar {
namespace {

ExcludeList list_of(std::initializer_list<const char*> patterns) {
  ExcludeList l;
  for (const char* p : patterns) l.add(p);
  return l;
}

TEST(ExcludeList, PatternWithoutSlashMatchesNamesAtAnyDepth) {
  ExcludeList l = list_of({"build"});
  EXPECT_TRUE(l.excluded("build", "build", true));
  EXPECT_TRUE(l.excluded("lib/build", "build", true));
  EXPECT_TRUE(l.excluded("lib/build", "build", false));
  EXPECT_FALSE(l.excluded("lib/builder", "builder", true));
}

TEST(ExcludeList, LeadingSlashOrDotSlashAnchorsAtTheRoot) {
  for (const char* p : {"/build", "./build", "//build", "/./build"}) {
    ExcludeList l = list_of({p});
    EXPECT_TRUE(l.excluded("build", "build", true)) << p;
    EXPECT_FALSE(l.excluded("lib/build", "build", true)) << p;
  }
}

TEST(ExcludeList, SlashInsideAnchorsAndGlobsStayWithinOneLevel) {
  ExcludeList l = list_of({"lib/*.o"});
  EXPECT_TRUE(l.excluded("lib/a.o", "a.o", false));
  EXPECT_FALSE(l.excluded("src/lib/a.o", "a.o", false));
  EXPECT_FALSE(l.excluded("lib/sub/a.o", "a.o", false));  // FNM_PATHNAME: '*' does not cross '/'
}

TEST(ExcludeList, TrailingSlashMatchesDirectoriesOnlyAndDoesNotAnchor) {
  ExcludeList l = list_of({".git/"});
  EXPECT_TRUE(l.excluded("a/b/.git", ".git", true));
  EXPECT_FALSE(l.excluded("a/b/.git", ".git", false));
  ExcludeList rooted = list_of({"/out/"});
  EXPECT_TRUE(rooted.excluded("out", "out", true));
  EXPECT_FALSE(rooted.excluded("out", "out", false));
  EXPECT_FALSE(rooted.excluded("x/out", "out", true));
}

TEST(ExcludeList, GlobstarInAnAnchoredPatternCrossesDirectories) {
  ExcludeList l = list_of({"etc/**/*.conf"});
  EXPECT_TRUE(l.excluded("etc/a.conf", "a.conf", false));
  EXPECT_TRUE(l.excluded("etc/x/y/a.conf", "a.conf", false));
  EXPECT_FALSE(l.excluded("usr/etc/a.conf", "a.conf", false));
  ExcludeList any_depth = list_of({"**/cache/"});
  EXPECT_TRUE(any_depth.excluded("cache", "cache", true));
  EXPECT_TRUE(any_depth.excluded("a/b/cache", "cache", true));
  EXPECT_FALSE(any_depth.excluded("a/b/cache", "cache", false));
}

TEST(ExcludeList, EmptyPatternsAreIgnored) {
  ExcludeList l = list_of({"", "/", "./", "//"});
  EXPECT_TRUE(l.empty());
}

}  // namespace
}  // namespace sqar
