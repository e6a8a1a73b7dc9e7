// `sqar create` as a library call: scan, data pipeline, metadata, manifest, atomic rename.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "pipeline/data_pipeline.h"
#include "scan/scanner.h"
#include "writer/finish_image.h"

namespace sqar {

// The options of a build, composed of the options of its stages. A setting that several stages
// share is given once, in the stage named below, and create_image() hands it on:
//   scan.sources, .excludes, .xattrs (also the metadata's and the data readers'),
//     .skip_unreadable (also the data phase's), .one_file_system, .keep_as_directory;
//   data.codec (also the metadata's), .dedup (also the metadata's), .verify_dedup, .strict,
//     .detect_incompressible;
//   metadata.manifest, .exportable, .uid, .gid, .mtime, .source_date.
// The stages' wiring (threads, progress counters, warn, the reuse index, the tar content) is
// create_image()'s to fill.
struct CreateOptions {
  std::string image;
  bool force = false;    // replace IMAGE if it exists
  unsigned threads = 0;  // 0: all cores
  ScanOptions scan;
  DataOptions data;
  FinishOptions metadata;
  // --tar ARCHIVE ("-": standard input): pack a tar stream instead of scan.sources.
  std::string tar;
  uint64_t tar_memory = uint64_t(256) << 20;  // its content held in memory before it spills
  std::string reuse;  // --reuse OLD: copy OLD's compressed blocks of unchanged content (ReuseIndex)
  // An OLD that is missing or cannot be read is an error; otherwise the build goes on without
  // it (a nightly job's first night) and says so through `note`.
  bool reuse_strict = false;
  std::function<void(const std::string&)> warn;
  std::function<void(const std::string&)> note;  // one-line remarks that are not warnings
};

enum class CreatePhase { indexing_reuse, scanning, data, metadata, done };

struct CreateProgress {
  std::atomic<CreatePhase> phase{CreatePhase::scanning};
  std::atomic<uint64_t> entries{0};
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> bytes_total{0};
};

struct CreateStats {
  uint64_t entries = 0, directories = 0, files = 0, symlinks = 0, hardlinks = 0, devices = 0, fifos = 0, sockets = 0;
  uint32_t inodes = 0;
  DataStats data;
  uint64_t image_bytes = 0;  // bytes_used of the filesystem (without padding and manifest)
  uint64_t file_bytes = 0;   // total size of the output file
  uint64_t xattr_sets = 0;
  double seconds = 0;
  double scan_seconds = 0, data_seconds = 0, metadata_seconds = 0;  // where the time went
  unsigned scan_listers = 0;  // most directory listers at once (more while the disk kept them waiting)
};

CreateStats create_image(CreateOptions opt, CreateProgress* progress = nullptr);

}  // namespace sqar
