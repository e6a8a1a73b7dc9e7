// The end of every image build (create, append, merge): metadata tables after the data, the
// superblock, the padding, the manifest, stored-data digests and settings trailers, and the link
// as IMAGE.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "codec/codec.h"
#include "pipeline/data_pipeline.h"
#include "scan/tree.h"
#include "writer/metadata_writer.h"

namespace sqar {

class ImageFile;

struct FinishOptions {
  std::string image;  // for messages
  CodecConfig codec;
  uint16_t flags = 0;  // superblock flags to add (fmt::kFlagCompressorOptions when written)
  bool dedup = true;
  bool manifest = true;  // and the other trailers: data digests, settings
  // Some stored blocks were compressed at another level than codec's, or by another tool
  // (append -l, merge): the settings trailer says so, and --reuse then cannot rely on it.
  bool mixed_levels = false;
  bool exportable = true;
  bool xattrs = true;
  std::optional<uint32_t> uid, gid;
  std::optional<int64_t> mtime;         // --mtime
  std::optional<int64_t> source_date;   // SOURCE_DATE_EPOCH: clamps the times, and is the image's
  std::optional<int64_t> image_time;    // the superblock's time alone (merge, append)
  std::function<void()> before_commit;  // may throw: the image is then not committed (append)
};

struct FinishResult {
  MetadataResult meta;
  uint64_t bytes_used = 0;
};

// `out` holds the superblock placeholder and all data; writes everything else and commits.
FinishResult finish_image(const Tree& tree, const DataResult& data, ImageFile& out, const FinishOptions& opt);

}  // namespace sqar
