// Metadata of an entry named in a directory, set without ever following a symlink.
//
// The entry is opened with O_PATH | O_NOFOLLOW: the descriptor pins the inode the name led to,
// so a name swapped for a symlink afterwards cannot redirect a call, and fstat on it shows
// what was opened (a symlink planted before the open is caught there). Owner and times are set
// through the descriptor itself (AT_EMPTY_PATH); mode and xattrs, which have no call on an
// O_PATH descriptor, through /proc/self/fd/N, which reaches the pinned inode, but only once
// fstat has shown it is not a symlink: the kernel follows a symlink reached that way.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/unique_fd.h"

namespace sqar::ops {

class PinnedEntry {
 public:
  // Opens `name` in `dfd` without following it. Throws sqar::Error when it is missing or its
  // type is not `type` (S_IFIFO, S_IFLNK, ...): someone replaced it after we created it.
  PinnedEntry(int dfd, const std::string& name, mode_t type);
  PinnedEntry(const PinnedEntry&) = delete;
  PinnedEntry& operator=(const PinnedEntry&) = delete;

  bool is_symlink() const;
  void chown(uid_t uid, gid_t gid);  // throws sqar::Error
  void chmod(mode_t mode);           // throws; must not be called on a symlink (no such mode)
  void set_mtime(uint32_t seconds);  // throws
  // 0 or -1 with errno, as setxattr. A symlink's xattrs are set by name in `dfd`, not followed.
  int set_xattr(const char* key, const std::string& value);

 private:
  UniqueFd fd_;
  int dfd_;
  std::string name_;
  mode_t type_;
};

}  // namespace sqar::ops
