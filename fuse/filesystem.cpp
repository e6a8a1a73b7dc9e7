#include "filesystem.h"

#include <fcntl.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string_view>
#include <vector>

#include "caller.h"
#include "common/error.h"
#include "format/squashfs.h"
#include "log.h"
#include "reader/block_index.h"
#include "resident_code.h"

namespace sqar::fuse {

namespace {
// The image never changes while mounted: let the kernel cache names and attributes "forever".
constexpr double kForever = 86400.0 * 365;

mode_t dtype_mode(reader::FileKind k) {
  switch (k) {
    case reader::FileKind::directory: return S_IFDIR;
    case reader::FileKind::regular: return S_IFREG;
    case reader::FileKind::symlink: return S_IFLNK;
    case reader::FileKind::block_device: return S_IFBLK;
    case reader::FileKind::char_device: return S_IFCHR;
    case reader::FileKind::fifo: return S_IFIFO;
    case reader::FileKind::socket: return S_IFSOCK;
  }
  return 0;
}

// Names one block of one file in the table of recent pushes; never 0 (an empty slot). Node ids
// are inode positions (up to 48 bits) and indexes up to 32 bits, so the two are mixed rather
// than packed: an earlier `(ino << 24 ^ index) | 1` gave blocks 2k and 2k+1 of a file one key,
// so the second was never pushed and all its pages cost a READ each.
uint64_t push_key(uint64_t ino, uint64_t index) {
  uint64_t k = ino * 0x9E3779B97F4A7C15ull ^ (index + 1) * 0xC2B2AE3D27D4EB4Full;
  k ^= k >> 29;
  k *= 0xBF58476D1CE4E5B9ull;
  k ^= k >> 32;
  return k ? k : 1;
}

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// Monotonic microseconds in 32 bits, never 0. It wraps every 71 minutes; differences taken
// with unsigned arithmetic stay right across a wrap for anything shorter than that.
uint32_t clock_us32() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint32_t(uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000) | 1;
}
}  // namespace

template <class T>
std::shared_ptr<T> Filesystem::NodeCache<T>::find(uint64_t key) {
  Shard& s = shards_[key % kShards];
  std::lock_guard lock(s.mu);
  auto it = s.map.find(key);
  return it == s.map.end() ? nullptr : it->second.first;
}

template <class T>
bool Filesystem::NodeCache<T>::insert(uint64_t key, std::shared_ptr<T> node, size_t bytes) {
  bytes += 64;  // hash node and control block
  if (bytes > per_shard_) return false;
  Shard& s = shards_[key % kShards];
  std::lock_guard lock(s.mu);
  // Buckets for a full shard on first use, not at mount: the 32 x 2 tables are 2 MiB, which
  // cost ~1.5 ms of every mount (see NodeCache).
  if (s.map.empty() && s.bytes == 0) s.map.reserve(std::min<size_t>(per_shard_ / 256, 4096));
  if (auto it = s.map.find(key); it != s.map.end()) {
    s.bytes -= it->second.second;
    s.map.erase(it);
  }
  // Full: drop arbitrary entries. Nodes are cheap to re-read (cached metadata blocks), so
  // a proper LRU would cost more bookkeeping than the misses it saves.
  while (s.bytes + bytes > per_shard_ && !s.map.empty()) {
    s.bytes -= s.map.begin()->second.second;
    s.map.erase(s.map.begin());
  }
  s.bytes += bytes;
  s.map.emplace(key, std::make_pair(std::move(node), bytes));
  return true;
}

Filesystem::Filesystem(std::unique_ptr<reader::Image> image, const Options& options)
    : image_(std::move(image)), options_(options) {
  reader::Inode root = image_->root();
  if (!root.is_dir()) throw Error(image_->path() + ": the root inode is not a directory");
  root_number_ = root.inode_number;
  root_ref_ = root.ref;
  // As the kernel does at mount: a fragment table that cannot be read would fail every small
  // file, so refuse the image now, with the reason, rather than mount it and answer EIO. (One
  // pointer array and one metadata block: still nothing proportional to the image.)
  if (image_->super().fragment_count > 0) image_->fragment_location(0);
}

void Filesystem::start_background_threads(fuse_session* se) {
  fuse_session_ = se;
  if (options_.readahead_blocks > 0) prefetcher_.start(2);
  pusher_.start(1);
  // Off the mount's path, on the pusher, before any push can be queued (resident_code.h).
  pusher_.submit([] {
    try {
      keep_code_resident();
    } catch (...) {
    }
  });
}
void Filesystem::stop_background_threads() {
  prefetcher_.stop();
  pusher_.stop();
}

// Node ids are inode positions (ref + 2: 0 is invalid and 1 is the root's fixed id), so every
// request names its inode directly: no table from numbers to positions in memory, and no trust
// in the image's export table, which only NFS needs (one flipped bit there made a directory
// fail or served another file's content). st_ino stays the image's inode number.
fuse_ino_t Filesystem::node_id(reader::InodeRef ref) const { return ref == root_ref_ ? FUSE_ROOT_ID : ref + 2; }

reader::InodeRef Filesystem::ref_of(fuse_ino_t ino) const { return ino == FUSE_ROOT_ID ? root_ref_ : ino - 2; }

reader::Inode Filesystem::inode_of(fuse_ino_t ino, bool with_blocks) {
  return image_->read_inode(ref_of(ino), with_blocks);
}

void Filesystem::cache_file(fuse_ino_t ino, std::shared_ptr<FileNode> f) {
  // A long list's window and checkpoints (reader/block_index.h), counted at their fullest.
  const uint64_t windowed = f->inode.block_index ? image_->block_count(f->inode) : 0;
  const size_t bytes = sizeof(FileNode) + f->inode.block_sizes.size() * (sizeof(uint32_t) + sizeof(uint64_t)) +
                       (windowed ? size_t(reader::BlockIndex::kWindow * 12 + windowed / reader::BlockIndex::kWindow *
                                                                                 sizeof(reader::BlockIndex::Checkpoint))
                                 : 0);
  if (!files_.insert(ino, f, bytes)) big_files_.put(ino, std::move(f), bytes);
}

std::shared_ptr<Filesystem::FileNode> Filesystem::file_node(fuse_ino_t ino) {
  if (auto f = files_.find(ino)) return f;
  if (auto f = big_files_.find(ino)) return f;
  auto f = std::make_shared<FileNode>();
  f->inode = inode_of(ino, true);
  if (f->inode.is_regular()) cache_file(ino, f);
  return f;
}

std::shared_ptr<Filesystem::DirNode> Filesystem::cached_dir(fuse_ino_t ino) {
  if (auto d = dirs_.find(ino)) return d;
  return big_dirs_.find(ino);
}

std::shared_ptr<Filesystem::DirNode> Filesystem::dir_node(fuse_ino_t ino, std::optional<reader::Inode> inode) {
  if (auto d = cached_dir(ino)) return d;
  auto d = std::make_shared<DirNode>();
  d->inode = inode ? std::move(*inode) : inode_of(ino);
  if (!d->inode.is_dir()) return d;
  d->entries = image_->read_dir(d->inode);
  size_t bytes = sizeof(DirNode);
  for (const auto& e : d->entries) bytes += sizeof e + (e.name.size() > 15 ? e.name.size() + 1 : 0);
  if (!dirs_.insert(ino, d, bytes)) big_dirs_.put(ino, d, bytes);
  return d;
}

void Filesystem::make_stat(const reader::Inode& inode, struct stat* st) const {
  reader::fill_stat(*image_, inode, st);
  st->st_ino = inode.inode_number;
  if (options_.uid) st->st_uid = *options_.uid;
  if (options_.gid) st->st_gid = *options_.gid;
}

void Filesystem::fill_entry(const reader::Inode& inode, fuse_entry_param* e, Known how) {
  // Every caller answers for a directory's entry. One naming the root would go out as node id
  // 1, which the kernel's FUSE refuses with an EIO of its own: our callers log it instead.
  if (inode.ref == root_ref_) throw Error("a directory entry names the root directory (a loop in the image)");
  std::memset(e, 0, sizeof *e);
  e->ino = node_id(inode.ref);
  e->generation = 1;
  e->attr_timeout = kForever;
  e->entry_timeout = kForever;
  make_stat(inode, &e->attr);
  if (inode.is_regular() && inode.fragment_index != fmt::kNoFragment && fuse_session_)
    register_mate(e->ino, inode, how);
}

void Filesystem::register_mate(fuse_ino_t ino, const reader::Inode& inode, Known how) {
  const uint64_t bs = image_->super().block_size;
  const uint64_t tail_start = inode.size / bs * bs;
  const uint64_t tail_len = inode.size - tail_start;
  if (tail_len == 0 || inode.fragment_offset + tail_len > bs) return;  // nothing to push, or damaged
  MateShard& s = mate_shards_[inode.fragment_index % kShards];
  std::lock_guard lock(s.mu);
  auto [it, fresh] = s.by_fragment.try_emplace(inode.fragment_index);
  std::vector<Mate>& v = it->second;
  if (fresh) s.count += kFragmentCharge;
  if (v.size() >= kMatesPerFragment) return;
  for (const Mate& m : v)
    if (m.ino == ino) return;  // listed again (a second readdirplus, a lookup after a forget)
  // Over budget: drop other fragments' lists (never the one being added to).
  for (auto victim = s.by_fragment.begin(); s.count >= kMatesPerShard && victim != s.by_fragment.end();) {
    if (victim == it) {
      ++victim;
      continue;
    }
    s.count -= victim->second.size() + kFragmentCharge;
    victim = s.by_fragment.erase(victim);
  }
  v.push_back({tail_start, ino, inode.fragment_offset, uint32_t(tail_len), how == Known::looked_up ? clock_us32() : 0});
  ++s.count;
}

void Filesystem::push_mates(fuse_ino_t reader, uint32_t fragment) {
  std::vector<Mate> mates;
  {
    MateShard& s = mate_shards_[fragment % kShards];
    std::lock_guard lock(s.mu);
    auto it = s.by_fragment.find(fragment);
    if (it == s.by_fragment.end()) return;
    mates.swap(it->second);
    s.count -= mates.size() + kFragmentCharge;
    s.by_fragment.erase(it);
  }
  // Each registered file is pushed once (one listed again later registers again). The reader
  // itself has its reply. A file looked up a moment ago is being opened by its own client,
  // whose READ is about to arrive: pushing it would race that READ and cost a wake-up of the
  // pusher for a push that rarely wins (docs/architecture.md, "Pushing pages the kernel will
  // ask for").
  const uint32_t now = clock_us32();
  std::erase_if(mates, [&](const Mate& m) {
    return m.ino == reader || (m.looked_up_us != 0 && now - m.looked_up_us < kFreshLookupUs);
  });
  if (mates.empty()) return;
  pusher_.submit([this, fragment, mates = std::move(mates)] {
    reader::Chunk block;
    try {
      block = image_->read_fragment(fragment);  // a cache hit: a read has just used it
    } catch (...) {
      return;  // the reads of these files will report the damage
    }
    for (const Mate& m : mates) {
      if (uint64_t(m.fragment_offset) + m.tail_len > block.len) continue;  // damaged: the read says so
      fuse_bufvec bv = FUSE_BUFVEC_INIT(m.tail_len);
      bv.buf[0].mem = const_cast<uint8_t*>(block.data + m.fragment_offset);
      // ENOENT when the kernel has forgotten the inode meanwhile: harmless.
      fuse_lowlevel_notify_store(fuse_session_, m.ino, off_t(m.tail_start), &bv, fuse_buf_copy_flags(0));
    }
  });
}

void Filesystem::report(fuse_req_t req, const char* op, fuse_ino_t ino) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    // Reply first: logging may block (a full stderr pipe), and the request must not wait on it.
    fuse_reply_err(req, ENOMEM);
    log_error(std::string(op) + " of the inode at " + std::to_string(ref_of(ino)) + ": out of memory");
  } catch (const std::exception& e) {
    std::string what = std::string(op) + ": " + e.what();
    fuse_reply_err(req, EIO);
    log_error(what);
  }
}

Filesystem& Filesystem::self(fuse_req_t req) { return *static_cast<Filesystem*>(fuse_req_userdata(req)); }

void Filesystem::op_init(void* userdata, fuse_conn_info* conn) {
  Filesystem& fs = *static_cast<Filesystem*>(userdata);
  auto want = [&](uint64_t cap) {
    if (conn->capable & cap) conn->want |= cap;
    return (conn->capable & cap) != 0;
  };
  want(FUSE_CAP_CACHE_SYMLINKS);
  want(FUSE_CAP_ASYNC_READ);       // several reads of one file in flight (read-ahead)
  want(FUSE_CAP_PARALLEL_DIROPS);  // concurrent lookups and readdirs in one directory
  // Readdirplus on every chunk, not only the first ("auto"): a walk that stats entries of a
  // large directory would otherwise send a lookup per entry after the first 4 KiB chunk.
  want(FUSE_CAP_READDIRPLUS);
  conn->want &= ~uint64_t(FUSE_CAP_READDIRPLUS_AUTO);
  // Without open/opendir requests the kernel keeps page and readdir caches across opens
  // (its defaults for a filesystem without open are keep_cache and cache_dir).
  // The image never changes: no need to compare mtimes to invalidate cached pages.
  conn->want &= ~uint64_t(FUSE_CAP_AUTO_INVAL_DATA);
  fs.no_open_ = want(FUSE_CAP_NO_OPEN_SUPPORT);
  fs.no_opendir_ = want(FUSE_CAP_NO_OPENDIR_SUPPORT);
  // libfuse ends the session unless init() asks for the max_read the mount was given.
  if (fs.options_.max_read) conn->max_read = *fs.options_.max_read;
}

void Filesystem::op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Filesystem& fs = self(req);
  // No SquashFS name is longer than 256 bytes: the kernel's driver answers so, without a
  // search (and without a negative entry for the kernel to cache).
  if (std::strlen(name) > 256) return (void)fuse_reply_err(req, ENAMETOOLONG);
  try {
    // The parent's whole listing, cached: a burst of lookups in one directory (a build, a
    // backup) costs one parse and a binary search each, instead of a scan of up to a whole
    // 8 KiB metadata block of entries per lookup. Listings over 64 KiB (~3000 entries) are
    // searched in the image through the directory index instead, to bound the cache.
    std::optional<reader::DirEntry> found;
    std::shared_ptr<DirNode> dir = fs.cached_dir(parent);
    if (!dir) {
      reader::Inode inode = fs.inode_of(parent);
      if (!inode.is_dir()) return (void)fuse_reply_err(req, ENOTDIR);
      if (inode.dir_file_size > (64u << 10))
        found = fs.image_->lookup(inode, name);
      else
        dir = fs.dir_node(parent, std::move(inode));
    }
    if (dir) {
      const std::string_view want(name);
      auto it = std::lower_bound(dir->entries.begin(), dir->entries.end(), want,
                                 [](const reader::DirEntry& e, std::string_view n) { return e.name < n; });
      if (it != dir->entries.end() && it->name == want) found = *it;
    }
    fuse_entry_param e;
    if (!found) {
      // Negative entry: the kernel remembers that the name does not exist.
      std::memset(&e, 0, sizeof e);
      e.entry_timeout = kForever;
      fuse_reply_entry(req, &e);
      return;
    }
    if (found->kind == reader::FileKind::regular) {
      // Opening usually follows a lookup: keep the file with its block list for the reads (a
      // long list is read a window at a time, so a stat costs nothing for a file claiming
      // millions of blocks).
      auto f = std::make_shared<FileNode>();
      f->inode = fs.image_->read_inode(found->inode_ref, true);
      fs.fill_entry(f->inode, &e, Known::looked_up);
      fs.cache_file(e.ino, f);
      fuse_reply_entry(req, &e);
      // A lookup of a file is usually an open about to read it: its first block (for most
      // files of a source tree the fragment block holding the whole file) is decompressed on
      // a read-ahead thread while the reply travels and the client comes back with a READ
      // (docs/architecture.md, "Read-ahead at lookup"). A hint after the reply: nothing here
      // may answer the request again.
      try {
        if (fs.options_.readahead_blocks > 0 && fs.image_->would_load_first_block(f->inode))
          fs.prefetcher_.submit([&fs, f] { fs.image_->prefetch_first_block(f->inode); });
      } catch (...) {
      }
      return;
    } else {
      fs.fill_entry(fs.image_->read_inode(found->inode_ref, false), &e, Known::looked_up);
    }
    fuse_reply_entry(req, &e);
  } catch (...) {
    fs.report(req, "lookup", parent);
  }
}

void Filesystem::op_forget(fuse_req_t req, fuse_ino_t, uint64_t) { fuse_reply_none(req); }
void Filesystem::op_forget_multi(fuse_req_t req, size_t, fuse_forget_data*) { fuse_reply_none(req); }

void Filesystem::op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  Filesystem& fs = self(req);
  try {
    struct stat st;
    fs.make_stat(fs.inode_of(ino), &st);
    fuse_reply_attr(req, &st, kForever);
  } catch (...) {
    fs.report(req, "getattr", ino);
  }
}

void Filesystem::op_readlink(fuse_req_t req, fuse_ino_t ino) {
  Filesystem& fs = self(req);
  try {
    reader::Inode inode = fs.inode_of(ino);
    if (!inode.is_symlink()) return (void)fuse_reply_err(req, EINVAL);
    fuse_reply_readlink(req, inode.symlink_target.c_str());
  } catch (...) {
    fs.report(req, "readlink", ino);
  }
}

void Filesystem::op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Filesystem& fs = self(req);
  try {
    if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
    // ENOSYS tells the kernel to stop sending open (and release) for good.
    if (fs.no_open_) return (void)fuse_reply_err(req, ENOSYS);
    auto f = fs.file_node(ino);
    if (f->inode.is_dir()) return (void)fuse_reply_err(req, EISDIR);
    if (!f->inode.is_regular()) return (void)fuse_reply_err(req, EINVAL);
    fi->keep_cache = 1;  // contents never change: keep the page cache across opens
    fuse_reply_open(req, fi);
  } catch (...) {
    fs.report(req, "open", ino);
  }
}

void Filesystem::readahead(const std::shared_ptr<FileNode>& f, uint64_t end) {
  const uint64_t bs = image_->super().block_size;
  const uint64_t nblocks = image_->block_count(f->inode);
  uint64_t from = std::max(end / bs, f->prefetched_upto.load(std::memory_order_relaxed));
  uint64_t to = std::min(end / bs + options_.readahead_blocks, nblocks);
  if (from >= to) return;
  // Only one of several racing readers claims this range.
  uint64_t seen = f->prefetched_upto.load(std::memory_order_relaxed);
  do {
    if (seen >= to) return;
  } while (!f->prefetched_upto.compare_exchange_weak(seen, to, std::memory_order_relaxed));
  from = std::max(from, seen);
  for (uint64_t i = from; i < to; ++i) {
    // The kernel's own read-ahead keeps two requests in flight, so a reply may already have
    // delivered (and released) the block by the time this task runs: then decoding it again
    // would only waste a core and refill the cache.
    if (!prefetcher_.submit([this, f, i, bs] {
          if ((i + 1) * bs > f->delivered_end.load(std::memory_order_relaxed)) image_->prefetch_block(f->inode, i);
        }))
      break;
  }
}

void Filesystem::push_rest_of_block(fuse_ino_t ino, const FileNode& f, uint64_t off, size_t len) {
  const uint64_t bs = image_->super().block_size;
  const uint64_t index = off / bs;
  const uint64_t block_start = index * bs;
  const uint64_t block_end = std::min(block_start + bs, f.inode.size);
  if (off == block_start && off + len >= block_end) return;  // the reply covered it all
  const uint64_t key = push_key(ino, index);
  const size_t slot = size_t(key >> 52) % kPushSlots;
  const uint64_t now = now_ms();
  if (pushed_key_[slot].exchange(key, std::memory_order_relaxed) == key &&
      now - pushed_ms_[slot].load(std::memory_order_relaxed) < 1000)
    return;
  pushed_ms_[slot].store(now, std::memory_order_relaxed);
  // Pages outside [off, off + len): the requested ones are in the page cache already.
  const uint64_t skip_from = off & ~uint64_t(4095), skip_to = std::min((off + len + 4095) & ~uint64_t(4095), block_end);
  reader::Chunk whole = image_->read_chunk(f.inode, block_start, size_t(block_end - block_start));
  if (whole.len != block_end - block_start) return;
  pusher_.submit([this, ino, whole, block_start, skip_from, skip_to, block_end] {
    auto store = [&](uint64_t from, uint64_t to) {
      if (from >= to) return;
      fuse_bufvec bv = FUSE_BUFVEC_INIT(size_t(to - from));
      bv.buf[0].mem = const_cast<uint8_t*>(whole.data + (from - block_start));
      // Fails harmlessly (ENOENT) when the kernel has forgotten the inode meanwhile.
      fuse_lowlevel_notify_store(fuse_session_, ino, off_t(from), &bv, fuse_buf_copy_flags(0));
    };
    store(block_start, skip_from);
    store(skip_to, block_end);
  });
}

// Full blocks that one reply covered from start to end are in the kernel's page cache now
// (keep_cache), so it will not ask for them again while it keeps them: the daemon's copy
// would only push out blocks other readers still need. Sequential readers get whole blocks
// (the kernel's read-ahead asks for 256 KiB at a time), which would otherwise fill the whole
// cache (docs/architecture.md). Partly read blocks stay cached for the rest of them.
// The arithmetic stays below the file size: a crafted inode claims sizes near 2^64, where
// rounding `off` up to a block wrapped to 0 and the loop walked 2^47 blocks.
void Filesystem::release_delivered(const FileNode& f, uint64_t off, uint64_t end) {
  const uint64_t bs = image_->super().block_size, size = f.inode.size;
  for (uint64_t k = off / bs + (off % bs != 0);; ++k) {
    const uint64_t start = k * bs;
    if (start / bs != k || start >= size) return;
    const uint64_t stop = size - start > bs ? start + bs : size;
    if (stop > end) return;
    image_->release_block(f.inode, k);
  }
}

void Filesystem::op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  Filesystem& fs = self(req);
  bool replied = false;
  try {
    std::shared_ptr<FileNode> f = fs.file_node(ino);
    if (!f->inode.is_regular()) return (void)fuse_reply_err(req, f->inode.is_dir() ? EISDIR : EINVAL);
    const uint64_t uoff = uint64_t(off);
    size_t n = 0;
    reader::Chunk c = fs.image_->read_chunk(f->inode, uoff, size);
    const bool from_cache = c.len == size || uoff + c.len >= f->inode.size;
    if (from_cache) {
      // The whole request lies in one cached block: reply straight from the cache.
      n = c.len;
      replied = true;
      fuse_reply_buf(req, reinterpret_cast<const char*>(c.data), c.len);
    } else {
      thread_local std::vector<char> buf;
      if (buf.size() < size) buf.resize(size);
      std::memcpy(buf.data(), c.data, c.len);
      n = c.len + fs.image_->read_file(f->inode, uoff + c.len, buf.data() + c.len, size - c.len);
      replied = true;
      fuse_reply_buf(req, buf.data(), n);
    }
    // Hints only, after the reply: a failure here (a damaged neighbouring block) must not
    // answer the request a second time, which would use a request libfuse has freed.
    try {
      if (from_cache && n > 0 && fs.fuse_session_) fs.push_rest_of_block(ino, *f, uoff, n);
      if (n > 0 && fs.fuse_session_ && f->inode.fragment_index != fmt::kNoFragment &&
          uoff + n > f->inode.size / fs.image_->super().block_size * fs.image_->super().block_size)
        fs.push_mates(ino, f->inode.fragment_index);
      const uint64_t end = uoff + n;
      if (f->next_offset.exchange(end, std::memory_order_relaxed) == uoff && fs.options_.readahead_blocks > 0)
        fs.readahead(f, end);
      uint64_t seen = f->delivered_end.load(std::memory_order_relaxed);
      while (seen < end && !f->delivered_end.compare_exchange_weak(seen, end, std::memory_order_relaxed)) {
      }
      fs.release_delivered(*f, uoff, end);
    } catch (...) {
    }
  } catch (...) {
    if (!replied) fs.report(req, "read", ino);
  }
}

void Filesystem::op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Filesystem& fs = self(req);
  try {
    if (fs.no_opendir_) return (void)fuse_reply_err(req, ENOSYS);
    auto d = fs.dir_node(ino);
    if (!d->inode.is_dir()) return (void)fuse_reply_err(req, ENOTDIR);
    fi->keep_cache = 1;
    fi->cache_readdir = 1;
    fuse_reply_open(req, fi);
  } catch (...) {
    fs.report(req, "opendir", ino);
  }
}

void Filesystem::do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*, bool plus) {
  try {
    std::shared_ptr<DirNode> node = dir_node(ino);
    const DirNode& d = *node;
    if (!d.inode.is_dir()) return (void)fuse_reply_err(req, ENOTDIR);
    thread_local std::vector<char> buf;  // not zero-filled per request
    if (buf.size() < size) buf.resize(size);
    size_t used = 0;
    // Offsets: 0 ".", 1 "..", 2.. the stored entries; each entry carries the next offset.
    const uint64_t total = d.entries.size() + 2;
    for (uint64_t i = uint64_t(off); i < total; ++i) {
      fuse_entry_param e;
      std::memset(&e, 0, sizeof e);
      const char* name;
      if (i < 2) {
        name = i == 0 ? "." : "..";
        uint32_t n = d.inode.inode_number;
        if (i == 1 && d.inode.inode_number != root_number_ && d.inode.parent_inode >= 1 &&
            d.inode.parent_inode <= image_->super().inode_count)
          n = d.inode.parent_inode;
        e.attr.st_ino = n;
        e.attr.st_mode = S_IFDIR;
      } else {
        const reader::DirEntry& de = d.entries[i - 2];
        name = de.name.c_str();
        if (plus) {
          // One damaged inode must not hide its siblings: list its name without attributes
          // (node id 0: the kernel then looks it up, and that lookup gives EIO), as the kernel's
          // squashfs lists every name and fails only the stat of the bad one.
          try {
            fill_entry(image_->read_inode(de.inode_ref, false), &e, Known::listed);
          } catch (const std::exception& err) {
            log_error("readdirplus of \"" + de.name + "\" (inode " + std::to_string(de.inode_number) +
                      "): " + err.what());
            std::memset(&e, 0, sizeof e);
            e.attr.st_ino = de.inode_number;
            e.attr.st_mode = dtype_mode(de.kind);
          }
        } else {
          e.attr.st_ino = de.inode_number;
          e.attr.st_mode = dtype_mode(de.kind);
        }
      }
      size_t room = size - used;
      size_t need = plus ? fuse_add_direntry_plus(req, buf.data() + used, room, name, &e, off_t(i + 1))
                         : fuse_add_direntry(req, buf.data() + used, room, name, &e.attr, off_t(i + 1));
      if (need > room) break;  // the entry did not fit: the kernel asks again from here
      used += need;
    }
    fuse_reply_buf(req, buf.data(), used);
  } catch (...) {
    report(req, plus ? "readdirplus" : "readdir", ino);
  }
}

void Filesystem::op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  self(req).do_readdir(req, ino, size, off, fi, false);
}
void Filesystem::op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  self(req).do_readdir(req, ino, size, off, fi, true);
}

void Filesystem::op_statfs(fuse_req_t req, fuse_ino_t) {
  Filesystem& fs = self(req);
  const reader::Superblock& sb = fs.image_->super();
  struct statvfs st;
  std::memset(&st, 0, sizeof st);
  st.f_bsize = sb.block_size;
  st.f_frsize = sb.block_size;
  st.f_blocks = (sb.bytes_used + sb.block_size - 1) / sb.block_size;
  st.f_files = sb.inode_count;
  st.f_namemax = 256;
  st.f_flag = ST_RDONLY;
  fuse_reply_statfs(req, &st);
}

namespace {
// The namespaces SquashFS stores (its xattr ids 0, 1, 2) and their prefixes.
constexpr std::string_view kStoredPrefixes[] = {"user.", "trusted.", "security."};
}  // namespace

void Filesystem::op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Filesystem& fs = self(req);
  try {
    // As the kernel's squashfs answers: a namespace it has no handler for (system.*, os2.*)
    // is not supported, and a prefix alone ("user.") is no name.
    const std::string_view n(name);
    bool stored_namespace = false;
    for (std::string_view prefix : kStoredPrefixes) {
      if (n == prefix) return (void)fuse_reply_err(req, EINVAL);
      stored_namespace = stored_namespace || n.starts_with(prefix);
    }
    if (!stored_namespace) return (void)fuse_reply_err(req, EOPNOTSUPP);
    reader::Inode inode = fs.inode_of(ino);
    const std::optional<std::string> v = fs.image_->xattr_value(inode, name);
    if (!v) return (void)fuse_reply_err(req, ENODATA);
    if (size == 0) return (void)fuse_reply_xattr(req, v->size());
    if (size < v->size()) return (void)fuse_reply_err(req, ERANGE);
    fuse_reply_buf(req, v->data(), v->size());
  } catch (...) {
    fs.report(req, "getxattr", ino);
  }
}

void Filesystem::op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Filesystem& fs = self(req);
  try {
    reader::Inode inode = fs.inode_of(ino);
    std::string names;
    int may_see_trusted = -1;  // asked once, and only of an inode that has such a name
    for (const std::string& n : fs.image_->xattr_names(inode)) {
      if (n.starts_with("trusted.")) {
        if (may_see_trusted < 0) may_see_trusted = caller_has_sys_admin(req);
        if (!may_see_trusted) continue;
      }
      names += n;
      names += '\0';
    }
    if (size == 0) return (void)fuse_reply_xattr(req, names.size());
    if (size < names.size()) return (void)fuse_reply_err(req, ERANGE);
    fuse_reply_buf(req, names.data(), names.size());
  } catch (...) {
    fs.report(req, "listxattr", ino);
  }
}

// SEEK_DATA / SEEK_HOLE from the block list, so `cp --sparse=auto`, tar and backup tools skip
// the holes of a sparse file instead of reading them as zeros: a block with size word 0 is a
// hole; everything past the list (the tail in a fragment) is data; the end of file is a hole.
void Filesystem::op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info*) {
  Filesystem& fs = self(req);
  try {
    if (whence != SEEK_DATA && whence != SEEK_HOLE) return (void)fuse_reply_err(req, EINVAL);
    std::shared_ptr<FileNode> f = fs.file_node(ino);
    if (!f->inode.is_regular()) return (void)fuse_reply_err(req, EINVAL);
    const uint64_t size = f->inode.size, bs = fs.image_->super().block_size;
    if (off < 0 || uint64_t(off) >= size) return (void)fuse_reply_err(req, ENXIO);
    const uint64_t nblocks = fs.image_->block_count(f->inode);
    for (uint64_t j = uint64_t(off) / bs; j * bs < size; ++j) {
      const bool hole = j < nblocks && fs.image_->block_location(f->inode, j).size_word == 0;
      if (hole == (whence == SEEK_HOLE)) return (void)fuse_reply_lseek(req, off_t(std::max(uint64_t(off), j * bs)));
      if (j >= nblocks) break;  // the fragment tail: data up to the end
    }
    if (whence == SEEK_HOLE) return (void)fuse_reply_lseek(req, off_t(size));
    fuse_reply_err(req, ENXIO);
  } catch (...) {
    fs.report(req, "lseek", ino);
  }
}

const fuse_lowlevel_ops& Filesystem::operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof o);
    o.init = op_init;
    o.lookup = op_lookup;
    o.forget = op_forget;
    o.forget_multi = op_forget_multi;
    o.getattr = op_getattr;
    o.readlink = op_readlink;
    o.open = op_open;
    o.read = op_read;
    o.opendir = op_opendir;
    o.readdir = op_readdir;
    o.readdirplus = op_readdirplus;
    o.statfs = op_statfs;
    o.getxattr = op_getxattr;
    o.listxattr = op_listxattr;
    o.lseek = op_lseek;
    return o;
  }();
  return ops;
}

}  // namespace sqar::fuse
