#include "pipeline/source_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace sqar {

namespace {
constexpr size_t kStreamChunk = 1 << 20;

// Opens a file the scan found regular, and checks that it still is: a live tree may have put a
// FIFO (whose open would wait for a writer forever), a device, a directory or a symlink at its
// name since. Returns the fd, -1 with errno set, or kNotRegularFile; `st` receives the open
// file's fstat.
int open_source(int dirfd, const char* name, struct stat& st) {
  // O_NOATIME keeps the build from dirtying inodes of the source tree (allowed for root/owner).
  // O_NONBLOCK makes opening a FIFO return at once. It stays set: it has no effect on reading
  // regular files (open(2)), and clearing it cost a system call per file (a filesystem that
  // answers EAGAIN anyway gets it cleared then: read_at_most). O_NOCTTY: a terminal put at the
  // name is opened before fstat can tell, and must not become sqar's controlling terminal.
  int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOATIME | O_NONBLOCK | O_NOCTTY;
  int fd = openat(dirfd, name, flags);
  if (fd < 0 && errno == EPERM) fd = openat(dirfd, name, flags &= ~O_NOATIME);
  // Another process holds a lease on the file (Samba's oplocks): with O_NONBLOCK the open
  // refuses instead of breaking it. A FIFO never answers so, so open again, waiting for the
  // holder to let go, as cat would.
  if (fd < 0 && errno == EWOULDBLOCK) fd = openat(dirfd, name, flags & ~O_NONBLOCK);
  // A symlink (O_NOFOLLOW) or a socket (ENXIO) now at the name: no longer the regular file.
  if (fd < 0) return errno == ELOOP || errno == ENXIO ? kNotRegularFile : -1;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return kNotRegularFile;
  }
  return fd;
}
// The errno value or kNotRegularFile for a failed open_source.
int open_failure(int fd) { return fd == kNotRegularFile ? kNotRegularFile : errno; }

// One fstat after a read tells a write during it (a log line appended and truncated back, a
// file rewritten in place at the same size), which the read itself cannot see: the times the
// file had when opened are compared with its times now.
void note_changes_since_open(int fd, const timespec& ctime, const timespec& mtime, OpenedFile& o) {
  struct stat now;
  if (fstat(fd, &now) != 0) return;
  o.changed_during_read = time_moved(now.st_ctim, ctime);
  o.written_during_read = time_moved(now.st_mtim, mtime);
}

OpenedFile opened_file(const struct stat& st) {
  OpenedFile o;
  o.inode = uint64_t(st.st_ino);
  o.mode = st.st_mode;
  o.uid = st.st_uid;
  o.gid = st.st_gid;
  o.mtime = int64_t(st.st_mtim.tv_sec);
  o.mtime_exact = st.st_mtim;
  o.ctime = st.st_ctim;
  return o;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// For a filesystem that honours O_NONBLOCK on a regular file (EAGAIN): reads block from then on.
bool clear_nonblock(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0;
}

// Reads until len bytes or EOF; returns bytes read or -errno. A short read that already
// reaches `enough` bytes is taken as EOF (regular files read short only there), which saves
// the extra pread per small file that only confirmed EOF.
int64_t read_at_most(int fd, uint8_t* buf, uint64_t len, uint64_t offset, uint64_t enough) {
  uint64_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, buf + done, len - done, off_t(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN && clear_nonblock(fd)) continue;
      return -errno;
    }
    if (n == 0) break;
    done += uint64_t(n);
    if (done < len && done >= enough) break;
  }
  return int64_t(done);
}
int64_t read_at_most(int fd, uint8_t* buf, uint64_t len, uint64_t offset) {
  return read_at_most(fd, buf, len, offset, len);
}

// Where the data at or after `offset` starts in a file with holes, at most `end`: the bytes
// before it are a hole, zeros that need not be read. `end` when the rest up to it is a hole
// (or the file ends first: a later read finds that), `offset` when the filesystem cannot say.
uint64_t next_data(int fd, uint64_t offset, uint64_t end) {
  const off_t data = lseek(fd, off_t(offset), SEEK_DATA);
  if (data >= 0) return std::min<uint64_t>(uint64_t(data), end);
  if (errno != ENXIO) return offset;
  const off_t size = lseek(fd, 0, SEEK_END);  // ENXIO: no data from offset to the end of file
  return size < 0 ? offset : std::clamp<uint64_t>(uint64_t(size), offset, end);
}
bool has_holes(const struct stat& st) { return uint64_t(st.st_blocks) * 512 < uint64_t(st.st_size); }
}  // namespace

namespace {
// Checks what a read of [offset, offset+len) found (n bytes; len+1 were asked when expect_eof)
// and trims `out` to the bytes of the range that exist: all len of them when the file grew,
// fewer when it shrank. Returns 0: a changed file is reported through `changed`.
int check_range_read(int64_t n, uint64_t offset, uint64_t len, bool expect_eof, SourceBytes& out,
                     std::string& changed) {
  if (n < 0) return int(-n);
  if (uint64_t(n) < len) {
    // The range may be one of several of a large file: say where the file ends now; the caller
    // knows the size the scan found.
    changed = "file shrank while being read: it ends at byte " + std::to_string(offset + uint64_t(n));
  } else if (expect_eof && uint64_t(n) > len) {
    changed = "file grew while being read: it is longer than " + std::to_string(offset + len) + " bytes";
  }
  out.resize(std::min(uint64_t(n), len));
  return 0;
}

// Cleared for good the first time the kernel or filesystem refuses RWF_NOWAIT (EOPNOTSUPP on
// filesystems without it, EINVAL before Linux 4.14): every read then simply blocks.
std::atomic<bool> nowait_supported{true};
}  // namespace

SourceRead::~SourceRead() {
  if (fd_ >= 0) close(fd_);
}

int SourceRead::start(int dirfd, const char* name, uint64_t offset, uint64_t len, bool expect_eof, SourceBytes& out,
                      std::string& changed, XattrList* xattrs, std::string* xattrs_failed_key, OpenedFile* opened) {
  if (fd_ >= 0) close(fd_);
  hole_ = false;
  struct stat st;
  fd_ = open_source(dirfd, name, st);
  if (fd_ < 0) {
    const int err = open_failure(fd_);
    fd_ = -1;
    return err;
  }
  opened_ = opened;
  opened_ctime_ = st.st_ctim;
  opened_mtime_ = st.st_mtim;
  if (opened) *opened = opened_file(st);
  if (xattrs) {
    if (int err = read_xattrs_of_fd(fd_, *xattrs, *xattrs_failed_key)) {
      close(fd_);
      fd_ = -1;
      return err;
    }
  }
  offset_ = offset;
  len_ = len;
  expect_eof_ = expect_eof;
  done_ = 0;
  // A range that lies in a hole of a sparse file (fewer blocks allocated than its size) is not
  // read: the kernel would zero-fill page after page (10 s for a 10 GiB sparse file), and
  // neither is a buffer filled with its zeros (range_was_hole). The last range is always
  // read, to notice growth.
  if (!expect_eof && has_holes(st) && offset + len <= uint64_t(st.st_size)) {
    const off_t data = lseek(fd_, off_t(offset), SEEK_DATA);
    if ((data < 0 && errno == ENXIO) || (data >= 0 && uint64_t(data) >= offset + len)) {
      hole_ = true;
      out.clear();
      close_after_read();
      return 0;
    }
  }
  out.resize(len + (expect_eof ? 1 : 0));
  // One read that is answered from the page cache or not at all: on a warm tree this is the
  // only read (the same one syscall as a plain pread), on a cold one the kernel has been asked
  // to fetch the data and the caller goes on to start its other reads before waiting.
  while (nowait_supported.load(std::memory_order_relaxed)) {
    iovec iov{out.data(), out.size()};
    ssize_t n = preadv2(fd_, &iov, 1, off_t(offset), RWF_NOWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EOPNOTSUPP || errno == EINVAL)) {
      nowait_supported.store(false, std::memory_order_relaxed);
      break;
    }
    if (n < 0 && errno != EAGAIN) return errno;
    // A read that reaches len bytes is complete (a short one there is EOF, as below). A shorter
    // one is ambiguous: EOF, or the rest is not cached yet; a blocking read settles it.
    if (n >= 0 && uint64_t(n) >= len) return finish(out, changed, n);
    done_ = n > 0 ? uint64_t(n) : 0;
    posix_fadvise(fd_, off_t(offset + done_), off_t(out.size() - done_), POSIX_FADV_WILLNEED);
    return kReadPending;
  }
  return finish(out, changed);
}

int SourceRead::finish(SourceBytes& out, std::string& changed) {
  int64_t n =
      read_at_most(fd_, out.data() + done_, out.size() - done_, offset_ + done_, len_ > done_ ? len_ - done_ : 0);
  return finish(out, changed, n < 0 ? n : n + int64_t(done_));
}

int SourceRead::finish(SourceBytes& out, std::string& changed, int64_t n) {
  if (n < 0) opened_ = nullptr;  // a failed read: nothing to compare
  close_after_read();
  return check_range_read(n, offset_, len_, expect_eof_, out, changed);
}

void SourceRead::close_after_read() {
  if (opened_) note_changes_since_open(fd_, opened_ctime_, opened_mtime_, *opened_);
  close(fd_);
  fd_ = -1;
}

int hash_source_file(int dirfd, const char* name, uint64_t expected_size, Hash128& out, std::string& changed,
                     uint64_t& hashed, XattrList* xattrs, std::string* xattrs_failed_key, OpenedFile* opened) {
  struct stat st;
  Fd f{open_source(dirfd, name, st)};
  if (f.fd < 0) return open_failure(f.fd);
  if (opened) *opened = opened_file(st);
  if (xattrs) {
    if (int err = read_xattrs_of_fd(f.fd, *xattrs, *xattrs_failed_key)) return err;
  }
  posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  ContentHasher hasher;
  std::vector<uint8_t> buf(kStreamChunk);
  // Only the first expected_size bytes are hashed: a file that grew is stored as its first
  // expected_size bytes (the size the scan saw), and this hash must be of those. One byte more
  // is asked for at the end, to notice the growth. The holes of a sparse file are hashed as
  // runs of zeros, not read (a 10 GiB hole was 10,000 reads of zeros), as the data pass does.
  const bool sparse = has_holes(st);
  uint64_t total = 0;
  bool longer = false;
  for (;;) {
    if (sparse && total < expected_size) {
      const uint64_t data = next_data(f.fd, total, expected_size);
      if (data > total) {
        hasher.update_zeros(data - total);
        total = data;
        continue;
      }
    }
    const size_t want = size_t(std::min<uint64_t>(buf.size(), expected_size - total + (total == expected_size)));
    ssize_t n = pread(f.fd, buf.data(), want, off_t(total));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN && clear_nonblock(f.fd)) continue;
      return errno;
    }
    if (n == 0) break;
    if (total == expected_size) {
      longer = true;
      break;
    }
    const size_t use = size_t(std::min<uint64_t>(uint64_t(n), expected_size - total));
    hasher.update(buf.data(), use);
    total += use;
  }
  if (opened) note_changes_since_open(f.fd, st.st_ctim, st.st_mtim, *opened);
  if (longer)
    changed = "file grew while being read: it is longer than " + std::to_string(expected_size) + " bytes";
  else if (total < expected_size)
    changed = "file shrank while being read: it ends at byte " + std::to_string(total);
  out = hasher.digest();
  hashed = total;
  return 0;
}

bool source_files_identical(int dir_a, const char* a, int dir_b, const char* b, uint64_t size) {
  struct stat sa, sb;
  Fd fa{open_source(dir_a, a, sa)}, fb{open_source(dir_b, b, sb)};
  if (fa.fd < 0 || fb.fd < 0) return false;
  std::vector<uint8_t> ba(kStreamChunk), bb(kStreamChunk);
  const bool sparse = has_holes(sa) && has_holes(sb);
  for (uint64_t off = 0; off < size;) {
    // Where both files have a hole, both hold zeros there: skipped, not read.
    if (sparse) {
      const uint64_t skip = std::min(next_data(fa.fd, off, size), next_data(fb.fd, off, size));
      if (skip > off) {
        off = skip;
        continue;
      }
    }
    uint64_t want = std::min<uint64_t>(kStreamChunk, size - off);
    if (read_at_most(fa.fd, ba.data(), want, off) != int64_t(want)) return false;
    if (read_at_most(fb.fd, bb.data(), want, off) != int64_t(want)) return false;
    if (std::memcmp(ba.data(), bb.data(), want) != 0) return false;
    off += want;
  }
  return true;
}

}  // namespace sqar
