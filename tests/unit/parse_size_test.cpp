#include "common/parse_size.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace sqar {
namespace {

TEST(ParseSize, PlainNumbersAreBytes) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("4096B"), 4096u);
  EXPECT_EQ(parse_size("18446744073709551615"), UINT64_MAX);
}

TEST(ParseSize, SuffixesArePowersOf1024) {
  for (const char* s : {"3K", "3k", "3KiB", "3KB", "3kb", "3kib"}) EXPECT_EQ(parse_size(s), 3u << 10) << s;
  for (const char* s : {"64M", "64m", "64MiB", "64MB", "64mb", "64mB"}) EXPECT_EQ(parse_size(s), 64u << 20) << s;
  for (const char* s : {"2G", "2g", "2GiB", "2GB", "2gb", "2Gib"}) EXPECT_EQ(parse_size(s), 2ull << 30) << s;
  EXPECT_EQ(parse_size("5b"), 5u);
}

TEST(ParseSize, OverflowIsRefused) {
  EXPECT_EQ(parse_size("18446744073709551616"), std::nullopt);  // 2^64
  EXPECT_EQ(parse_size("99999999999999999999999"), std::nullopt);
  // The largest value that still fits with each unit, and one more.
  EXPECT_EQ(parse_size("18014398509481983K"), (UINT64_MAX >> 10) << 10);
  EXPECT_EQ(parse_size("18014398509481984K"), std::nullopt);
  EXPECT_EQ(parse_size("17179869183G"), (UINT64_MAX >> 30) << 30);
  EXPECT_EQ(parse_size("17179869184G"), std::nullopt);
}

TEST(ParseSize, MalformedInputIsRefused) {
  for (const char* s :
       {"", "K", "-1", "+1", " 1", "1 ", "1.5M", "0x10", "12X", "1KiBB", "1Ki", "1T", "1kk", "M1", "1,024"})
    EXPECT_EQ(parse_size(s), std::nullopt) << '"' << s << '"';
}

}  // namespace
}  // namespace sqar
