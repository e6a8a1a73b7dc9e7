// The settings trailer: the compression level sqar compressed an image's data at. The
// compressor options block cannot say it for every codec (xz and lz4 store no level, and gzip
// stores 10-12 as 9, since unsquashfs refuses more), yet `append` must compress new data at the
// image's level and `--reuse` may copy only blocks a fresh build would write.
//
// Layout (little-endian, 40 bytes, then zero padding to a multiple of 4096), right after the
// stored-data digests trailer (docs/format.md):
//   magic "SQARSET1", u32 version (1), u32 compressor (the superblock's id), u32 level,
//   u32 flags (bit 0: mixed, some of the data was compressed at another level or by another
//   tool), u64 zero, u64 XXH3-64 of the first 32 bytes
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "codec/codec.h"

namespace sqar {

constexpr size_t kImageSettingsHeaderSize = 40;

struct ImageSettings {
  CodecId compressor = CodecId::zstd;
  int level = 0;       // what new data of this image is compressed at
  bool mixed = false;  // not every stored block was compressed so (append -l, merge)
};

// The trailer including its padding to 4 KiB.
std::vector<uint8_t> encode_image_settings(const ImageSettings& s);

// nullopt when the magic is absent or the version is a later one this build does not know.
// Throws sqar::Error when the trailer is damaged: a bad header hash, a compressor other than
// `compressor` (the superblock's), or a level outside the compressor's range.
std::optional<ImageSettings> decode_image_settings(const uint8_t* data, size_t len, CodecId compressor);

}  // namespace sqar
