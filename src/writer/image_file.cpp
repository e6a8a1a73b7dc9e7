#include "writer/image_file.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sqfs/error.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/file_type_name.h"
#include "common/proc_fd.h"
#include "common/temp_file.h"

namespace sqar {

namespace {
constexpr size_t kBufferSize = 1 << 20;
// Writeback of what was appended starts every this many bytes, so that commit()'s fsync waits
// for the last window only: an fsync of the whole file at the end took 77 ms of the 0.27 s of
// writing a 156 MB tar (the disk idle until then, the CPU idle during it).
constexpr uint64_t kWritebackWindow = 8 << 20;

// The temp path for the signal handler: a fixed buffer, since the handler may not allocate.
char g_pending_temp[PATH_MAX + 1];
std::atomic<bool> g_pending_set{false};

void set_pending(const std::string& path) {
  if (path.size() > PATH_MAX) return;
  std::memcpy(g_pending_temp, path.c_str(), path.size() + 1);
  g_pending_set.store(true);
}
void clear_pending() { g_pending_set.store(false); }

std::string directory_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A temporary name beside `path` ending in `suffix`: IMAGE's name cut short where the suffix
// would take the whole past NAME_MAX (255 bytes), so a long IMAGE name can still be replaced.
std::string temp_name_beside(const std::string& path, const std::string& suffix) {
  const size_t start = path.find_last_of('/') + 1;  // npos + 1 == 0
  const size_t keep = std::min(path.size() - start, size_t(NAME_MAX) - suffix.size());
  return path.substr(0, start + keep) + suffix;
}

// The file a symlink at PATH leads to (PATH itself when it is none), as mksquashfs and
// `tar -cf` write through a symlink: the new file is renamed over the target, and the symlink
// stays. A dangling symlink leads to the file it names, which is then created.
// The links are read here, not followed by the kernel, so the kernel's protected_symlinks
// rule is applied here: a symlink in a sticky world-writable directory (/tmp) is followed only
// when it belongs to us or to the directory's owner. Otherwise another user's
// `ln -s /etc/shadow /tmp/out.tar` would have root's `extract --tar /tmp/out.tar` replace it.
std::string follow_symlinks(const std::string& path) {
  std::string at = path;
  for (int hops = 0; hops <= 40; ++hops) {
    struct stat st;
    if (lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    struct stat dir;
    if (stat(directory_of(at).c_str(), &dir) != 0) throw_errno(directory_of(at), errno);
    if ((dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH) && st.st_uid != geteuid() && st.st_uid != dir.st_uid)
      throw Error(at +
                  ": a symlink of another user in a sticky world-writable directory; not followed (as the "
                  "kernel's protected_symlinks refuses), and not replaced");
    std::vector<char> target(PATH_MAX + 1);
    const ssize_t n = readlink(at.c_str(), target.data(), target.size());
    if (n <= 0 || size_t(n) >= target.size()) throw_errno(at, n < 0 ? errno : ENAMETOOLONG);
    const std::string to(target.data(), size_t(n));
    at = to[0] == '/' ? to : directory_of(at) + "/" + to;
  }
  throw Error(path + ": too many levels of symbolic links");
}
}  // namespace

void remove_pending_temp_file_from_signal_handler() {
  if (g_pending_set.load()) unlink(g_pending_temp);
}

// libsquashfs sees the image through this: `base` first, so a sqfs_file_t* is a view pointer.
struct ImageFileSqfsView {
  sqfs_file_t base;
  ImageFile* owner;
};

namespace {
ImageFile* owner_of(sqfs_file_t* f) { return reinterpret_cast<ImageFileSqfsView*>(f)->owner; }

int view_read_at(sqfs_file_t* f, sqfs_u64 off, void* buf, size_t len) {
  try {
    owner_of(f)->read_at(off, buf, len);
    return 0;
  } catch (const std::exception& e) {
    owner_of(f)->set_last_error(e.what());
    return SQFS_ERROR_IO;
  }
}
int view_write_at(sqfs_file_t* f, sqfs_u64 off, const void* buf, size_t len) {
  try {
    owner_of(f)->write_at(off, buf, len);
    return 0;
  } catch (const std::exception& e) {
    owner_of(f)->set_last_error(e.what());
    return SQFS_ERROR_IO;
  }
}
sqfs_u64 view_get_size(const sqfs_file_t* f) { return owner_of(const_cast<sqfs_file_t*>(f))->position(); }
int view_truncate(sqfs_file_t* f, sqfs_u64 size) {
  try {
    owner_of(f)->truncate(size);
    return 0;
  } catch (const std::exception& e) {
    owner_of(f)->set_last_error(e.what());
    return SQFS_ERROR_IO;
  }
}
void view_destroy(sqfs_object_t*) {}  // owned by ImageFile

// The extended attributes of the file at `from` (labels, user.* notes a user keeps on an
// archive) onto `to`, as overwriting the file in place would keep them. Best effort: a name
// the caller may not read or set is skipped.
void copy_xattrs(const std::string& from, int to) {
  std::vector<char> names(4096);
  ssize_t n = llistxattr(from.c_str(), names.data(), names.size());
  if (n < 0 && errno == ERANGE) {
    n = llistxattr(from.c_str(), nullptr, 0);
    if (n <= 0) return;
    names.resize(size_t(n));
    n = llistxattr(from.c_str(), names.data(), names.size());
  }
  std::vector<char> value;
  for (ssize_t i = 0; i < n;) {
    const char* name = names.data() + i;
    i += ssize_t(std::strlen(name)) + 1;
    const ssize_t len = lgetxattr(from.c_str(), name, nullptr, 0);
    if (len < 0) continue;
    value.resize(size_t(len));
    const ssize_t got = lgetxattr(from.c_str(), name, value.data(), value.size());
    if (got >= 0) fsetxattr(to, name, value.data(), size_t(got), 0);
  }
}

}  // namespace

ImageFile::ImageFile(std::string final_path, bool overwrite)
    : final_path_(final_path == kStandardOutput ? final_path : follow_symlinks(final_path)),
      name_(final_path_),
      overwrite_(overwrite) {
  buffer_.reserve(kBufferSize);
  if (final_path_ == kStandardOutput) {
    create_spool();
    return;
  }
  // /dev/stdout and /dev/fd/N lead into /proc/self/fd, whose entries are no names a file
  // can be created beside: standard output is '-'.
  if (final_path_.rfind("/proc/self/fd/", 0) == 0 || final_path_.rfind("/dev/fd/", 0) == 0)
    throw Error(final_path + ": a file descriptor's name; write '-' for standard output");
  struct stat st;
  const bool exists = lstat(final_path_.c_str(), &st) == 0;
  if (exists) {
    // The file is written beside the name and renamed over it, which would put a regular
    // file in place of a device or a FIFO (/dev/null, a tape, a pipe).
    if (S_ISDIR(st.st_mode)) throw Error(final_path + ": is a directory");
    if (!S_ISREG(st.st_mode))
      throw Error(final_path + ": is a " + file_type_name(st.st_mode) +
                  ", not a regular file: the output is made as a new file renamed into place, which would "
                  "replace it");
    if (!overwrite) throw Error(final_path + ": already exists (use --force to overwrite it)");
  }
  const std::string dir = directory_of(final_path_);
  // An unnamed file in IMAGE's directory: nothing to clean up whatever kills us (SIGKILL, the
  // OOM killer, a crash), and it gets a name only in commit(). The mode is subject to the
  // umask, as any new file's is.
  fd_ = open(dir.c_str(), O_RDWR | O_TMPFILE | O_CLOEXEC, 0666);
  if (fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // Filesystems (or kernels) without O_TMPFILE: a named file beside IMAGE, removed on error
    // and by the CLI's signal handlers.
    std::string tmpl = temp_name_beside(final_path_, ".sqar-tmp-XXXXXX");
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    fd_ = mkostemp(name.data(), O_CLOEXEC);
    if (fd_ >= 0) {
      temp_path_ = name.data();
      set_pending(temp_path_);
      const mode_t mask = umask(0);  // no threads create files yet: read the umask by setting it back
      umask(mask);
      fchmod(fd_, 0666 & ~mask);
    }
  }
  if (fd_ < 0) {
    // Name both: the user gave the path (an image, or a tar archive), the failure is about its
    // directory.
    const int err = errno;
    throw Error(final_path_ + ": cannot create it in " + dir + ": " + std::strerror(err));
  }
  if (exists && S_ISREG(st.st_mode)) {
    // Replacing an image keeps its permissions and owner, as overwriting it in place would:
    // a private image must not become world-readable because it was rebuilt. Best effort
    // (fchown fails for a non-root caller that does not own it).
    if (fchown(fd_, st.st_uid, st.st_gid) != 0) {
      // not ours to give away: the new image keeps the caller's ownership
    }
    fchmod(fd_, st.st_mode & 0777);
    copy_xattrs(final_path_, fd_);
  }
}

void ImageFile::create_spool() {
  to_stdout_ = true;
  name_ = "standard output";
  // Closed (EBADF), or closed with the descriptor held by a file open for reading only (the CLI
  // keeps a closed standard descriptor taken that way): nowhere to write.
  const int flags = fcntl(STDOUT_FILENO, F_GETFL);
  if (flags < 0) throw_errno(name_, errno);
  if ((flags & O_ACCMODE) == O_RDONLY) throw_errno(name_, EBADF);
  if (isatty(STDOUT_FILENO))
    throw Error("standard output is a terminal, not a place for an image: redirect it to a file or a pipe");
  spool_dir_ = temp_dir();
  fd_ = unnamed_temp_file(spool_dir_);
  if (fd_ < 0) {
    const int err = errno;
    throw Error(name_ + ": cannot create the file the image is built in, in " + spool_dir_ +
                " (TMPDIR): " + std::strerror(err));
  }
}

std::optional<std::pair<dev_t, ino_t>> ImageFile::replaced_identity() const {
  struct stat st;
  if (to_stdout_) {
    if (fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  } else if (stat(final_path_.c_str(), &st) != 0) {
    return std::nullopt;
  }
  return std::make_pair(st.st_dev, st.st_ino);
}

void ImageFile::throw_write_error(int err) const {
  if (err == ENOSPC && to_stdout_)
    throw Error(name_ + ": no space left on device in " + spool_dir_ +
                " (TMPDIR), where the image is built before it is copied out; point TMPDIR at a larger "
                "filesystem");
  if (err == ENOSPC) throw Error(name_ + ": no space left on device");  // the image or a tar archive
  throw_errno(to_stdout_ ? name_ + " (the image built in " + spool_dir_ + ")" : name_, err);
}

std::pair<dev_t, ino_t> ImageFile::identity() const {
  struct stat st {};
  fstat(fd_, &st);
  return {st.st_dev, st.st_ino};
}

ImageFile::~ImageFile() {
  delete view_;
  if (fd_ >= 0) close(fd_);
  if (!committed_ && !temp_path_.empty()) {
    unlink(temp_path_.c_str());
    clear_pending();
  }
}

void ImageFile::write_fully(uint64_t offset, const uint8_t* data, size_t len) {
  while (len > 0) {
    ssize_t n = pwrite(fd_, data, len, off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_write_error(errno);
    }
    data += n;
    len -= size_t(n);
    offset += uint64_t(n);
  }
}

void ImageFile::append(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (buffer_.size() + len > kBufferSize) flush();
  if (len >= kBufferSize) {
    write_fully(flushed_, p, len);
    flushed_ += len;
    start_writeback();
  } else {
    buffer_.insert(buffer_.end(), p, p + len);
  }
  position_ += len;
}

void ImageFile::flush() {
  if (buffer_.empty()) return;
  write_fully(flushed_, buffer_.data(), buffer_.size());
  flushed_ += buffer_.size();
  buffer_.clear();
  start_writeback();
}

void ImageFile::start_writeback() {
  // A spool is read back by commit(): it is better left in the page cache than written out.
  if (to_stdout_ || flushed_ < writeback_from_ + kWritebackWindow) return;
  // Only starts the writes (no wait, no flush of the disk's cache): commit() still fsyncs.
  // A filesystem without writeback (tmpfs) or a kernel without the call just ignores it.
  (void)sync_file_range(fd_, off_t(writeback_from_), off_t(flushed_ - writeback_from_), SYNC_FILE_RANGE_WRITE);
  writeback_from_ = flushed_;
}

uint64_t ImageFile::append_from(int fd, const std::string& path, uint64_t offset, uint64_t len) {
  flush();
  // A filesystem clones only whole blocks at equal offsets within a block, and a call whose
  // start is not aligned is copied whole: the aligned middle goes in a call of its own.
  constexpr uint64_t kAlign = 4096;
  if (offset % kAlign == flushed_ % kAlign && len > 2 * kAlign) {
    const uint64_t head = (kAlign - offset % kAlign) % kAlign;
    const uint64_t middle = (len - head) / kAlign * kAlign;
    uint64_t n = head ? append_range(fd, path, offset, head) : 0;
    n += append_range(fd, path, offset + head, middle);
    if (len > head + middle) n += append_range(fd, path, offset + head + middle, len - head - middle);
    return n;
  }
  return append_range(fd, path, offset, len);
}

uint64_t ImageFile::append_range(int fd, const std::string& path, uint64_t offset, uint64_t len) {
  uint64_t shared = 0;
  loff_t in = loff_t(offset), out = loff_t(flushed_);
  while (len > 0) {
    const ssize_t n = copy_file_range(fd, &in, fd_, &out, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOSPC) throw_write_error(ENOSPC);
    if (n <= 0) break;  // EXDEV, EINVAL, ENOSYS...: copy the rest below
    len -= uint64_t(n);
    shared += uint64_t(n);
  }
  flushed_ = position_ = uint64_t(out);
  std::vector<uint8_t> buf(size_t(std::min<uint64_t>(len, 1u << 20)));
  while (len > 0) {
    const ssize_t n = pread(fd, buf.data(), size_t(std::min<uint64_t>(len, buf.size())), off_t(in));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(path, errno);
    if (n == 0) throw Error(path + ": ends before byte " + std::to_string(uint64_t(in) + len));
    write_fully(flushed_, buf.data(), size_t(n));
    flushed_ = position_ = flushed_ + uint64_t(n);
    in += n;
    len -= uint64_t(n);
  }
  return shared;
}

void ImageFile::write_at(uint64_t offset, const void* data, size_t len) {
  flush();
  write_fully(offset, static_cast<const uint8_t*>(data), len);
  if (offset + len > position_) position_ = flushed_ = offset + len;
}

void ImageFile::read_at(uint64_t offset, void* data, size_t len) {
  flush();
  uint8_t* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    ssize_t n = pread(fd_, p, len, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(name_ + ": short read of the image being written");
    p += n;
    len -= size_t(n);
    offset += uint64_t(n);
  }
}

void ImageFile::truncate(uint64_t size) {
  flush();
  if (ftruncate(fd_, off_t(size)) != 0) throw_write_error(errno);
  position_ = flushed_ = size;
}

std::string ImageFile::directory() const { return to_stdout_ ? spool_dir_ : directory_of(final_path_); }

sqfs_file_t* ImageFile::as_sqfs_file() {
  if (!view_) {
    view_ = new ImageFileSqfsView{};
    view_->base.base.destroy = view_destroy;
    view_->base.read_at = view_read_at;
    view_->base.write_at = view_write_at;
    view_->base.get_size = view_get_size;
    view_->base.truncate = view_truncate;
    view_->owner = this;
  }
  return &view_->base;
}

namespace {
// Gives the unnamed (O_TMPFILE) file open as fd the name dir_fd/name; fails with EEXIST when the
// name is taken. /proc/self/fd works for any caller; AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH.
// Without procfs on /proc, /proc/self/fd/N could name another file: only AT_EMPTY_PATH then.
int link_unnamed(int fd, int dir_fd, const char* name) {
  if (proc_is_procfs()) {
    if (linkat(AT_FDCWD, proc_fd_path(fd).c_str(), dir_fd, name, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != ENOENT) return -1;
  }
  return linkat(fd, "", dir_fd, name, AT_EMPTY_PATH);
}

std::string base_name_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "already exists" when another process made IMAGE while this one was writing it: without
// --force an existing IMAGE is never replaced, however late it appeared.
[[noreturn]] void throw_commit_error(const std::string& image, int err) {
  if (err == EEXIST)
    throw Error(image + ": already exists, made while this image was written (use --force to overwrite it)");
  throw_errno(image, err);
}
}  // namespace

void ImageFile::copy_to_standard_output() {
  // copy_file_range: standard output is a file (the kernel copies, or shares extents on XFS and
  // btrfs); sendfile: a pipe or a socket; read and write: anything else (a file opened with
  // O_APPEND, which both calls refuse).
  enum class Way { copy_file_range, sendfile, read_write } way = Way::copy_file_range;
  loff_t in = 0;
  std::vector<uint8_t> buf;
  while (uint64_t(in) < position_) {
    const size_t want = size_t(std::min<uint64_t>(position_ - uint64_t(in), 1u << 30));
    ssize_t n;
    if (way == Way::copy_file_range) {
      n = copy_file_range(fd_, &in, STDOUT_FILENO, nullptr, want, 0);
    } else if (way == Way::sendfile) {
      n = sendfile(STDOUT_FILENO, fd_, &in, want);
    } else {
      if (buf.empty()) buf.resize(1 << 20);
      n = pread(fd_, buf.data(), std::min(want, buf.size()), in);
      for (ssize_t done = 0; n > 0 && done < n;) {
        const ssize_t w = write(STDOUT_FILENO, buf.data() + done, size_t(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw_errno(name_, errno);
        done += w;
      }
      if (n > 0) in += n;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && way != Way::read_write &&
        (errno == EXDEV || errno == EINVAL || errno == EBADF || errno == ENOSYS || errno == EOPNOTSUPP)) {
      way = way == Way::copy_file_range ? Way::sendfile : Way::read_write;
      continue;
    }
    if (n < 0) throw_errno(name_, errno);
    if (n == 0) throw Error(name_ + ": the image built in " + spool_dir_ + " ended early");
  }
}

void ImageFile::commit() {
  flush();
  if (ftruncate(fd_, off_t(position_)) != 0) throw_write_error(errno);
  if (to_stdout_) {
    // No fsync: what happens to the bytes after standard output is the reader's, as for tar.
    copy_to_standard_output();
    committed_ = true;
    return;
  }
  if (fsync(fd_) != 0) throw_errno(final_path_, errno);
  const std::string dir = directory_of(final_path_);
  if (temp_path_.empty()) {
    int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) throw_errno(dir, errno);
    const std::string name = base_name_of(final_path_);
    if (!overwrite_) {
      const int rc = link_unnamed(fd_, dir_fd, name.c_str());
      const int err = errno;
      if (rc != 0) {
        close(dir_fd);
        throw_commit_error(final_path_, err);
      }
    } else {
      // Atomic replacement: a name of our own first, then rename over IMAGE. The name exists
      // for the two system calls in between; the signal handlers remove it if one lands there.
      std::string staged;
      for (unsigned attempt = 0;; ++attempt) {
        staged = temp_name_beside(final_path_, ".sqar-tmp-" + std::to_string(getpid()) + "-" + std::to_string(attempt));
        set_pending(staged);
        if (link_unnamed(fd_, dir_fd, base_name_of(staged).c_str()) == 0) break;
        const int err = errno;
        clear_pending();
        if (err != EEXIST || attempt > 100) {
          close(dir_fd);
          throw_errno(final_path_, err);
        }
      }
      if (rename(staged.c_str(), final_path_.c_str()) != 0) {
        const int err = errno;
        unlink(staged.c_str());
        clear_pending();
        close(dir_fd);
        throw_errno(final_path_, err);
      }
    }
    committed_ = true;
    clear_pending();
    fsync(dir_fd);
    close(dir_fd);
    return;
  }
  if (!overwrite_) {
    // Never over an IMAGE that appeared meanwhile. Filesystems without RENAME_NOREPLACE get a
    // hard link (which fails on an existing name) and an unlink of the temporary name.
    if (renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, final_path_.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno != EINVAL && errno != ENOSYS) throw_commit_error(final_path_, errno);
      if (link(temp_path_.c_str(), final_path_.c_str()) != 0) throw_commit_error(final_path_, errno);
      unlink(temp_path_.c_str());
    }
  } else if (rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    throw_errno(final_path_, errno);
  }
  committed_ = true;
  clear_pending();
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

}  // namespace sqar
