// The engines behind extract, diff and verify, driven as a front end drives them: an image
// built by create_image from a tree with every entry type, extracted and compared back, then
// checked by the verifier before and after a bit is flipped in a stored block.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ops/extractor.h"
#include "ops/tree_compare.h"
#include "ops/verifier.h"
#include "reader/image.h"
#include "reader_test_util.h"
#include "writer/create.h"

namespace sqar {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;

struct Problem {
  ops::Severity severity;
  std::string path, message;
};

// Packs the contents of src into a new image at image_path.
void pack(const fs::path& src, const std::string& image_path) {
  CreateOptions opt;
  opt.scan.sources = {src.string() + "/"};
  opt.image = image_path;
  opt.threads = 2;
  create_image(opt);
}

class OpsEnginesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = dir_.path() / "src";
    testutil::make_tree(src_, false);
    image_ = (dir_.path() / "img.sqfs").string();
    pack(src_, image_);
  }
  std::unique_ptr<reader::Image> open() { return reader::Image::open(image_, {}); }

  size_t extract(const fs::path& dest, unsigned jobs, std::vector<Problem>& problems,
                 std::vector<std::string> patterns = {}) {
    auto image = open();
    ops::ExtractOptions opt;
    opt.dest = dest.string();
    opt.jobs = jobs;
    opt.patterns = std::move(patterns);
    opt.problems = [&](ops::Severity s, const std::string& p, const std::string& m) { problems.push_back({s, p, m}); };
    return ops::Extractor(*image, opt).run();
  }

  // Every entry below root: type and permission bits, size, content or symlink target.
  static std::map<std::string, std::string> describe(const fs::path& root) {
    std::map<std::string, std::string> out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      struct stat st;
      EXPECT_EQ(::lstat(it->path().c_str(), &st), 0);
      std::string d = std::to_string(st.st_mode) + " " + std::to_string(S_ISDIR(st.st_mode) ? 0 : st.st_size) + " ";
      if (S_ISREG(st.st_mode)) d += testutil::read_host_file(it->path());
      if (S_ISLNK(st.st_mode)) d += fs::read_symlink(it->path()).string();
      // lexically: fs::relative resolves symlinks, which gave a symlink its target's key.
      out[it->path().lexically_relative(root).string()] = d;
    }
    return out;
  }

  TempDir dir_;
  fs::path src_;
  std::string image_;
};

TEST_F(OpsEnginesTest, ExtractReproducesTheTree) {
  for (unsigned jobs : {1u, 3u}) {
    const fs::path out = dir_.path() / ("out" + std::to_string(jobs));
    std::vector<Problem> problems;
    EXPECT_EQ(extract(out, jobs, problems), 0u);
    EXPECT_TRUE(problems.empty()) << problems[0].path << ": " << problems[0].message;
    EXPECT_EQ(describe(out), describe(src_)) << "-j" << jobs;
    struct stat a, b;
    ASSERT_EQ(::stat((out / "linked").c_str(), &a), 0);
    ASSERT_EQ(::stat((out / "sub/linked2").c_str(), &b), 0);
    EXPECT_EQ(a.st_ino, b.st_ino) << "hard links must stay one inode";
  }
}

// Copies of a subtree lie far apart in walk order, but their files share stored data (a
// duplicate is stored once). Extract meets them while that data is cached: every fragment
// block and every shared full block is decoded once, though the cache is smaller than what
// lies between the copies in walk order.
TEST(ExtractOrder, SharedDataIsDecodedOnceAcrossCopiesOfASubtree) {
  TempDir dir;
  const fs::path src = dir.path() / "src";
  for (const char* copy : {"a1", "a3"}) {
    fs::create_directories(src / copy);
    testutil::write_file(src / copy / "big", testutil::random_bytes(3 * 131072 + 777, 7, true));
    for (int i = 0; i < 10; ++i)
      testutil::write_file(src / copy / ("t" + std::to_string(i)), testutil::random_bytes(3000, 100 + i, true));
  }
  // Between the copies: tails filling ~4 MB of fragment blocks, twice the cache below.
  fs::create_directories(src / "a2");
  for (int i = 0; i < 40; ++i)
    testutil::write_file(src / "a2" / ("u" + std::to_string(i)), testutil::random_bytes(100000, 200 + i, true));
  const std::string image_path = (dir.path() / "img.sqfs").string();
  pack(src, image_path);

  reader::ImageOptions iopt;
  iopt.cache_bytes = 2u << 20;
  auto image = reader::Image::open(image_path, iopt);
  ops::ExtractOptions opt;
  opt.dest = (dir.path() / "out").string();
  opt.jobs = 1;  // one thread: the order of loads is the order of the batches
  std::vector<std::string> problems;
  opt.problems = [&](ops::Severity, const std::string& p, const std::string& m) { problems.push_back(p + ": " + m); };
  EXPECT_EQ(ops::Extractor(*image, opt).run(), 0u);
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  for (auto it = fs::recursive_directory_iterator(src); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file()) continue;
    EXPECT_EQ(testutil::read_host_file(dir.path() / "out" / it->path().lexically_relative(src)),
              testutil::read_host_file(it->path()))
        << it->path();
  }
  const uint64_t shared_full_blocks = 3;  // big's, stored once for a1 and a3
  ASSERT_GT(image->super().fragment_count, 20u) << "a2's tails must not fit in the cache";
  EXPECT_EQ(image->cache_stats().data_misses, image->super().fragment_count + shared_full_blocks);
}

// ExtractOptions::stop set before anything is written: every entry is left out and counted in
// one line, none is named, and nothing is made below the target.
TEST_F(OpsEnginesTest, ExtractStoppedLeavesOutEveryEntryInOneLine) {
  const std::atomic<bool> stop{true};
  auto image = open();
  ops::ExtractOptions opt;
  opt.dest = (dir_.path() / "out").string();
  opt.jobs = 2;
  opt.stop = &stop;
  std::vector<Problem> problems;
  opt.problems = [&](ops::Severity s, const std::string& p, const std::string& m) { problems.push_back({s, p, m}); };
  const size_t failed = ops::Extractor(*image, opt).run();
  EXPECT_EQ(failed, describe(src_).size());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message, "extraction stopped: " + std::to_string(failed) +
                                     " entries were not extracted; the directories made have their modes and times");
  EXPECT_TRUE(fs::is_empty(dir_.path() / "out"));
}

// --skip-old-files after a partial extraction: what is missing is extracted, what exists is
// kept as it is (a file the user changed, named in a warning since its size is not the
// image's; a hard link's first name, to which the link is made).
TEST_F(OpsEnginesTest, ExtractSkippingOldFilesFillsInWhatIsMissing) {
  const fs::path out = dir_.path() / "out";
  std::vector<Problem> problems;
  ASSERT_EQ(extract(out, 2, problems), 0u);
  fs::remove(out / "sub/deeper/multi");
  fs::remove(out / "sub/linked2");
  testutil::write_file(out / "small.txt", "the user's own\n");
  auto image = open();
  ops::ExtractOptions opt;
  opt.dest = out.string();
  opt.jobs = 2;
  opt.skip_existing = true;
  opt.problems = [&](ops::Severity s, const std::string& p, const std::string& m) { problems.push_back({s, p, m}); };
  EXPECT_EQ(ops::Extractor(*image, opt).run(), 0u);
  // The changed file is kept, with a warning: its size is not the image's.
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].severity, ops::Severity::warning);
  EXPECT_EQ(problems[0].path, "small.txt");
  EXPECT_EQ(problems[0].message, "kept, but it has 15 bytes where the image has 16 (--overwrite replaces it)");
  EXPECT_EQ(testutil::read_host_file(out / "small.txt"), "the user's own\n");
  testutil::write_file(out / "small.txt", testutil::read_host_file(src_ / "small.txt"));
  EXPECT_EQ(describe(out), describe(src_));
  struct stat a, b;
  ASSERT_EQ(::stat((out / "linked").c_str(), &a), 0);
  ASSERT_EQ(::stat((out / "sub/linked2").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino) << "the link is made to the kept first name";
}

TEST_F(OpsEnginesTest, ExtractSelectsByGlobAndReportsExistingEntriesOnce) {
  const fs::path out = dir_.path() / "sel";
  std::vector<Problem> problems;
  EXPECT_EQ(extract(out, 2, problems, {"sub/deeper/*"}), 0u);
  EXPECT_TRUE(fs::exists(out / "sub/deeper/multi"));
  EXPECT_FALSE(fs::exists(out / "sub/block"));
  EXPECT_FALSE(fs::exists(out / "small.txt"));
  const size_t failed = extract(out, 2, problems, {"sub/deeper/*"});
  EXPECT_EQ(failed, 1u);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "sub/deeper/multi");
  EXPECT_NE(problems[0].message.find("--overwrite"), std::string::npos) << problems[0].message;
}

TEST_F(OpsEnginesTest, CompareFindsChangesAndNothingElse) {
  auto image = open();
  ops::CompareOptions opt;
  opt.jobs = 2;
  opt.owners = false;
  std::vector<std::string> lines, errors;
  ops::CompareReport report;
  report.difference = [&](const ops::Difference& d) { lines.push_back(d.line); };
  report.error = [&](const std::string& message) { errors.push_back(message); };
  ops::CompareCounts counts = ops::compare_image_with_tree(*image, src_.string(), opt, report);
  EXPECT_EQ(counts.differences, 0u);
  EXPECT_TRUE(lines.empty()) << ::testing::PrintToString(lines);
  testutil::write_file(src_ / "small.txt", "hello, squashfs!\n");  // same size + 1
  fs::remove(src_ / "sub/block");
  testutil::write_file(src_ / "new", "n");
  opt.times = false;
  counts = ops::compare_image_with_tree(*image, src_.string(), opt, report);
  EXPECT_EQ(counts.differences, 3u);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "+ new");
  EXPECT_EQ(lines[1].rfind("M small.txt: size", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2], "- sub/block");
}

TEST_F(OpsEnginesTest, VerifierNamesTheFileOfADamagedBlock) {
  {
    auto image = open();
    std::vector<Problem> problems;
    ops::Verifier v(*image, 2, [&](ops::Severity s, const std::string& p, const std::string& m) {
      problems.push_back({s, p, m});
    });
    EXPECT_EQ(v.run(), 0u);
    EXPECT_TRUE(v.had_manifest());
    EXPECT_GT(v.files(), 1500u);
    EXPECT_TRUE(problems.empty());
  }
  // "random" is incompressible, so it is stored raw: a flipped bit is found only by its hash.
  const std::string content = testutil::read_host_file(src_ / "random");
  std::string bytes = testutil::read_host_file(image_);
  const size_t at = bytes.find(content.substr(1000, 64));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 5] ^= 1;
  std::ofstream(image_, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  auto image = open();
  std::vector<Problem> problems;
  ops::Verifier v(*image, 2, [&](ops::Severity s, const std::string& p, const std::string& m) {
    problems.push_back({s, p, m});
  });
  // The file, then the MiB of stored bytes around it (the stored-data digests trailer).
  EXPECT_EQ(v.run(), 2u);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].path, "random");
  EXPECT_NE(problems[0].message.find("content differs from the manifest"), std::string::npos);
  EXPECT_EQ(problems[1].path, "");
  EXPECT_NE(problems[1].message.find("do not match the data digests trailer"), std::string::npos);
}

}  // namespace
}  // namespace sqar
