// Matching one component at a time (common/component_pattern.h, common/pattern_walk.h) answers
// as path_pattern_match does on the whole path: random patterns over random trees, walked
// depth-first as the image walks go, and in any order; and PathSelection, ExtractFilter and
// ExcludeList, which now match that way, answer as they did when they matched whole paths.
#include "common/pattern_walk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/component_pattern.h"
#include "common/path_pattern.h"
#include "ops/extract_filter.h"
#include "scan/exclude.h"

namespace sqar {
namespace {

// Names with glob characters in them too, so escapes and the literal comparison are exercised.
const std::vector<std::string> kNames = {"a", "b", "ab", "ba", "abc", ".a", "a*", "[a]", "a?", "\\", "-", "aa"};
const std::vector<std::string> kParts = {"a",     "b",   "ab",   "*",     "?",    "a*",   "*b", "[ab]", "[!a]*",
                                         "[a-c]", "\\*", "a\\*", "\\[a]", "\\\\", "a?",   "**", "**",   "**",
                                         "a**",   "**b", ".*",   "[",     "[]a]", "*\\?", "",   "[a-]"};

struct Entry {
  std::string path, name;
  bool is_dir;
  size_t end;  // one past the last entry of its subtree, in walk order
};

// A random tree, depth-first with parents first: each entry's path and where its subtree ends.
std::vector<Entry> random_tree(std::mt19937& rng, size_t max_depth) {
  std::vector<Entry> out;
  // By value: `out` grows while its entries' paths are in use.
  std::function<void(std::string, size_t)> fill = [&](std::string dir, size_t depth) {
    const size_t n = std::uniform_int_distribution<size_t>(0, depth == 0 ? 5 : 3)(rng);
    for (size_t i = 0; i < n; ++i) {
      const std::string& name = kNames[rng() % kNames.size()];
      const bool is_dir = depth + 1 < max_depth && rng() % 3 != 0;
      const size_t at = out.size();
      out.push_back({dir.empty() ? name : dir + "/" + name, name, is_dir, 0});
      if (is_dir) fill(out[at].path, depth + 1);
      out[at].end = out.size();
    }
  };
  fill("", 0);
  return out;
}

std::string random_pattern(std::mt19937& rng) {
  const size_t n = std::uniform_int_distribution<size_t>(1, 5)(rng);
  std::string p;
  for (size_t i = 0; i < n; ++i) p += (i ? "/" : "") + kParts[rng() % kParts.size()];
  // Leading and trailing "**" are the special cases: make them common.
  if (rng() % 4 == 0) p = "**/" + p;
  if (rng() % 4 == 0) p += "/**";
  return p;
}

std::vector<std::string> random_patterns(std::mt19937& rng, const std::vector<Entry>& tree) {
  std::vector<std::string> out;
  const size_t n = std::uniform_int_distribution<size_t>(1, 4)(rng);
  for (size_t i = 0; i < n; ++i) {
    // Some name an entry literally (they may hold glob characters), so directories on the way
    // to them are not skipped.
    if (!tree.empty() && rng() % 4 == 0)
      out.push_back(tree[rng() % tree.size()].path);
    else
      out.push_back(random_pattern(rng));
  }
  return out;
}

// PathSelection as it was when it matched each whole path with path_pattern_match: the
// reference its answers must equal.
struct WholePathSelection {
  explicit WholePathSelection(std::vector<std::string> p) : patterns(std::move(p)), hit(patterns.size(), false) {}
  std::vector<std::string> patterns;
  std::vector<bool> hit;
  std::string selected_dir;
  bool have_selected_dir = false;

  bool select(const std::string& path) {
    if (patterns.empty()) return true;
    if (path.empty()) return false;
    const bool inside = have_selected_dir && path.size() > selected_dir.size() && path[selected_dir.size()] == '/' &&
                        path.compare(0, selected_dir.size(), selected_dir) == 0;
    bool any = false;
    for (size_t i = 0; i < patterns.size(); ++i)
      if (path == patterns[i] || path_pattern_match(patterns[i], path)) hit[i] = any = true;
    if (inside) return true;
    if (any) {
      selected_dir = path;
      have_selected_dir = true;
    }
    return any;
  }
  std::vector<std::string> unmatched() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < patterns.size(); ++i)
      if (!hit[i]) out.push_back(patterns[i]);
    return out;
  }
};

TEST(ComponentPattern, EdgeCasesMatchAsWholePaths) {
  const std::vector<std::string> patterns = {"", "**", "a/", "/a", "a//b", "**/**", "a/**/**", "**/a/**", "/", "a/**/"};
  const std::vector<std::string> paths = {"", "a", "a/", "/a", "a//b", "a/b", "a/b/c", "/", "//", "b/a/c"};
  for (const auto& p : patterns) {
    PatternWalk walk{PatternSet({p})};
    for (const auto& path : paths)
      EXPECT_EQ(walk.patterns().matches(walk.enter(path), 0), path_pattern_match(p, path))
          << "pattern '" << p << "', path '" << path << "'";
  }
}

TEST(PatternWalk, DepthFirstWalksMatchAsWholePaths) {
  std::mt19937 rng(20261130);
  size_t matched = 0, compared = 0;
  for (int round = 0; round < 300; ++round) {
    const std::vector<Entry> tree = random_tree(rng, 7);
    std::vector<std::string> patterns;
    for (int i = 0; i < 6; ++i) patterns.push_back(random_pattern(rng));
    PatternWalk walk{PatternSet(patterns)}, in_order{PatternSet(patterns)};
    for (const Entry& e : tree) {
      const auto state = walk.enter(e.path);
      const auto state_in_order = in_order.enter_in_walk_order(e.path);
      for (size_t i = 0; i < patterns.size(); ++i) {
        const bool want = path_pattern_match(patterns[i], e.path);
        ASSERT_EQ(walk.patterns().matches(state, i), want)
            << "pattern '" << patterns[i] << "', path '" << e.path << "'";
        ASSERT_EQ(in_order.patterns().matches(state_in_order, i), want)
            << "in walk order: pattern '" << patterns[i] << "', path '" << e.path << "'";
        matched += want;
        ++compared;
      }
    }
  }
  // The patterns are not so random that they never match.
  EXPECT_GT(matched, compared / 50);
}

TEST(PatternWalk, AnyOrderMatchesAsWholePaths) {
  // Paths out of walk order, repeated, with empty components and leading or trailing '/':
  // the walk falls back to matching from the root, never to a wrong answer.
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> patterns;
    for (int i = 0; i < 4; ++i) patterns.push_back(random_pattern(rng));
    PatternWalk walk{PatternSet(patterns)};
    for (int n = 0; n < 40; ++n) {
      std::string path;
      const size_t depth = std::uniform_int_distribution<size_t>(1, 5)(rng);
      for (size_t d = 0; d < depth; ++d)
        path += (d ? "/" : "") + (rng() % 12 == 0 ? std::string() : kNames[rng() % kNames.size()]);
      const auto state = walk.enter(path);
      for (size_t i = 0; i < patterns.size(); ++i)
        ASSERT_EQ(walk.patterns().matches(state, i), path_pattern_match(patterns[i], path))
            << "pattern '" << patterns[i] << "', path '" << path << "'";
    }
  }
}

TEST(PatternWalk, DeepChainsAreMatchedFromTheParent) {
  // 20,000 levels, each entry one step from its parent (a whole-path match of each took
  // seconds here).
  PatternWalk walk{PatternSet({"**/x", "d/**/d/y", "*/*/*"})};
  std::string path = "d";
  for (int depth = 1; depth <= 20'000; ++depth) {
    const auto state = walk.enter(path);
    ASSERT_FALSE(walk.patterns().matches(state, 0));
    ASSERT_EQ(walk.patterns().matches(state, 2), depth == 3);
    path += "/d";
  }
  EXPECT_TRUE(walk.patterns().matches(walk.enter(path + "/x"), 0));
  EXPECT_TRUE(walk.patterns().matches(walk.enter(path + "/y"), 1));
}

TEST(PatternWalk, WalkOrderSkipsWhatAPreOrderWalkLeaves) {
  // Siblings of equal names at many depths, the walk going back up between them: each entry's
  // parent is found by its length and last name alone, and still answers as whole paths do.
  const std::vector<std::string> patterns = {"a/**/b/c", "*/b/*", "**/b"};
  PatternWalk walk{PatternSet(patterns)};
  std::vector<std::string> order;
  for (const std::string top : {"a", "b"})
    for (const std::string mid : {"b", "x"})
      for (const std::string leaf : {"b", "c"}) {
        order.push_back(top);
        order.push_back(top + "/" + mid);
        order.push_back(top + "/" + mid + "/" + leaf);
        order.push_back(top + "/" + mid + "/" + leaf + "/b");
      }
  for (const std::string& path : order) {
    const auto state = walk.enter_in_walk_order(path);
    for (size_t i = 0; i < patterns.size(); ++i)
      ASSERT_EQ(walk.patterns().matches(state, i), path_pattern_match(patterns[i], path))
          << "pattern '" << patterns[i] << "', path '" << path << "'";
  }
}

// As list walks: select each entry, and enter a directory only while it may lead to a match.
// Selections must equal whole-path matching; a directory skipped must hold nothing selected.
TEST(PathSelection, AnswersAsWholePathMatchingInAListWalk) {
  std::mt19937 rng(42);
  size_t skipped_with_literal_patterns = 0;
  for (int round = 0; round < 500; ++round) {
    const std::vector<Entry> tree = random_tree(rng, 6);
    const std::vector<std::string> patterns = random_patterns(rng, tree);
    PathSelection got(patterns);
    WholePathSelection want{patterns};
    const bool literal_only = std::none_of(patterns.begin(), patterns.end(), has_wildcard);
    size_t skipped = 0;
    for (size_t i = 0; i < tree.size();) {
      const Entry& e = tree[i];
      ASSERT_EQ(got.select(e.path), want.select(e.path)) << e.path;
      const bool enter = e.is_dir && got.may_lead_to_match(e.path);
      if (e.is_dir && !enter) {
        ++skipped;
        // Nothing below a directory skipped would have been selected.
        for (size_t j = i + 1; j < e.end; ++j)
          for (const auto& p : patterns)
            ASSERT_FALSE(tree[j].path == p || path_pattern_match(p, tree[j].path)) << p << " " << tree[j].path;
      }
      i = enter ? i + 1 : e.end;
    }
    ASSERT_EQ(got.unmatched(), want.unmatched());
    skipped_with_literal_patterns += literal_only ? skipped : 0;
  }
  // Skipping is what makes a walk for named paths cheap: literal patterns must prune some.
  EXPECT_GT(skipped_with_literal_patterns, 0u);
}

ExcludeList random_excludes(std::mt19937& rng) {
  ExcludeList l;
  const size_t n = std::uniform_int_distribution<size_t>(0, 3)(rng);
  for (size_t i = 0; i < n; ++i) {
    std::string p = rng() % 3 == 0 ? kParts[rng() % kParts.size()] : random_pattern(rng);
    if (rng() % 4 == 0) p = "/" + p;
    if (rng() % 4 == 0) p += "/";
    l.add(p);
  }
  return l;
}

std::vector<std::string> unmatched_excludes(const ExcludeList& l) {
  std::vector<std::string> out;
  l.warn_unmatched({}, [&](const std::string& w) { out.push_back(w); });
  return out;
}

// As extract walks: each entry marked from its parent's mark.
TEST(ExtractFilter, AnswersAsWholePathMatchingInAnExtractWalk) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 500; ++round) {
    const std::vector<Entry> tree = random_tree(rng, 6);
    const std::vector<std::string> patterns = rng() % 5 == 0 ? std::vector<std::string>{} : random_patterns(rng, tree);
    const ExcludeList excludes = random_excludes(rng);
    const ExcludeList reference_excludes = excludes;  // each counts its own hits
    ops::ExtractFilter got(patterns, excludes);
    WholePathSelection reference_hits{patterns};
    std::vector<ops::ExtractFilter::Mark> marks = {got.root()};  // by depth
    for (const Entry& e : tree) {
      const size_t depth = size_t(std::count(e.path.begin(), e.path.end(), '/')) + 1;
      marks.resize(depth);
      const ops::ExtractFilter::Mark parent = marks.back();
      ops::ExtractFilter::Mark want;
      want.excluded = parent.excluded || reference_excludes.excluded(e.path, e.name, e.is_dir);
      // A pattern finds its entry also below a selected or excluded directory ("d d/f").
      bool any = false;
      if (!patterns.empty())
        for (size_t i = 0; i < patterns.size(); ++i)
          if (e.path == patterns[i] || path_pattern_match(patterns[i], e.path)) reference_hits.hit[i] = any = true;
      want.selected = !want.excluded && (patterns.empty() || parent.selected || any);
      const ops::ExtractFilter::Mark mark = got.entry(parent, e.path, e.name, e.is_dir);
      ASSERT_EQ(mark.excluded, want.excluded) << e.path;
      ASSERT_EQ(mark.selected, want.selected) << e.path;
      marks.push_back(mark);
    }
    ASSERT_EQ(got.unmatched(), reference_hits.unmatched());
    ASSERT_EQ(unmatched_excludes(excludes), unmatched_excludes(reference_excludes));
  }
}

// As the scan matches: each directory keeps its state, and its entries step from it.
TEST(ExcludeList, StepwiseAnswersAsWholePaths) {
  std::mt19937 rng(99);
  for (int round = 0; round < 500; ++round) {
    const std::vector<Entry> tree = random_tree(rng, 6);
    const ExcludeList got = random_excludes(rng);
    const ExcludeList want = got;
    const PatternSet& anchored = got.anchored();
    std::vector<std::vector<uint8_t>> states = {anchored.start()};  // by depth
    for (const Entry& e : tree) {
      states.resize(size_t(std::count(e.path.begin(), e.path.end(), '/')) + 1);
      std::vector<uint8_t> state(anchored.state_size());
      anchored.step(states.back(), e.name, state);
      ASSERT_EQ(got.excluded(state, e.name, e.is_dir), want.excluded(e.path, e.name, e.is_dir)) << e.path;
      states.push_back(std::move(state));
    }
    ASSERT_EQ(unmatched_excludes(got), unmatched_excludes(want));
  }
}

TEST(ExcludeList, SourcePathsRewrittenAreMatchedStepwiseToo) {
  ExcludeList l;
  l.add("/var/log/journal/**/*.tmp");
  l.map_source_paths({{"/var/log", "logs"}}, nullptr);
  std::vector<uint8_t> state = l.anchored().start(), next(l.anchored().state_size());
  for (const char* c : {"logs", "journal", "x", "a.tmp"}) {
    l.anchored().step(state, c, next);
    state.swap(next);
  }
  EXPECT_TRUE(l.excluded(state, "a.tmp", false));
  EXPECT_TRUE(l.excluded("logs/journal/x/a.tmp", "a.tmp", false));
}

}  // namespace
}  // namespace sqar
