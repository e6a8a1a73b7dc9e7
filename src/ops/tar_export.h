// Writes an image (or the entries matching some paths/globs) as a pax tar stream through
// libarchive, for GNU tar and bsdtar to extract exactly.
//
// What goes in, and why:
//   - entries in walk order (parents first), names relative without a leading '/',
//     directories with a trailing '/'; the root directory itself is not an entry (as with
//     `tar -c -C dir entry...`), so extracting never changes the target directory's own mode;
//   - numeric owners only (the image holds no user names);
//   - hard links as tar hard-link entries to the first name written;
//   - holes (sparse blocks of the image) as GNU sparse 1.0 maps, so they stay holes;
//   - xattrs as SCHILY.xattr records (GNU tar warns about LIBARCHIVE.xattr ones);
//   - names as UTF-8; names that are not valid UTF-8 byte for byte (hdrcharset=BINARY);
//   - sockets cannot be archived (tar has no type for them): skipped with a warning.
// Worker threads decode blocks ahead of the one thread that writes, in walk order, so the
// archive is byte-identical for any thread count.
// A damaged block or inode, or content that differs from the manifest trailer, is an error
// naming the entry. Writing to a file goes to an unnamed file beside it that gets its name
// only when the archive is complete.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/problem.h"
#include "ops/tar_compression.h"
#include "reader/image.h"
#include "scan/exclude.h"

namespace sqar::ops {

// Counters for a progress display, updated as the archive is written (the total is not known
// before the walk that writes it).
struct TarExportProgress {
  std::atomic<uint64_t> entries_done{0};
  std::atomic<uint64_t> bytes_done{0};  // file content written
};

struct TarExportOptions {
  std::string output;  // archive path; "-" is standard output
  // gzip: ParallelGzipWriter on `threads` (4 MiB members); the others: libarchive's filter
  // over the tar stream, xz and zstd on max(2, threads) threads (their multi-threaded
  // encoders' output does not depend on the count), the rest on the writer's.
  TarCompression compression = TarCompression::none;
  std::vector<std::string> patterns;  // PATH or GLOB inside the image; empty: everything
  ExcludeList excludes;               // left out, with all below an excluded directory
  // --strip-components: each entry's first N path components are left out, as tar -x leaves
  // them out; entries N or fewer levels deep are not archived. Patterns match image paths.
  unsigned strip_components = 0;
  bool xattrs = true;
  unsigned threads = 1;  // decoding blocks ahead of the writer; the archive is the same for any count
  // Check each file's content against the manifest trailer (when the image has one); a
  // mismatch is an error naming the file, and no archive file is left.
  bool verify = true;
  ProblemSink problems;                   // warnings (skipped sockets); errors are thrown
  TarExportProgress* progress = nullptr;  // may be null
};

struct TarExportStats {
  uint64_t entries = 0;  // written, hard links included
  uint64_t bytes = 0;    // file content written (holes included)
};

// Throws sqar::Error naming the entry on a damaged image, a pattern that matches nothing
// (checked before anything is written) or a write error. The output file then does not exist.
TarExportStats export_tar(reader::Image& image, const TarExportOptions& options);

}  // namespace sqar::ops
