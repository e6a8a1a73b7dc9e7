// Walks the source directories and builds the Tree: every entry type, metadata, xattrs, hard links.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "scan/exclude.h"
#include "scan/tree.h"

namespace sqar {

struct ScanOptions {
  std::vector<std::string> sources;  // one directory (the root) or several entries of the root
  ExcludeList excludes;
  bool one_file_system = false;
  bool xattrs = true;
  // Leave the attributes of regular files with content to whoever reads the content (create's
  // readers: pipeline/source_reader.h), which reads them from the open file.
  bool file_xattrs_later = false;
  bool skip_unreadable = false;
  // A directory that vanishes during the scan fails it (create --strict) instead of being left
  // out with a warning.
  bool strict = false;
  // Added to the error for a directory that cannot be listed, without skip_unreadable: what the
  // command's user can do about it ("" for a command without that option).
  std::string unreadable_hint = " (--skip-unreadable stores it as an empty directory and goes on)";
  // A single SOURCE directory is an entry of the root under its own name, not the root
  // (mksquashfs's -keep-as-directory).
  bool keep_as_directory = false;
  unsigned threads = 1;  // directories listed in parallel; the tree is the same for any count
  // Listers added while listing waits on the disk (a tree not in the cache), up to this many
  // in all; 0 or less than `threads`: never more than `threads`.
  unsigned max_threads = 0;
  // Inodes (st_dev, st_ino) to leave out wherever they are found: the image being written (and
  // the one it replaces), when they lie inside a source, must not be packed into it.
  std::vector<std::pair<dev_t, ino_t>> skip_inodes;
  std::function<void(const std::string&)> warn;  // receives "PATH: cause" warnings
  // Warn about modification times SquashFS cannot hold (before 1970, after 2106): off when
  // --mtime replaces them all anyway.
  bool warn_unstorable_times = true;
  // SOURCE_DATE_EPOCH clamps later times to itself: a time after 2106 is then stored as that
  // time, as every other time after it is, and is no loss to warn about.
  bool later_times_clamped = false;
  std::atomic<uint64_t>* entries_seen = nullptr;  // progress counter, may be null
  unsigned* listers_peak = nullptr;               // receives the most listers that worked at once, may be null
};

// Throws sqar::Error naming the path and the cause on the first fatal problem.
Tree scan_sources(const ScanOptions& options);

// Whether the SOURCEs' content becomes the image root (one SOURCE that is a directory, as
// mksquashfs does it) rather than each SOURCE being an entry of the root under its own name.
// A SOURCE that names a symlink to a directory is a directory only when written with a
// trailing '/' (as rsync reads it).
bool sources_form_root(const std::vector<std::string>& sources, bool keep_as_directory);

// A SOURCE's directory and its name in the image: "a/b/" -> ("a", "b"); "." and ".." are
// resolved first, since they name no entry, and so is "link/", a symlink written with a
// trailing '/': the directory it points to is packed, under that directory's own name.
std::pair<std::string, std::string> split_source(const std::string& src);

}  // namespace sqar
