// ReuseIndex: an earlier image made with the same codec and block size yields its files'
// stored blocks by (size, XXH3-128); another compressor or block size makes it unusable with
// a reason.
#include "dedup/reuse_index.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/content_hash.h"
#include "common/hash.h"
#include "reader_test_util.h"
#include "writer/create.h"

namespace sqar {
namespace {

namespace fs = std::filesystem;

class ReuseIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = dir_.path() / "src";
    fs::create_directories(src_);
    big_ = testutil::random_bytes(3 * 131072 + 100, 7, true);
    testutil::write_file(src_ / "big", big_);
    testutil::write_file(src_ / "small", "a small file\n");
    old_ = (dir_.path() / "old.sqfs").string();
    CreateOptions opt;
    opt.scan.sources = {src_.string() + "/"};
    opt.image = old_;
    opt.threads = 1;
    create_image(opt);
  }
  testutil::TempDir dir_;
  fs::path src_;
  std::string old_, big_;
};

TEST_F(ReuseIndexTest, FindsAFileByItsContent) {
  std::string why;
  ReuseIndex index = ReuseIndex::open(old_, CodecConfig{}, why);
  EXPECT_TRUE(why.empty()) << why;
  ASSERT_FALSE(index.empty());
  EXPECT_TRUE(index.has_size(big_.size()));
  const auto first = index.find(big_.size(), content_hash(big_.data(), big_.size()));
  ASSERT_TRUE(first);
  EXPECT_FALSE(index.find(big_.size(), hash128("other", 5)));
  // Its first block, as stored in OLD, is read back whole.
  const ReuseIndex::Block& b = index.block(*first);
  std::vector<uint8_t> stored;
  ASSERT_TRUE(index.read(b, stored));
  EXPECT_EQ(stored.size(), size_t(b.size_word & 0xFFFFFF));
  EXPECT_GT(b.position, 0u);
}

TEST_F(ReuseIndexTest, AnotherCodecOrBlockSizeIsUnusable) {
  std::string why;
  CodecConfig gzip;
  gzip.id = CodecId::gzip;
  EXPECT_TRUE(ReuseIndex::open(old_, gzip, why).empty());
  EXPECT_FALSE(why.empty());
  why.clear();
  CodecConfig small_blocks;
  small_blocks.block_size = 4096;
  EXPECT_TRUE(ReuseIndex::open(old_, small_blocks, why).empty());
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace sqar
