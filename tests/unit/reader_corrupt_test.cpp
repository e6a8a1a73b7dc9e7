// Damaged images: the reader must throw sqar::Error, never crash, hang or run away.
#include <gtest/gtest.h>

#include <cstring>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"
#include "reader/image.h"
#include "reader_test_util.h"

namespace {

using namespace sqar::testutil;
using sqar::reader::Image;
using sqar::reader::Inode;

// Reads everything reachable; returns the error message or "" when the image read cleanly.
std::string read_everything(const fs::path& img) {
  try {
    auto image = Image::open(img, {.offset = 0, .cache_bytes = 1 << 20});
    std::vector<char> buf(1 << 18);
    image->walk([&](const std::string&, const Inode& ino) {
      image->xattrs(ino);
      if (ino.is_regular())
        for (uint64_t off = 0; off < ino.size; off += buf.size()) image->read_file(ino, off, buf.data(), buf.size());
      if (ino.is_regular() && ino.fragment_index != sqar::fmt::kNoFragment) image->read_fragment(ino.fragment_index);
      if (ino.is_dir())
        for (const auto& e : image->read_dir(ino)) image->lookup(ino, e.name);
      return true;
    });
    image->manifest();
    return "";
  } catch (const sqar::Error& e) {
    return e.what();
  }
}

fs::path build_image(TempDir& tmp, const std::string& opts) {
  fs::path src = tmp.path() / "src", img = tmp.path() / "img.sqfs";
  fs::create_directories(src / "d1/d2");
  write_file(src / "a.txt", random_bytes(20000, 7, true));
  write_file(src / "d1/b.bin", random_bytes(150000, 8, false));
  write_file(src / "d1/d2/xx", "tiny");
  write_file(src / "d1/d2/ab", "other");
  fs::create_symlink("a.txt", src / "ln");
  setxattr((src / "a.txt").c_str(), "user.k", "v", 1, 0);
  for (int i = 0; i < 300; ++i) write_file(src / "d1" / ("n" + std::to_string(i)), std::to_string(i));
  if (run("mksquashfs " + src.string() + " " + img.string() + " -noappend -quiet -no-progress -xattrs " + opts) != 0)
    return {};
  return img;
}

TEST(ReaderCorrupt, RandomByteFlipsNeverCrash) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  for (std::string opts : {"-comp gzip", "-noI -noD -noF -noX -comp lz4"}) {
    TempDir tmp;
    fs::path img = build_image(tmp, opts);
    ASSERT_FALSE(img.empty());
    ASSERT_EQ(read_everything(img), "");
    const std::string orig = read_host_file(img);
    auto image = Image::open(img);
    const uint64_t meta_start = image->super().inode_table_start;
    const uint64_t end = image->super().bytes_used;
    std::mt19937 rng(42);
    fs::path bad = tmp.path() / "bad.sqfs";
    int errors = 0;
    for (int iter = 0; iter < 250; ++iter) {
      std::string s = orig;
      int flips = 1 + int(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        // Mostly the metadata tables (where the structure is), sometimes anywhere.
        uint64_t pos = (iter % 4 == 0) ? rng() % end : meta_start + rng() % (end - meta_start);
        s[pos] = char(s[pos] ^ (1 << (rng() % 8)) ^ (iter % 3 == 0 ? 0xff : 0));
      }
      write_file(bad, s);
      if (!read_everything(bad).empty()) ++errors;
    }
    EXPECT_GT(errors, 10) << "flips should usually be detected";
  }
}

TEST(ReaderCorrupt, TruncatedImagesAreRejected) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  TempDir tmp;
  fs::path img = build_image(tmp, "-comp zstd");
  ASSERT_FALSE(img.empty());
  const std::string orig = read_host_file(img);
  fs::path bad = tmp.path() / "bad.sqfs";
  for (size_t len : {size_t(0), size_t(50), size_t(96), orig.size() / 2, orig.size() - 4097}) {
    write_file(bad, orig.substr(0, len));
    std::string msg = read_everything(bad);
    EXPECT_NE(msg, "") << len;
    EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
  }
}

// With uncompressed metadata (-noI -noD) names and inodes can be patched in place.
TEST(ReaderCorrupt, RejectsDotDotSlashAndDuplicateNames) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  TempDir tmp;
  fs::path img = build_image(tmp, "-noI -noD -noF -noX");
  ASSERT_FALSE(img.empty());
  const std::string orig = read_host_file(img);
  auto d2_listing_name = [&](const std::string& from, const std::string& to) {
    std::string s = orig;
    // "xx" appears as a name in d1/d2's listing (and nowhere else as "\x01\x00xx" pattern:
    // type 2 (file), name_size 1 (stored -1), then the name).
    std::string needle = std::string("\x02\x00\x01\x00", 4) + from;
    size_t at = s.find(needle);
    EXPECT_NE(at, std::string::npos);
    s.replace(at + 4, from.size(), to);
    fs::path bad = tmp.path() / "bad.sqfs";
    write_file(bad, s);
    return read_everything(bad);
  };
  EXPECT_NE(d2_listing_name("xx", "..").find("invalid name"), std::string::npos);
  EXPECT_NE(d2_listing_name("xx", "a/").find("invalid name"), std::string::npos);
  EXPECT_NE(d2_listing_name("xx", std::string("a\0", 2)).find("invalid name"), std::string::npos);
  EXPECT_NE(d2_listing_name("xx", "ab").find("unsorted or duplicated"), std::string::npos);
}

TEST(ReaderCorrupt, DetectsDirectoryLoop) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  TempDir tmp;
  fs::path img = build_image(tmp, "-noI -noD -noF -noX");
  ASSERT_FALSE(img.empty());
  std::string s = read_host_file(img);
  auto image = Image::open(img);
  Inode root = image->root();
  Inode d2 = *image->resolve_path("d1/d2");
  ASSERT_EQ(d2.type, 1);  // basic directory
  // Uncompressed metadata: byte o of block b sits at table + b + 2 + o (if in one block).
  uint64_t pos = image->super().inode_table_start + (d2.ref >> 16) + 2 + (d2.ref & 0xffff);
  ASSERT_LT((d2.ref & 0xffff) + 32, 8192u);
  ASSERT_EQ(sqar::load_le32(reinterpret_cast<const uint8_t*>(&s[pos + 12])), d2.inode_number);
  // Point d2's listing at d1's listing: d2 now contains itself, forever.
  Inode d1 = *image->resolve_path("d1");
  uint8_t* p = reinterpret_cast<uint8_t*>(&s[pos + 16]);
  sqar::store_le32(p, d1.dir_block_start);
  sqar::store_le16(p + 8, uint16_t(d1.dir_file_size));
  sqar::store_le16(p + 10, d1.dir_offset);
  fs::path bad = tmp.path() / "bad.sqfs";
  write_file(bad, s);
  EXPECT_NE(read_everything(bad).find("directory loop"), std::string::npos) << read_everything(bad);
  (void)root;
}

}  // namespace
