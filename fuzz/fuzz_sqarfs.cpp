// Fuzzes sqarfs's request handling: the FUSE low-level handlers of fuse/filesystem.cpp, called
// the way the kernel calls them, on a fuzzed image, with no kernel and no FUSE session (the
// replies are recorded by fuse_replies.cpp). From the root it walks the tree as a client
// would: getattr, listxattr and getxattr of every node; opendir, readdir and readdirplus in
// 4 KiB chunks, and a lookup of every listed name, for directories; open, reads (sequential,
// in the middle, at the end) and lseek for files; readlink for symlinks; statfs.
//
// Every damaged structure must be answered with EIO (or the POSIX answer for the request);
// a crash, a sanitizer report, a second or missing reply, an oversized reply, an unexpected
// errno, a hang or unbounded memory is a bug in sqarfs or the reader.
#include <fcntl.h>

#include <deque>
#include <memory>
#include <string>
#include <unordered_set>

#include "common/error.h"
#include "filesystem.h"
#include "fuse_replies.h"
#include "fuzz_util.h"

namespace {

// Bounds per input, so a valid but large (or lying) image cannot turn one run into minutes.
constexpr size_t kMaxNodes = 1024;
constexpr size_t kMaxChunksPerDir = 256;
constexpr size_t kMaxXattrs = 32;
constexpr uint64_t kMaxBytesPerFile = 1u << 20;
constexpr size_t kChunk = 4096;           // the kernel's readdir buffer
constexpr size_t kReadSize = 128u << 10;  // the kernel's usual read request

class Client {
 public:
  explicit Client(sqar::fuse::Filesystem& fs) : fs_(fs), ops_(sqar::fuse::Filesystem::operations()) {}

  void run() {
    fuse_conn_info conn{};  // no capabilities: the kernel keeps sending open and opendir
    ops_.init(&fs_, &conn);
    call(0, [&](fuse_req_t r) { ops_.statfs(r, FUSE_ROOT_ID); });
    queue_.push_back(FUSE_ROOT_ID);
    seen_.insert(FUSE_ROOT_ID);
    while (!queue_.empty()) {
      const fuse_ino_t ino = queue_.front();
      queue_.pop_front();
      visit(ino);
      call(0, [&](fuse_req_t r) { ops_.forget(r, ino, 1); });
    }
  }

 private:
  template <class F>
  fuse_req call(size_t size, F&& send) {
    fuse_req r;
    r.userdata = &fs_;
    r.size = size;
    send(&r);
    if (r.replies != 1) __builtin_trap();  // a request left unanswered hangs its caller
    return r;
  }

  void visit(fuse_ino_t ino) {
    fuse_req attr = call(0, [&](fuse_req_t r) { ops_.getattr(r, ino, nullptr); });
    if (attr.error) return;
    xattrs(ino);
    switch (attr.attr.st_mode & S_IFMT) {
      case S_IFDIR: directory(ino); break;
      case S_IFREG: file(ino, uint64_t(attr.attr.st_size)); break;
      case S_IFLNK: call(0, [&](fuse_req_t r) { ops_.readlink(r, ino); }); break;
      default: break;
    }
  }

  void xattrs(fuse_ino_t ino) {
    fuse_req probe = call(0, [&](fuse_req_t r) { ops_.listxattr(r, ino, 0); });
    if (probe.error) return;
    const size_t total = probe.xattr_size;
    fuse_req list = call(total, [&](fuse_req_t r) { ops_.listxattr(r, ino, total); });
    if (list.error) return;
    if (list.data.size() != total) __builtin_trap();  // the probe promised this size
    if (total > 0) call(total - 1, [&](fuse_req_t r) { ops_.listxattr(r, ino, total - 1); });
    size_t done = 0;
    for (size_t at = 0; at < list.data.size() && done < kMaxXattrs; ++done) {
      const std::string name = list.data.c_str() + at;
      at += name.size() + 1;
      fuse_req size = call(0, [&](fuse_req_t r) { ops_.getxattr(r, ino, name.c_str(), 0); });
      if (size.error) continue;
      const size_t want = size.xattr_size;
      call(want, [&](fuse_req_t r) { ops_.getxattr(r, ino, name.c_str(), want); });
      if (want > 0) call(want - 1, [&](fuse_req_t r) { ops_.getxattr(r, ino, name.c_str(), want - 1); });
    }
    call(64, [&](fuse_req_t r) { ops_.getxattr(r, ino, "user.not-there", 64); });
  }

  void directory(fuse_ino_t ino) {
    fuse_file_info fi{};
    call(0, [&](fuse_req_t r) { ops_.opendir(r, ino, &fi); });
    // A lookup before the listing is cached takes the other path (directory index for
    // listings over 64 KiB).
    call(0, [&](fuse_req_t r) { ops_.lookup(r, ino, "zz-not-there"); });
    call(kChunk, [&](fuse_req_t r) { ops_.readdir(r, ino, kChunk, 0, &fi); });
    off_t off = 0;
    for (size_t chunk = 0; chunk < kMaxChunksPerDir; ++chunk) {
      fuse_req list = call(kChunk, [&](fuse_req_t r) { ops_.readdirplus(r, ino, kChunk, off, &fi); });
      if (list.error || list.listed.empty()) break;
      for (const auto& e : list.listed) {
        if (e.next <= off) __builtin_trap();  // the next offset must move on, or `ls` never ends
        off = e.next;
        if (e.name == "." || e.name == "..") continue;
        fuse_req found = call(0, [&](fuse_req_t r) { ops_.lookup(r, ino, e.name.c_str()); });
        if (found.error || found.entry.ino == 0) continue;
        if (seen_.size() < kMaxNodes && seen_.insert(found.entry.ino).second) queue_.push_back(found.entry.ino);
      }
    }
  }

  void file(fuse_ino_t ino, uint64_t size) {
    fuse_file_info fi{};
    fi.flags = O_RDONLY;
    fuse_req open = call(0, [&](fuse_req_t r) { ops_.open(r, ino, &fi); });
    if (open.error) return;
    fuse_file_info wr{};
    wr.flags = O_WRONLY;
    call(0, [&](fuse_req_t r) { ops_.open(r, ino, &wr); });
    const uint64_t limit = std::min(size, kMaxBytesPerFile);
    for (uint64_t off = 0; off < limit;) {
      fuse_req got = call(kReadSize, [&](fuse_req_t r) { ops_.read(r, ino, kReadSize, off_t(off), &fi); });
      if (got.error || got.data.empty()) break;
      off += got.data.size();
    }
    call(kChunk, [&](fuse_req_t r) { ops_.read(r, ino, kChunk, off_t(size / 2), &fi); });
    fuse_req end = call(kChunk, [&](fuse_req_t r) { ops_.read(r, ino, kChunk, off_t(size), &fi); });
    if (!end.error && !end.data.empty()) __builtin_trap();  // nothing past the end of the file
    for (int whence : {SEEK_DATA, SEEK_HOLE}) {
      fuse_req seek = call(0, [&](fuse_req_t r) { ops_.lseek(r, ino, 0, whence, &fi); });
      if (!seek.error && uint64_t(seek.seek) > size) __builtin_trap();
    }
  }

  sqar::fuse::Filesystem& fs_;
  const fuse_lowlevel_ops& ops_;
  std::deque<fuse_ino_t> queue_;
  std::unordered_set<fuse_ino_t> seen_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sqar::fuzz::MemImage mem;
  const std::string& path = mem.store(data, size);
  std::unique_ptr<sqar::fuse::Filesystem> fs;
  try {
    // As sqarfs's main does: the image is opened and checked before the mount; a refusal
    // there is an error message, not a request.
    sqar::fuse::Options options;
    options.cache_bytes = sqar::fuzz::fuzz_options().cache_bytes;
    fs = std::make_unique<sqar::fuse::Filesystem>(sqar::reader::Image::open(path, sqar::fuzz::fuzz_options()), options);
  } catch (const sqar::Error&) {
    return 0;
  }
  Client(*fs).run();
  return 0;
}
