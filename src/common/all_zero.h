// Whether a buffer holds only zero bytes: such blocks become sparse in an image and holes on
// extraction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sqar {

// Compares the buffer with itself shifted by one byte: memcmp's vectorised loop does the work.
inline bool all_zero(const uint8_t* p, size_t n) { return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0); }

}  // namespace sqar
