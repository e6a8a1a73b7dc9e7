// The image being written: an unnamed (O_TMPFILE) file in IMAGE's directory that gets IMAGE's
// name only when complete and synced, so an error, a signal or a crash leaves nothing behind.
// Where the filesystem has no O_TMPFILE, a named temporary file beside IMAGE, renamed into
// place at the end and removed on destruction, on error and by the CLI's signal handlers.
#pragma once
#include <sqfs/io.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sqar {

struct ImageFileSqfsView;

class ImageFile {
 public:
  // Fails (sqar::Error) if final_path exists and !overwrite, or the directory is not writable.
  // final_path "-" (kStandardOutput) builds the image in an unnamed file in $TMPDIR, which
  // commit() copies to standard output: the image needs seeking, a pipe has none.
  ImageFile(std::string final_path, bool overwrite);
  static constexpr const char* kStandardOutput = "-";
  ~ImageFile();
  ImageFile(const ImageFile&) = delete;
  ImageFile& operator=(const ImageFile&) = delete;

  // Buffered sequential writes (the data pipeline's writer thread).
  void append(const void* data, size_t len);
  uint64_t position() const { return position_; }
  void flush();

  // Appends bytes [offset, offset + len) of another file. copy_file_range lets a filesystem
  // that shares extents (XFS, btrfs) share them instead of copying; returns the bytes it took
  // (the rest went through read and write: another filesystem, or no support).
  uint64_t append_from(int fd, const std::string& path, uint64_t offset, uint64_t len);

  void write_at(uint64_t offset, const void* data, size_t len);
  void read_at(uint64_t offset, void* data, size_t len);
  void truncate(uint64_t size);

  // libsquashfs writes its tables through this view of the same file (positional I/O).
  sqfs_file_t* as_sqfs_file();

  // fsync, then name it IMAGE (replacing an existing IMAGE only if overwrite; one made by
  // someone else during the build is an error otherwise), fsync the directory.
  void commit();
  const std::string& final_path() const { return final_path_; }
  // IMAGE as messages name it: its path, or "standard output".
  const std::string& display_name() const { return name_; }
  std::string directory() const;  // where the image (and scratch files beside it) is built
  // The file being written, for the scanner to skip it when IMAGE lies inside a source.
  std::pair<dev_t, ino_t> identity() const;
  // The file the image will replace or fill (an existing IMAGE, or standard output redirected
  // to a file), which the scanner must skip as well; none for a new IMAGE or a pipe.
  std::optional<std::pair<dev_t, ino_t>> replaced_identity() const;
  // The cause of the last failed write through as_sqfs_file() (libsquashfs only sees an error code).
  const std::string& last_error() const { return last_error_; }
  void set_last_error(std::string e) { last_error_ = std::move(e); }

 private:
  void write_fully(uint64_t offset, const uint8_t* data, size_t len);
  void start_writeback();  // of the appended bytes not yet handed to writeback
  void create_spool();     // IMAGE '-': the unnamed file in $TMPDIR
  void copy_to_standard_output();
  [[noreturn]] void throw_write_error(int err) const;  // names the image, or the spool's directory
  uint64_t append_range(int fd, const std::string& path, uint64_t offset, uint64_t len);

  std::string final_path_;
  std::string name_;  // for messages
  bool to_stdout_ = false;
  std::string spool_dir_;  // to_stdout_: where the image is built
  std::string temp_path_;  // empty while the file is unnamed (O_TMPFILE)
  std::string last_error_;
  bool overwrite_ = false;
  int fd_ = -1;
  bool committed_ = false;
  uint64_t position_ = 0;        // logical end of file (buffered bytes included)
  uint64_t flushed_ = 0;         // bytes already handed to the kernel
  uint64_t writeback_from_ = 0;  // appended bytes before this are being written back
  std::vector<uint8_t> buffer_;
  ImageFileSqfsView* view_ = nullptr;
};

// Async-signal-safe cleanup of a named temporary image: the CLI's handlers for the signals
// that end a process call this.
void remove_pending_temp_file_from_signal_handler();

}  // namespace sqar
