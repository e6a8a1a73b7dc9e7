#include <zlib.h>

#include <cstring>
#include <new>

#include "codec/codec_impl.h"

namespace sqar {
namespace {

// SquashFS "gzip" is a zlib stream (RFC 1950) per block.
class GzipCodec final : public Codec {
 public:
  GzipCodec(int level, int window) : level_(level), window_(window) {}
  ~GzipCodec() override {
    if (deflate_ready_) deflateEnd(&def_);
    if (inflate_ready_) inflateEnd(&inf_);
  }
  size_t compress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    if (!deflate_ready_) {
      std::memset(&def_, 0, sizeof def_);
      if (deflateInit2(&def_, level_, Z_DEFLATED, window_, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::bad_alloc();
      deflate_ready_ = true;
    } else {
      deflateReset(&def_);
    }
    def_.next_in = const_cast<Bytef*>(src);
    def_.avail_in = uInt(len);
    def_.next_out = dst;
    def_.avail_out = uInt(dst_cap);
    int rc = deflate(&def_, Z_FINISH);
    if (rc != Z_STREAM_END) return 0;
    size_t n = def_.total_out;
    return n < len ? n : 0;
  }
  std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) override {
    if (!inflate_ready_) {
      std::memset(&inf_, 0, sizeof inf_);
      if (inflateInit(&inf_) != Z_OK) throw std::bad_alloc();
      inflate_ready_ = true;
    } else {
      inflateReset(&inf_);
    }
    inf_.next_in = const_cast<Bytef*>(src);
    inf_.avail_in = uInt(len);
    inf_.next_out = dst;
    inf_.avail_out = uInt(dst_cap);
    if (inflate(&inf_, Z_FINISH) != Z_STREAM_END) return std::nullopt;
    return size_t(inf_.total_out);
  }

 private:
  int level_, window_;
  z_stream def_{}, inf_{};
  bool deflate_ready_ = false, inflate_ready_ = false;
};

}  // namespace

std::unique_ptr<Codec> make_gzip_codec(const CodecConfig& cfg) {
  return std::make_unique<GzipCodec>(cfg.level, int(cfg.gzip_window));
}

}  // namespace sqar
