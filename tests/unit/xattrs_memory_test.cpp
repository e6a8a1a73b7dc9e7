#include <gtest/gtest.h>

#include "scan/tree.h"

namespace sqar {
namespace {

// Many short names: the pairs themselves are the memory, not the names' bytes.
TEST(XattrsMemory, CountsThePairsNotOnlyTheNames) {
  Xattrs many;
  for (int i = 0; i < 9362; ++i) many.emplace_back("user.a", "");
  EXPECT_GE(memory_of(many), many.capacity() * sizeof(Xattrs::value_type));
  EXPECT_GE(memory_of(many), size_t(9362) * 6 * 10);  // over ten times the names' bytes
}

TEST(XattrsMemory, CountsLongValuesOnTheHeap) {
  Xattrs one{{"security.selinux", std::string(50, 'x')}};
  EXPECT_GE(memory_of(one), sizeof(Xattrs::value_type) + 17 + 51);
  EXPECT_EQ(memory_of(Xattrs{}), 0u);
}

}  // namespace
}  // namespace sqar
