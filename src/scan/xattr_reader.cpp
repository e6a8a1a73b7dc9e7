#include "scan/xattr_reader.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace sqar {

bool storable_xattr(const std::string& key) {
  // A name must follow the prefix: libsquashfs refuses a bare "user." when the image is
  // written, and a tar member can carry one (SCHILY.xattr.user.=v).
  for (const char* prefix : {"user.", "trusted.", "security."})
    if (key.rfind(prefix, 0) == 0) return key.size() > std::char_traits<char>::length(prefix);
  return false;
}

namespace {

// listxattrat(2) (Linux 6.13) names the entry relative to its directory; llistxattr needs the
// full path, and walking it again cost a path lookup per component for every entry (the
// largest kernel cost of the scan on the ports set). Older kernels answer ENOSYS: then the
// path is used. The number is the same on every architecture with the generic syscall table.
#ifndef SYS_listxattrat
#define SYS_listxattrat 465
#endif
std::atomic<bool> have_listxattrat{true};
// SQAR_TEST_NO_LISTXATTRAT=1 makes the call fail as a kernel before 6.13 does (for the tests).
const bool simulate_no_listxattrat = std::getenv("SQAR_TEST_NO_LISTXATTRAT") != nullptr;

// The name the path-based xattr calls use for `name` in the directory open as dirfd:
// /proc/self/fd/DIRFD/NAME reaches it through our descriptor, so it works however deep the tree
// (a full path can exceed PATH_MAX) and the l* calls do not follow a final symlink, as
// extraction does it. (AT_FDCWD: `name` is the source path itself.)
std::string at_path(int dirfd, const char* name) {
  return dirfd == AT_FDCWD ? std::string(name) : "/proc/self/fd/" + std::to_string(dirfd) + "/" + name;
}

// The two ways to reach an entry's attributes.
class ByName {
 public:
  ByName(int dirfd, const char* name) : dirfd_(dirfd), name_(name) {}
  ssize_t list(char* buf, size_t size) {
    if (have_listxattrat.load(std::memory_order_relaxed)) {
      errno = ENOSYS;
      long r = simulate_no_listxattrat ? -1 : syscall(SYS_listxattrat, dirfd_, name_, AT_SYMLINK_NOFOLLOW, buf, size);
      if (r >= 0 || errno != ENOSYS) return ssize_t(r);
      have_listxattrat.store(false, std::memory_order_relaxed);
    }
    return llistxattr(path().c_str(), buf, size);
  }
  ssize_t get(const char* key, void* buf, size_t size) { return lgetxattr(path().c_str(), key, buf, size); }

 private:
  const std::string& path() {
    if (path_.empty()) path_ = at_path(dirfd_, name_);
    return path_;
  }
  int dirfd_;
  const char* name_;
  std::string path_;  // built on first need
};

class ByFd {
 public:
  explicit ByFd(int fd) : fd_(fd) {}
  ssize_t list(char* buf, size_t size) { return flistxattr(fd_, buf, size); }
  ssize_t get(const char* key, void* buf, size_t size) { return fgetxattr(fd_, key, buf, size); }

 private:
  int fd_;
};

template <class Source>
int read_xattrs(Source& src, XattrList& out, std::string& failed_key) {
  out.stored.clear();
  out.unstorable.clear();
  failed_key.clear();
  // Nearly every entry has none: one call with a small buffer answers that.
  char small[256];
  std::string names;
  ssize_t len = src.list(small, sizeof small);
  if (len >= 0) {
    names.assign(small, size_t(len));
  } else if (errno == ERANGE) {
    // Longer than the small buffer: ask the size, then read (again if it grew meanwhile).
    for (;;) {
      len = src.list(nullptr, 0);
      if (len < 0) return errno;
      names.resize(size_t(len));
      len = src.list(names.data(), names.size());
      if (len >= 0) break;
      if (errno != ERANGE) return errno;
    }
    names.resize(size_t(len));
  } else {
    const int err = errno;
    return err == ENOTSUP || err == ENODATA ? 0 : err;  // a filesystem without xattrs
  }
  for (size_t pos = 0; pos < names.size();) {
    std::string key(names.c_str() + pos);
    pos += key.size() + 1;
    if (key.empty()) continue;
    if (!storable_xattr(key)) {
      out.unstorable.push_back(std::move(key));
      continue;
    }
    ssize_t vlen = src.get(key.c_str(), nullptr, 0);
    std::string value(size_t(std::max<ssize_t>(vlen, 0)), '\0');
    if (vlen >= 0) vlen = src.get(key.c_str(), value.data(), value.size());
    if (vlen < 0) {
      failed_key = key;
      return errno;
    }
    value.resize(size_t(vlen));
    out.stored.emplace_back(std::move(key), std::move(value));
  }
  std::sort(out.stored.begin(), out.stored.end());
  return 0;
}

}  // namespace

int read_xattrs_at(int dirfd, const char* name, XattrList& out, std::string& failed_key) {
  ByName src(dirfd, name);
  return read_xattrs(src, out, failed_key);
}

int read_xattrs_of_fd(int fd, XattrList& out, std::string& failed_key) {
  ByFd src(fd);
  return read_xattrs(src, out, failed_key);
}

std::string xattr_error_subject(const std::string& path, const std::string& failed_key) {
  return failed_key.empty() ? path : path + " (xattr " + failed_key + ")";
}

void warn_unstorable_xattrs(const XattrList& found, const std::string& path,
                            const std::function<void(const std::string&)>& warn) {
  if (!warn) return;
  for (const std::string& key : found.unstorable)
    warn(path + ": xattr " + key + " cannot be stored in SquashFS, skipped");
}

}  // namespace sqar
