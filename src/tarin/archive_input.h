// The bytes libarchive reads for `create --tar`: a file or standard input, decoded here and
// handed to the tar reader in pieces, so that what one member's headers take can be bounded
// between two pieces (begin_header). gzip is decoded with zlib rather than by libarchive, whose
// gzip filter does not check the CRC-32 and length in each member's trailer, so a damaged
// .tar.gz would pack without a word. Every other compression (xz, zstd, bzip2, lz4, ...) is
// decoded by a second libarchive reader in its "raw" format, which yields one filter block
// (64-128 KiB) at a time: handed its compressed bytes, the tar reader's own filter would
// decode as far ahead as it liked, past any check.
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

  // Around archive_read_next_header: libarchive reads a GNU sparse 1.0 map whole into a list
  // there, a node per region, before the member is seen, so a map of millions of "0\n0\n"
  // lines (a few hundred KB of .tar.xz) took GBs. What one member's headers read of the
  // decoded stream, handed over in small pieces meanwhile, is bounded (4 MiB: some 200,000
  // regions of a real map).
  void begin_header(struct archive* a);
  void end_header();

 private:
  static ssize_t read_cb(struct archive* a, void* self, const void** buf);
  ssize_t read(struct archive* a, const void** buf);
  size_t read_gzip(size_t room);
  // Other compressions: the next piece of at most `room` bytes of the decoder's current block.
  size_t read_decoded(size_t room, const void** buf);
  void start_decoder();
  // The decoder's source: the raw bytes of the input, the ones read for the test first.
  static ssize_t raw_read_cb(struct archive* a, void* self, const void** buf);
  size_t fill();  // reads more raw input; 0 at its end
  // The first read: at least `want` bytes unless the input ends first, since a pipe may hand
  // over one byte at a time and the gzip test needs two.
  size_t fill_at_least(size_t want);
  void check_header_bound(struct archive* a) const;  // throws past the bound

  int fd_ = -1;
  bool own_fd_ = false;
  std::string name_;
  std::vector<uint8_t> in_, out_;
  size_t in_len_ = 0;
  int64_t header_start_ = -1;  // in a member's headers: the stream position they began at
  bool gzip_ = false, started_ = false, in_member_ = false, eof_ = false;
  z_stream z_{};
  struct archive* decoder_ = nullptr;  // other compressions, and none
  bool first_bytes_pending_ = false;   // the bytes read for the gzip test, not yet handed to decoder_
  const uint8_t* block_ = nullptr;     // the rest of decoder_'s current block
  size_t block_left_ = 0;
};

}  // namespace sqar
