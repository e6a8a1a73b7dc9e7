#include <lzo/lzo1x.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "codec/codec_impl.h"
#include "common/error.h"

namespace sqar {
namespace {

// SquashFS "lzo": a raw LZO1X block. Algorithm 4 (lzo1x_999) honours the level 1..9;
// 0..3 are the fast lzo1x_1 family (we write lzo1x_1 for all of them).
class LzoCodec final : public Codec {
 public:
  LzoCodec(uint32_t algorithm, int level) : algorithm_(algorithm), level_(level) {
    static std::once_flag once;
    std::call_once(once, [] {
      if (lzo_init() != LZO_E_OK) throw Error("lzo: library initialisation failed");
    });
    work_.resize(algorithm_ == 4 ? LZO1X_999_MEM_COMPRESS : LZO1X_1_MEM_COMPRESS);
  }
  size_t compress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    // LZO has no output bound: compress into a worst-case sized scratch buffer.
    scratch_.resize(len + len / 16 + 64 + 3);
    lzo_uint out_len = scratch_.size();
    int rc = algorithm_ == 4 ? lzo1x_999_compress_level(src, len, scratch_.data(), &out_len, work_.data(), nullptr, 0,
                                                        nullptr, level_)
                             : lzo1x_1_compress(src, len, scratch_.data(), &out_len, work_.data());
    if (rc != LZO_E_OK || out_len >= len || out_len > dst_cap) return 0;
    std::memcpy(dst, scratch_.data(), out_len);
    return out_len;
  }
  std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    lzo_uint out_len = dst_cap;
    int rc = lzo1x_decompress_safe(src, len, dst, &out_len, nullptr);
    if (rc != LZO_E_OK) return std::nullopt;
    return out_len;
  }

 private:
  uint32_t algorithm_;
  int level_;
  std::vector<uint8_t> work_, scratch_;
};

}  // namespace

std::unique_ptr<Codec> make_lzo_codec(const CodecConfig& cfg) {
  return std::make_unique<LzoCodec>(cfg.lzo_algorithm, cfg.level);
}

}  // namespace sqar
