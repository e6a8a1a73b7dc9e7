#include "tarin/archive_input.h"

#include <archive.h>
#include <archive_entry.h>
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
  if (decoder_) archive_read_free(decoder_);
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

ssize_t ArchiveInput::raw_read_cb(struct archive* a, void* self, const void** buf) {
  auto* in = static_cast<ArchiveInput*>(self);
  try {
    *buf = in->in_.data();
    if (in->first_bytes_pending_) {
      in->first_bytes_pending_ = false;
      return ssize_t(in->in_len_);
    }
    return ssize_t(in->fill());
  } catch (const std::exception& e) {
    archive_set_error(a, EIO, "%s", e.what());
    return -1;
  }
}

void ArchiveInput::start_decoder() {
  decoder_ = archive_read_new();
  if (!decoder_) throw Error("out of memory");
  archive_read_support_filter_all(decoder_);
  archive_read_support_format_raw(decoder_);
  first_bytes_pending_ = true;
  archive_entry* entry = nullptr;
  if (archive_read_open(decoder_, this, nullptr, &ArchiveInput::raw_read_cb, nullptr) != ARCHIVE_OK ||
      archive_read_next_header(decoder_, &entry) < ARCHIVE_WARN) {
    const char* m = archive_error_string(decoder_);
    throw Error(name_ + ": " + (m ? m : "cannot be decoded"));
  }
}

size_t ArchiveInput::read_decoded(size_t room, const void** buf) {
  while (block_left_ == 0 && !eof_) {
    const void* p = nullptr;
    size_t n = 0;
    la_int64_t offset = 0;
    const int r = archive_read_data_block(decoder_, &p, &n, &offset);
    if (r == ARCHIVE_EOF) {
      eof_ = true;
    } else if (r < ARCHIVE_WARN) {
      const char* m = archive_error_string(decoder_);
      throw Error(name_ + ": " + (m ? m : "damaged compressed data"));
    } else {
      block_ = static_cast<const uint8_t*>(p);
      block_left_ = n;
    }
  }
  const size_t n = std::min(room, block_left_);
  *buf = block_;
  block_ += n;
  block_left_ -= n;
  return n;
}

size_t ArchiveInput::read_gzip(size_t room) {
  // Members one after another (gzip -c a b > ab.gz is one stream), each trailer checked; bytes
  // after the last member that are no gzip member are ignored, as gzip -d does.
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
  return room - z_.avail_out;
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
      } else if (in_len_ == 0) {
        eof_ = true;  // an empty input: the tar reader says what it lacks
      } else {
        start_decoder();
      }
    }
    const size_t room = header_start_ >= 0 ? kHeaderPiece : kBuffer;
    if (gzip_) {
      *buf = out_.data();
      return ssize_t(read_gzip(room));
    }
    if (!decoder_) {
      *buf = in_.data();
      return 0;
    }
    return ssize_t(read_decoded(room, buf));
  } catch (const std::exception& e) {
    // The ingest names the archive in front of libarchive's message.
    std::string m = e.what();
    if (m.rfind(name_ + ": ", 0) == 0) m.erase(0, name_.size() + 2);
    archive_set_error(a, EIO, "%s", m.c_str());
    return -1;
  }
}

}  // namespace sqar
