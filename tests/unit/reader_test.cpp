// Reader core tests: images built at test time by mksquashfs / gensquashfs, read back with
// sqar::reader::Image and compared with the source tree.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <thread>

#include "common/error.h"
#include "format/squashfs.h"
#include "reader/image.h"
#include "reader_test_util.h"
#include "writer/create.h"

namespace {

using namespace sqar::testutil;
using sqar::reader::Image;
using sqar::reader::Inode;

struct Fixture {
  TempDir tmp;
  fs::path src = tmp.path() / "src";
  fs::path img = tmp.path() / "img.sqfs";
};

std::map<std::string, std::string> host_xattrs(const fs::path& p) {
  std::map<std::string, std::string> out;
  char names[4096];
  ssize_t n = llistxattr(p.c_str(), names, sizeof names);
  for (ssize_t i = 0; i < n;) {
    std::string name(names + i);
    i += ssize_t(name.size() + 1);
    if (name.rfind("user.", 0) != 0) continue;  // security.* etc. depend on the host
    char val[8192];
    ssize_t v = lgetxattr(p.c_str(), name.c_str(), val, sizeof val);
    out[name] = std::string(val, size_t(std::max<ssize_t>(v, 0)));
  }
  return out;
}

// Compares every entry of the source tree with the image (metadata and content).
void compare_tree(Image& image, const fs::path& src, bool xattrs) {
  size_t count = 0;
  for (auto it = fs::recursive_directory_iterator(src); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& p = it->path();
    const std::string rel = p.lexically_relative(src).string();
    SCOPED_TRACE(rel);
    struct stat hs;
    ASSERT_EQ(lstat(p.c_str(), &hs), 0);
    auto ino = image.resolve_path(rel);
    ASSERT_TRUE(ino.has_value());
    struct stat is;
    sqar::reader::fill_stat(image, *ino, &is);
    EXPECT_EQ(is.st_mode, hs.st_mode);
    EXPECT_EQ(is.st_uid, hs.st_uid);
    EXPECT_EQ(is.st_gid, hs.st_gid);
    EXPECT_EQ(is.st_mtime, hs.st_mtime);
    EXPECT_EQ(is.st_nlink, hs.st_nlink);
    if (S_ISREG(hs.st_mode) || S_ISLNK(hs.st_mode)) {
      EXPECT_EQ(is.st_size, hs.st_size);
    }
    if (S_ISCHR(hs.st_mode) || S_ISBLK(hs.st_mode)) {
      EXPECT_EQ(is.st_rdev, hs.st_rdev);
    }
    if (S_ISLNK(hs.st_mode)) {
      EXPECT_EQ(image.read_symlink(*ino), fs::read_symlink(p).string());
    }
    if (S_ISREG(hs.st_mode)) {
      std::string want = read_host_file(p);
      std::string got(want.size() + 10, '?');
      size_t n = image.read_file(*ino, 0, got.data(), got.size());
      got.resize(n);
      EXPECT_TRUE(got == want) << "content differs";
      // Block by block, bypassing the cache (extract's path): same bytes, 0 past the end.
      const uint64_t bs = image.super().block_size;
      std::vector<uint8_t> block(bs);
      std::string blocks;
      uint64_t index = 0;
      for (size_t m; (m = image.read_block(*ino, index, block.data())) > 0; ++index)
        blocks.append(reinterpret_cast<const char*>(block.data()), m);
      EXPECT_EQ(index, (want.size() + bs - 1) / bs);
      EXPECT_TRUE(blocks == want) << "read_block content differs";
      // The tail end, seen from its whole fragment block (what sqarfs pushes to the page cache).
      if (ino->fragment_index != sqar::fmt::kNoFragment) {
        sqar::reader::Chunk frag = image.read_fragment(ino->fragment_index);
        const size_t tail = size_t(want.size() % bs);
        ASSERT_LE(ino->fragment_offset + tail, frag.len);
        EXPECT_TRUE(std::string(reinterpret_cast<const char*>(frag.data) + ino->fragment_offset, tail) ==
                    want.substr(want.size() - tail))
            << "tail in its fragment block differs";
      }
    }
    if (xattrs) {
      std::map<std::string, std::string> got;
      for (auto& [k, v] : image.xattrs(*ino))
        if (k.rfind("user.", 0) == 0) got[k] = v;
      EXPECT_EQ(got, host_xattrs(p));
    }
    ++count;
  }
  size_t walked = 0;
  image.walk([&](const std::string& path, const Inode&) {
    if (!path.empty()) ++walked;
    return true;
  });
  EXPECT_EQ(walked, count);
}

class ReaderCompressor : public ::testing::TestWithParam<std::string> {};

TEST_P(ReaderCompressor, ReadsMksquashfsImage) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  Fixture f;
  make_tree(f.src, true);
  bool devices = mknod((f.src / "chardev").c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0 &&
                 mknod((f.src / "blockdev").c_str(), S_IFBLK | 0600, makedev(259, 70000)) == 0;
  (void)devices;
  ASSERT_EQ(run("mksquashfs " + f.src.string() + " " + f.img.string() +
                " -noappend -quiet -no-progress -xattrs -comp " + GetParam()),
            0);
  auto image = Image::open(f.img);
  EXPECT_EQ(sqar::codec_name(image->super().compressor), GetParam());
  compare_tree(*image, f.src, true);
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, ReaderCompressor, ::testing::Values("gzip", "xz", "lzo", "lz4", "zstd"));

TEST(Reader, VariantsWithoutFragmentsUncompressedAndAlwaysFragments) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  Fixture f;
  make_tree(f.src, false);
  for (std::string opts :
       {"-no-fragments -no-xattrs", "-noI -noD -noF -noX -no-xattrs", "-always-use-fragments -no-xattrs",
        "-b 4096 -no-xattrs", "-b 1M -no-xattrs -comp zstd -Xcompression-level 3"}) {
    SCOPED_TRACE(opts);
    ASSERT_EQ(run("mksquashfs " + f.src.string() + " " + f.img.string() + " -noappend -quiet -no-progress " + opts), 0);
    auto image = Image::open(f.img);
    compare_tree(*image, f.src, false);
  }
}

TEST(Reader, ReadsGensquashfsImage) {
  if (!have_tool("gensquashfs")) GTEST_SKIP() << "gensquashfs is not installed";
  Fixture f;
  make_tree(f.src, false);
  fs::remove(f.src / "fifo");  // keep to what every gensquashfs version packs
  ASSERT_EQ(run("gensquashfs --pack-dir " + f.src.string() + " -c zstd -q -f " + f.img.string()), 0);
  auto image = Image::open(f.img);
  size_t files = 0;
  image->walk([&](const std::string& path, const Inode& ino) {
    if (ino.is_regular()) {
      std::string want = read_host_file(f.src / path);
      std::string got(want.size(), '\0');
      EXPECT_EQ(image->read_file(ino, 0, got.data(), got.size()), want.size());
      EXPECT_TRUE(got == want) << path;
      ++files;
    }
    return true;
  });
  EXPECT_GT(files, 1500u);
}

// libsquashfs indexes every directory header (one per 256 entries or inode block), not one
// per metadata block: a directory of 10,000 short names has 60 or so index entries for a
// listing of 150 KB. The reader must take what its own writer (and the kernel) accept.
TEST(Reader, ReadsTheIndexOfALargeDirectoryItsWriterMade) {
  TempDir dir;
  const fs::path src = dir.path() / "src";
  fs::create_directories(src / "d");
  for (int i = 0; i < 10000; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "f%06d", i);
    write_file(src / "d" / name, "");
  }
  sqar::CreateOptions opt;
  opt.scan.sources = {src.string() + "/"};
  opt.image = (dir.path() / "big-dir.sqfs").string();
  opt.threads = 1;
  sqar::create_image(opt);
  auto image = Image::open(opt.image);
  auto d = image->resolve_path("d");
  ASSERT_TRUE(d);
  EXPECT_GT(d->dir_index_count, d->dir_file_size / sqar::fmt::kMetadataBlockSize + 2)
      << "more index entries than metadata blocks: the case this test is about";
  auto entries = image->read_dir(*d);
  ASSERT_EQ(entries.size(), 10000u);
  for (size_t i = 0; i < entries.size(); i += 97) {
    auto found = image->lookup(*d, entries[i].name);
    ASSERT_TRUE(found) << entries[i].name;
    EXPECT_EQ(found->inode_ref, entries[i].inode_ref);
  }
  EXPECT_TRUE(image->resolve_path("d/f009999"));
  EXPECT_FALSE(image->lookup(*d, "f010000"));
}

TEST(Reader, LookupUsesDirectoryIndexAndExportTable) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  Fixture f;
  make_tree(f.src, false);
  ASSERT_EQ(run("mksquashfs " + f.src.string() + " " + f.img.string() + " -noappend -quiet -no-progress -exports"), 0);
  auto image = Image::open(f.img);
  auto big = image->resolve_path("big");
  ASSERT_TRUE(big);
  EXPECT_GT(big->dir_index_count, 0) << "large directory should carry an index";
  auto entries = image->read_dir(*big);
  ASSERT_EQ(entries.size(), 1500u);
  for (const auto& e : entries) {
    auto found = image->lookup(*big, e.name);
    ASSERT_TRUE(found) << e.name;
    EXPECT_EQ(found->inode_ref, e.inode_ref);
  }
  EXPECT_FALSE(image->lookup(*big, "file-with-a-longish-name-"));
  EXPECT_FALSE(image->lookup(*big, "zzz"));
  EXPECT_FALSE(image->lookup(*big, "a"));
  EXPECT_FALSE(image->lookup(*big, ".."));
  EXPECT_FALSE(image->resolve_path("nope/x"));
  EXPECT_THROW(image->resolve_path("small.txt/x"), sqar::Error);

  ASSERT_TRUE(image->has_export_table());
  image->walk([&](const std::string& path, const Inode& ino) {
    auto ref = image->inode_ref_by_number(ino.inode_number);
    EXPECT_TRUE(ref && *ref == ino.ref) << path;
    return true;
  });
}

TEST(Reader, ImageAtOffsetAndManifestTrailer) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  Fixture f;
  fs::create_directories(f.src);
  write_file(f.src / "a", "alpha");
  ASSERT_EQ(run("mksquashfs " + f.src.string() + " " + f.img.string() + " -noappend -quiet -no-progress"), 0);
  std::string raw = read_host_file(f.img);
  uint32_t fragment_blocks = 0;
  {
    auto image = Image::open(f.img);
    EXPECT_FALSE(image->manifest());
    // Trailer at align_up(bytes_used, 4096), i.e. right after mksquashfs' 4 KiB padding.
    ASSERT_EQ(raw.size(), sqar::fmt::align_up(image->super().bytes_used, 4096));
    fragment_blocks = image->super().fragment_count;
  }
  // One fragment digest per fragment block, as a manifest of this filesystem has.
  auto trailer = sqar::encode_manifest({{1, {11, 22}}, {2, {33, 44}}},
                                       std::vector<sqar::Hash128>(fragment_blocks, sqar::Hash128{5, 6}));
  fs::path with = f.tmp.path() / "with-offset.bin";
  std::string junk(12345, 'J');
  write_file(with, junk + raw + std::string(trailer.begin(), trailer.end()));
  auto image = Image::open(with, {.offset = junk.size()});
  auto a = image->resolve_path("a");
  ASSERT_TRUE(a);
  char buf[16];
  ASSERT_EQ(image->read_file(*a, 0, buf, sizeof buf), 5u);
  EXPECT_EQ(std::string(buf, 5), "alpha");
  auto m = image->manifest();
  ASSERT_TRUE(m);
  ASSERT_EQ(m->files.size(), 2u);
  EXPECT_EQ(m->files[1].hash.high, 44u);
  EXPECT_THROW(Image::open(with), sqar::Error);  // no superblock at offset 0
}

TEST(Reader, ConcurrentRandomReads) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  Fixture f;
  fs::create_directories(f.src);
  std::vector<std::string> contents;
  for (int i = 0; i < 4; ++i) {
    contents.push_back(random_bytes(700000 + i * 1000, 100 + i, i % 2 == 0));
    write_file(f.src / ("f" + std::to_string(i)), contents.back());
  }
  ASSERT_EQ(run("mksquashfs " + f.src.string() + " " + f.img.string() + " -noappend -quiet -no-progress -comp zstd"),
            0);
  // A small cache forces evictions while other threads hold blocks.
  auto image = Image::open(f.img, {.offset = 0, .cache_bytes = 300000});
  std::vector<Inode> inodes;
  for (int i = 0; i < 4; ++i) inodes.push_back(*image->resolve_path("f" + std::to_string(i)));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::string buf;
      for (int i = 0; i < 400; ++i) {
        int which = int(rng() % 4);
        const std::string& want = contents[size_t(which)];
        size_t off = rng() % want.size();
        size_t len = 1 + rng() % 200000;
        buf.resize(len);
        size_t n = image->read_file(inodes[size_t(which)], off, buf.data(), len);
        if (n != std::min(len, want.size() - off) || buf.compare(0, n, want, off, n) != 0) ++bad;
        if (i % 50 == 0) image->prefetch_block(inodes[size_t(which)], rng() % 6);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  auto stats = image->cache_stats();
  EXPECT_GT(stats.data_hits, 0u);
  EXPECT_LE(stats.data_bytes, 300000u + 16 * (131072 + 128));
}

// sqarfs decompresses a looked-up file's first block ahead of its READ: the first full block,
// or the fragment block when the whole file is a tail; nothing for empty or sparse starts.
TEST(Reader, PrefetchFirstBlockLoadsBlockOrFragmentOnce) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  Fixture f;
  fs::create_directories(f.src);
  write_file(f.src / "big", random_bytes(300000, 7, true));
  write_file(f.src / "small", "a small file that lives in a fragment block");
  write_file(f.src / "empty", "");
  write_file(f.src / "holes", std::string(3 * 131072, '\0') + "tail");
  ASSERT_EQ(run("mksquashfs " + f.src.string() + " " + f.img.string() + " -noappend -quiet -no-progress"), 0);
  auto image = Image::open(f.img);
  for (const char* name : {"big", "small"}) {
    SCOPED_TRACE(name);
    Inode file = *image->resolve_path(name);
    const uint64_t misses = image->cache_stats().data_misses;
    EXPECT_TRUE(image->would_load_first_block(file));
    image->prefetch_first_block(file);
    EXPECT_EQ(image->cache_stats().data_misses, misses + 1);
    EXPECT_FALSE(image->would_load_first_block(file));  // cached now
    const uint64_t hits = image->cache_stats().data_hits;
    char buf[16];
    ASSERT_EQ(image->read_file(file, 0, buf, sizeof buf), sizeof buf);
    EXPECT_EQ(image->cache_stats().data_hits, hits + 1);  // the read found it decompressed
  }
  for (const char* name : {"empty", "holes"}) {
    SCOPED_TRACE(name);
    Inode file = *image->resolve_path(name);
    EXPECT_FALSE(image->would_load_first_block(file));
  }
}

TEST(Reader, RejectsNonImages) {
  TempDir tmp;
  EXPECT_THROW(Image::open((tmp.path() / "missing").string()), sqar::Error);
  EXPECT_THROW(Image::open(tmp.path().string()), sqar::Error);
  write_file(tmp.path() / "junk", std::string(4096, 'x'));
  try {
    Image::open((tmp.path() / "junk").string());
    FAIL() << "junk accepted";
  } catch (const sqar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("junk"), std::string::npos) << "message names the file";
  }
}

}  // namespace
