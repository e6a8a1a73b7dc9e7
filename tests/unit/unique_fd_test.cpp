#include "common/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <utility>

namespace sqar {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

int open_null() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(UniqueFd, ClosesWhenItGoesOutOfScope) {
  int raw;
  {
    const UniqueFd fd(open_null());
    raw = fd.get();
    ASSERT_TRUE(fd);
    EXPECT_TRUE(is_open(raw));
  }
  EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFd, AFailedOpenHoldsNothing) {
  const UniqueFd fd(-1);
  EXPECT_FALSE(fd);
  EXPECT_FALSE(UniqueFd());
}

TEST(UniqueFd, MovingHandsOwnershipOver) {
  UniqueFd a(open_null());
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a);
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(is_open(raw));
}

TEST(UniqueFd, ReleaseGivesUpOwnershipWithoutClosing) {
  int raw;
  {
    UniqueFd fd(open_null());
    raw = fd.release();
    EXPECT_FALSE(fd);
  }
  EXPECT_TRUE(is_open(raw));
  ::close(raw);
}

TEST(UniqueFd, ResetClosesTheOldDescriptorAndKeepsErrno) {
  UniqueFd fd(open_null());
  const int old = fd.get();
  errno = ENOSPC;
  fd.reset(open_null());
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_TRUE(is_open(fd.get()));
  EXPECT_FALSE(is_open(old));  // the new one was opened while the old one was still open
}

TEST(UniqueFd, CloseCheckedReportsCloseErrors) {
  UniqueFd fd(open_null());
  EXPECT_EQ(fd.close_checked(), 0);
  EXPECT_FALSE(fd);
  EXPECT_EQ(fd.close_checked(), -1);  // nothing held: close(-1) fails with EBADF
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace sqar
