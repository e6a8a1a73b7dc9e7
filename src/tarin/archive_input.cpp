#include "tarin/archive_input.h"

#include <archive.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace sqar {
namespace {
constexpr size_t kBuffer = size_t(1) << 20;
// While a member's headers are read: the most of the stream they may take, and the decoded
// gzip pieces handed over, small enough that a check between two of them comes before
// libarchive has parsed much past the bound.
constexpr int64_t kMaxHeaderBytes = int64_t(4) << 20;
constexpr size_t kHeaderPiece = size_t(64) << 10;
}  // namespace

void ArchiveInput::begin_header(struct archive* a) { header_start_ = archive_filter_bytes(a, 0); }

void ArchiveInput::end_header() { header_start_ = -1; }

void ArchiveInput::check_header_bound(struct archive* a) const {
  if (header_start_ < 0 || archive_filter_bytes(a, 0) - header_start_ <= kMaxHeaderBytes) return;
  throw Error(name_ +
              ": one member's headers take more than 4 MiB of the archive (a GNU sparse map of millions "
              "of regions, which libarchive would hold in memory, or zero blocks past the archive's end)");
}

ArchiveInput::ArchiveInput(const std::string& path, std::string name) : name_(std::move(name)) {
  if (path == "-") {
    fd_ = 0;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_errno(path, errno);
    own_fd_ = true;
  }
  in_.resize(kBuffer);
}

ArchiveInput::~ArchiveInput() {
  if (gzip_) inflateEnd(&z_);
  if (own_fd_) close(fd_);
}

int ArchiveInput::open(struct archive* a) {
  return archive_read_open(a, this, nullptr, &ArchiveInput::read_cb, nullptr);
}

ssize_t ArchiveInput::read_cb(struct archive* a, void* self, const void** buf) {
  return static_cast<ArchiveInput*>(self)->read(a, buf);
}

size_t ArchiveInput::fill() { return fill_at_least(1); }

size_t ArchiveInput::fill_at_least(size_t want) {
  size_t got = 0;
  while (got < want) {
    const ssize_t n = ::read(fd_, in_.data() + got, in_.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(name_, errno);
    if (n == 0) break;
    got += size_t(n);
  }
  in_len_ = got;
  return in_len_;
}

ssize_t ArchiveInput::read(struct archive* a, const void** buf) {
  try {
    check_header_bound(a);
    if (!started_) {
      started_ = true;
      if (fill_at_least(2) >= 2 && in_[0] == 0x1f && in_[1] == 0x8b) {
        gzip_ = true;
        if (inflateInit2(&z_, 15 + 16) != Z_OK) throw Error(name_ + ": cannot start the gzip decoder");
        in_member_ = true;
        z_.next_in = in_.data();
        z_.avail_in = unsigned(in_len_);
        out_.resize(kBuffer);
      } else {
        *buf = in_.data();
        return ssize_t(in_len_);
      }
    }
    if (!gzip_) {
      *buf = in_.data();
      return ssize_t(fill());
    }
    // gzip: decode members one after another (gzip -c a b > ab.gz is one stream), checking
    // each trailer; bytes after the last member that are no gzip member are ignored, as gzip -d does.
    const size_t room = header_start_ >= 0 ? kHeaderPiece : out_.size();
    z_.next_out = out_.data();
    z_.avail_out = unsigned(room);
    while (z_.avail_out == room && !eof_) {
      if (z_.avail_in == 0) {
        if (fill() == 0) {
          if (in_member_) throw Error(name_ + ": gzip stream ends in the middle (truncated)");
          eof_ = true;
          break;
        }
        z_.next_in = in_.data();
        z_.avail_in = unsigned(in_len_);
      }
      if (!in_member_) {
        if (z_.next_in[0] != 0x1f) {  // trailing bytes (often zero padding)
          eof_ = true;
          break;
        }
        inflateReset(&z_);
        in_member_ = true;
      }
      const int r = inflate(&z_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        in_member_ = false;
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        throw Error(name_ + ": damaged gzip data (" + (z_.msg ? z_.msg : "zlib error " + std::to_string(r)) + ")");
      }
    }
    *buf = out_.data();
    return ssize_t(room - z_.avail_out);
  } catch (const std::exception& e) {
    // The ingest names the archive in front of libarchive's message.
    std::string m = e.what();
    if (m.rfind(name_ + ": ", 0) == 0) m.erase(0, name_.size() + 2);
    archive_set_error(a, EIO, "%s", m.c_str());
    return -1;
  }
}

}  // namespace sqar
