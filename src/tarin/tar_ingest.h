// `sqar create --tar`: reads a tar stream through libarchive (every tar format and compression
// it reads) once, into the Tree the scanner would build for a directory and a ContentStore
// holding the members' content, for the data pipeline to read in image order.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "scan/exclude.h"
#include "scan/tree.h"
#include "tarin/content_store.h"

struct archive;

namespace sqar {

struct TarIngestOptions {
  std::string archive;      // a file, or "-" for standard input
  std::string scratch_dir;  // where content beyond memory_limit spills (the image's directory)
  // Content held in memory before it spills: 256 MiB keeps a typical source tarball off the
  // disk while bounding what a multi-gigabyte stream costs.
  uint64_t memory_limit = uint64_t(256) << 20;
  uint32_t block_size = 128 << 10;  // bounds a member's size (at most 2^32 blocks)
  // An upper bound on a member's size, 0: none. The holes of a sparse member cost no bytes of
  // the stream but are hashed as zeros, so time grows with the size it claims (the fuzz
  // harness sets one to keep each input fast).
  uint64_t max_member_size = 0;
  ExcludeList excludes;
  bool xattrs = true;
  bool keep_duplicates = false;  // ContentStore: --verify-dedup
  bool warn_unstorable_times = true;
  std::function<void(const std::string&)> warn;
  std::atomic<uint64_t>* entries_seen = nullptr;  // progress, may be null
  std::atomic<uint64_t>* bytes_seen = nullptr;
};

struct TarInput {
  Tree tree;
  std::unique_ptr<ContentStore> content;
};

// Throws sqar::Error naming the archive, the member and the cause.
TarInput ingest_tar(const TarIngestOptions& opt);
// The same for an archive already open for reading (the fuzz harness reads from memory);
// `name` is what messages call it.
class ArchiveInput;
TarInput ingest_tar_archive(struct archive* a, const std::string& name, const TarIngestOptions& opt,
                            ArchiveInput* input = nullptr);

// A member's name as a path inside the image: leading '/' and "." components dropped, ".."
// resolved. Returns false (with `why`) for a ".." that climbs above the root or a component
// longer than 255 bytes. "" is the root.
bool normalize_member_path(std::string_view name, std::string& out, std::string& why);

}  // namespace sqar
