#include "format/image_settings.h"

#include <xxhash.h>

#include <cstring>
#include <string>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"

namespace sqar {

namespace {
constexpr char kMagic[8] = {'S', 'Q', 'A', 'R', 'S', 'E', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kFlagMixed = 1;
}  // namespace

std::vector<uint8_t> encode_image_settings(const ImageSettings& s) {
  std::vector<uint8_t> out(size_t(fmt::align_up(kImageSettingsHeaderSize, fmt::kDeviceAlign)), 0);
  std::memcpy(out.data(), kMagic, 8);
  store_le32(out.data() + 8, kVersion);
  store_le32(out.data() + 12, uint32_t(s.compressor));
  store_le32(out.data() + 16, uint32_t(s.level));
  store_le32(out.data() + 20, s.mixed ? kFlagMixed : 0);
  store_le64(out.data() + 32, XXH3_64bits(out.data(), 32));
  return out;
}

std::optional<ImageSettings> decode_image_settings(const uint8_t* data, size_t len, CodecId compressor) {
  if (len < kImageSettingsHeaderSize || std::memcmp(data, kMagic, 8) != 0) return std::nullopt;
  if (XXH3_64bits(data, 32) != load_le64(data + 32)) throw Error("settings trailer is damaged");
  if (load_le32(data + 8) != kVersion) return std::nullopt;
  ImageSettings s;
  s.compressor = CodecId(load_le32(data + 12));
  if (load_le32(data + 12) != uint32_t(compressor))
    throw Error("settings trailer names compressor " + std::to_string(load_le32(data + 12)) + ", the superblock " +
                codec_name(compressor));
  const uint32_t level = load_le32(data + 16);
  const auto [lo, hi] = level_range(compressor);
  if (level < uint32_t(lo) || level > uint32_t(hi))
    throw Error("settings trailer gives level " + std::to_string(level) + ", outside " + codec_name(compressor) +
                "'s " + std::to_string(lo) + "-" + std::to_string(hi));
  s.level = int(level);
  s.mixed = (load_le32(data + 20) & kFlagMixed) != 0;
  return s;
}

}  // namespace sqar
