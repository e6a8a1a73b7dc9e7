// Reading source files with as few system calls as possible: small files cost open + one read
// + close, which is what limits trees of 10^5 small files.
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "common/content_hash.h"
#include "common/hash.h"
#include "common/source_bytes.h"
#include "scan/directory_cursor.h"
#include "scan/xattr_reader.h"

namespace sqar {

// Returned (instead of an errno value) when the name a read opens is no longer a regular file:
// a live tree put a FIFO, a device, a directory, a symlink or a socket there after the scan.
constexpr int kNotRegularFile = -2;

// What fstat said of the file a read opened, to compare with what the scan saw of it.
struct OpenedFile {
  uint64_t inode = 0;
  mode_t mode = 0;
  uint32_t uid = 0, gid = 0;
  int64_t mtime = 0;
  timespec mtime_exact{}, ctime{};  // to compare: a write moves both, a chmod only the ctime
  // The file's ctime moved between the open and the end of the read, as tar checks ("file
  // changed as we read it"): it was written to (its mtime moved too, and the bytes read may
  // mix two versions), or only its mode, owner or links changed.
  bool changed_during_read = false;
  bool written_during_read = false;
};

inline bool time_moved(const timespec& now, const timespec& then) {
  return now.tv_sec != then.tv_sec || now.tv_nsec != then.tv_nsec;
}

// Reads [offset, offset+len) of the file `name` in the directory open as `dirfd` (AT_FDCWD and
// a path work too) into `out`. When `expect_eof` the file must end exactly there (one extra byte
// is requested to notice growth). File-changed conditions are reported through `changed`.
//
// A reader starts the reads of a whole batch before it waits for any: start() completes a read
// whose data is in the page cache (one non-blocking read, as cheap as a plain pread) and
// otherwise asks the kernel to fetch it and returns kReadPending, keeping the file open for
// finish(). One blocking read at a time per thread leaves the disk nearly idle on a cold tree
// (docs/architecture.md, "Cold trees: many reads in flight").
class SourceRead {
 public:
  static constexpr int kReadPending = -1;

  SourceRead() = default;
  SourceRead(const SourceRead&) = delete;
  SourceRead& operator=(const SourceRead&) = delete;
  ~SourceRead();

  // Returns 0 (done), an errno value, kNotRegularFile, or kReadPending (call finish() with the
  // same out/changed). `out` ends up with the bytes of the range that exist (fewer than len
  // when the file shrank). With `xattrs`, the file's attributes are read from it once it is
  // open (an error is returned as errno; `xattrs_failed_key` then names the attribute, or is
  // empty). With `opened`, the open file's fstat is stored there: the caller compares it with
  // the scan (a file replaced or changed since), and the ranges of one large file, read
  // through separate opens, with each other (a file replaced or written between two ranges);
  // its changed_during_read is set when the ctime moved while this range was read.
  int start(int dirfd, const char* name, uint64_t offset, uint64_t len, bool expect_eof, SourceBytes& out,
            std::string& changed, XattrList* xattrs = nullptr, std::string* xattrs_failed_key = nullptr,
            OpenedFile* opened = nullptr);
  // Completes a pending read (blocking); returns 0 or an errno value.
  int finish(SourceBytes& out, std::string& changed);
  // The range start() completed lies wholly in a hole of a sparse file: it was not read and
  // `out` was left empty; its len bytes are zeros.
  bool range_was_hole() const { return hole_; }

 private:
  int finish(SourceBytes& out, std::string& changed, int64_t bytes_read);
  void close_after_read();  // takes the ctime again (OpenedFile::changed_during_read) and closes

  int fd_ = -1;
  OpenedFile* opened_ = nullptr;
  timespec opened_ctime_{}, opened_mtime_{};
  uint64_t offset_ = 0, len_ = 0, done_ = 0;
  bool expect_eof_ = false;
  bool hole_ = false;
};

// Keeps the directory of the files a reader thread is working through open, so each file is
// opened relative to it: image order groups files by directory, and a full-path open walks
// every component again (a third of all CPU time on a tree of 200k small files). Directories
// are themselves opened relative to the previous ones (DirectoryCursor).
class DirectoryHandle {
 public:
  // Returns an fd for the directory rel() below the SOURCE directory `base`, identified by
  // `key`: the open one when the key matches (rel() is then not called), or -1 with errno set.
  template <class RelPath>
  int open(uint64_t key, const std::string& base, RelPath&& rel) {
    if (key == key_ && fd_ >= 0) return fd_;
    key_ = key;
    fd_ = cursor_.open(base, rel(), false);
    return fd_;
  }

 private:
  uint64_t key_ = UINT64_MAX;
  int fd_ = -1;  // owned by cursor_
  DirectoryCursor cursor_;
};

// Streams the first expected_size bytes of a file through XXH3-128 with a bounded buffer (all
// of it when it shrank; `changed` then says so, or that it grew). Returns 0 or an errno value.
// With `xattrs`, also reads the file's attributes (as SourceRead::start does).
// `hashed` receives the number of bytes hashed (less than expected_size when the file shrank).
// Returns kNotRegularFile when the name is no longer a regular file.
// The file is `name` in the directory open as dirfd (DirectoryHandle): no name on the way to
// it follows a symlink.
int hash_source_file(int dirfd, const char* name, uint64_t expected_size, Hash128& out, std::string& changed,
                     uint64_t& hashed, XattrList* xattrs = nullptr, std::string* xattrs_failed_key = nullptr,
                     OpenedFile* opened = nullptr);

// Byte comparison of two source files, each a name in a directory fd (for --verify-dedup).
// Returns true when identical.
bool source_files_identical(int dir_a, const char* a, int dir_b, const char* b, uint64_t size);

}  // namespace sqar
