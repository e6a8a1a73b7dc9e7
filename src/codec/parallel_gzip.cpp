#include "codec/parallel_gzip.h"

#include <libdeflate.h>

#include <algorithm>
#include <new>

#include "codec/codec.h"
#include "common/error.h"

namespace sqar {

ParallelGzipWriter::ParallelGzipWriter(int level, unsigned threads, Output out)
    : out_(std::move(out)), pool_(std::max(1u, threads)) {
  for (unsigned i = 0; i < pool_.threads(); ++i) {
    libdeflate_compressor* c = libdeflate_alloc_compressor(libdeflate_level(level));
    if (!c) {
      for (libdeflate_compressor* done : compressors_) libdeflate_free_compressor(done);
      throw std::bad_alloc();
    }
    compressors_.push_back(c);
  }
  // Two pieces a worker: one batch keeps every core busy while the pieces' sizes differ.
  pieces_.resize(2 * size_t(pool_.threads()));
  for (Piece& p : pieces_) p.in.reserve(kPieceSize);
}

ParallelGzipWriter::~ParallelGzipWriter() {
  for (libdeflate_compressor* c : compressors_) libdeflate_free_compressor(c);
}

void ParallelGzipWriter::write(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    std::vector<uint8_t>& in = pieces_[filling_].in;
    const size_t take = std::min(len, kPieceSize - in.size());
    in.insert(in.end(), p, p + take);
    p += take;
    len -= take;
    if (in.size() == kPieceSize && ++filling_ == pieces_.size()) {
      compress_pieces(pieces_.size());
      filling_ = 0;
    }
  }
}

void ParallelGzipWriter::finish() {
  const size_t count = filling_ + (pieces_[filling_].in.empty() ? 0 : 1);
  compress_pieces(count == 0 && !wrote_member_ ? 1 : count);  // no input at all: one empty member
  filling_ = 0;
}

void ParallelGzipWriter::compress_pieces(size_t count) {
  pool_.parallel_for(count, [&](size_t i, unsigned worker) {
    Piece& piece = pieces_[i];
    libdeflate_compressor* c = compressors_[worker];
    piece.out.resize(libdeflate_gzip_compress_bound(c, piece.in.size()));
    const size_t n = libdeflate_gzip_compress(c, piece.in.data(), piece.in.size(), piece.out.data(), piece.out.size());
    if (n == 0) throw Error("gzip: libdeflate found its output bound too small");  // never: it is its own bound
    piece.out.resize(n);
  });
  for (size_t i = 0; i < count; ++i) {
    out_(pieces_[i].out.data(), pieces_[i].out.size());
    pieces_[i].in.clear();
    wrote_member_ = true;
  }
}

}  // namespace sqar
