// The FUSE low-level operations over the reader core.
//
// Node ids are inode positions (Filesystem::node_id); st_ino is the image's own inode number,
// stable across mounts.
// The image is immutable, so entries and attributes are cached by the kernel for a long
// time, file contents are kept in the page cache (keep_cache) and forget needs no work.
//
// Round trips, not decompression, dominate small-file workloads (a FUSE request costs about
// as much as decompressing 20 KiB), so the driver avoids them where the kernel allows:
// - no open/opendir/release requests (FUSE_CAP_NO_OPEN_SUPPORT, NO_OPENDIR_SUPPORT): reads
//   and readdirs find their inode in a cache keyed by node id instead of a file handle;
// - readdirplus on every readdir, so `find`/`ls -l` need no lookup or getattr afterwards;
// - when a read needs only part of a block it just decompressed, the rest of the block is
//   pushed into the kernel's page cache (notify_store) by a background thread, the way the
//   kernel's own squashfs driver fills the page cache, so the neighbouring pages of a random
//   reader never come back to us;
// - likewise across files: when a read needs a fragment block, the tails of the other files
//   in it that the kernel knows (registered at lookup and readdirplus) are pushed too, so the
//   small files of a directory cost about one read request per fragment block.
#pragma once
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "options.h"
#include "prefetcher.h"
#include "reader/image.h"

namespace sqar::fuse {

class Filesystem {
 public:
  Filesystem(std::unique_ptr<reader::Image> image, const Options& options);
  static const fuse_lowlevel_ops& operations();
  void start_background_threads(fuse_session* se);
  void stop_background_threads();

 private:
  // A regular file as reads need it (block list loaded), plus read-ahead state shared by all
  // readers of the file (there are no file handles).
  struct FileNode {
    reader::Inode inode;
    std::atomic<uint64_t> next_offset{0};      // where a sequential reader continues
    std::atomic<uint64_t> prefetched_upto{0};  // blocks below this were already requested
    std::atomic<uint64_t> delivered_end{0};    // highest end of a reply: read-ahead behind it is moot
  };
  struct DirNode {
    reader::Inode inode;
    std::vector<reader::DirEntry> entries;
  };
  // node id -> parsed node, bounded in bytes; sharded so 16 threads rarely meet on a mutex.
  template <class T>
  class NodeCache {
   public:
    // A shard reserves buckets for its full budget on its first insert: growing the tables
    // rehashed ~3% of the CPU of a read-everything run (nodes ~256 bytes; 4096 buckets per
    // shard cost 32 KiB).
    explicit NodeCache(size_t budget_bytes) : per_shard_(budget_bytes / kShards) {}
    std::shared_ptr<T> find(uint64_t key);
    // False when the node alone exceeds a shard's budget (nothing is cached then).
    bool insert(uint64_t key, std::shared_ptr<T> node, size_t bytes);

   private:
    static constexpr size_t kShards = 32;
    struct Shard {
      std::mutex mu;
      std::unordered_map<uint64_t, std::pair<std::shared_ptr<T>, size_t>> map;
      size_t bytes = 0;
    };
    size_t per_shard_;
    Shard shards_[kShards];
  };

  fuse_ino_t node_id(reader::InodeRef ref) const;
  reader::InodeRef ref_of(fuse_ino_t ino) const;
  reader::Inode inode_of(fuse_ino_t ino, bool with_blocks = false);
  void make_stat(const reader::Inode& inode, struct stat* st) const;
  // How the kernel came to know an entry: a lookup is nearly always an open about to read.
  enum class Known { looked_up, listed };
  void fill_entry(const reader::Inode& inode, fuse_entry_param* e, Known how);
  std::shared_ptr<FileNode> file_node(fuse_ino_t ino);
  std::shared_ptr<DirNode> dir_node(fuse_ino_t ino, std::optional<reader::Inode> inode = std::nullopt);
  void readahead(const std::shared_ptr<FileNode>& f, uint64_t end);
  void release_delivered(const FileNode& f, uint64_t off, uint64_t end);
  void push_rest_of_block(fuse_ino_t ino, const FileNode& f, uint64_t off, size_t len);
  void register_mate(fuse_ino_t ino, const reader::Inode& inode, Known how);
  void push_mates(fuse_ino_t reader, uint32_t fragment);
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
  static void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  static void op_statfs(fuse_req_t req, fuse_ino_t ino);
  static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
  static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
  static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi);
  void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus);

  std::unique_ptr<reader::Image> image_;
  Options options_;
  uint32_t root_number_;
  reader::InodeRef root_ref_;
  static constexpr size_t kShards = 32;
  // 32 MiB each: ~100k small files (~300 bytes each with their entry) and listings of
  // ~500k entries, bounded whatever the image holds.
  NodeCache<FileNode> files_{32u << 20};
  NodeCache<DirNode> dirs_{32u << 20};
  void cache_file(fuse_ino_t ino, std::shared_ptr<FileNode> f);
  std::shared_ptr<DirNode> cached_dir(fuse_ino_t ino);
  // Nodes too large for their NodeCache (over 1 MiB): the most recently used of each kind, up
  // to kMaxBig of them within kBigBytes (the last two are kept whatever their size). Two would be
  // too few: four large directories listed at once would miss on every 4 KiB readdir chunk and
  // parse their whole listing again each time (8-20 s against 0.3 s for one).
  template <class T>
  class RecentBig {
   public:
    static constexpr size_t kMaxBig = 8, kKeepAlways = 2;
    static constexpr size_t kBigBytes = size_t(128) << 20;
    std::shared_ptr<T> find(fuse_ino_t ino) {
      std::lock_guard lock(mu_);
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].ino != ino) continue;
        std::rotate(slots_.begin(), slots_.begin() + std::ptrdiff_t(i), slots_.begin() + std::ptrdiff_t(i) + 1);
        return slots_.front().node;
      }
      return nullptr;
    }
    void put(fuse_ino_t ino, std::shared_ptr<T> node, size_t bytes) {
      std::lock_guard lock(mu_);
      slots_.insert(slots_.begin(), Slot{ino, std::move(node), bytes});
      total_ += bytes;
      while (slots_.size() > kKeepAlways && (slots_.size() > kMaxBig || total_ > kBigBytes)) {
        total_ -= slots_.back().bytes;
        slots_.pop_back();
      }
    }

   private:
    struct Slot {
      fuse_ino_t ino;
      std::shared_ptr<T> node;
      size_t bytes;
    };
    std::mutex mu_;
    std::vector<Slot> slots_;  // most recently used first
    size_t total_ = 0;
  };
  // Listings of ~20k+ entries: the kernel's 4 KiB readdir chunks of a huge directory do not
  // each parse the whole listing again.
  RecentBig<DirNode> big_dirs_;
  // Files of ~87k+ blocks (11 GiB at 128 KiB blocks, 340 MiB at 4 KiB): each read would
  // otherwise parse the whole block list again (docs/architecture.md, "Large files and holes").
  RecentBig<FileNode> big_files_;
  Prefetcher prefetcher_;
  Prefetcher pusher_{256};
  fuse_session* fuse_session_ = nullptr;
  bool no_open_ = false, no_opendir_ = false;  // the kernel skips open/opendir when we decline
  // Files the kernel knows (looked up or listed by readdirplus) whose tail end lies in a
  // fragment block, by fragment: the first read that needs a fragment block pushes the tails
  // of the others into the page cache, so each small file of a decompressed fragment block
  // costs one notify_store instead of a read round trip. Bounded: past the budget, arbitrary
  // fragments' lists are dropped (their files are then read the ordinary way).
  struct Mate {
    uint64_t tail_start;  // file offset where the fragment part begins (block-aligned)
    fuse_ino_t ino;
    uint32_t fragment_offset;
    uint32_t tail_len;
    uint32_t looked_up_us;  // when a lookup registered it (clock_us32); 0: listed by readdirplus
  };
  struct MateShard {
    std::mutex mu;
    std::unordered_map<uint32_t, std::vector<Mate>> by_fragment;
    size_t count = 0;
  };
  // Budget in mates (a fragment's map node and vector are charged as 3 more): 8 MiB in all.
  static constexpr size_t kMatesPerShard = (8u << 20) / kShards / sizeof(Mate);
  static constexpr size_t kFragmentCharge = 3;
  static constexpr size_t kMatesPerFragment = 512;
  // A mate looked up less than this long before the push is left to its own READ, which is
  // nearly always on its way: see push_mates.
  static constexpr uint32_t kFreshLookupUs = 1000;
  MateShard mate_shards_[kShards];
  // Recently pushed (node, block) pairs: a block is pushed again only after 1 s, so the
  // reads that race with a push do not push the same block once each.
  static constexpr size_t kPushSlots = 4096;
  std::atomic<uint64_t> pushed_key_[kPushSlots] = {};
  std::atomic<uint64_t> pushed_ms_[kPushSlots] = {};
};

}  // namespace sqar::fuse
