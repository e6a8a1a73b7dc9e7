#include "ops/tar_compression.h"

#include <array>

namespace sqar::ops {
namespace {

struct Named {
  const char* name;
  TarCompression compression;
};

constexpr std::array<Named, 9> kNames{{{"none", TarCompression::none},
                                       {"gzip", TarCompression::gzip},
                                       {"bzip2", TarCompression::bzip2},
                                       {"xz", TarCompression::xz},
                                       {"zstd", TarCompression::zstd},
                                       {"lz4", TarCompression::lz4},
                                       {"lzma", TarCompression::lzma},
                                       {"lzip", TarCompression::lzip},
                                       {"compress", TarCompression::compress}}};

constexpr std::array<Named, 4> kAliases{{{"gz", TarCompression::gzip},
                                         {"bz2", TarCompression::bzip2},
                                         {"zst", TarCompression::zstd},
                                         {"Z", TarCompression::compress}}};

// GNU tar's suffix table (its --auto-compress), plus .lz4, which bsdtar -a knows too. Case
// matters, as in both: ".Z" is compress, ".z" is nothing.
constexpr std::array<Named, 19> kSuffixes{{{".gz", TarCompression::gzip},
                                           {".tgz", TarCompression::gzip},
                                           {".taz", TarCompression::gzip},
                                           {".bz2", TarCompression::bzip2},
                                           {".tbz", TarCompression::bzip2},
                                           {".tbz2", TarCompression::bzip2},
                                           {".tz2", TarCompression::bzip2},
                                           {".tb2", TarCompression::bzip2},
                                           {".xz", TarCompression::xz},
                                           {".txz", TarCompression::xz},
                                           {".zst", TarCompression::zstd},
                                           {".tzst", TarCompression::zstd},
                                           {".lz4", TarCompression::lz4},
                                           {".lzma", TarCompression::lzma},
                                           {".tlz", TarCompression::lzma},
                                           {".lz", TarCompression::lzip},
                                           {".Z", TarCompression::compress},
                                           {".taZ", TarCompression::compress},
                                           {".tar", TarCompression::none}}};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

const char* tar_compression_name(TarCompression c) {
  for (const Named& n : kNames)
    if (n.compression == c) return n.name;
  return "none";
}

std::optional<TarCompression> parse_tar_compression(std::string_view name) {
  for (const Named& n : kNames)
    if (name == n.name) return n.compression;
  for (const Named& n : kAliases)
    if (name == n.name) return n.compression;
  return std::nullopt;
}

TarCompression tar_compression_for_name(std::string_view path) {
  // Only the last component's suffix counts: "out.gz/archive" is a plain tar in a directory.
  const size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  for (const Named& s : kSuffixes)
    if (ends_with(path, s.name)) return s.compression;
  return TarCompression::none;
}

std::string tar_compression_names() {
  std::string out;
  for (const Named& n : kNames) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

}  // namespace sqar::ops
