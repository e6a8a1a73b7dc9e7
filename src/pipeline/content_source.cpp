#include "pipeline/content_source.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace sqar {

bool ContentSource::identical(uint32_t a, uint32_t b, uint64_t size) const {
  constexpr uint64_t kPiece = uint64_t(1) << 20;
  std::vector<uint8_t> x(size_t(std::min(kPiece, size))), y(x.size());
  for (uint64_t at = 0; at < size; at += kPiece) {
    const uint64_t n = std::min(kPiece, size - at);
    // Where both lie in a hole there is nothing to compare: two sparse members of 4 TiB were
    // otherwise compared a MiB of zeros at a time.
    if (range_is_hole(a, at, n) && range_is_hole(b, at, n)) continue;
    if (read(a, at, n, x.data()) != 0 || read(b, at, n, y.data()) != 0) return false;
    if (std::memcmp(x.data(), y.data(), size_t(n)) != 0) return false;
  }
  return true;
}

}  // namespace sqar
