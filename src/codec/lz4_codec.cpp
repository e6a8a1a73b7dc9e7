#include <lz4.h>
#include <lz4hc.h>

#include <climits>

#include "codec/codec_impl.h"

namespace sqar {
namespace {

// SquashFS "lz4": a raw LZ4 block (the "legacy" version 1 in the options block).
class Lz4Codec final : public Codec {
 public:
  Lz4Codec(bool hc, int level) : hc_(hc), level_(level) {}
  size_t compress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    if (len > INT_MAX || dst_cap > INT_MAX) return 0;
    int n = hc_ ? LZ4_compress_HC(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst), int(len),
                                  int(dst_cap), level_)
                : LZ4_compress_default(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst), int(len),
                                       int(dst_cap));
    if (n <= 0 || size_t(n) >= len) return 0;
    return size_t(n);
  }
  std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    if (len > INT_MAX || dst_cap > INT_MAX) return std::nullopt;
    int n =
        LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst), int(len), int(dst_cap));
    if (n < 0) return std::nullopt;
    return size_t(n);
  }

 private:
  bool hc_;
  int level_;
};

}  // namespace

std::unique_ptr<Codec> make_lz4_codec(const CodecConfig& cfg) {
  return std::make_unique<Lz4Codec>(cfg.lz4_hc, cfg.level);
}

}  // namespace sqar
