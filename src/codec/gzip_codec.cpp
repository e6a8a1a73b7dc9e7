#include <libdeflate.h>
#include <zlib.h>

#include <cstring>
#include <new>

#include "codec/codec_impl.h"

namespace sqar {
namespace {

// The libdeflate level behind each user level 1-9: the lowest whose output is no larger than
// zlib's at that level on the log, ports, C-header and shared-library sets (table in
// docs/architecture.md); level 2 needs libdeflate's 2 because its 1 is 0.6% larger than
// zlib-2 on shared libraries. At 7-9 none is smaller on every input: 8 is smaller on C
// headers, log and shared libraries and equal on ports (within 0.05% either way, by file
// order); keeping the rule everywhere costs more than zlib.
// Levels 10-12 are libdeflate's own (near-optimal parsing), beyond anything zlib offers.
constexpr int kLibdeflateLevel[10] = {0, 1, 2, 2, 4, 6, 7, 8, 8, 8};

// SquashFS "gzip" is a zlib stream (RFC 1950) per block.
// Blocks are encoded and decoded by libdeflate, whole-buffer deflate and inflate: inflate at
// ~3x zlib's speed (1380 against 444 MB/s on 128 KiB blocks of a kernel tree), deflate see
// above. zlib remains for a window smaller than 32 KiB (an OLD image's options under
// --reuse), which libdeflate cannot produce.
class GzipCodec final : public Codec {
 public:
  GzipCodec(int level, int window) : level_(level), window_(window) {}
  ~GzipCodec() override {
    if (deflate_ready_) deflateEnd(&def_);
    libdeflate_free_compressor(deflater_);
    libdeflate_free_decompressor(inflater_);
  }
  size_t compress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    if (window_ < 15) return compress_zlib(src, len, dst, dst_cap);
    if (!deflater_ && !(deflater_ = libdeflate_alloc_compressor(libdeflate_level(level_)))) throw std::bad_alloc();
    // Returns 0 when the stream does not fit, so capping the space at len - 1 also refuses growth.
    if (len < 2) return 0;
    return libdeflate_zlib_compress(deflater_, src, len, dst, dst_cap < len - 1 ? dst_cap : len - 1);
  }
  std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    if (!inflater_ && !(inflater_ = libdeflate_alloc_decompressor())) throw std::bad_alloc();
    // Trailing bytes after the stream are ignored, as zlib's inflate ignores them; output that
    // would not fit in dst_cap is an error (LIBDEFLATE_INSUFFICIENT_SPACE), never an overrun.
    size_t in_used = 0, out_len = 0;
    if (libdeflate_zlib_decompress_ex(inflater_, src, len, dst, dst_cap, &in_used, &out_len) != LIBDEFLATE_SUCCESS)
      return std::nullopt;
    return out_len;
  }

 private:
  size_t compress_zlib(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) {
    if (!deflate_ready_) {
      std::memset(&def_, 0, sizeof def_);
      if (deflateInit2(&def_, level_ > 9 ? 9 : level_, Z_DEFLATED, window_, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::bad_alloc();
      deflate_ready_ = true;
    } else {
      deflateReset(&def_);
    }
    def_.next_in = const_cast<Bytef*>(src);
    def_.avail_in = uInt(len);
    def_.next_out = dst;
    def_.avail_out = uInt(dst_cap);
    if (deflate(&def_, Z_FINISH) != Z_STREAM_END) return 0;
    size_t n = def_.total_out;
    return n < len ? n : 0;
  }

  int level_, window_;
  z_stream def_{};
  bool deflate_ready_ = false;
  libdeflate_compressor* deflater_ = nullptr;
  libdeflate_decompressor* inflater_ = nullptr;
};

}  // namespace

int libdeflate_level(int level) { return level <= 9 ? kLibdeflateLevel[level < 1 ? 1 : level] : level; }

std::unique_ptr<Codec> make_gzip_codec(const CodecConfig& cfg) {
  return std::make_unique<GzipCodec>(cfg.level, int(cfg.gzip_window));
}

}  // namespace sqar
