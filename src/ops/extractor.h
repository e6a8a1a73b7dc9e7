// Unpacks an image (or the entries matching some paths/globs) into a directory.
//
// Order of work, and why:
//   1. plan: walk all metadata first (the reader refuses bad names, duplicate names and
//      directory loops), so a malicious image is rejected before anything is written;
//   2. directories and files, symlinks, devices, fifos, sockets in one parallel pass, in
//      batches of one directory's entries, each batch once its directory exists (content,
//      owner, mode, xattrs, mtime; every directory is made 0700, so no other user can
//      rename or plant entries in it while we work there);
//   3. hard links, once their first name exists;
//   4. directory metadata once its content is written (directories others may write into,
//      and those with hard links, at the very end), so writing contents does not bump a
//      restored mtime and a read-only mode does not lock us out.
// Every filesystem call is relative to a directory descriptor and never follows symlinks;
// metadata goes through a descriptor of the entry itself (ops/entry_meta.h).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/problem.h"
#include "reader/image.h"
#include "scan/exclude.h"

namespace sqar::ops {

enum class ExtractPhase { reading_directories, writing_entries, links_and_directory_metadata };

// Counters a progress display reads while extraction runs.
struct ExtractProgress {
  std::atomic<ExtractPhase> phase{ExtractPhase::reading_directories};
  std::atomic<uint64_t> bytes_total{0};  // content of the selected files, each inode once
  std::atomic<uint64_t> bytes_done{0};
  std::atomic<uint64_t> entries_total{0};  // below the root (hard links included)
  std::atomic<uint64_t> entries_done{0};
  std::atomic<uint64_t> entries_kept{0};  // existing entries left as they were (skip_existing)
};

struct ExtractOptions {
  std::string dest = ".";
  std::vector<std::string> patterns;  // PATH or GLOB inside the image; empty: everything
  // --exclude: entries left out (and all below an excluded directory), matched as create's
  // --exclude matches them, by path inside the image.
  ExcludeList excludes;
  // --strip-components: leave out the first N components of each path, as tar -x does.
  // Entries N or fewer levels deep are not created; patterns still match whole image paths.
  unsigned strip_components = 0;
  unsigned jobs = 1;
  bool overwrite = false;  // replace existing non-directories (never follows or removes dirs)
  // --skip-old-files: keep existing non-directories as they are, as tar --skip-old-files does
  // (a hard link is then made to an existing first name). An extraction that was stopped
  // removed the file it was writing, so running it again this way finishes it.
  bool skip_existing = false;
  bool same_owner = false;  // restore uid/gid (default when running as root)
  bool xattrs = true;
  // Check each file the image's manifest trailer covers against its XXH3-128; a file that does
  // not match is removed and reported as failed.
  bool verify = true;
  ExtractProgress* progress = nullptr;  // updated when set
  ProblemSink problems;                 // each failed entry and each warning; none when empty
  // Set (by a signal handler, say) to stop early: entries not begun are left out, a file being
  // written is removed, and the directories already made still get their metadata, so what
  // was extracted looks as the image has it. One error names how many entries were left out.
  const std::atomic<bool>* stop = nullptr;
};

class Extractor {
 public:
  Extractor(reader::Image& image, const ExtractOptions& options);
  ~Extractor();
  Extractor(const Extractor&) = delete;
  Extractor& operator=(const Extractor&) = delete;

  // Extracts once. Returns the number of entries that failed or were left out by a stop
  // (passed to options.problems as errors). Throws sqar::Error when nothing could be extracted.
  size_t run();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sqar::ops
