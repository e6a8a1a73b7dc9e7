#include "common/temp_file.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace sqar {

std::string temp_dir() {
  const char* dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

int unnamed_temp_file(const std::string& dir) {
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string name = dir + "/sqar-spool-XXXXXX";
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  fd = mkostemp(name.data(), O_CLOEXEC);
  const int err = errno;
  if (fd >= 0) unlink(name.c_str());
  sigprocmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return fd;
}

}  // namespace sqar
