#include "writer/image_header.h"

#include <vector>

#include "common/endian.h"
#include "format/squashfs.h"

namespace sqar {

uint16_t write_image_header(ImageFile& out, const CodecConfig& codec) {
  const std::vector<uint8_t> zeros(fmt::kSuperblockSize, 0);
  out.append(zeros.data(), zeros.size());
  const std::vector<uint8_t> options = encode_codec_options(codec);
  if (options.empty()) return 0;
  uint8_t header[2];
  store_le16(header, uint16_t(options.size() | fmt::kMetadataUncompressed));
  out.append(header, 2);
  out.append(options.data(), options.size());
  return fmt::kFlagCompressorOptions;
}

}  // namespace sqar
