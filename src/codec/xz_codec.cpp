#include <lzma.h>

#include <new>

#include "codec/codec_impl.h"

namespace sqar {
namespace {

// Decoders never get more than this: a crafted stream cannot make us allocate without bound.
constexpr uint64_t kDecoderMemLimit = 256ull << 20;

// SquashFS "xz": an .xz stream per block, LZMA2 with the dictionary sized to the block, CRC32.
class XzCodec final : public Codec {
 public:
  XzCodec(int level, uint32_t dict_size) {
    if (lzma_lzma_preset(&opts_, uint32_t(level))) throw std::bad_alloc();
    opts_.dict_size = dict_size < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : dict_size;
    filters_[0] = {LZMA_FILTER_LZMA2, &opts_};
    filters_[1] = {LZMA_VLI_UNKNOWN, nullptr};
  }
  size_t compress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    size_t out_pos = 0;
    lzma_ret rc = lzma_stream_buffer_encode(filters_, LZMA_CHECK_CRC32, nullptr, src, len, dst, &out_pos, dst_cap);
    if (rc != LZMA_OK || out_pos >= len) return 0;
    return out_pos;
  }
  std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    uint64_t memlimit = kDecoderMemLimit;
    size_t in_pos = 0, out_pos = 0;
    lzma_ret rc = lzma_stream_buffer_decode(&memlimit, 0, nullptr, src, &in_pos, len, dst, &out_pos, dst_cap);
    if (rc != LZMA_OK) return std::nullopt;
    return out_pos;
  }

 private:
  lzma_options_lzma opts_{};
  lzma_filter filters_[2];
};

// Legacy "lzma" (lzma_alone format): read only, for old images.
class LzmaCodec final : public Codec {
 public:
  size_t compress(const uint8_t*, size_t, uint8_t*, size_t) override { return 0; }
  std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    lzma_stream strm = LZMA_STREAM_INIT;
    if (lzma_alone_decoder(&strm, kDecoderMemLimit) != LZMA_OK) return std::nullopt;
    strm.next_in = src;
    strm.avail_in = len;
    strm.next_out = dst;
    strm.avail_out = dst_cap;
    lzma_ret rc = lzma_code(&strm, LZMA_FINISH);
    size_t n = strm.total_out;
    lzma_end(&strm);
    if (rc != LZMA_STREAM_END && rc != LZMA_OK) return std::nullopt;
    return n;
  }
};

}  // namespace

std::unique_ptr<Codec> make_xz_codec(const CodecConfig& cfg) {
  return std::make_unique<XzCodec>(cfg.level, cfg.xz_dict_size ? cfg.xz_dict_size : cfg.block_size);
}
std::unique_ptr<Codec> make_lzma_codec(const CodecConfig&) { return std::make_unique<LzmaCodec>(); }

}  // namespace sqar
