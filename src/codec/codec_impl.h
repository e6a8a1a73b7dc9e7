// Private to src/codec: one factory per codec file.
#pragma once
#include "codec/codec.h"

namespace sqar {
std::unique_ptr<Codec> make_gzip_codec(const CodecConfig& cfg);
std::unique_ptr<Codec> make_xz_codec(const CodecConfig& cfg);
std::unique_ptr<Codec> make_lzma_codec(const CodecConfig& cfg);
std::unique_ptr<Codec> make_lzo_codec(const CodecConfig& cfg);
std::unique_ptr<Codec> make_lz4_codec(const CodecConfig& cfg);
std::unique_ptr<Codec> make_zstd_codec(const CodecConfig& cfg);
}  // namespace sqar
