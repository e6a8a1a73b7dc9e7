// Block codecs for SquashFS data and metadata: gzip, xz, lzo, lz4, zstd (and lzma, read only).
//
// A Codec object holds per-thread state (compression contexts); it is NOT thread-safe.
// Create one per worker thread with make_codec(). All codecs work on whole blocks:
// SquashFS compresses each data block (<= 1 MiB) and each 8 KiB metadata block alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sqar {

// Compressor ids as stored in the superblock.
enum class CodecId : uint16_t { gzip = 1, lzma = 2, lzo = 3, xz = 4, lz4 = 5, zstd = 6 };

struct CodecConfig {
  CodecId id = CodecId::zstd;
  int level = -1;                // -1: the codec's default (see default_level())
  uint32_t block_size = 131072;  // xz sizes its dictionary to the block
  // Codec-specific extras carried in the on-disk options block.
  uint32_t gzip_window = 15;
  uint32_t xz_dict_size = 0;   // 0: block size
  uint32_t xz_filters = 0;     // bitmask of BCJ filters (read only; we write none)
  uint32_t lzo_algorithm = 4;  // 0..3 lzo1x_1 variants, 4 lzo1x_999
  bool lz4_hc = false;
};

class Codec {
 public:
  virtual ~Codec() = default;
  // Compresses src into dst. Returns the compressed size, or 0 when the result would not be
  // smaller than the input (the caller then stores the block uncompressed).
  virtual size_t compress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) = 0;
  // Decompresses src into dst. Returns the decompressed size, or nullopt on corrupt input
  // or when the output does not fit in dst_cap. Never reads or writes out of bounds.
  virtual std::optional<size_t> decompress(const uint8_t* src, size_t len, uint8_t* dst, size_t dst_cap) = 0;
};

std::unique_ptr<Codec> make_codec(const CodecConfig& cfg);

// Names as users type them: "gzip", "xz", "lzo", "lz4", "zstd", "lzma".
std::optional<CodecId> codec_from_name(const std::string& name);
const char* codec_name(CodecId id);
// The level an image without a compressor options block was written at (the format's default).
int default_level(CodecId id);
// cfg.level, or the codec's default_level() when it is -1.
int resolved_level(const CodecConfig& cfg);
// The level sqar writes at when the user gives none: the format's default, but zstd 9.
int preferred_level(CodecId id);
// Whether the options block (or its absence) tells the level cfg was read as: zstd's and lzo's
// do, and gzip's up to 8 and plain lz4's; xz and lz4hc store none, and gzip's 9 stands for
// sqar's 10-12 too. Otherwise only sqar's settings trailer knows it (docs/format.md).
bool options_block_tells_level(const CodecConfig& cfg);
// Valid level range for --level; {0,0} means the codec has no levels.
std::pair<int, int> level_range(CodecId id);
bool codec_can_write(CodecId id);
// The libdeflate level that sqar compresses gzip at for the user's level 1-12: at 1-9 the
// lowest whose output is no larger than zlib's at that level (docs/architecture.md).
int libdeflate_level(int level);

// The compressor options block stored (uncompressed metadata block) after the superblock.
// Returns empty when the defaults are used and no block needs to be written.
std::vector<uint8_t> encode_codec_options(const CodecConfig& cfg);
// Parses an options block read from an image; throws sqar::Error on invalid options.
void decode_codec_options(CodecConfig& cfg, const uint8_t* data, size_t len);

// What the Linux kernel's squashfs driver refuses in xz images though the format and liblzma
// accept it. The kernel allocates one dictionary per image up front: the size the options
// block declares, else the block size (at least 8 KiB). A block whose LZMA2 dictionary is
// larger fails with EIO there, while unsquashfs reads it. The kernel's decoder also knows no
// integrity check but CRC32.
//
// The dictionary sqar's writer compresses xz blocks with: the options block's, else the
// block size.
uint32_t xz_block_dictionary(const CodecConfig& cfg);
// The dictionary the kernel allocates for an image of these settings.
uint32_t xz_declared_dictionary(const CodecConfig& cfg);
// Whether the kernel accepts `size` in an options block: 2^n or 3 * 2^n only.
bool xz_dictionary_size_is_valid(uint32_t size);
// Why the kernel would refuse the xz-compressed block src (its stream header and first block
// header are read), or "" when it would not. Damage that decompression itself reports is
// left to it.
std::string xz_block_kernel_refusal(const uint8_t* src, size_t len, uint32_t declared_dictionary);

// The same for zstd: the kernel's decoder takes windows up to the block size (at least the
// 8 KiB of a metadata block) and refuses a frame that declares a larger one, which libzstd and
// unsquashfs read. "" when the frame header is within that (or is damage decoding reports).
std::string zstd_block_kernel_refusal(const uint8_t* src, size_t len, uint32_t block_size);
// Either of the two for an image of `cfg` (its block size included); "" for other codecs.
std::string block_kernel_refusal(const CodecConfig& cfg, const uint8_t* src, size_t len);

}  // namespace sqar
