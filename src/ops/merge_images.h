// `sqar append` and `sqar merge`: a new image from existing images (their stored blocks copied,
// never decoded and compressed again) and, for append, new SOURCEs packed as create packs them.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "pipeline/data_pipeline.h"
#include "scan/exclude.h"

namespace sqar::ops {

struct MergeOptions {
  // Input images in order. With `append`, images[0] is IMAGE, which the result replaces.
  std::vector<std::string> images;
  // New SOURCEs (append): directories and files, one directory forming the root as in create.
  // Any source that yields a sqar::Tree whose regular files the data pipeline can read (a tar
  // stream spilled to a tree, say) plugs in beside them (docs/architecture.md).
  std::vector<std::string> sources;
  // append --tar ARCHIVE ("-": standard input): the members of a tar stream (any format and
  // compression libarchive reads) are the new entries, read once as create --tar reads them.
  std::string tar;
  uint64_t tar_memory = uint64_t(256) << 20;  // its content held in memory before it spills
  std::string output;
  bool append = false;
  bool force = false;    // merge: replace an existing OUT
  bool replace = false;  // a name in several inputs: the last one wins instead of an error
  unsigned threads = 0;
  // The output's compressor and block size. merge: inputs stored another way, the first one
  // included, are recoded (default: the first input's). append: must be IMAGE's (checked).
  std::optional<CodecId> compressor;
  std::optional<uint32_t> block_size;
  // Level of new and recoded data: -1 keeps the first input's when the output keeps its
  // compressor, else preferred_level().
  int level = -1;
  bool dedup = true;
  bool xattrs = true;
  bool keep_as_directory = false;
  bool one_file_system = false;
  bool skip_unreadable = false;
  bool strict = false;
  // append: the owner and time every new entry gets (IMAGE's entries keep theirs).
  std::optional<uint32_t> uid, gid, mtime;
  // The superblock's time (SOURCE_DATE_EPOCH): without it, the time of the build, so that
  // merges of the same shards give the same bytes only with it. Entries keep their times.
  std::optional<int64_t> image_time;
  ExcludeList excludes;
  std::function<void(const std::string&)> warn;
  std::function<void(const std::string&)> note;
};

struct MergeStats {
  uint64_t entries = 0, files = 0;
  uint64_t copied_bytes = 0;     // stored bytes copied from the input images
  uint64_t shared_bytes = 0;     // of which copy_file_range took (extents shared on XFS/btrfs)
  uint64_t checked_bytes = 0;    // stored bytes hashed against the inputs' data digests
  uint64_t decoded_bytes = 0;    // input content decoded (to hash it, or to check it without digests)
  uint64_t duplicate_files = 0;  // input files whose content an earlier input holds: not copied
  uint64_t duplicate_bytes = 0;
  // Inputs with another compressor or block size than the output: their files decoded and
  // compressed again (counted in `data` too).
  uint64_t recoded_inputs = 0, recoded_files = 0, recoded_bytes = 0;
  DataStats data;  // new files (append); blocks_compressed counts only those
  uint64_t image_bytes = 0, file_bytes = 0;
  double seconds = 0;
  // Where the time went: reading and checking the inputs' trees and hashes, copying (and
  // checking) their stored bytes, the new data, the tables and trailers (with the fsync).
  double load_seconds = 0, copy_seconds = 0, data_seconds = 0, finish_seconds = 0;
};

// What a progress display shows: the phase, and in the copying and data phases the bytes done
// of the phase's total (stored bytes copied; content read for compression).
enum class MergePhase { loading, scanning, copying, data, finishing };
struct MergeProgress {
  std::atomic<MergePhase> phase{MergePhase::loading};
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> bytes_total{0};
};

MergeStats merge_images(MergeOptions opt, MergeProgress* progress = nullptr);

}  // namespace sqar::ops
