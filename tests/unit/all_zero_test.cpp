#include "common/all_zero.h"

#include <gtest/gtest.h>

#include <vector>

namespace sqar {
namespace {

TEST(AllZero, EmptyAndZeroBuffersAreZero) {
  EXPECT_TRUE(all_zero(nullptr, 0));
  std::vector<uint8_t> buf(131072, 0);
  EXPECT_TRUE(all_zero(buf.data(), buf.size()));
  EXPECT_TRUE(all_zero(buf.data(), 1));
}

TEST(AllZero, AnyNonZeroByteCounts) {
  std::vector<uint8_t> buf(4097, 0);
  for (size_t at : {size_t(0), size_t(1), size_t(2048), buf.size() - 1}) {
    buf[at] = 0x80;
    EXPECT_FALSE(all_zero(buf.data(), buf.size())) << at;
    buf[at] = 0;
  }
}

}  // namespace
}  // namespace sqar
