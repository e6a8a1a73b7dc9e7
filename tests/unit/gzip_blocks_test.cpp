// sqar decodes gzip blocks with libdeflate; zlib's inflate is the reference the kernel and
// unsquashfs use. Every compressed block of gzip images made by mksquashfs, gensquashfs and sqar
// itself must decode to the same bytes through both.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include "common/endian.h"
#include "reader/image.h"
#include "reader_test_util.h"
#include "writer/create.h"

namespace {

using namespace sqar::testutil;
using sqar::reader::Image;
using sqar::reader::Inode;

constexpr uint32_t kDataUncompressed = 1u << 24;
constexpr uint16_t kMetaUncompressed = 0x8000;
constexpr uint64_t kNoTable = ~uint64_t(0);

struct BlockCounts {
  size_t data = 0, fragment = 0, metadata = 0;
};

std::string pread_exact(int fd, uint64_t pos, size_t len) {
  std::string buf(len, '\0');
  EXPECT_EQ(pread(fd, buf.data(), len, off_t(pos)), ssize_t(len)) << "at " << pos;
  return buf;
}

uint64_t le64_at(int fd, uint64_t pos) {
  std::string b = pread_exact(fd, pos, 8);
  return sqar::load_le64(reinterpret_cast<const uint8_t*>(b.data()));
}

// Decodes one stored block with sqar's gzip codec and with zlib; both must agree.
void compare_decoders(sqar::Codec& codec, const std::string& stored, size_t max_out, const std::string& what) {
  std::vector<uint8_t> ours(max_out), ref(max_out);
  auto n = codec.decompress(reinterpret_cast<const uint8_t*>(stored.data()), stored.size(), ours.data(), ours.size());
  uLongf ref_len = uLongf(ref.size());
  uLong src_len = uLong(stored.size());
  int rc = uncompress2(ref.data(), &ref_len, reinterpret_cast<const Bytef*>(stored.data()), &src_len);
  ASSERT_EQ(rc, Z_OK) << what << ": zlib refuses a block of a well-formed image";
  ASSERT_TRUE(n.has_value()) << what << ": libdeflate refuses a block zlib decodes";
  ASSERT_EQ(*n, size_t(ref_len)) << what;
  EXPECT_TRUE(std::equal(ours.begin(), ours.begin() + long(*n), ref.begin())) << what << ": bytes differ";
}

// Walks the image's compressed data blocks, fragment blocks and the metadata blocks of its
// inode and directory tables, comparing the two decoders on each.
BlockCounts compare_all_blocks(const fs::path& img) {
  BlockCounts counts;
  auto image = Image::open(img);
  EXPECT_EQ(image->super().compressor, sqar::CodecId::gzip);
  auto codec = sqar::make_codec(image->codec_config());
  const auto& sb = image->super();
  const size_t bs = sb.block_size;
  int fd = ::open(img.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  const uint64_t base = image->offset();

  image->walk([&](const std::string& path, const Inode& ino) {
    if (!ino.is_regular()) return true;
    for (size_t i = 0; i < ino.block_sizes.size(); ++i) {
      uint32_t word = ino.block_sizes[i];
      if (word == 0 || (word & kDataUncompressed)) continue;
      compare_decoders(*codec, pread_exact(fd, base + ino.block_offsets[i], word), bs, path);
      ++counts.data;
    }
    return true;
  });
  for (uint32_t f = 0; f < sb.fragment_count; ++f) {
    auto loc = image->fragment_location(f);
    if (loc.size_word == 0 || (loc.size_word & kDataUncompressed)) continue;
    compare_decoders(*codec, pread_exact(fd, base + loc.position, loc.size_word), bs, "fragment " + std::to_string(f));
    ++counts.fragment;
  }
  // The inode table runs up to the directory table; the directory table up to the first
  // metadata block of whichever lookup table comes next.
  uint64_t dir_end = sb.bytes_used;
  for (uint64_t index : {sb.fragment_table_start, sb.export_table_start, sb.id_table_start})
    if (index != kNoTable && index > sb.directory_table_start) dir_end = std::min(dir_end, le64_at(fd, base + index));
  if (sb.xattr_table_start != kNoTable) dir_end = std::min(dir_end, le64_at(fd, base + sb.xattr_table_start));
  for (auto [start, end] :
       {std::pair{sb.inode_table_start, sb.directory_table_start}, std::pair{sb.directory_table_start, dir_end}}) {
    for (uint64_t pos = start; pos + 2 <= end;) {
      std::string hdr = pread_exact(fd, base + pos, 2);
      uint16_t word = sqar::load_le16(reinterpret_cast<const uint8_t*>(hdr.data()));
      uint16_t len = word & 0x7FFF;
      if (!(word & kMetaUncompressed)) {
        compare_decoders(*codec, pread_exact(fd, base + pos + 2, len), 8192,
                         "metadata block at " + std::to_string(pos));
        ++counts.metadata;
      }
      pos += 2 + len;
    }
  }
  ::close(fd);
  return counts;
}

// Text of varying redundancy, so blocks use stored, fixed and dynamic Huffman deflate blocks.
void add_text_files(const fs::path& root) {
  fs::create_directories(root / "text");
  for (int i = 0; i < 40; ++i) {
    std::string s;
    for (int line = 0; s.size() < size_t(2000 + i * 9000); ++line)
      s += "line " + std::to_string(line * (i + 1)) + " of file " + std::to_string(i) + ": " +
           random_bytes(size_t(i % 7) * 3, uint32_t(line + i), i % 2 == 0) + "\n";
    write_file(root / "text" / ("f" + std::to_string(i)), s);
  }
}

class GzipBlocks : public ::testing::Test {
 protected:
  void SetUp() override {
    make_tree(src, false);
    fs::remove(src / "fifo");  // keep to what every gensquashfs version packs
    add_text_files(src);
  }
  void expect_blocks(const BlockCounts& c) {
    EXPECT_GT(c.data, 10u);
    EXPECT_GT(c.fragment, 0u);
    EXPECT_GT(c.metadata, 2u);
  }
  TempDir tmp;
  fs::path src = tmp.path() / "src";
  fs::path img = tmp.path() / "img.sqfs";
};

TEST_F(GzipBlocks, MksquashfsImagesDecodeIdenticallyWithZlib) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  // Default level 9; level 1 with a 256-byte window on 4 KiB blocks; every deflate strategy
  // (mksquashfs keeps the smallest per block, so fixed-Huffman and stored blocks appear).
  for (std::string opts : {"", "-b 4096 -Xcompression-level 1 -Xwindow-size 8",
                           "-Xstrategy default,filtered,huffman_only,run_length_encoded,fixed"}) {
    SCOPED_TRACE(opts);
    ASSERT_EQ(run("mksquashfs " + src.string() + " " + img.string() +
                  " -noappend -quiet -no-progress -no-xattrs -comp gzip " + opts),
              0);
    expect_blocks(compare_all_blocks(img));
  }
}

TEST_F(GzipBlocks, GensquashfsImageDecodesIdenticallyWithZlib) {
  if (!have_tool("gensquashfs")) GTEST_SKIP() << "gensquashfs is not installed";
  ASSERT_EQ(run("gensquashfs --pack-dir " + src.string() + " -c gzip -q -f " + img.string()), 0);
  expect_blocks(compare_all_blocks(img));
}

TEST_F(GzipBlocks, SqarImagesDecodeIdenticallyWithZlib) {
  for (int level : {1, 6, 9}) {
    SCOPED_TRACE(level);
    sqar::CreateOptions opt;
    opt.scan.sources = {src.string()};
    opt.image = img.string();
    opt.force = true;
    opt.data.codec.id = sqar::CodecId::gzip;
    opt.data.codec.level = level;
    sqar::create_image(opt);
    expect_blocks(compare_all_blocks(img));
  }
}

}  // namespace
