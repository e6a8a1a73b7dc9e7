// A gzip stream compressed on several cores: the input is cut into 4 MiB pieces, each
// compressed by libdeflate on its own into one gzip member (RFC 1952 allows a file of several
// members, and gzip -d, zcat, GNU tar, bsdtar and zlib's gzread read them as one stream, as
// they read bgzip's and pigz --independent's). Pieces are cut by offset only, so the stream
// is the same for any thread count. Used for `extract --tar x.tar.gz`, where libarchive's gzip
// filter (zlib, one core) was the bottleneck.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/thread_pool.h"

struct libdeflate_compressor;

namespace sqar {

class ParallelGzipWriter {
 public:
  // Compressed bytes go to `out`, in order, always from the thread that calls write() or
  // finish(). `level` is the user's gzip level (1-12, mapped as for image blocks).
  using Output = std::function<void(const void* data, size_t len)>;
  ParallelGzipWriter(int level, unsigned threads, Output out);
  ~ParallelGzipWriter();
  ParallelGzipWriter(const ParallelGzipWriter&) = delete;
  ParallelGzipWriter& operator=(const ParallelGzipWriter&) = delete;

  void write(const void* data, size_t len);
  // Compresses and writes what is left; an empty stream becomes one empty member, so the
  // output is always a gzip file.
  void finish();

  // Each piece starts without the 32 KiB of history before it. On the ports set's tar, 1 MiB
  // pieces came out 0.46% larger than 4 MiB ones, 16 MiB 0.12% smaller still; 4 MiB keeps a
  // batch (2 pieces a worker, in and out) at 32 MiB on two cores.
  static constexpr size_t kPieceSize = 4 << 20;

 private:
  struct Piece {
    std::vector<uint8_t> in, out;
  };
  void compress_pieces(size_t count);  // pieces_[0, count): compressed in parallel, written in order

  Output out_;
  ThreadPool pool_;
  std::vector<libdeflate_compressor*> compressors_;  // one per worker
  std::vector<Piece> pieces_;                        // a batch: 2 per worker, filled in turn
  size_t filling_ = 0;                               // the piece being filled
  bool wrote_member_ = false;
};

}  // namespace sqar
