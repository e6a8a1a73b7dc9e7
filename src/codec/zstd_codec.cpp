#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getFrameHeader, in libzstd since 1.3
#include <zstd.h>

#include <algorithm>
#include <string>

#include "codec/codec_impl.h"

namespace sqar {
namespace {

class ZstdCodec final : public Codec {
 public:
  explicit ZstdCodec(int level) : level_(level), cctx_(ZSTD_createCCtx()), dctx_(ZSTD_createDCtx()) {}
  ~ZstdCodec() override {
    ZSTD_freeCCtx(cctx_);
    ZSTD_freeDCtx(dctx_);
  }
  size_t compress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    size_t n = ZSTD_compressCCtx(cctx_, dst, dst_cap, src, len, level_);
    if (ZSTD_isError(n) || n >= len) return 0;
    return n;
  }
  std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    size_t n = ZSTD_decompressDCtx(dctx_, dst, dst_cap, src, len);
    if (ZSTD_isError(n)) return std::nullopt;
    return n;
  }

 private:
  int level_;
  ZSTD_CCtx* cctx_;
  ZSTD_DCtx* dctx_;
};

}  // namespace

std::unique_ptr<Codec> make_zstd_codec(const CodecConfig& cfg) { return std::make_unique<ZstdCodec>(cfg.level); }

std::string zstd_block_kernel_refusal(const uint8_t* src, size_t len, uint32_t block_size) {
  ZSTD_frameHeader h;
  if (ZSTD_getFrameHeader(&h, src, len) != 0 || h.frameType != ZSTD_frame) return {};
  const uint64_t allowed = std::max<uint64_t>(block_size, 8192);
  if (h.windowSize <= allowed) return {};
  return "declares a zstd window of " + std::to_string(h.windowSize / 1024) + " KiB, more than the " +
         std::to_string(allowed / 1024) +
         " KiB the Linux kernel decodes with: it refuses the block with EIO "
         "(unsquashfs reads it)";
}

}  // namespace sqar
