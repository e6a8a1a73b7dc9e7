#include "pipeline/source_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sqar {

namespace {
constexpr size_t kStreamChunk = 1 << 20;

int open_source(int dirfd, const char* name) {
  // O_NOATIME keeps the build from dirtying inodes of the source tree (allowed for root/owner).
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  return fd;
}
int open_source(const std::string& path) { return open_source(AT_FDCWD, path.c_str()); }

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Reads until len bytes or EOF; returns bytes read or -errno. A short read that already
// reaches `enough` bytes is taken as EOF (regular files read short only there), which saves
// the extra pread per small file that only confirmed EOF.
int64_t read_at_most(int fd, uint8_t* buf, uint64_t len, uint64_t offset, uint64_t enough) {
  uint64_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, buf + done, len - done, off_t(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
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
}  // namespace

int read_source_range(int dirfd, const char* name, uint64_t offset, uint64_t len, bool expect_eof,
                      std::vector<uint8_t>& out, std::string& changed) {
  Fd f{open_source(dirfd, name)};
  if (f.fd < 0) return errno;
  out.resize(len + (expect_eof ? 1 : 0));
  int64_t n = read_at_most(f.fd, out.data(), out.size(), offset, len);
  if (n < 0) return int(-n);
  if (uint64_t(n) < len) {
    changed = "file shrank while being read (expected " + std::to_string(offset + len) + " bytes, found " +
              std::to_string(offset + uint64_t(n)) + ")";
  } else if (expect_eof && uint64_t(n) > len) {
    changed = "file grew while being read (expected " + std::to_string(offset + len) + " bytes)";
  }
  out.resize(len);
  return 0;
}

int hash_source_file(const std::string& path, uint64_t expected_size, Hash128& out, std::string& changed) {
  Fd f{open_source(path)};
  if (f.fd < 0) return errno;
  posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  StreamHasher hasher;
  std::vector<uint8_t> buf(kStreamChunk);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = read(f.fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    hasher.update(buf.data(), size_t(n));
    total += uint64_t(n);
    if (total > expected_size) break;
  }
  if (total != expected_size)
    changed = std::string("file ") + (total > expected_size ? "grew" : "shrank") + " while being read (expected " +
              std::to_string(expected_size) + " bytes)";
  out = hasher.digest();
  return 0;
}

bool source_files_identical(const std::string& a, const std::string& b, uint64_t size) {
  Fd fa{open_source(a)}, fb{open_source(b)};
  if (fa.fd < 0 || fb.fd < 0) return false;
  std::vector<uint8_t> ba(kStreamChunk), bb(kStreamChunk);
  for (uint64_t off = 0; off < size;) {
    uint64_t want = std::min<uint64_t>(kStreamChunk, size - off);
    if (read_at_most(fa.fd, ba.data(), want, off) != int64_t(want)) return false;
    if (read_at_most(fb.fd, bb.data(), want, off) != int64_t(want)) return false;
    if (std::memcmp(ba.data(), bb.data(), want) != 0) return false;
    off += want;
  }
  return true;
}

}  // namespace sqar
