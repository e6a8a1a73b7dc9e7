// Writes the inode, directory, fragment, export, id and xattr tables after the data, using
// libsquashfs's writers for the on-disk encoding (directory index, header runs, xattr dedup).
#pragma once
#include <sqfs/super.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "codec/codec.h"
#include "pipeline/data_pipeline.h"
#include "scan/tree.h"

namespace sqar {

class ImageFile;

struct MetadataOptions {
  CodecConfig codec;
  bool exportable = true;
  bool xattrs = true;
  std::optional<uint32_t> uid, gid;       // present every entry with this owner
  std::optional<int64_t> mtime_override;  // --mtime: every inode gets this time
  std::optional<int64_t> mtime_clamp;     // SOURCE_DATE_EPOCH: no inode newer than this
};

struct MetadataResult {
  std::vector<uint32_t> file_inode_numbers;  // indexed like Tree::files (0 for omitted files)
  uint32_t inode_count = 0;
  uint64_t xattr_sets = 0;
};

// Fills the table positions, counts and root reference in `super`.
MetadataResult write_metadata(const Tree& tree, const DataResult& data, ImageFile& out, sqfs_super_t& super,
                              const MetadataOptions& opt);

}  // namespace sqar
