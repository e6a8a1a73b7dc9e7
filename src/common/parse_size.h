// Byte counts on the command line (sqar -b, --offset; sqarfs -o cache=): one parser so both
// programs accept the same spellings.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace sqar {

// Decimal digits, then an optional binary unit in any case: B; K, KiB, KB; M, MiB, MB; G, GiB,
// GB (all powers of 1024: KB is accepted as sqarfs always took it). nullopt when malformed
// (empty, a sign, spaces, an unknown unit) or when the value does not fit in 64 bits.
std::optional<uint64_t> parse_size(std::string_view text);

}  // namespace sqar
