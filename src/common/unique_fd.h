// An owned file descriptor: closed when its owner goes out of scope, so no error path can leak
// it and no caller needs a try/catch just to close it before rethrowing.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace sqar {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes ownership of fd; -1 (a failed open) holds nothing.
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

  // Gives up ownership without closing: the caller closes what is returned.
  int release() { return std::exchange(fd_, -1); }

  // Closes the descriptor held, if any, ignoring close(2)'s result, and holds fd instead. For
  // descriptors nothing was written through, or when the operation has failed already. errno is
  // kept, so a descriptor closed while an error propagates cannot change the errno it reports.
  void reset(int fd = -1) {
    if (fd_ >= 0) {
      const int saved = errno;
      ::close(fd_);
      errno = saved;
    }
    fd_ = fd;
  }

  // Closes now and returns close(2)'s result: 0, or -1 with errno set. For a file written
  // through the descriptor, where a failed close can mean the data did not reach the disk (NFS,
  // quotas) and the operation must fail. Holds nothing afterwards, whatever the result.
  [[nodiscard]] int close_checked() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_ = -1;
};

}  // namespace sqar
