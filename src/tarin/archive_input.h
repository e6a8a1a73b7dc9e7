// The bytes libarchive reads for `create --tar`: a file or standard input, with gzip decoded
// here rather than by libarchive, whose gzip filter does not check the CRC-32 and length in
// each member's trailer, so a damaged .tar.gz would pack without a word. zlib checks both.
#pragma once
#include <sys/types.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

struct archive;

namespace sqar {

class ArchiveInput {
 public:
  // Opens `path` ("-": standard input). Throws sqar::Error naming it.
  ArchiveInput(const std::string& path, std::string name);
  ~ArchiveInput();
  ArchiveInput(const ArchiveInput&) = delete;
  ArchiveInput& operator=(const ArchiveInput&) = delete;

  // Hands the input to `a` (archive_read_open); returns its status.
  int open(struct archive* a);

 private:
  static ssize_t read_cb(struct archive* a, void* self, const void** buf);
  ssize_t read(struct archive* a, const void** buf);
  size_t fill();  // reads more raw input; 0 at its end
  // The first read: at least `want` bytes unless the input ends first, since a pipe may hand
  // over one byte at a time and the gzip test needs two.
  size_t fill_at_least(size_t want);

  int fd_ = -1;
  bool own_fd_ = false;
  std::string name_;
  std::vector<uint8_t> in_, out_;
  size_t in_len_ = 0;
  bool gzip_ = false, started_ = false, in_member_ = false, eof_ = false;
  z_stream z_{};
};

}  // namespace sqar
