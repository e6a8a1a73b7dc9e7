// DedupIndex: the first file of a content owns it; size and hash must both match; a forgotten
// owner frees the content for the next file; tails are found by (length, hash) only.
#include "dedup/dedup_index.h"

#include <gtest/gtest.h>

#include <string>

#include "common/hash.h"

namespace sqar {
namespace {

Hash128 h(const std::string& s) { return hash128(s.data(), s.size()); }

TEST(DedupIndexTest, FirstFileOwnsItsContent) {
  DedupIndex index;
  index.reserve(8);
  EXPECT_EQ(index.find_or_add_file(5, h("hello"), 1), std::nullopt);
  EXPECT_EQ(index.find_or_add_file(5, h("hello"), 2), 1u);
  EXPECT_EQ(index.find_or_add_file(5, h("hello"), 3), 1u);
  EXPECT_EQ(index.find_or_add_file(5, h("world"), 4), std::nullopt);
}

TEST(DedupIndexTest, SizeAndHashMustBothMatch) {
  DedupIndex index;
  EXPECT_EQ(index.find_or_add_file(5, h("hello"), 1), std::nullopt);
  EXPECT_EQ(index.find_or_add_file(6, h("hello"), 2), std::nullopt);  // same hash, other size
  EXPECT_EQ(index.find_or_add_file(6, h("hello"), 3), 2u);
}

TEST(DedupIndexTest, ForgottenOwnerIsReplacedByTheNextFile) {
  DedupIndex index;
  EXPECT_EQ(index.find_or_add_file(5, h("hello"), 1), std::nullopt);
  index.forget_file(5, h("hello"));
  EXPECT_EQ(index.find_or_add_file(5, h("hello"), 2), std::nullopt);
  EXPECT_EQ(index.find_or_add_file(5, h("hello"), 3), 2u);
}

TEST(DedupIndexTest, TailsAreFoundByLengthAndHash) {
  DedupIndex index;
  EXPECT_FALSE(index.find_tail(3, h("abc")));
  index.add_tail(3, h("abc"), {7, 4096});
  auto found = index.find_tail(3, h("abc"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->fragment, 7u);
  EXPECT_EQ(found->offset, 4096u);
  EXPECT_FALSE(index.find_tail(4, h("abc")));
  EXPECT_FALSE(index.find_tail(3, h("abd")));
  // Files and tails are separate tables.
  EXPECT_EQ(index.find_or_add_file(3, h("abc"), 1), std::nullopt);
}

}  // namespace
}  // namespace sqar
