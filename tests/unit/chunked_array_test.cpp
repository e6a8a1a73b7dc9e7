#include "scan/chunked_array.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace sqar {
namespace {

struct Item {
  uint64_t value = 7;  // default-initialised like Node's members
  uint32_t other = 0;
};

TEST(ChunkedArray, GrowsAcrossChunksWithoutMovingElements) {
  ChunkedArray<Item> a;
  EXPECT_TRUE(a.empty());
  Item& root = a.emplace_back();
  EXPECT_EQ(root.value, 7u);
  root.value = 1000;
  const size_t n = 3 * ChunkedArray<Item>::kChunkSize + 5;  // several chunks and a partial one
  Item* first_of_second_chunk = nullptr;
  for (size_t i = 1; i < n; ++i) {
    Item& it = a.push_back(Item{i, uint32_t(i * 3)});
    if (i == ChunkedArray<Item>::kChunkSize) first_of_second_chunk = &it;
  }
  ASSERT_EQ(a.size(), n);
  EXPECT_EQ(&a[0], &root);  // references survive growth
  EXPECT_EQ(&a[ChunkedArray<Item>::kChunkSize], first_of_second_chunk);
  EXPECT_EQ(a[0].value, 1000u);
  for (size_t i = 1; i < n; ++i) {
    ASSERT_EQ(a[i].value, i) << i;
    ASSERT_EQ(a[i].other, uint32_t(i * 3)) << i;
  }
  const ChunkedArray<Item>& c = a;
  EXPECT_EQ(c[n - 1].value, n - 1);
}

}  // namespace
}  // namespace sqar
