#include "ops/entry_meta.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/proc_fd.h"

namespace sqar::ops {
namespace {

[[noreturn]] void sys_fail(const std::string& what) { throw Error(what + ": " + strerror(errno)); }

// Modes, times and xattrs of what has no descriptor to write through (symlinks, devices,
// FIFOs, sockets) are set through /proc/self/fd of the pinned entry, and refused with the
// cause when /proc is not procfs.
std::string proc_path(int fd) {
  if (!proc_is_procfs())
    throw Error(
        "/proc is not procfs (not mounted here?): modes, times and xattrs of symlinks, devices, FIFOs "
        "and sockets cannot be set without following names");
  return proc_fd_path(fd);
}

}  // namespace

PinnedEntry::PinnedEntry(int dfd, const std::string& name, mode_t type) : dfd_(dfd), name_(name), type_(type) {
  fd_.reset(::openat(dfd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd_) sys_fail("open");
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) sys_fail("stat");
  if ((st.st_mode & S_IFMT) != type)
    throw Error("was replaced by another kind of entry while extracting; not touching it");
}

bool PinnedEntry::is_symlink() const { return type_ == S_IFLNK; }

void PinnedEntry::chown(uid_t uid, gid_t gid) {
  if (::fchownat(fd_.get(), "", uid, gid, AT_EMPTY_PATH) != 0) sys_fail("chown");
}

void PinnedEntry::chmod(mode_t mode) {
  if (is_symlink()) throw Error("chmod: refusing to change the mode through a symlink");
  if (::chmod(proc_path(fd_.get()).c_str(), mode) != 0) sys_fail("chmod");
}

void PinnedEntry::set_mtime(uint32_t seconds) {
  struct timespec ts[2] = {{time_t(seconds), 0}, {time_t(seconds), 0}};
  if (::utimensat(fd_.get(), "", ts, AT_EMPTY_PATH) == 0) return;
  // Kernels before 5.8 refuse AT_EMPTY_PATH here: the pinned inode through /proc for what is
  // not a symlink; a symlink by name, which AT_SYMLINK_NOFOLLOW never follows.
  if (errno != EINVAL) sys_fail("set mtime");
  const int rc = is_symlink() ? ::utimensat(dfd_, name_.c_str(), ts, AT_SYMLINK_NOFOLLOW)
                              : ::utimensat(AT_FDCWD, proc_path(fd_.get()).c_str(), ts, 0);
  if (rc != 0) sys_fail("set mtime");
}

int PinnedEntry::set_xattr(const char* key, const std::string& value) {
  // lsetxattr by name in our directory descriptor sets the symlink's own xattrs; should the
  // name have been swapped meanwhile, it still acts on the entry inside the target only.
  if (is_symlink()) return ::lsetxattr((proc_path(dfd_) + "/" + name_).c_str(), key, value.data(), value.size(), 0);
  return ::setxattr(proc_path(fd_.get()).c_str(), key, value.data(), value.size(), 0);
}

}  // namespace sqar::ops
