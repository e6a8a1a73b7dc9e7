// The FUSE low-level operations over the reader core.
//
// Inode numbers: FUSE node ids are the image's own inode numbers, except that the root
// must be 1, so the root's number and 1 swap places. Numbers are stable across mounts.
// The image is immutable, so entries and attributes are cached by the kernel for a long
// time, file contents are kept in the page cache (keep_cache) and forget needs no work.
#pragma once
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "options.h"
#include "prefetcher.h"
#include "reader/image.h"

namespace sqar::fuse {

class Filesystem {
 public:
  Filesystem(std::unique_ptr<reader::Image> image, const Options& options);
  static const fuse_lowlevel_ops& operations();
  void start_background_threads();
  void stop_background_threads();

 private:
  struct OpenFile {
    reader::Inode inode;
    std::atomic<uint64_t> next_offset{0};     // where a sequential reader continues
    std::atomic<uint64_t> prefetched_upto{0};  // blocks below this were already requested
  };
  struct OpenDir {
    reader::Inode inode;
    std::vector<reader::DirEntry> entries;
  };

  fuse_ino_t to_fuse(uint32_t inode_number) const;
  uint32_t from_fuse(fuse_ino_t ino) const;
  void remember(uint32_t inode_number, reader::InodeRef ref);
  reader::InodeRef ref_of(fuse_ino_t ino);
  reader::Inode inode_of(fuse_ino_t ino, bool with_blocks = false);
  void make_stat(const reader::Inode& inode, struct stat* st) const;
  void fill_entry(const reader::Inode& inode, fuse_entry_param* e);
  void readahead(const std::shared_ptr<OpenFile>& f, uint64_t end);
  void report(fuse_req_t req, const char* op, fuse_ino_t ino);

  static Filesystem& self(fuse_req_t req);
  static void op_init(void* userdata, fuse_conn_info* conn);
  static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
  static void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets);
  static void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void op_readlink(fuse_req_t req, fuse_ino_t ino);
  static void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  static void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  static void op_releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void op_statfs(fuse_req_t req, fuse_ino_t ino);
  static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
  static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
  void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus);

  std::unique_ptr<reader::Image> image_;
  Options options_;
  uint32_t root_number_;
  reader::InodeRef root_ref_;
  // node id -> inode position, learnt from lookups (images without an export table).
  static constexpr size_t kShards = 32;
  struct RefShard {
    std::mutex mu;
    std::unordered_map<uint32_t, reader::InodeRef> refs;
  };
  RefShard ref_shards_[kShards];
  Prefetcher prefetcher_;
};

}  // namespace sqar::fuse
