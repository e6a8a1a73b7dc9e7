// libfuse's reply functions for fuzz_sqarfs: record the reply in the request (see
// fuse_replies.h) and trap on anything libfuse or the kernel would not accept.
#include "fuse_replies.h"

#include <linux/fuse.h>

#include <cerrno>
#include <cstring>

namespace {

fuse_req& begin_reply(fuse_req_t req) {
  // A second reply would use a request libfuse has already freed.
  if (++req->replies != 1) __builtin_trap();
  return *req;
}

void check_fits(const fuse_req& r, size_t size) {
  if (size > r.size) __builtin_trap();  // the kernel asked for at most r.size bytes
}

// What the handlers may answer: damage is EIO, the rest are the POSIX answers for the request.
// ENOMEM (std::bad_alloc) is left out on purpose: no valid or damaged image of a few KiB may
// need more memory than there is.
bool expected_errno(int err) {
  switch (err) {
    case EIO:
    case ENOTDIR:
    case EISDIR:
    case EINVAL:
    case ENODATA:
    case ERANGE:
    case ENXIO:
    case ENOSYS:
    case EOPNOTSUPP:
    case EROFS: return true;
    default: return false;
  }
}

// libfuse's entry sizes (linux/fuse.h): a name is never truncated, and an entry that does not
// fit leaves the buffer untouched.
size_t add_entry(fuse_req_t req, char* buf, size_t bufsize, const char* name, fuse_ino_t ino, off_t off,
                 size_t name_offset) {
  const size_t len = std::strlen(name);
  // The kernel fails the whole listing on an empty name; the reader refuses '/' in names.
  if (len == 0 || (std::strchr(name, '/') != nullptr)) __builtin_trap();
  const size_t need = FUSE_DIRENT_ALIGN(name_offset + len);
  if (need > bufsize) return need;
  std::memset(buf, 0, name_offset);  // every byte the caller said it owns is written
  std::memcpy(buf + name_offset, name, len);
  std::memset(buf + name_offset + len, 0, need - name_offset - len);
  req->listed.push_back({name, ino, off});
  return need;
}

}  // namespace

namespace sqar::fuzz {
void check_mode(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR:
    case S_IFREG:
    case S_IFLNK:
    case S_IFBLK:
    case S_IFCHR:
    case S_IFIFO:
    case S_IFSOCK: return;
    default: __builtin_trap();
  }
}
}  // namespace sqar::fuzz

extern "C" {

void* fuse_req_userdata(fuse_req_t req) { return req->userdata; }

// A request the kernel itself sent (pid 0): no caller whose rights matter.
const struct fuse_ctx* fuse_req_ctx(fuse_req_t) {
  static const fuse_ctx kernel{};
  return &kernel;
}

int fuse_reply_err(fuse_req_t req, int err) {
  fuse_req& r = begin_reply(req);
  if (!expected_errno(err)) __builtin_trap();
  r.error = err;
  return 0;
}

void fuse_reply_none(fuse_req_t req) { begin_reply(req); }

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param* e) {
  fuse_req& r = begin_reply(req);
  r.entry = *e;
  if (e->ino != 0) sqar::fuzz::check_mode(e->attr.st_mode);  // 0: a negative entry
  return 0;
}

int fuse_reply_attr(fuse_req_t req, const struct stat* attr, double) {
  fuse_req& r = begin_reply(req);
  sqar::fuzz::check_mode(attr->st_mode);
  r.attr = *attr;
  return 0;
}

int fuse_reply_readlink(fuse_req_t req, const char* link) {
  fuse_req& r = begin_reply(req);
  r.data = link;
  return 0;
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info*) {
  begin_reply(req);
  return 0;
}

int fuse_reply_buf(fuse_req_t req, const char* buf, size_t size) {
  fuse_req& r = begin_reply(req);
  check_fits(r, size);
  r.data.assign(buf, size);  // ASan checks the handler's buffer holds `size` bytes
  return 0;
}

int fuse_reply_statfs(fuse_req_t req, const struct statvfs*) {
  begin_reply(req);
  return 0;
}

int fuse_reply_xattr(fuse_req_t req, size_t count) {
  fuse_req& r = begin_reply(req);
  if (r.size != 0) __builtin_trap();  // only the size probe (size 0) is answered with a count
  r.xattr_size = count;
  return 0;
}

int fuse_reply_lseek(fuse_req_t req, off_t off) {
  fuse_req& r = begin_reply(req);
  if (off < 0) __builtin_trap();
  r.seek = off;
  return 0;
}

size_t fuse_add_direntry(fuse_req_t req, char* buf, size_t bufsize, const char* name, const struct stat* stbuf,
                         off_t off) {
  return add_entry(req, buf, bufsize, name, stbuf->st_ino, off, FUSE_NAME_OFFSET);
}

size_t fuse_add_direntry_plus(fuse_req_t req, char* buf, size_t bufsize, const char* name,
                              const struct fuse_entry_param* e, off_t off) {
  if (e->ino != 0) sqar::fuzz::check_mode(e->attr.st_mode);
  return add_entry(req, buf, bufsize, name, e->ino, off, FUSE_NAME_OFFSET_DIRENTPLUS);
}

// Only called with a session (start_background_threads), which the harness never starts.
int fuse_lowlevel_notify_store(struct fuse_session*, fuse_ino_t, off_t, struct fuse_bufvec*, enum fuse_buf_copy_flags) {
  __builtin_trap();
}

}  // extern "C"
