// DirStack (extract, diff) and DirectoryCursor (scan) on a 300-deep chain: every request yields
// the directory asked for, going down, up and sideways, while the descriptors each holds stay
// bounded instead of growing with the depth.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ops/safe_dir.h"
#include "scan/directory_cursor.h"

namespace {

constexpr int kDepth = 300;

class DeepDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sqar-deep-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < kDepth; ++i) {
      ASSERT_EQ(::mkdirat(fd, "d", 0755), 0);
      ASSERT_EQ(::mkdirat(fd, ("side" + std::to_string(i)).c_str(), 0755), 0);
      struct stat st;
      ASSERT_EQ(::fstatat(fd, "d", &st, 0), 0);
      inodes_.push_back(st.st_ino);
      int sub = ::openat(fd, "d", O_RDONLY | O_DIRECTORY);
      ::close(fd);
      fd = sub;
    }
    ::close(fd);
    root_fd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY);
  }
  void TearDown() override {
    ::close(root_fd_);
    std::system(("rm -rf " + root_).c_str());
  }
  static std::string chain(int levels) {
    std::string p;
    for (int i = 0; i < levels; ++i) p += i ? "/d" : "d";
    return p;
  }
  void expect_level(int fd, int levels) {
    ASSERT_GE(fd, 0);
    struct stat st;
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(st.st_ino, inodes_[size_t(levels - 1)]) << "wrong directory for level " << levels;
  }
  std::string root_;
  int root_fd_ = -1;
  std::vector<ino_t> inodes_;  // of d at each level, 1-based
};

TEST_F(DeepDirsTest, DirStackStaysBoundedDownAndUp) {
  sqar::ops::DirStack stack(root_fd_);
  const size_t bound = sqar::ops::DirStack::kKeepTop + kDepth / sqar::ops::DirStack::kCheckpoint + 1;
  for (int l = 1; l <= kDepth; ++l) {
    expect_level(stack.open(chain(l)), l);
    EXPECT_LE(stack.open_descriptors(), bound);
  }
  for (int l = kDepth; l >= 1; --l) {  // walk back up: closed levels are reopened
    expect_level(stack.open(chain(l)), l);
    EXPECT_LE(stack.open_descriptors(), bound);
  }
  expect_level(stack.open(chain(kDepth)), kDepth);
  const int side = stack.open(chain(10) + "/side10");
  struct stat a, b;
  ASSERT_EQ(::fstat(side, &a), 0);
  ASSERT_EQ(::stat((root_ + "/" + chain(10) + "/side10").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
}

// The same walks with directories named by node (as extract names them): node l is d at
// level l (0 the root), node 1000 + i is side<i>, which lies in level i.
TEST_F(DeepDirsTest, DirStackByNodeStaysBoundedDownAndUp) {
  std::vector<std::string> side_names;
  for (int i = 0; i < kDepth; ++i) side_names.push_back("side" + std::to_string(i));
  const std::string link = "link-to-d";
  ASSERT_EQ(::symlinkat("d", root_fd_, link.c_str()), 0);
  const sqar::ops::DirStack::NodeUp up = [&](uint64_t n) -> std::pair<uint64_t, std::string_view> {
    if (n == 5000) return {0, link};
    if (n >= 1000) return {n - 1000, side_names[n - 1000]};
    return {n - 1, "d"};
  };
  sqar::ops::DirStack stack(root_fd_);
  const size_t bound = sqar::ops::DirStack::kKeepTop + kDepth / sqar::ops::DirStack::kCheckpoint + 1;
  for (int l = 1; l <= kDepth; ++l) {
    expect_level(stack.open_node(uint64_t(l), size_t(l), up), l);
    EXPECT_LE(stack.open_descriptors(), bound);
  }
  for (int l = kDepth; l >= 1; --l) {
    expect_level(stack.open_node(uint64_t(l), size_t(l), up), l);
    EXPECT_LE(stack.open_descriptors(), bound);
  }
  EXPECT_EQ(stack.open_node(0, 0, up), root_fd_);
  expect_level(stack.open_node(kDepth, kDepth, up), kDepth);
  const int side = stack.open_node(1000 + 10, 11, up);
  struct stat a, b;
  ASSERT_EQ(::fstat(side, &a), 0);
  ASSERT_EQ(::stat((root_ + "/" + chain(10) + "/side10").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  expect_level(stack.open_node(kDepth - 1, kDepth - 1, up), kDepth - 1);
  // A symlink where a directory is expected is never followed.
  EXPECT_THROW(stack.open_node(5000, 1, up), std::exception);
}

// Down, part of the way up, and down again, higher each time: the levels reopened on the way
// up must be closed again when the walk goes deeper (extract's batches move like this).
TEST_F(DeepDirsTest, DirStackStaysBoundedGoingUpAndDownAgain) {
  const sqar::ops::DirStack::NodeUp up = [](uint64_t n) -> std::pair<uint64_t, std::string_view> {
    return {n - 1, "d"};
  };
  sqar::ops::DirStack by_path(root_fd_), by_node(root_fd_);
  const size_t bound = sqar::ops::DirStack::kKeepTop + kDepth / sqar::ops::DirStack::kCheckpoint + 1;
  for (int turn = 10; turn < kDepth; turn += 20) {
    for (int l : {kDepth, turn, kDepth}) {
      expect_level(by_path.open(chain(l)), l);
      expect_level(by_node.open_node(uint64_t(l), size_t(l), up), l);
      ASSERT_LE(by_path.open_descriptors(), bound) << "after level " << l << ", turning at " << turn;
      ASSERT_LE(by_node.open_descriptors(), bound) << "after level " << l << ", turning at " << turn;
    }
  }
}

TEST_F(DeepDirsTest, DirectoryCursorStaysBoundedDownAndUp) {
  sqar::DirectoryCursor cursor;
  const size_t bound = sqar::DirectoryCursor::kKeepTop + kDepth / sqar::DirectoryCursor::kCheckpoint + 2;
  for (int l = 1; l <= kDepth; ++l) {
    expect_level(cursor.open(root_, chain(l), l % 2 == 0), l);
    EXPECT_LE(cursor.open_descriptors(), bound);
  }
  for (int l = kDepth; l >= 1; --l) {
    expect_level(cursor.open(root_, chain(l), true), l);
    EXPECT_LE(cursor.open_descriptors(), bound);
  }
}

}  // namespace
