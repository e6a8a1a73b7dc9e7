// The compression of an archive `sqar extract --tar` writes: chosen by name (--compress, -z,
// -J, ...) or, as `tar -a` and bsdtar -a choose it, by the archive file's suffix. gzip goes
// through codec/parallel_gzip, the others through libarchive's own filters, so bsdtar reads
// every one back, and GNU tar through the compressor's own tool.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace sqar::ops {

enum class TarCompression { none, gzip, bzip2, xz, zstd, lz4, lzma, lzip, compress };

// "gzip", "xz", ... (what --compress takes); "none" for TarCompression::none.
const char* tar_compression_name(TarCompression c);

// The compression --compress NAME means; nullopt for a name it does not know. Takes the
// names in tar_compression_name and the aliases users type: "gz", "bz2", "zst", "Z".
std::optional<TarCompression> parse_tar_compression(std::string_view name);

// The compression an archive named `path` is expected to hold, from its suffix as GNU tar's
// --auto-compress reads it: .gz .tgz .taz, .bz2 .tbz .tbz2 .tz2 .tb2, .xz .txz, .zst .tzst,
// .lz4, .lzma .tlz, .lz, .Z .taZ. Any other name, "-" included: none.
TarCompression tar_compression_for_name(std::string_view path);

// The names --compress takes, for help and error messages: "gzip, bzip2, ...".
std::string tar_compression_names();

}  // namespace sqar::ops
