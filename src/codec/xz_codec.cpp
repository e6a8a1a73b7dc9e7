#include <lzma.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

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

uint32_t xz_block_dictionary(const CodecConfig& cfg) { return cfg.xz_dict_size ? cfg.xz_dict_size : cfg.block_size; }

uint32_t xz_declared_dictionary(const CodecConfig& cfg) {
  return std::max<uint32_t>(xz_block_dictionary(cfg), 8192);  // at least SQUASHFS_METADATA_SIZE
}

bool xz_dictionary_size_is_valid(uint32_t size) {
  if (size == 0) return false;
  const uint32_t lowest = size & -size;
  return size == lowest || uint64_t(size) == uint64_t(lowest) * 3;
}

std::string xz_block_kernel_refusal(const uint8_t* src, size_t len, uint32_t declared_dictionary) {
  lzma_stream_flags stream{};
  if (len <= LZMA_STREAM_HEADER_SIZE || lzma_stream_header_decode(&stream, src) != LZMA_OK) return {};
  if (stream.check != LZMA_CHECK_NONE && stream.check != LZMA_CHECK_CRC32) {
    const std::string check = stream.check == LZMA_CHECK_CRC64    ? "CRC64"
                              : stream.check == LZMA_CHECK_SHA256 ? "SHA-256"
                                                                  : "number " + std::to_string(int(stream.check));
    return "uses the xz integrity check " + check +
           ", and the Linux kernel's xz decoder knows only CRC32 (unsquashfs reads it)";
  }
  const uint8_t* header = src + LZMA_STREAM_HEADER_SIZE;
  if (header[0] == 0) return {};  // the index follows at once: a stream without blocks
  lzma_filter filters[LZMA_FILTERS_MAX + 1];
  lzma_block block{};
  block.version = 1;
  block.check = stream.check;
  block.filters = filters;
  block.header_size = lzma_block_header_size_decode(header[0]);
  if (block.header_size > len - LZMA_STREAM_HEADER_SIZE) return {};
  if (lzma_block_header_decode(&block, nullptr, header) != LZMA_OK) return {};
  uint32_t needed = 0;
  for (size_t i = 0; filters[i].id != LZMA_VLI_UNKNOWN; ++i) {
    if (filters[i].id == LZMA_FILTER_LZMA2 && filters[i].options)
      needed = static_cast<const lzma_options_lzma*>(filters[i].options)->dict_size;
    std::free(filters[i].options);  // allocated by liblzma with malloc (no allocator given)
  }
  if (needed <= declared_dictionary) return {};
  auto kib = [](uint32_t n) { return std::to_string(n / 1024) + " KiB"; };
  return "needs a " + kib(needed) + " xz dictionary, more than the " + kib(declared_dictionary) +
         " the image declares: the Linux kernel refuses it with EIO (unsquashfs reads it)";
}

std::unique_ptr<Codec> make_xz_codec(const CodecConfig& cfg) {
  return std::make_unique<XzCodec>(cfg.level, xz_block_dictionary(cfg));
}
std::unique_ptr<Codec> make_lzma_codec(const CodecConfig&) { return std::make_unique<LzmaCodec>(); }

}  // namespace sqar
