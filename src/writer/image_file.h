// The image being written: a temporary file beside IMAGE, renamed into place only when complete
// and synced. Until commit() it is removed on destruction, on error and on SIGINT/SIGTERM.
#pragma once
#include <sqfs/io.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sqar {

struct ImageFileSqfsView;

class ImageFile {
 public:
  // Fails (sqar::Error) if final_path exists and !overwrite, or the directory is not writable.
  ImageFile(std::string final_path, bool overwrite);
  ~ImageFile();
  ImageFile(const ImageFile&) = delete;
  ImageFile& operator=(const ImageFile&) = delete;

  // Buffered sequential writes (the data pipeline's writer thread).
  void append(const void* data, size_t len);
  uint64_t position() const { return position_; }
  void flush();

  void write_at(uint64_t offset, const void* data, size_t len);
  void read_at(uint64_t offset, void* data, size_t len);
  void truncate(uint64_t size);

  // libsquashfs writes its tables through this view of the same file (positional I/O).
  sqfs_file_t* as_sqfs_file();

  // fsync, rename over final_path, fsync the directory.
  void commit();
  const std::string& final_path() const { return final_path_; }
  std::string directory() const;  // where IMAGE (and its temporary files) live
  const std::string& temp_path() const { return temp_path_; }
  // The cause of the last failed write through as_sqfs_file() (libsquashfs only sees an error code).
  const std::string& last_error() const { return last_error_; }
  void set_last_error(std::string e) { last_error_ = std::move(e); }

 private:
  void write_fully(uint64_t offset, const uint8_t* data, size_t len);

  std::string final_path_, temp_path_, last_error_;
  int fd_ = -1;
  bool committed_ = false;
  uint64_t position_ = 0;  // logical end of file (buffered bytes included)
  uint64_t flushed_ = 0;   // bytes already handed to the kernel
  std::vector<uint8_t> buffer_;
  ImageFileSqfsView* view_ = nullptr;
};

// Async-signal-safe cleanup: the CLI installs SIGINT/SIGTERM handlers that call this.
void remove_pending_temp_file_from_signal_handler();

}  // namespace sqar
