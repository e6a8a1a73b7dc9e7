// What `sqar verify` computes: every metadata block, data block and fragment of an image is
// read and decompressed, each file's size is checked and, when the image carries sqar's
// manifest trailer, each file's XXH3-128 is compared with it (files that lie alone in a
// fragment block are checked together, by the block's digest). Files are checked in parallel;
// content shared by several inodes (dedup) is read once.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/problem.h"
#include "reader/image.h"

namespace sqar::ops {

// What a progress display shows while run() works.
struct VerifyProgress {
  bool metadata = true;  // still walking the metadata (then entries counts), else reading content
  uint64_t entries = 0, bytes_done = 0, bytes_total = 0;
};

class Verifier {
 public:
  // Every problem is passed to `problems` as an error, naming the entry ("" for the image's
  // tables) and the cause.
  Verifier(reader::Image& image, unsigned jobs, ProblemSink problems);
  ~Verifier();
  Verifier(const Verifier&) = delete;
  Verifier& operator=(const Verifier&) = delete;

  // Checks everything once; returns the number of problems found.
  size_t run();
  VerifyProgress progress() const;  // safe to call from another thread while run() works

  uint64_t entries() const;
  uint64_t files() const;
  uint64_t bytes() const;  // content bytes checked
  bool had_manifest() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sqar::ops
