// What `sqar diff` computes: the differences in content and metadata between an image and a
// directory tree.
//
// The tree is read by the builder's scanner (directories listed in parallel, xattrs listed
// relative to the open directory), then image and tree are walked side by side: both list a
// directory's entries sorted by name in byte order, so one merge per directory pairs them up
// without a table of every path. Contents of same-size files are compared in parallel.
//
// Differences are handed to the caller in path order a batch at a time, rather than gathered
// and sorted: a crafted image of deep long names yields hundreds of megabytes of paths, which
// must never all be held at once. Memory is one batch (4,096 contents to compare or 4 MiB of
// lines) and, per open directory, a cursor into its listing rather than the listing.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "reader/image.h"

namespace sqar::ops {

struct CompareOptions {
  bool times = true, owners = true, xattrs = true;
  unsigned jobs = 1;
  // Only whether they differ is wanted (diff --quiet): stop at the first difference found,
  // leaving the rest of the tree and the remaining contents uncompared.
  bool stop_at_first_difference = false;
};

struct Difference {
  const std::string& path;  // "." for the root, "a/b" below it
  const std::string& line;  // "- PATH", "+ PATH" or "M PATH: WHAT A != B"
};

struct CompareReport {
  // Called in path order (byte order of the whole path: "a-c" before "a/b"); a path's lines
  // come in a fixed order, its content line last.
  std::function<void(const Difference&)> difference;
  // A file that could not be compared (a read error, a directory that could not be listed,
  // damaged xattrs), in the same order; the comparison goes on.
  std::function<void(const std::string& message)> error;
};

struct CompareCounts {
  uint64_t differences = 0;
  uint64_t errors = 0;
};

// Throws sqar::Error when `root` is not a directory, cannot be listed, or the image's
// directory graph is damaged (what was found before is reported first). With
// stop_at_first_difference no difference is reported and `differences` is 1 when they differ.
CompareCounts compare_image_with_tree(reader::Image& image, const std::string& root, const CompareOptions& opt,
                                      const CompareReport& report);

}  // namespace sqar::ops
