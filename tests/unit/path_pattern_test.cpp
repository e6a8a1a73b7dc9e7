// path_pattern_match: fnmatch rules within a component, "**" across components.
#include "common/path_pattern.h"

#include <gtest/gtest.h>

namespace sqar {
namespace {

TEST(PathPattern, WildcardsStayWithinOneComponent) {
  EXPECT_TRUE(path_pattern_match("etc/*.conf", "etc/a.conf"));
  EXPECT_FALSE(path_pattern_match("etc/*.conf", "etc/x/a.conf"));
  EXPECT_FALSE(path_pattern_match("etc/?", "etc/a/b"));
  EXPECT_TRUE(path_pattern_match("etc/[ab]", "etc/b"));
  EXPECT_FALSE(path_pattern_match("etc", "etc/a"));
  EXPECT_FALSE(path_pattern_match("etc/a", "etc"));
  EXPECT_TRUE(path_pattern_match("e\\*", "e*"));
  EXPECT_FALSE(path_pattern_match("e\\*", "ex"));
}

TEST(PathPattern, GlobstarInTheMiddleMatchesZeroOrMoreComponents) {
  for (const char* p : {"a/b", "a/x/b", "a/x/y/b"}) EXPECT_TRUE(path_pattern_match("a/**/b", p)) << p;
  EXPECT_FALSE(path_pattern_match("a/**/b", "a/b/c"));
  EXPECT_FALSE(path_pattern_match("a/**/b", "x/a/b"));
  EXPECT_FALSE(path_pattern_match("a/**/b", "a/xb"));
  EXPECT_TRUE(path_pattern_match("etc/**/*.conf", "etc/a.conf"));
  EXPECT_TRUE(path_pattern_match("etc/**/*.conf", "etc/x/y/z/a.conf"));
  EXPECT_FALSE(path_pattern_match("etc/**/*.conf", "etc/x/a.confx"));
}

TEST(PathPattern, LeadingGlobstarMatchesAtAnyDepth) {
  for (const char* p : {"foo", "a/foo", "a/b/foo"}) EXPECT_TRUE(path_pattern_match("**/foo", p)) << p;
  EXPECT_FALSE(path_pattern_match("**/foo", "foo/bar"));
  EXPECT_TRUE(path_pattern_match("**/foo/bar", "x/foo/bar"));
}

TEST(PathPattern, TrailingGlobstarMatchesEverythingInsideButNotTheDirectory) {
  for (const char* p : {"a/x", "a/x/y", "a/x/y/z"}) EXPECT_TRUE(path_pattern_match("a/**", p)) << p;
  EXPECT_FALSE(path_pattern_match("a/**", "a"));
  EXPECT_FALSE(path_pattern_match("a/**", "b/x"));
  EXPECT_TRUE(path_pattern_match("**", "a/b/c"));
}

TEST(PathPattern, GlobstarNextToOtherCharactersIsAStar) {
  EXPECT_TRUE(path_pattern_match("a**b", "axyb"));
  EXPECT_FALSE(path_pattern_match("a**b", "ax/yb"));
  EXPECT_TRUE(path_pattern_match("x/a**", "x/abc"));
  EXPECT_FALSE(path_pattern_match("x/a**", "x/a/b"));
}

TEST(PathPattern, ManyGlobstarsDoNotBacktrackExponentially) {
  std::string pat, path;
  for (int i = 0; i < 40; ++i) pat += "**/";
  pat += "z";
  for (int i = 0; i < 200; ++i) path += "d/";
  path += "y";
  EXPECT_FALSE(path_pattern_match(pat, path));
}

TEST(PathSelection, SelectsMatchesAndWhatLiesBelowAndNamesUnmatchedPatterns) {
  PathSelection s({"a", "a/b", "nothing", "c/**/*.txt"});
  EXPECT_FALSE(s.select(""));
  EXPECT_TRUE(s.select("a"));
  EXPECT_TRUE(s.select("a/b"));
  EXPECT_TRUE(s.select("a/q"));
  EXPECT_FALSE(s.select("ab"));
  EXPECT_FALSE(s.select("c"));
  EXPECT_TRUE(s.select("c/d/e.txt"));
  EXPECT_FALSE(s.select("c/d/e.md"));
  EXPECT_EQ(s.unmatched(), std::vector<std::string>{"nothing"});
}

TEST(PathSelection, LiteralPatternsLetAWalkSkipOtherDirectories) {
  PathSelection s({"usr/share/doc"});
  EXPECT_TRUE(s.may_lead_to_match("usr"));
  EXPECT_TRUE(s.may_lead_to_match("usr/share"));
  EXPECT_FALSE(s.may_lead_to_match("usr/lib"));
  EXPECT_FALSE(s.may_lead_to_match("usrx"));
  EXPECT_TRUE(s.select("usr/share/doc"));
  EXPECT_TRUE(s.may_lead_to_match("usr/share/doc/x"));
  PathSelection g({"usr/*/doc"});
  EXPECT_TRUE(g.may_lead_to_match("var"));
}

TEST(PathSelection, NoPatternsSelectsEverything) {
  PathSelection s({});
  EXPECT_TRUE(s.select(""));
  EXPECT_TRUE(s.select("x/y"));
  EXPECT_TRUE(s.unmatched().empty());
}

}  // namespace
}  // namespace sqar
