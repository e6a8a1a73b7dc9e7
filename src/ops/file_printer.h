// The engine behind `sqar cat`: the content of files inside an image, written in order to one
// descriptor (standard output), decoded ahead by worker threads and checked against the
// manifest trailer. tools/cmd_cat.cpp only parses options and picks the files.
#pragma once
#include <memory>
#include <string>

#include "common/error.h"
#include "reader/image.h"

namespace sqar::ops {

// Writing to the output failed: every later file would fail the same way, so the command ends
// (other errors name one file, and the next one is still printed).
class OutputError : public Error {
 public:
  using Error::Error;
};

// The regular file at PATH (normalized, relative to the root), following symlinks inside the
// image as the kernel would, at most 40 of them: an absolute target starts at the image root
// and '..' (in PATH or in a target) stops at it. Throws sqar::Error naming PATH when it is missing, a directory or
// another kind of entry.
reader::Inode resolve_regular_file(reader::Image& image, std::string path);

class FilePrinter {
 public:
  // out_name names `out_fd` in errors ("standard output"). With `verify`, what is written is
  // checked against the manifest trailer when the image has one.
  FilePrinter(reader::Image& image, int out_fd, std::string out_name, unsigned threads, bool verify);
  ~FilePrinter();
  FilePrinter(const FilePrinter&) = delete;
  FilePrinter& operator=(const FilePrinter&) = delete;

  // Writes the content of `file`; `shown` names it in errors. Everything before a damaged
  // block is written, then its error is thrown (sqar::Error naming `shown`); a mismatch with
  // the manifest is thrown after the whole content was written. A failed write throws
  // OutputError.
  void print(const reader::Inode& file, const std::string& shown);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sqar::ops
