#include "ops/append_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.h"

namespace sqar::ops {

AppendLock::AppendLock(const std::string& image, const std::function<void(const std::string&)>& warn) : path_(image) {
  // Each append that finished renamed a new file over IMAGE, so the file a waiter locked may be
  // an old one by the time it gets the lock: it then locks the file now at the name. A bound on
  // the rounds only keeps a pathological loop (IMAGE replaced without end) from spinning forever.
  for (unsigned round = 0;; ++round) {
    fd_.reset(::open(image.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd_) throw_errno(image, errno);
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      // A filesystem without locks (ENOLCK, EINVAL on some FUSE mounts) still gets the check
      // before the commit.
      if (err != EWOULDBLOCK) {
        if (err != ENOLCK && err != EINVAL && err != EOPNOTSUPP) throw_errno(image, err);
      } else {
        if (warn && round == 0) warn(image + ": another sqar append of this image is running; waiting for it to end");
        while (::flock(fd_.get(), LOCK_EX) != 0)
          if (errno != EINTR) throw_errno(image, errno);
      }
    }
    struct stat held {};
    if (::fstat(fd_.get(), &held) != 0) throw_errno(image, errno);
    dev_ = held.st_dev;
    ino_ = held.st_ino;
    if (struct stat now{}; ::stat(image.c_str(), &now) == 0 && now.st_dev == dev_ && now.st_ino == ino_) return;
    fd_.reset();
    if (round > 1000) throw Error(image + ": replaced again and again while waiting to append to it");
  }
}

void AppendLock::check_still_in_place() const {
  struct stat now {};
  if (::stat(path_.c_str(), &now) == 0 && now.st_dev == dev_ && now.st_ino == ino_) return;
  throw Error(path_ +
              ": replaced by another program during the append; the result is not written, so that "
              "the image now at that name is not lost");
}

}  // namespace sqar::ops
