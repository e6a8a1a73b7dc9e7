// An unnamed temporary file next to the image, seen by libsquashfs as a sqfs_file_t.
// The directory table is written here while the inode table is still growing in the image
// (SquashFS wants inodes first), instead of holding it in memory: libsquashfs keeps every
// in-memory metadata block at its full 8 KiB however well it compressed (8 MB on 270k entries).
#pragma once
#include <sqfs/io.h>

#include <cstdint>
#include <string>

namespace sqar {

class ImageFile;

class ScratchFile {
 public:
  // `purpose` names it in error messages ("DIR (scratch file for PURPOSE): cause").
  explicit ScratchFile(const std::string& directory, std::string purpose = "the directory table");
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  sqfs_file_t* as_sqfs_file() { return &view_.base; }
  // Appends the whole scratch content to `out`.
  void copy_to(ImageFile& out);
  // The cause of the last failed access (libsquashfs only passes on an error code), e.g.
  // "DIR (scratch file for the directory table): No space left on device"; empty if none.
  const std::string& last_error() const { return last_error_; }

 private:
  struct View {
    sqfs_file_t base;
    ScratchFile* owner;
  };
  static int read_at(sqfs_file_t* f, sqfs_u64 off, void* buf, size_t len);
  static int write_at(sqfs_file_t* f, sqfs_u64 off, const void* buf, size_t len);
  static sqfs_u64 get_size(const sqfs_file_t* f);
  static int truncate(sqfs_file_t* f, sqfs_u64 size);
  static void destroy(sqfs_object_t*) {}
  int fail(int err);  // records the cause, returns SQFS_ERROR_IO

  int fd_ = -1;
  uint64_t size_ = 0;
  std::string where_;
  std::string purpose_;
  std::string last_error_;
  View view_{};
};

}  // namespace sqar
