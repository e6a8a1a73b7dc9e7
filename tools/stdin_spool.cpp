#include "stdin_spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/temp_file.h"
#include "read_common.h"

namespace sqar::cli {

int seekable_stdin() {
  struct stat st;
  if (fstat(STDIN_FILENO, &st) != 0) throw_errno("-: standard input", errno);
  if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
    const int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw_errno("-: standard input", errno);
    return fd;
  }
  if (isatty(STDIN_FILENO))
    throw UsageError(
        "IMAGE '-' reads the image from standard input, which is a terminal: pipe or redirect "
        "an image into it ('sqar list - < image.sqfs')");
  const std::string dir = temp_dir();
  const int fd = unnamed_temp_file(dir);
  if (fd < 0)
    throw Error("-: cannot create a temporary file in " + dir +
                " (TMPDIR) to hold standard input: " + std::strerror(errno));
  std::vector<char> buf(1u << 20);
  while (true) {
    ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    int err = n < 0 ? errno : 0;
    for (ssize_t done = 0; !err && done < n;) {
      const ssize_t w = write(fd, buf.data() + done, size_t(n - done));
      if (w < 0 && errno != EINTR) err = errno;
      if (w > 0) done += w;
    }
    if (err) {
      close(fd);
      throw Error(std::string("-: ") +
                  (n < 0 ? "reading standard input: "
                         : "copying standard input to a "
                           "temporary file in " +
                               dir + " (TMPDIR): ") +
                  std::strerror(err));
    }
    if (n == 0) return fd;
  }
}

}  // namespace sqar::cli
