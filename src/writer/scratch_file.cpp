#include "writer/scratch_file.h"

#include <fcntl.h>
#include <sqfs/error.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "common/error.h"
#include "writer/image_file.h"

namespace sqar {

ScratchFile::ScratchFile(const std::string& directory, std::string purpose)
    : where_(directory), purpose_(std::move(purpose)) {
  fd_ = open(directory.c_str(), O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    // Filesystems without O_TMPFILE: a named file, unlinked at once.
    std::string tmpl = directory + "/.sqar-scratch-XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    fd_ = mkostemp(name.data(), O_CLOEXEC);
    if (fd_ < 0) throw_errno(directory, errno);
    unlink(name.data());
  }
  view_.base.base.destroy = &ScratchFile::destroy;
  view_.base.read_at = &ScratchFile::read_at;
  view_.base.write_at = &ScratchFile::write_at;
  view_.base.get_size = &ScratchFile::get_size;
  view_.base.truncate = &ScratchFile::truncate;
  view_.owner = this;
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) close(fd_);
}

int ScratchFile::fail(int err) {
  last_error_ = errno_message(where_ + " (scratch file for " + purpose_ + ")", err ? err : EIO);
  return SQFS_ERROR_IO;
}

int ScratchFile::read_at(sqfs_file_t* f, sqfs_u64 off, void* buf, size_t len) {
  ScratchFile* self = reinterpret_cast<View*>(f)->owner;
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    ssize_t n = pread(self->fd_, p, len, off_t(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return self->fail(n < 0 ? errno : EIO);
    p += n;
    len -= size_t(n);
    off += uint64_t(n);
  }
  return 0;
}

int ScratchFile::write_at(sqfs_file_t* f, sqfs_u64 off, const void* buf, size_t len) {
  ScratchFile* self = reinterpret_cast<View*>(f)->owner;
  const auto* p = static_cast<const uint8_t*>(buf);
  const uint64_t end = off + len;
  while (len > 0) {
    ssize_t n = pwrite(self->fd_, p, len, off_t(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return self->fail(n < 0 ? errno : EIO);
    p += n;
    len -= size_t(n);
    off += uint64_t(n);
  }
  if (end > self->size_) self->size_ = end;
  return 0;
}

sqfs_u64 ScratchFile::get_size(const sqfs_file_t* f) { return reinterpret_cast<const View*>(f)->owner->size_; }

int ScratchFile::truncate(sqfs_file_t* f, sqfs_u64 size) {
  ScratchFile* self = reinterpret_cast<View*>(f)->owner;
  if (ftruncate(self->fd_, off_t(size)) != 0) return self->fail(errno);
  self->size_ = size;
  return 0;
}

void ScratchFile::copy_to(ImageFile& out) {
  std::vector<uint8_t> buf(1 << 20);
  for (uint64_t off = 0; off < size_;) {
    size_t want = size_t(std::min<uint64_t>(buf.size(), size_ - off));
    if (read_at(&view_.base, off, buf.data(), want) != 0) throw Error(last_error_);
    out.append(buf.data(), want);
    off += want;
  }
}

}  // namespace sqar
