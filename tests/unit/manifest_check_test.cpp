// ManifestCheck against an image sqar packed (so with a manifest trailer): a walk may meet one
// inode under several names, hard-linked or not, and learning it again must not change what the
// fragment digests say.
#include "ops/manifest_check.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_map>

#include "reader/image.h"
#include "reader_test_util.h"
#include "writer/create.h"

namespace sqar {
namespace {

namespace fs = std::filesystem;

TEST(ManifestCheck, AnInodeLearnedTwiceLeavesItsFragmentDigestRight) {
  testutil::TempDir dir;
  const fs::path src = dir.path() / "src";
  fs::create_directories(src);
  // Small files share a fragment block, which the manifest covers with one digest.
  testutil::write_file(src / "a", "alpha\n");
  testutil::write_file(src / "b", "beta\n");
  CreateOptions opt;
  opt.scan.sources = {src.string() + "/"};
  opt.image = (dir.path() / "img.sqfs").string();
  opt.threads = 1;
  create_image(opt);

  auto image = reader::Image::open(opt.image, {});
  ops::ManifestCheck check(*image);
  ASSERT_TRUE(check.has_manifest());
  std::unordered_map<uint32_t, Hash128> read;
  image->walk([&](const std::string&, const reader::Inode& ino) {
    if (!ino.is_regular()) return true;
    check.learn(ino);
    check.learn(ino);  // as for a second name of an inode whose link count says 1
    EXPECT_TRUE(check.in_fragment_digest(ino));
    read.emplace(ino.inode_number, reader::stored_content_hash(*image, ino, HashScheme::kChunked));
    return true;
  });
  ASSERT_EQ(read.size(), 2u);
  EXPECT_TRUE(check.bad_fragments(read).empty());

  // A wrong content is still caught.
  read.begin()->second.low ^= 1;
  EXPECT_EQ(check.bad_fragments(read).size(), 1u);
}

}  // namespace
}  // namespace sqar
