// What `sqar diff` computes: the differences in content and metadata between an image and a
// directory tree.
//
// The tree is read by the builder's scanner (directories listed in parallel, xattrs listed
// relative to the open directory), then image and tree are walked side by side: both list a
// directory's entries sorted by name in byte order, so one merge per directory pairs them up
// without a table of every path. Contents of same-size files are compared in parallel.
#pragma once
#include <string>
#include <vector>

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
  std::string path;  // "." for the root, "a/b" below it
  std::string line;  // "- PATH", "+ PATH" or "M PATH: WHAT A != B"
};

struct CompareResult {
  std::vector<Difference> differences;  // sorted by path; a path's lines in the order found
  std::vector<std::string> errors;      // files that could not be compared (read errors)
};

// Throws sqar::Error when `root` is not a directory, cannot be listed, or the image's
// directory graph is damaged.
CompareResult compare_image_with_tree(reader::Image& image, const std::string& root, const CompareOptions& opt);

}  // namespace sqar::ops
