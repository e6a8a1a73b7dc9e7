// DirectoryCursor: every request yields the directory asked for, whatever was opened before,
// and components below the base never follow symlinks.
#include "scan/directory_cursor.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace sqar {
namespace {

class DirectoryCursorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sqar-cursor-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    for (const char* d : {"a", "a/b", "a/b/c", "a/b/d", "a/e", "f", "f/g"})
      ASSERT_EQ(mkdir((root_ + "/" + d).c_str(), 0755), 0);
    ASSERT_EQ(symlink("a/b", (root_ + "/link").c_str()), 0);
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }

  // The inode `fd` refers to must be the directory root_/rel.
  void expect_is(int fd, const std::string& rel) {
    ASSERT_GE(fd, 0) << rel << ": " << strerror(errno);
    struct stat a, b;
    ASSERT_EQ(fstat(fd, &a), 0);
    ASSERT_EQ(stat((root_ + (rel.empty() ? "" : "/" + rel)).c_str(), &b), 0);
    EXPECT_EQ(a.st_ino, b.st_ino) << "cursor opened the wrong directory for '" << rel << "'";
  }

  std::string root_;
};

TEST_F(DirectoryCursorTest, OpensEveryDirectoryInAnyOrder) {
  DirectoryCursor cursor;
  // Depth-first, breadth-first, back up, sideways, repeated, and a name that is a prefix of another.
  const std::vector<std::string> order = {"a/b/c", "a/b/d", "a", "", "a/e", "f/g", "a/b", "a/b", "f", "a/b/c", "a/e"};
  for (const auto& rel : order) expect_is(cursor.open(root_, rel, false), rel);
}

TEST_F(DirectoryCursorTest, ReadableFdsCanBeListed) {
  DirectoryCursor cursor;
  expect_is(cursor.open(root_, "a/b/c", false), "a/b/c");  // "a/b" is open as a mere path now
  int fd = cursor.open(root_, "a/b", true);
  expect_is(fd, "a/b");
  int dup_fd = dup(fd);
  ASSERT_GE(dup_fd, 0);
  DIR* dir = fdopendir(dup_fd);
  ASSERT_NE(dir, nullptr) << strerror(errno);
  std::vector<std::string> names;
  while (dirent* de = readdir(dir))
    if (de->d_name[0] != '.') names.push_back(de->d_name);
  closedir(dir);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"c", "d"}));
}

TEST_F(DirectoryCursorTest, ComponentsBelowTheBaseNeverFollowSymlinks) {
  DirectoryCursor cursor;
  EXPECT_LT(cursor.open(root_, "link", false), 0);
  EXPECT_LT(cursor.open(root_, "link/c", true), 0);
  EXPECT_LT(cursor.open(root_, "a/missing", false), 0);
  EXPECT_EQ(errno, ENOENT);
  // A failure leaves the cursor usable.
  expect_is(cursor.open(root_, "a/b/d", true), "a/b/d");
  // The base itself is opened as named, symlinks included (the user chose that path).
  DirectoryCursor other;
  expect_is(other.open(root_ + "/link", "c", false), "a/b/c");
}

}  // namespace
}  // namespace sqar
