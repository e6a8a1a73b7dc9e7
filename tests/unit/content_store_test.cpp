// ContentStore (create --tar): content is read back as added, across the memory / scratch-file
// boundary and with holes as zeros (zeros written out in full are stored as holes); a duplicate is rolled back (it
// costs no store bytes) and shares the first copy; hashes are of the whole content, holes included. And the member-name
// rules: leading '/' and '.' dropped, '..' resolved, climbing out and long names refused.
#include "tarin/content_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/content_hash.h"
#include "common/hash.h"
#include "tarin/tar_ingest.h"

namespace sqar {
namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7 + (i >> 9));
  return v;
}

uint32_t add_whole(ContentStore& s, const std::vector<uint8_t>& v) {
  s.begin();
  s.add(0, v.data(), v.size());
  return s.finish(v.size());
}

std::vector<uint8_t> read_all(const ContentStore& s, uint32_t node, uint64_t size) {
  std::vector<uint8_t> out(size);
  EXPECT_EQ(s.read(node, 0, size, out.data()), 0);
  return out;
}

TEST(ContentStoreTest, ReadsBackAcrossTheSpillBoundaryAndRollsBackDuplicates) {
  // 1 MiB in memory, the rest spilled to a scratch file in /tmp.
  ContentStore s("/tmp", 1 << 20, false);
  const auto a = bytes(700000, 1), b = bytes(900000, 2), c = bytes(300000, 3);
  const uint32_t ia = add_whole(s, a);
  const uint32_t ib = add_whole(s, b);  // straddles the boundary
  const uint64_t before = s.memory_bytes() + s.spilled_bytes();
  const uint32_t ia2 = add_whole(s, a);  // a duplicate: rolled back
  EXPECT_EQ(ia2, ia);
  EXPECT_EQ(s.memory_bytes() + s.spilled_bytes(), before);
  EXPECT_EQ(s.duplicate_members(), 1u);
  const uint32_t ic = add_whole(s, c);  // written where the duplicate was
  EXPECT_GT(s.spilled_bytes(), 0u);
  s.bind(1, ia);
  s.bind(2, ib);
  s.bind(3, ic);
  s.bind(4, ia2);
  s.seal();
  EXPECT_EQ(read_all(s, 1, a.size()), a);
  EXPECT_EQ(read_all(s, 2, b.size()), b);
  EXPECT_EQ(read_all(s, 3, c.size()), c);
  EXPECT_EQ(read_all(s, 4, a.size()), a);
  EXPECT_TRUE(s.hash(2) == content_hash(b.data(), b.size()));
  EXPECT_TRUE(s.identical(1, 4, a.size()));
  EXPECT_FALSE(s.identical(1, 2, a.size()));
  std::vector<uint8_t> part(1000);  // a range inside, across the boundary
  ASSERT_EQ(s.read(2, 1000, part.size(), part.data()), 0);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), b.begin() + 1000));
  EXPECT_NE(s.read(2, b.size() - 10, 11, part.data()), 0);  // past the end
}

TEST(ContentStoreTest, HolesReadAsZerosAndAreHashed) {
  ContentStore s("/tmp", 1 << 20, false);
  const auto d1 = bytes(5000, 4), d2 = bytes(100, 5);
  s.begin();
  s.add(8192, d1.data(), d1.size());
  s.add(100000, d2.data(), d2.size());
  const uint64_t size = 200000;  // a trailing hole too
  const uint32_t id = s.finish(size);
  EXPECT_EQ(s.memory_bytes(), d1.size() + d2.size());  // holes take no store bytes
  s.bind(7, id);
  s.seal();
  std::vector<uint8_t> want(size, 0);
  std::copy(d1.begin(), d1.end(), want.begin() + 8192);
  std::copy(d2.begin(), d2.end(), want.begin() + 100000);
  EXPECT_EQ(read_all(s, 7, size), want);
  EXPECT_TRUE(s.hash(7) == content_hash(want.data(), want.size()));
  std::vector<uint8_t> mid(50000);
  ASSERT_EQ(s.read(7, 10000, mid.size(), mid.data()), 0);
  EXPECT_TRUE(std::equal(mid.begin(), mid.end(), want.begin() + 10000));
}

TEST(ContentStoreTest, ZerosWrittenOutInFullAreNotStored) {
  // A member as a tar holds a file with empty pages: data, 300,000 zeros, data, handed over in
  // blocks that do not line up with the 64 KiB windows.
  ContentStore s("/tmp", 1 << 20, false);
  const auto d1 = bytes(5000, 8), d2 = bytes(70000, 9);
  std::vector<uint8_t> whole(d1);
  whole.resize(305000, 0);
  whole.insert(whole.end(), d2.begin(), d2.end());
  s.begin();
  for (size_t at = 0; at < whole.size(); at += 10000)
    s.add(at, whole.data() + at, std::min<size_t>(10000, whole.size() - at));
  const uint32_t id = s.finish(whole.size());
  // What is stored: the blocks that hold data, not the 29 that hold only zeros.
  EXPECT_EQ(s.memory_bytes(), 10000u + 10000u + 65000u);
  s.bind(1, id);
  s.seal();
  EXPECT_EQ(read_all(s, 1, whole.size()), whole);
  EXPECT_TRUE(s.hash(1) == content_hash(whole.data(), whole.size()));
  EXPECT_TRUE(s.range_is_hole(1, 65536, 65536));
  EXPECT_FALSE(s.range_is_hole(1, 0, 65536));
  // All zeros: nothing stored, read as zeros.
  const std::vector<uint8_t> zeros(200000, 0);
  const uint32_t z = add_whole(s, zeros);
  EXPECT_EQ(s.memory_bytes(), 10000u + 10000u + 65000u);
  s.bind(2, z);
  EXPECT_EQ(read_all(s, 2, zeros.size()), zeros);
}

TEST(ContentStoreTest, KeepsDuplicatesWhenAskedTo) {
  ContentStore s("/tmp", 1 << 20, true);
  const auto a = bytes(1000, 6);
  EXPECT_NE(add_whole(s, a), add_whole(s, a));
  EXPECT_EQ(s.duplicate_members(), 0u);
}

TEST(MemberPathTest, StaysInsideTheRoot) {
  std::string out, why;
  auto ok = [&](const char* in, const char* want) {
    EXPECT_TRUE(normalize_member_path(in, out, why)) << in;
    EXPECT_EQ(out, want) << in;
  };
  ok("a/b", "a/b");
  ok("/abs/path", "abs/path");
  ok("//x//y/", "x/y");
  ok("./a/./b/.", "a/b");
  ok("a/../b", "b");
  ok("./", "");
  ok("/", "");
  for (const char* bad : {"..", "../x", "a/../../b", "/../etc", "a/b/../../.."}) {
    EXPECT_FALSE(normalize_member_path(bad, out, why)) << bad;
    EXPECT_NE(why.find("climbs out"), std::string::npos) << bad;
  }
  EXPECT_TRUE(normalize_member_path("d/" + std::string(255, 'n'), out, why));
  EXPECT_FALSE(normalize_member_path("d/" + std::string(256, 'n'), out, why));
}

}  // namespace
}  // namespace sqar
