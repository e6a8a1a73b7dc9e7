#include "pipeline/incompressible.h"

#include <lz4.h>

#include <array>
#include <cmath>
#include <vector>

namespace sqar {

namespace {

// Order-0 entropy of data[0, len) in bits per byte.
double byte_entropy(const uint8_t* data, size_t len) {
  std::array<uint32_t, 256 * 4> hist{};  // four interleaved tables: no store-to-load stalls
  size_t i = 0;
  for (; i + 4 <= len; i += 4) {
    ++hist[data[i]];
    ++hist[256 + data[i + 1]];
    ++hist[512 + data[i + 2]];
    ++hist[768 + data[i + 3]];
  }
  for (; i < len; ++i) ++hist[data[i]];
  double entropy = 0;
  for (int b = 0; b < 256; ++b) {
    uint32_t c = hist[b] + hist[256 + b] + hist[512 + b] + hist[768 + b];
    if (c) {
      double p = double(c) / double(len);
      entropy -= p * std::log2(p);
    }
  }
  return entropy;
}

}  // namespace

bool looks_incompressible(const uint8_t* data, size_t len) {
  if (len < 4096) return false;
  // Order-0 entropy first: text, logs and most binaries are far below 8 bits/byte. Their
  // first 4 KiB says so already (random bytes give 7.95 there): the rest of a 128 KiB block
  // is counted only when it might be stored raw. A prefix that misleads can only send a block
  // to the real codec, never store one raw.
  constexpr size_t kPrefix = 4096;
  if (len > 4 * kPrefix && byte_entropy(data, kPrefix) < 7.5) return false;
  const double entropy = byte_entropy(data, len);
  if (entropy < 7.9) return false;
  // Uniform random bytes fall short of 8 bits/byte only by sampling noise, about
  // 255 / (2 len ln 2) bits. A larger shortfall is skew the real codec's entropy stage turns
  // into bytes saved (packed binaries, deflate streams, files with headers), so those blocks
  // go to it: storing them raw made /usr/lib images larger than mksquashfs's.
  const double random_shortfall = 255.0 / (2.0 * double(len) * std::log(2.0));
  if (8.0 - entropy > 4.0 * random_shortfall) return false;
  // High byte entropy can still hide repeats; a fast LZ4 pass finds those cheaply. Any saving
  // at all sends the block to the real codec, which finds at least as many matches.
  thread_local std::vector<char> scratch;
  scratch.resize(size_t(LZ4_compressBound(int(len))));
  int n = LZ4_compress_default(reinterpret_cast<const char*>(data), scratch.data(), int(len), int(scratch.size()));
  return n <= 0 || size_t(n) >= len;
}

}  // namespace sqar
