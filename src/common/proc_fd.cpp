#include "common/proc_fd.h"

#include <linux/magic.h>
#include <sys/vfs.h>

#include "common/error.h"

namespace sqar {

bool proc_is_procfs() {
  static const bool is_procfs = [] {
    struct statfs st;
    return ::statfs("/proc/self/fd", &st) == 0 && st.f_type == PROC_SUPER_MAGIC;
  }();
  return is_procfs;
}

std::string proc_fd_path(int fd, const char* name) {
  if (!proc_is_procfs())
    throw Error(
        "/proc is not procfs (not mounted here?): entries reached through /proc/self/fd cannot be "
        "trusted there");
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (name) (path += '/') += name;
  return path;
}

}  // namespace sqar
