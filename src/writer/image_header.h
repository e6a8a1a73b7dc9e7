// The start of every image sqar writes: the superblock's place (filled in last, by
// finish_image) and the compressor options block when the codec's settings need one.
#pragma once
#include <cstdint>

#include "codec/codec.h"
#include "writer/image_file.h"

namespace sqar {

// Appends both at the output's current position (its start). Returns the superblock flags
// they imply (fmt::kFlagCompressorOptions when the options block was written, else 0).
uint16_t write_image_header(ImageFile& out, const CodecConfig& codec);

}  // namespace sqar
