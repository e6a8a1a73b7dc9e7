// PinnedEntry never lets a metadata call reach through a symlink: a name that is (or becomes)
// a symlink to a file elsewhere must leave that file untouched.
#include "ops/entry_meta.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.h"

namespace {

class EntryMetaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sqar-entry-meta-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::mkdir((dir_ + "/target").c_str(), 0755), 0);
    dfd_ = ::open((dir_ + "/target").c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(dfd_, 0);
    victim_ = dir_ + "/victim";
    int fd = ::open(victim_.c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ::close(fd);
    ASSERT_EQ(::chmod(victim_.c_str(), 0600), 0);
  }
  void TearDown() override {
    ::close(dfd_);
    std::filesystem::remove_all(dir_);
  }
  mode_t victim_mode() const {
    struct stat st;
    EXPECT_EQ(::stat(victim_.c_str(), &st), 0);
    return st.st_mode & 07777;
  }
  struct stat lstat_at(const char* name) const {
    struct stat st {};
    EXPECT_EQ(::fstatat(dfd_, name, &st, AT_SYMLINK_NOFOLLOW), 0);
    return st;
  }
  std::string dir_, victim_;
  int dfd_ = -1;
};

TEST_F(EntryMetaTest, SymlinkWhereAFifoWasMadeIsRefused) {
  ASSERT_EQ(::symlinkat(victim_.c_str(), dfd_, "f"), 0);
  EXPECT_THROW(sqar::ops::PinnedEntry(dfd_, "f", S_IFIFO), sqar::Error);
  EXPECT_EQ(victim_mode(), 0600u);
}

TEST_F(EntryMetaTest, NameSwappedAfterPinningChangesOnlyThePinnedFifo) {
  ASSERT_EQ(::mkfifoat(dfd_, "f", 0600), 0);
  sqar::ops::PinnedEntry entry(dfd_, "f", S_IFIFO);
  // The name now leads to a symlink to the victim; the calls must still act on the fifo.
  ASSERT_EQ(::renameat(dfd_, "f", dfd_, "moved"), 0);
  ASSERT_EQ(::symlinkat(victim_.c_str(), dfd_, "f"), 0);
  entry.chmod(0666);
  entry.set_mtime(1234567);
  entry.chown(::geteuid(), ::getegid());
  EXPECT_EQ(victim_mode(), 0600u);
  const struct stat moved = lstat_at("moved");
  EXPECT_TRUE(S_ISFIFO(moved.st_mode));
  EXPECT_EQ(moved.st_mode & 07777, 0666u);
  EXPECT_EQ(moved.st_mtime, 1234567);
}

TEST_F(EntryMetaTest, SymlinkGetsItsOwnTimesAndNeverAMode) {
  ASSERT_EQ(::symlinkat(victim_.c_str(), dfd_, "l"), 0);
  sqar::ops::PinnedEntry entry(dfd_, "l", S_IFLNK);
  EXPECT_TRUE(entry.is_symlink());
  EXPECT_THROW(entry.chmod(0666), sqar::Error);
  entry.set_mtime(7654321);
  entry.chown(::geteuid(), ::getegid());
  EXPECT_EQ(victim_mode(), 0600u);
  EXPECT_EQ(lstat_at("l").st_mtime, 7654321);
  struct stat st;
  ASSERT_EQ(::stat(victim_.c_str(), &st), 0);
  EXPECT_NE(st.st_mtime, 7654321);
}

TEST_F(EntryMetaTest, XattrOnPinnedFifoDoesNotReachTheVictim) {
  ASSERT_EQ(::mkfifoat(dfd_, "f", 0600), 0);
  sqar::ops::PinnedEntry entry(dfd_, "f", S_IFIFO);
  ASSERT_EQ(::renameat(dfd_, "f", dfd_, "moved"), 0);
  ASSERT_EQ(::symlinkat(victim_.c_str(), dfd_, "f"), 0);
  // user.* xattrs are not allowed on fifos; trusted.* needs root. Either way the victim must
  // not get it.
  entry.set_xattr("trusted.sqar_test", "v");
  char buf[8];
  EXPECT_LT(::getxattr(victim_.c_str(), "trusted.sqar_test", buf, sizeof buf), 0);
}

}  // namespace
