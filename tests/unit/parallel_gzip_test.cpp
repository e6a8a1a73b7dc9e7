#include "codec/parallel_gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sqar {
namespace {

using Bytes = std::vector<uint8_t>;

// Text-like bytes with repeats, so that every piece compresses.
Bytes sample(size_t n) {
  Bytes b(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245 + 12345;
    b[i] = uint8_t('a' + (x >> 16) % 8);
  }
  return b;
}

// Writes `in` in uneven slices, as libarchive's callbacks arrive.
Bytes compress(const Bytes& in, unsigned threads) {
  Bytes out;
  ParallelGzipWriter w(6, threads, [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  });
  size_t at = 0;
  for (size_t step = 1; at < in.size(); step = step * 7 % 70001 + 1) {
    const size_t n = std::min(step, in.size() - at);
    w.write(in.data() + at, n);
    at += n;
  }
  w.finish();
  return out;
}

// zlib's gunzip, member after member (as gzip -d reads a file): the content and the count.
std::pair<Bytes, size_t> gunzip(const Bytes& gz) {
  Bytes out;
  size_t members = 0;
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  z.next_in = const_cast<Bytef*>(gz.data());
  z.avail_in = uInt(gz.size());
  uint8_t buf[65536];
  while (z.avail_in > 0) {
    z.next_out = buf;
    z.avail_out = sizeof buf;
    const int rc = inflate(&z, Z_NO_FLUSH);
    out.insert(out.end(), buf, buf + (sizeof buf - z.avail_out));
    if (rc == Z_STREAM_END) {
      ++members;
      inflateReset(&z);
    } else if (rc != Z_OK) {
      ADD_FAILURE() << "inflate: " << rc;
      break;
    }
  }
  inflateEnd(&z);
  return {out, members};
}

TEST(ParallelGzip, EveryMemberDecodesAndTheStreamIsTheInput) {
  constexpr size_t kPiece = ParallelGzipWriter::kPieceSize;
  // Empty, shorter than a piece, a piece exactly and around it, and more than a batch of
  // pieces (2 per worker) so that batches follow each other.
  for (size_t n : {size_t(0), size_t(1), kPiece - 1, kPiece, kPiece + 1, 5 * kPiece + 7}) {
    const Bytes in = sample(n);
    const Bytes gz = compress(in, 2);
    const auto [plain, members] = gunzip(gz);
    EXPECT_EQ(plain, in) << n;
    EXPECT_EQ(members, n == 0 ? 1 : (n + kPiece - 1) / kPiece) << n;
    EXPECT_LT(gz.size(), n / 2 + 64) << n;  // compressed, not stored
  }
}

TEST(ParallelGzip, TheStreamDoesNotDependOnTheThreadCount) {
  const Bytes in = sample(3 * ParallelGzipWriter::kPieceSize + 12345);  // more than a batch at -j1
  const Bytes one = compress(in, 1);
  EXPECT_EQ(compress(in, 2), one);
  EXPECT_EQ(compress(in, 3), one);
  EXPECT_EQ(compress(in, 8), one);
}

TEST(ParallelGzip, NoLargerThanZlibAtTheSameLevel) {
  // The level keeps its meaning: libdeflate at the level mapped from 6 is no larger than
  // zlib's 6 over the same pieces (a member per piece on both sides).
  const Bytes in = sample(2 * ParallelGzipWriter::kPieceSize);
  const Bytes ours = compress(in, 2);
  size_t zlib_size = 0;
  for (size_t at = 0; at < in.size(); at += ParallelGzipWriter::kPieceSize) {
    z_stream z{};
    ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    Bytes out(deflateBound(&z, ParallelGzipWriter::kPieceSize));
    z.next_in = const_cast<Bytef*>(in.data() + at);
    z.avail_in = uInt(ParallelGzipWriter::kPieceSize);
    z.next_out = out.data();
    z.avail_out = uInt(out.size());
    ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    zlib_size += z.total_out;
    deflateEnd(&z);
  }
  EXPECT_LE(ours.size(), zlib_size);
}

}  // namespace
}  // namespace sqar
