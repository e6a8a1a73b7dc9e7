#include "writer/image_file.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include <sqfs/error.h>

namespace sqar {

namespace {
constexpr size_t kBufferSize = 1 << 20;

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
sqfs_u64 view_get_size(const sqfs_file_t* f) {
  return owner_of(const_cast<sqfs_file_t*>(f))->position();
}
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
}  // namespace

ImageFile::ImageFile(std::string final_path, bool overwrite) : final_path_(std::move(final_path)) {
  struct stat st;
  if (lstat(final_path_.c_str(), &st) == 0) {
    if (!overwrite) throw Error(final_path_ + ": already exists (use --force to overwrite it)");
    if (S_ISDIR(st.st_mode)) throw Error(final_path_ + ": is a directory");
  }
  std::string tmpl = final_path_ + ".sqar-tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  fd_ = mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) {
    // Name both: the user gave the image path, the failure is about its directory.
    const int err = errno;
    throw Error(final_path_ + ": cannot create the image in " + directory_of(final_path_) + ": " + std::strerror(err));
  }
  temp_path_ = name.data();
  set_pending(temp_path_);
  fchmod(fd_, 0644);
  buffer_.reserve(kBufferSize);
}

ImageFile::~ImageFile() {
  delete view_;
  if (fd_ >= 0) close(fd_);
  if (!committed_) {
    unlink(temp_path_.c_str());
    clear_pending();
  }
}

void ImageFile::write_fully(uint64_t offset, const uint8_t* data, size_t len) {
  while (len > 0) {
    ssize_t n = pwrite(fd_, data, len, off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      if (e == ENOSPC) throw Error(final_path_ + ": no space left on device while writing the image");
      throw_errno(final_path_, e);
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
    if (n <= 0) throw Error(temp_path_ + ": short read of the image being written");
    p += n;
    len -= size_t(n);
    offset += uint64_t(n);
  }
}

void ImageFile::truncate(uint64_t size) {
  flush();
  if (ftruncate(fd_, off_t(size)) != 0) throw_errno(final_path_, errno);
  position_ = flushed_ = size;
}

std::string ImageFile::directory() const { return directory_of(final_path_); }

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

void ImageFile::commit() {
  flush();
  if (ftruncate(fd_, off_t(position_)) != 0) throw_errno(final_path_, errno);
  if (fsync(fd_) != 0) throw_errno(final_path_, errno);
  if (rename(temp_path_.c_str(), final_path_.c_str()) != 0) throw_errno(final_path_, errno);
  committed_ = true;
  clear_pending();
  int dfd = open(directory_of(final_path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

}  // namespace sqar
