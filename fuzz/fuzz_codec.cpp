// Fuzzes block decompression of every codec the reader accepts. The first input byte picks the
// codec (gzip, lzma, lzo, xz, lz4, zstd) and the output capacity; the rest is the compressed block,
// as the reader hands it over from an image. decompress must return nullopt on garbage and never
// write beyond dst_cap: the output buffer is exactly dst_cap bytes so ASan sees any overflow.
// xz blocks also go through the kernel-limits check verify applies (xz_block_kernel_refusal),
// which parses the stream and block headers itself.
#include <memory>
#include <vector>

#include "codec/codec.h"
#include "common/error.h"

namespace {

constexpr sqar::CodecId kCodecs[] = {sqar::CodecId::gzip, sqar::CodecId::lzma, sqar::CodecId::lzo,
                                     sqar::CodecId::xz,   sqar::CodecId::lz4,  sqar::CodecId::zstd};
// Metadata blocks (8 KiB), small and the largest data blocks, and a tiny buffer for overflows.
constexpr size_t kCaps[] = {8192, 4096, 131072, 1u << 20, 17, 65536, 1, 0};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const sqar::CodecId id = kCodecs[(selector & 7) % 6];
  const size_t cap = kCaps[selector >> 5];
  static std::unique_ptr<sqar::Codec> codecs[6];
  auto& codec = codecs[(selector & 7) % 6];
  if (!codec) {
    sqar::CodecConfig cfg;
    cfg.id = id;
    cfg.block_size = 1u << 20;
    codec = sqar::make_codec(cfg);
  }
  std::vector<uint8_t> out(cap);
  // Copy the payload so reads past its end hit ASan's redzone instead of the fuzzer's buffer.
  std::vector<uint8_t> in(data + 1, data + size);
  if (id == sqar::CodecId::xz) sqar::xz_block_kernel_refusal(in.data(), in.size(), 1u << 17);
  auto n = codec->decompress(in.data(), in.size(), out.data(), out.size());
  if (n && *n > cap) __builtin_trap();
  return 0;
}
