#include "codec/codec.h"

#include <zstd.h>

#include "codec/codec_impl.h"
#include "common/endian.h"
#include "common/error.h"

namespace sqar {

namespace {
// Levels that the format (mksquashfs, the kernel) treats as default: no options block needed.
constexpr int kGzipFormatDefault = 9;
constexpr int kGzipMaxLevel = 12;
constexpr int kGzipMaxStoredLevel = 9;  // unsquashfs and libsquashfs refuse more in the options block
constexpr int kZstdFormatDefault = 15;
constexpr int kLzoFormatDefault = 8;
constexpr uint32_t kLzoAlgorithm999 = 4;
constexpr uint32_t kLz4Legacy = 1;
constexpr uint32_t kLz4FlagHC = 1;
}  // namespace

int resolved_level(const CodecConfig& cfg) { return cfg.level < 0 ? default_level(cfg.id) : cfg.level; }

bool options_block_tells_level(const CodecConfig& cfg) {
  switch (cfg.id) {
    case CodecId::zstd:
    case CodecId::lzo: return true;
    case CodecId::gzip: return resolved_level(cfg) < 9;
    case CodecId::lz4: return !cfg.lz4_hc;
    case CodecId::xz:
    case CodecId::lzma: return false;
  }
  return false;
}

std::unique_ptr<Codec> make_codec(const CodecConfig& in) {
  CodecConfig cfg = in;
  cfg.level = resolved_level(in);
  switch (cfg.id) {
    case CodecId::gzip: return make_gzip_codec(cfg);
    case CodecId::xz: return make_xz_codec(cfg);
    case CodecId::lzma: return make_lzma_codec(cfg);
    case CodecId::lzo: return make_lzo_codec(cfg);
    case CodecId::lz4: return make_lz4_codec(cfg);
    case CodecId::zstd: return make_zstd_codec(cfg);
  }
  throw Error("unknown compressor id " + std::to_string(int(cfg.id)));
}

std::optional<CodecId> codec_from_name(const std::string& name) {
  if (name == "gzip" || name == "zlib") return CodecId::gzip;
  if (name == "xz") return CodecId::xz;
  if (name == "lzo") return CodecId::lzo;
  if (name == "lz4") return CodecId::lz4;
  if (name == "zstd") return CodecId::zstd;
  if (name == "lzma") return CodecId::lzma;
  return std::nullopt;
}

const char* codec_name(CodecId id) {
  switch (id) {
    case CodecId::gzip: return "gzip";
    case CodecId::lzma: return "lzma";
    case CodecId::lzo: return "lzo";
    case CodecId::xz: return "xz";
    case CodecId::lz4: return "lz4";
    case CodecId::zstd: return "zstd";
  }
  return "unknown";
}

int default_level(CodecId id) {
  switch (id) {
    case CodecId::gzip: return kGzipFormatDefault;
    case CodecId::xz: return 6;
    case CodecId::lzo: return kLzoFormatDefault;
    case CodecId::lz4: return 0;
    case CodecId::zstd: return kZstdFormatDefault;
    case CodecId::lzma: return 0;
  }
  return 0;
}

// zstd level 9: smaller images than mksquashfs' default gzip-9 on logs and source trees at about
// 2x its speed (numbers in docs/architecture.md).
int preferred_level(CodecId id) { return id == CodecId::zstd ? 9 : default_level(id); }

std::pair<int, int> level_range(CodecId id) {
  switch (id) {
    case CodecId::gzip: return {1, kGzipMaxLevel};  // 10-12: libdeflate's levels beyond zlib's 9
    case CodecId::xz: return {0, 9};
    case CodecId::lzo: return {1, 9};
    case CodecId::lz4: return {0, 12};  // 0: fast LZ4; 1..12: LZ4-HC at that level
    case CodecId::zstd: return {1, ZSTD_maxCLevel()};
    case CodecId::lzma: return {0, 0};
  }
  return {0, 0};
}

bool codec_can_write(CodecId id) { return id != CodecId::lzma; }

std::vector<uint8_t> encode_codec_options(const CodecConfig& cfg) {
  const int level = resolved_level(cfg);
  std::vector<uint8_t> out;
  switch (cfg.id) {
    case CodecId::gzip: {
      // Readers only use the window; the level is informational, so 10-12 are stored as 9.
      const int stored = level > kGzipMaxStoredLevel ? kGzipMaxStoredLevel : level;
      if (stored == kGzipFormatDefault && cfg.gzip_window == 15) return out;
      out.resize(8);
      store_le32(&out[0], uint32_t(stored));
      store_le16(&out[4], uint16_t(cfg.gzip_window));
      store_le16(&out[6], 0);  // strategies: default only
      return out;
    }
    case CodecId::zstd:
      if (level == kZstdFormatDefault) return out;
      out.resize(4);
      store_le32(&out[0], uint32_t(level));
      return out;
    case CodecId::lzo:
      if (level == kLzoFormatDefault && cfg.lzo_algorithm == kLzoAlgorithm999) return out;
      out.resize(8);
      store_le32(&out[0], cfg.lzo_algorithm);
      store_le32(&out[4], cfg.lzo_algorithm == kLzoAlgorithm999 ? uint32_t(level) : 0);
      return out;
    case CodecId::lz4:
      // Always written: unsquashfs and the kernel expect the version field.
      out.resize(8);
      store_le32(&out[0], kLz4Legacy);
      store_le32(&out[4], cfg.lz4_hc ? kLz4FlagHC : 0);
      return out;
    case CodecId::xz:
      // Dictionary = block size and no BCJ filters are the defaults the kernel assumes.
      if (cfg.xz_dict_size == 0 || cfg.xz_dict_size == cfg.block_size) return out;
      out.resize(8);
      store_le32(&out[0], cfg.xz_dict_size);
      store_le32(&out[4], 0);
      return out;
    case CodecId::lzma: return out;
  }
  return out;
}

void decode_codec_options(CodecConfig& cfg, const uint8_t* p, size_t len) {
  auto need = [&](size_t n) {
    if (len < n) throw Error(std::string("compressor options for ") + codec_name(cfg.id) + " are truncated");
  };
  switch (cfg.id) {
    case CodecId::gzip:
      need(8);
      cfg.level = int(load_le32(p));
      cfg.gzip_window = load_le16(p + 4);
      if (cfg.level < 1 || cfg.level > 9 || cfg.gzip_window < 8 || cfg.gzip_window > 15)
        throw Error("invalid gzip compressor options");
      return;
    case CodecId::zstd:
      need(4);
      cfg.level = int(load_le32(p));
      if (cfg.level < 1 || cfg.level > ZSTD_maxCLevel()) throw Error("invalid zstd compression level");
      return;
    case CodecId::lzo:
      need(8);
      cfg.lzo_algorithm = load_le32(p);
      cfg.level = int(load_le32(p + 4));
      if (cfg.lzo_algorithm > 4) throw Error("invalid lzo algorithm in compressor options");
      if (cfg.lzo_algorithm != kLzoAlgorithm999) cfg.level = kLzoFormatDefault;
      return;
    case CodecId::lz4:
      need(8);
      if (load_le32(p) != kLz4Legacy) throw Error("unsupported lz4 format version in compressor options");
      cfg.lz4_hc = (load_le32(p + 4) & kLz4FlagHC) != 0;
      return;
    case CodecId::xz:
      need(8);
      cfg.xz_dict_size = load_le32(p);
      cfg.xz_filters = load_le32(p + 4);
      return;
    case CodecId::lzma: return;
  }
}

std::string block_kernel_refusal(const CodecConfig& cfg, const uint8_t* src, size_t len) {
  if (cfg.id == CodecId::xz) return xz_block_kernel_refusal(src, len, xz_declared_dictionary(cfg));
  if (cfg.id == CodecId::zstd) return zstd_block_kernel_refusal(src, len, cfg.block_size);
  return {};
}

}  // namespace sqar
