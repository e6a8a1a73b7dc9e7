#include "ops/extractor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/all_zero.h"
#include "common/error.h"
#include "common/file_type_name.h"
#include "common/owner_id.h"
#include "common/path_pattern.h"
#include "common/unique_fd.h"
#include "format/squashfs.h"
#include "ops/data_key.h"
#include "ops/entry_meta.h"
#include "ops/extract_filter.h"
#include "ops/manifest_check.h"
#include "ops/parallel.h"
#include "ops/safe_dir.h"

namespace sqar::ops {
namespace {

using reader::FileKind;
using reader::Inode;

// What planning and setting metadata need of an inode. The full reader::Inode (block list,
// symlink target, directory fields: ~220 bytes and two vectors) is read again from the
// metadata cache only where content, a symlink target or xattrs are written, so memory per
// entry stays small: a full Inode per entry made extracting 270k entries take 180 MB.
struct InodeSummary {
  reader::InodeRef ref = 0;
  uint64_t size = 0;
  uint32_t mode = 0, uid = 0, gid = 0, mtime = 0;
  uint32_t inode_number = 0, nlink = 1;
  uint32_t rdev_major = 0, rdev_minor = 0;
  uint32_t xattr_index = 0xFFFFFFFF;
  FileKind kind = FileKind::regular;
  // Regular files: where the stored content starts in the image (the first full block, or the
  // tail's fragment block), and whether another kept file's full blocks start there too.
  uint64_t data_pos = 0;
  bool shares_blocks = false;

  explicit InodeSummary(const Inode& i)
      : ref(i.ref),
        size(i.size),
        mode(i.mode),
        uid(extracted_owner_id(i.uid, false)),
        gid(extracted_owner_id(i.gid, true)),
        mtime(i.mtime),
        inode_number(i.inode_number),
        nlink(i.nlink),
        rdev_major(i.rdev_major),
        rdev_minor(i.rdev_minor),
        xattr_index(i.xattr_index),
        kind(i.kind) {}
  bool is_dir() const { return kind == FileKind::directory; }
  bool is_regular() const { return kind == FileKind::regular; }
  bool is_symlink() const { return kind == FileKind::symlink; }
};

struct Item {
  InodeSummary inode;
  // The entry's name in Extractor::names_ (empty for the root). Paths are rebuilt from the
  // parent chain where needed (opening a directory, naming an entry in a message): a path
  // string per entry held ~6 MB of heap on a 135k-entry image.
  size_t name_offset = 0;
  uint32_t name_length = 0;
  int64_t parent = -1;
  uint32_t depth = 0;    // levels below the root, as extracted
  int64_t link_to = -1;  // earlier item with the same inode: becomes a hard link
  int64_t copy_of = -1;  // earlier item with the same stored data: its extracted bytes are copied
  bool has_copies = false;
  int64_t dir_slot = -1;  // directories: index into the directory states
  bool selected = false;
  bool keep = false;
  bool excluded = false;  // by --exclude, or below an excluded directory
  // --strip-components: stripped entries (N or fewer levels deep) are not created; those one
  // level below them are made in the root instead (parent 0; image_parent_ keeps the image's).
  bool stripped = false;
};

// The target filesystem is full (ENOSPC, or EDQUOT: the user's quota): every entry after it
// would fail the same way, so extraction stops there with one message instead of one per entry.
class OutOfSpace : public Error {
 public:
  using Error::Error;
};
bool is_out_of_space(int err) { return err == ENOSPC || err == EDQUOT; }

[[noreturn]] void sys_fail(const std::string& what) {
  const int err = errno;
  if (is_out_of_space(err)) throw OutOfSpace(what + ": " + strerror(err));
  throw Error(what + ": " + strerror(err));
}

void pwrite_all(int fd, const uint8_t* p, size_t n, uint64_t off) {
  while (n) {
    ssize_t w = ::pwrite(fd, p, n, off_t(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) sys_fail("write");
    p += w, n -= size_t(w), off += uint64_t(w);
  }
}

// ExtractOptions::stop was set while a file was being written: the file is removed and
// counted with the entries the stop left out, not named.
class Stopped : public Error {
 public:
  Stopped() : Error("extraction stopped") {}
};

// An Error like `e` (an OutOfSpace or a Stopped stays one) with `suffix` added to its message.
[[noreturn]] void rethrow_with(const std::exception& e, const std::string& suffix) {
  if (dynamic_cast<const OutOfSpace*>(&e)) throw OutOfSpace(e.what() + suffix);
  if (dynamic_cast<const Stopped*>(&e)) throw Stopped();
  throw Error(e.what() + suffix);
}

// An entry is in the way and --overwrite was not given: reported once for all of them.
class AlreadyExists : public Error {
 public:
  using Error::Error;
};

// An entry is in the way and --skip-old-files keeps it: counted, not an error. Hard links to
// its name are made to it, as tar makes them, when it is of the image entry's type (never to
// a directory, nor through a symlink planted where the image has a file).
class KeptExisting : public Error {
 public:
  explicit KeptExisting(bool linkable) : Error("kept as it was"), linkable(linkable) {}
  bool linkable;
};

}  // namespace

class Extractor::Impl {
 public:
  Impl(reader::Image& image, const ExtractOptions& opt) : img_(image), opt_(opt) {}
  ~Impl() {
    if (umask_cleared_) ::umask(umask_);
  }

  size_t run() {
    plan();
    open_root();
    write_entries();
    check_fragment_blocks();
    copy_duplicates();
    if (opt_.progress) opt_.progress->phase = ExtractPhase::links_and_directory_metadata;
    make_links();
    finish_dirs();
    report_existing();
    report_left_out_by_stop();
    return errors_;
  }

 private:
  void plan() {
    ExtractFilter filter(opt_.patterns, opt_.excludes);
    // The walk is depth-first with parents first, so an entry's parent is on the stack of
    // directories leading to it (no lookup by path string). The stack holds ancestors, whose
    // paths are prefixes of each other: the parent is the one whose path is as long as the
    // entry's parent path. Lengths, not paths: a path per level is quadratic in the depth
    // (a 40,000-deep crafted image took 1.6 GB).
    std::vector<int64_t> open_dirs;
    std::vector<size_t> open_lengths;  // the length of open_dirs' paths
    // One allocation up front: growing by doubling copied and page-faulted ~70 MB on ports.
    // (inode_count comes from the image unchecked, hence the cap; reserving only takes
    // address space.)
    items_.reserve(std::min<size_t>(img_.super().inode_count, size_t(1) << 20));
    if (opt_.verify) {
      try {
        check_.emplace(img_);
        if (!check_->has_manifest()) check_.reset();
      } catch (const std::exception& e) {
        fail_image(manifest_trailer_problem(e, img_.path()) + "; content is not checked");
      }
    }
    // The directory item holding `path` (below the root): the open one whose path is as long as
    // path's parent.
    auto parent_of = [&](const std::string& path, std::string_view parent) {
      while (!open_dirs.empty() && open_lengths.back() != parent.size()) {
        open_dirs.pop_back();
        open_lengths.pop_back();
      }
      if (open_dirs.empty()) throw Error(img_.path() + ": " + path + ": parent not walked first");
      return open_dirs.back();
    };
    std::unordered_set<uint32_t> learned;  // regular inodes, for the content check
    reader::WalkOptions walk_options;
    // A damaged inode or listing is named, as an entry that could not be extracted, when the
    // selection takes it; everything else is still extracted (as list, cat and sqarfs still
    // read what is intact). The rest of a damaged listing is not reached: its directory is named.
    walk_options.on_error = [&](const std::string& path, const std::string& error) {
      if (path.empty()) throw Error(img_.path() + ": " + error);
      auto [parent, name] = split_parent(path);
      const Item& parent_item = items_[size_t(parent_of(path, parent))];
      const ExtractFilter::Mark mark =
          filter.entry({parent_item.excluded, parent_item.selected}, path, name, /*is_dir=*/false);
      if (mark.selected) fail(path, error);
    };
    img_.walk(
        [&](const std::string& path, const Inode& inode) {
          if (check_ && inode.is_regular() && learned.insert(inode.inode_number).second) check_->learn(inode);
          Item it{InodeSummary(inode)};
          if (inode.is_regular()) it.inode.data_pos = data_position(inode);
          ExtractFilter::Mark mark = filter.root();
          if (!path.empty()) {
            auto [parent, name] = split_parent(path);
            it.parent = parent_of(path, parent);
            it.name_offset = names_.size();
            it.name_length = uint32_t(name.size());
            names_.append(name);
            const Item& parent_item = items_[size_t(it.parent)];
            mark = filter.entry({parent_item.excluded, parent_item.selected}, path, name, inode.is_dir());
          }
          it.excluded = mark.excluded;
          it.selected = mark.selected;
          if (opt_.strip_components && !path.empty()) {
            const size_t depth = open_dirs.size();  // the root and the directories down to the parent
            it.stripped = depth <= opt_.strip_components;
            if (depth == opt_.strip_components + 1) {
              image_parent_.emplace(int64_t(items_.size()), it.parent);
              it.parent = 0;
            }
          }
          if (it.parent >= 0) it.depth = items_[size_t(it.parent)].depth + 1;
          if (inode.is_dir()) {
            open_dirs.push_back(int64_t(items_.size()));
            open_lengths.push_back(path.size());
          }
          items_.push_back(std::move(it));
          return true;
        },
        walk_options);
    // As tar -x does: what the other PATTERNs match is extracted, and a PATTERN that matches
    // nothing is named (the front end exits 1). When none matches, nothing is written at all.
    const std::vector<std::string> unmatched = filter.unmatched();
    if (filter.has_patterns() && unmatched.size() == opt_.patterns.size()) {
      std::string all;
      for (const std::string& p : unmatched) all += (all.empty() ? "" : ", ") + p;
      throw Error(img_.path() + ": " + all + ": not found in the image");
    }
    for (const std::string& p : unmatched)
      if (opt_.problems) opt_.problems(Severity::error, p, "not found in the image");
    // Keep the selection and the directories leading to it.
    items_[0].keep = true;
    for (auto& it : items_) {
      if (!it.selected || it.stripped) continue;
      it.keep = true;
      for (int64_t p = it.parent; p >= 0 && !items_[size_t(p)].keep; p = items_[size_t(p)].parent)
        items_[size_t(p)].keep = true;
    }
    if (opt_.strip_components) drop_colliding_stripped_names();
    std::unordered_map<uint32_t, int64_t> first_of_inode;
    for (size_t i = 0; i < items_.size(); ++i) {
      Item& it = items_[i];
      if (!it.keep || it.inode.is_dir() || it.inode.nlink < 2) continue;
      auto [pos, fresh] = first_of_inode.emplace(it.inode.inode_number, int64_t(i));
      // Only names of the same inode are linked: a crafted image may give one number to two
      // inodes (a file and a symlink); each is then made as its own inode says, as diff sees it.
      if (!fresh && items_[size_t(pos->second)].inode.ref == it.inode.ref) it.link_to = pos->second;
    }
    mark_shared_blocks();
    mark_duplicate_content();
    if (opt_.progress) {
      uint64_t bytes = 0;
      uint64_t entries = 0;
      for (const Item& it : items_) {
        if (it.keep && it.link_to < 0 && it.inode.is_regular()) bytes += it.inode.size;
        entries += it.keep;
      }
      opt_.progress->bytes_total = bytes;
      opt_.progress->entries_total = entries - 1;  // the root is kept, but not an entry
    }
  }

  // With --strip-components, entries of different directories can land on one name in the
  // root ('a/x' and 'b/x' with 1). The first in walk order is extracted; each later one is
  // named and left out with everything below it, never merged into or written over the first.
  void drop_colliding_stripped_names() {
    std::unordered_map<std::string_view, size_t> first;
    for (size_t i = 1; i < items_.size(); ++i) {
      Item& it = items_[i];
      if (!it.keep) continue;
      if (!items_[size_t(it.parent)].keep) {  // below an entry left out here
        it.keep = false;
        continue;
      }
      if (!image_parent_.count(int64_t(i))) continue;
      auto [pos, fresh] = first.emplace(name_of(it), i);
      if (fresh) continue;
      it.keep = false;
      fail(walked_path(i), "not extracted: --strip-components gives it the name of " + walked_path(pos->second) +
                               ", extracted as " + std::string(name_of(it)));
    }
  }

  // The entry's path in the image; path_of gives it as extracted (stripped).
  std::string walked_path(size_t index) const {
    auto moved = image_parent_.find(int64_t(index));
    if (moved == image_parent_.end()) return path_of(items_[index]);
    return path_of(items_[size_t(moved->second)]) + "/" + std::string(name_of(items_[index]));
  }

  // The image position a file's content starts at: its first full block, or its tail's
  // fragment block. Ordering the work by it makes files that share stored data (duplicates,
  // and tails in one fragment block) meet while that data is still cached.
  uint64_t data_position(const Inode& inode) {
    if (inode.size == 0) return 0;
    const uint64_t bs = img_.super().block_size;
    const bool has_tail = inode.fragment_index != fmt::kNoFragment;
    if ((has_tail ? inode.size / bs : (inode.size + bs - 1) / bs) > 0) return inode.blocks_start;
    try {
      return img_.fragment_location(inode.fragment_index).position;
    } catch (const std::exception&) {
      return 0;  // a damaged fragment table: reading the file reports it
    }
  }

  // Files whose full blocks start where another kept file's do hold the same stored data:
  // theirs is read through the data cache, so the copy written next finds it decoded.
  void mark_shared_blocks() {
    const uint64_t bs = img_.super().block_size;
    std::unordered_map<uint64_t, uint32_t> files_at;
    auto candidate = [&](const Item& it) {
      return it.keep && it.link_to < 0 && it.inode.is_regular() && it.inode.size >= bs && it.inode.data_pos != 0;
    };
    for (const Item& it : items_)
      if (candidate(it)) ++files_at[it.inode.data_pos];
    for (Item& it : items_)
      if (candidate(it)) it.inode.shares_blocks = files_at[it.inode.data_pos] > 1;
  }

  // A file whose stored data is an earlier kept file's (a duplicate the image stores once) and
  // holds a full block is not decoded again: once every file is written, the first one's
  // extracted bytes are copied in the kernel (copy_duplicates). On XFS and btrfs the copy
  // shares extents, so the extracted tree keeps the image's dedup; elsewhere it is a page-cache
  // copy, several times faster than decoding (xz decodes ~100 MB/s a core).
  void mark_duplicate_content() {
    std::map<DataKey, size_t> first_of;
    for (size_t i = 0; i < items_.size(); ++i) {
      Item& it = items_[i];
      if (!it.inode.shares_blocks) continue;  // kept, regular, no hard link, a full block shared
      try {
        const DataKey key(img_, img_.read_inode(it.inode.ref, true));
        const auto [pos, fresh] = first_of.try_emplace(key, i);
        if (fresh) continue;
        it.copy_of = int64_t(pos->second);
        items_[pos->second].has_copies = true;
      } catch (const std::exception&) {
        // A damaged block list: the file is written (and its damage reported) on its own.
      }
    }
  }

  void open_root() {
    std::error_code ec;
    if (!std::filesystem::is_directory(opt_.dest, ec)) {
      std::filesystem::create_directories(opt_.dest, ec);
      if (ec) throw Error(opt_.dest + ": cannot create the target directory: " + ec.message());
      created_root_ = true;
    }
    root_fd_.reset(::open(opt_.dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd_) throw_errno(opt_.dest, errno);
    // Every entry gets its mode from the image, so the umask would only force a chmod: it
    // is 0 until we are done (restored by the destructor; umask() is process-wide).
    umask_ = ::umask(0);
    umask_cleared_ = true;
    euid_ = ::geteuid();
    egid_ = ::getegid();
    struct stat st;
    // New directories inherit a set-gid root's group (and bit): then files need a chown.
    root_setgid_ = ::fstat(root_fd_.get(), &st) != 0 || (st.st_mode & S_ISGID);
    size_t dirs = 0;
    for (Item& it : items_)
      if (it.inode.is_dir()) it.dir_slot = int64_t(dirs++);
    dir_state_ = std::make_unique<DirState[]>(dirs);
    DirState& root = dir_state_[size_t(items_[0].dir_slot)];
    root.created = created_root_;
    root.setgid = root_setgid_;
    root.state = kReady;
  }

  std::string_view name_of(const Item& it) const { return {names_.data() + it.name_offset, it.name_length}; }

  // The descriptor of directory item `index` through a thread's DirStack, keyed by item: the
  // paths of a deep tree's directories are as long as its depth.
  int open_dir(DirStack& ds, int64_t index) const {
    return ds.open_node(uint64_t(index), items_[size_t(index)].depth, [this](uint64_t n) {
      const Item& it = items_[size_t(n)];
      return std::pair{uint64_t(it.parent), name_of(it)};
    });
  }

  // "a/b/c" relative to the root ("" for the root), from the names up the parent chain.
  std::string path_of(const Item& it) const {
    std::vector<std::string_view> names;
    for (const Item* p = &it; p->parent >= 0; p = &items_[size_t(p->parent)]) names.push_back(name_of(*p));
    std::string path;
    for (auto n = names.rbegin(); n != names.rend(); ++n) {
      if (!path.empty()) path += '/';
      path += *n;
    }
    return path;
  }
  std::string shown_path(const Item& it) const {
    std::string p = path_of(it);
    return p.empty() ? "." : p;
  }

  // Records a failure of one entry and carries on with the others.
  void fail(const std::string& path, const std::string& why) {
    const std::string msg = without_path_prefix(why, img_.path());
    std::lock_guard lock(mu_);
    ++errors_;
    if (opt_.problems) opt_.problems(Severity::error, path.empty() ? "." : path, msg);
  }

  // A problem of the image as a whole (its manifest trailer), not of an entry: no path, and
  // not counted among the entries that could not be extracted (the front end sees the error).
  void fail_image(const std::string& why) {
    std::lock_guard lock(mu_);
    if (opt_.problems) opt_.problems(Severity::error, "", why);
  }

  void fail(const std::string& path, const std::exception& e) {
    if (dynamic_cast<const KeptExisting*>(&e)) return keep_existing();
    if (dynamic_cast<const AlreadyExists*>(&e)) {
      std::lock_guard lock(mu_);
      ++errors_;
      if (existing_++ == 0) first_existing_ = path;
      return;
    }
    if (dynamic_cast<const Stopped*>(&e)) {
      not_begun_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (dynamic_cast<const OutOfSpace*>(&e)) {
      // The first is named; the others (entries being written beside it) only counted.
      out_of_space_.store(true);
      if (no_space_named_.exchange(true)) {
        not_begun_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
    fail(path, std::string(e.what()));
  }

  bool stop_requested() const { return opt_.stop && opt_.stop->load(std::memory_order_relaxed); }

  // Whether extraction is stopping (the target is full, or the caller asked): the entries not
  // yet begun are then left out, and counted.
  bool stopping() const { return out_of_space_.load(std::memory_order_relaxed) || stop_requested(); }
  bool skip_when_stopping() {
    if (!stopping()) return false;
    not_begun_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // One line for every entry a stop left out.
  void report_left_out_by_stop() {
    const size_t n = not_begun_.load();
    if (!n) return;
    std::lock_guard lock(mu_);
    errors_ += n;
    if (!opt_.problems) return;
    // A full target named the entry that did not fit; these are the ones after it.
    const bool full = out_of_space_.load();
    const std::string count =
        std::to_string(n) + (full ? " more" : "") + (n == 1 ? " entry was" : " entries were") + " not extracted";
    opt_.problems(Severity::error, "",
                  full ? "the target filesystem is full: extraction stopped, and " + count
                       : "extraction stopped: " + count + "; the directories made have their modes and times");
  }

  // Extracting over an earlier extraction without --overwrite: one line, not one per entry.
  void report_existing() {
    if (!existing_ || !opt_.problems) return;
    const std::string more = existing_ == 1   ? ""
                             : existing_ == 2 ? ", and so does 1 more entry"
                                              : ", and so do " + std::to_string(existing_ - 1) + " more entries";
    const std::string them = existing_ == 1 ? "it" : "them";
    opt_.problems(Severity::error, first_existing_,
                  "already exists" + more + " (use --overwrite to replace " + them + ", or --skip-old-files to keep " +
                      them + ")");
  }

  void warn(const std::string& path, const std::string& why) {
    std::lock_guard lock(mu_);
    if (opt_.problems) opt_.problems(Severity::warning, path, why);
  }

  void keep_existing() {
    if (opt_.progress) opt_.progress->entries_kept.fetch_add(1, std::memory_order_relaxed);
  }

  // Removes an existing non-directory so it can be replaced (--overwrite); never a directory.
  // Without --overwrite the entry in the way is an error, or kept (--skip-old-files).
  void replace_existing(int dfd, const std::string& name, const Item& it) {
    struct stat st;
    if (opt_.skip_existing) {
      const bool exists = ::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      const bool same_type = exists && (st.st_mode & S_IFMT) == (it.inode.mode & S_IFMT);
      // Kept as asked, but not silently when it cannot be the image's entry: one cut short by
      // a second signal or a kill, one the user changed, or one of another type.
      if (same_type && it.inode.is_regular() && uint64_t(st.st_size) != it.inode.size)
        warn(path_of(it), "kept, but it has " + std::to_string(st.st_size) + " bytes where the image has " +
                              std::to_string(it.inode.size) + " (--overwrite replaces it)");
      if (exists && !same_type)
        warn(path_of(it), std::string("kept, but it is a ") + file_type_name(st.st_mode) + " where the image has a " +
                              file_type_name(it.inode.mode) + " (--overwrite replaces it)");
      throw KeptExisting(same_type);
    }
    if (!opt_.overwrite) throw AlreadyExists("already exists");
    if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
      throw Error("already exists as a directory; not replacing it");
    if (::unlinkat(dfd, name.c_str(), 0) != 0) sys_fail("cannot remove the existing " + path_of(it));
  }

  // Per kept directory: whether it exists yet (the batches filling it wait for that), whether
  // we made it (then it is ours and may already have its final mode), and whether new entries
  // in it take its group (set-gid) instead of ours.
  enum : int { kPending = 0, kReady = 1, kFailed = 2 };
  struct DirState {
    std::atomic<int> state{kPending};
    bool created = false;
    bool setgid = true;
    // Batches of its entries not done yet: the last one to finish sets the directory's
    // metadata through the descriptor it already holds, unless that must wait for the end.
    std::atomic<uint32_t> batches_left{0};
    bool has_batches = false;
    bool finish_at_end = false;
  };

  // Directories are made 0700 and get their final mode once their content is written (as
  // tar and unsquashfs do): a directory writable by others from the start would let any local
  // user rename entries in it while we set their metadata.
  static constexpr mode_t kDirCreateMode = 0700;
  // Directories that others may write into keep 0700 until everything is extracted, so none
  // of their descendants can be renamed or replaced while we still work below them.
  static bool others_may_write(const InodeSummary& ino) { return (ino.mode & 0022) != 0; }

  // Creates directory `it` in `dfd` (its parent, state `parent`) and publishes its state.
  void make_dir(int dfd, const Item& it, const DirState& parent) {
    DirState& ds = dir_state_[size_t(it.dir_slot)];
    try {
      std::string name(name_of(it));
      const mode_t mode = kDirCreateMode;
      bool made = ::mkdirat(dfd, name.c_str(), mode) == 0;
      struct stat st;
      if (made) {
        ds.created = true;
        ds.setgid = parent.setgid;
      } else if (errno != EEXIST) {
        sys_fail("mkdir");
      } else if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        ds.setgid = st.st_mode & S_ISGID;  // reused as it is
        // Without root a directory we cannot write into (one an interrupted extraction already
        // gave its read-only mode) would refuse its entries: it is ours for now, as the ones we
        // make are, and gets the image's mode with the others once its content is written.
        if (euid_ != 0 && st.st_uid == euid_ && (st.st_mode & 0700) != 0700)
          PinnedEntry(dfd, name, S_IFDIR).chmod((st.st_mode & 07777) | 0700);
      } else {
        // Named on its own, not counted with the files in the way: --skip-old-files cannot
        // keep it, since nothing the image holds below it could be extracted.
        if (!opt_.overwrite)
          throw Error(
              "already exists and is not a directory: what the image has below it is left out (use "
              "--overwrite to replace it)");
        if (::unlinkat(dfd, name.c_str(), 0) != 0 || ::mkdirat(dfd, name.c_str(), mode) != 0)
          sys_fail("cannot replace");
        ds.created = true;
        ds.setgid = parent.setgid;
      }
      ds.state.store(kReady, std::memory_order_release);
    } catch (const std::exception& e) {
      // Set before the batches waiting for this directory see it failed, so that they count
      // what they leave out as left out for want of space.
      if (dynamic_cast<const OutOfSpace*>(&e)) out_of_space_.store(true);
      ds.state.store(kFailed, std::memory_order_release);
      ds.state.notify_all();
      throw;
    }
    ds.state.notify_all();
  }

  // A file large enough to be split into ranges written by several threads at once (the
  // log set is a few 150 MB files: with one thread per file, the last file ran alone).
  struct SharedFile {
    std::mutex mu;
    UniqueFd fd;  // closed, with its error checked, by the last range to finish
    bool opened = false;
    // The inode, read once by the range that opens the file and shared by all its ranges (and
    // the block list's checkpoints, reader/block_index.h): read per range, a 64 GiB file's
    // block list was parsed 8192 times.
    std::optional<Inode> inode;
    std::atomic<bool> failed{false};
    std::atomic<size_t> ranges_left{0};
  };
  struct Task {
    size_t item;
    uint64_t from = 0, to = 0;  // byte range (big files only)
    SharedFile* shared = nullptr;
  };
  struct Batch {
    size_t begin, end;  // into tasks
    size_t dir;         // item of the directory all its entries are in
  };

  // Directories and entries are created in one parallel pass. A batch holds entries of one
  // directory: all its subdirectories (mkdir), or up to kMaxBatch other entries, or one range
  // of a big file. Every batch comes after the one that makes its directory, and a batch
  // waits until its directory exists, which an earlier batch (already running) makes, so the
  // wait always ends. Before, the 36k directories of the ports set were made by one thread
  // before any file was written.
  void write_entries() {
    written_.assign(items_.size(), 0);
    // 64 blocks (8 MiB at 128 KiB): big enough that a range costs far more than the shared
    // file's mutex, small enough that two threads share a 45 MB file evenly.
    const uint64_t range = uint64_t(img_.super().block_size) * 64;
    // At most 1024 ranges a file (block-aligned): the task list must not follow the size a
    // sparse file claims.
    const uint64_t bs = img_.super().block_size;
    auto range_of = [&](const Item& it) { return std::max(range, ((it.inode.size + 1023) / 1024 + bs - 1) / bs * bs); };
    // Kept children of each directory, grouped by parent (counting sort; groups follow the
    // walk order of their directories, members keep walk order).
    std::vector<size_t> first(items_.size() + 1, 0);
    for (const Item& it : items_)
      if (it.keep && it.parent >= 0) ++first[size_t(it.parent) + 1];
    for (size_t i = 1; i < first.size(); ++i) first[i] += first[i - 1];
    std::vector<size_t> kids(first.back());
    {
      std::vector<size_t> fill(first.begin(), first.end() - 1);
      for (int pass = 0; pass < 2; ++pass)  // subdirectories first
        for (size_t i = 0; i < items_.size(); ++i)
          if (items_[i].keep && items_[i].parent >= 0 && items_[i].inode.is_dir() == (pass == 0))
            kids[fill[size_t(items_[i].parent)]++] = i;
    }
    // A big regular file is split into ranges that threads write in parallel.
    auto split = [&](const Item& it) { return it.inode.is_regular() && it.inode.size > range && opt_.jobs > 1; };
    // Sized up front: growing by doubling held the old and the new array at once (12.6 of
    // the 47 MB heap peak on a 135k-entry image).
    size_t task_count = 0;
    for (const Item& it : items_)
      if (it.keep && it.parent >= 0 && it.link_to < 0 && it.copy_of < 0)
        task_count += split(it) ? size_t((it.inode.size + range_of(it) - 1) / range_of(it)) : 1;
    std::vector<Task> tasks;
    tasks.reserve(task_count);
    std::vector<Batch> batches;
    std::vector<std::unique_ptr<SharedFile>> shared;
    // Two passes over the directories. First their subdirectories, level by level (walk order
    // within a level): a batch's directory was made a whole level earlier, so threads rarely
    // wait for each other (depth-first order had the other thread wait for almost every new
    // directory). Then every other entry, in batches of one directory taken in walk order and
    // then put in the order of the stored data they read (order_by_stored_data): for an image
    // written in walk order that is the order of its fragment blocks, so each is decompressed
    // once and a small data cache holds what the threads are working in (entries level by
    // level swept all fragments once per level, so all of them stayed cached: 25 MB on the
    // ports image).
    std::vector<uint32_t> depth(items_.size(), 0);
    std::vector<size_t> walk_dirs;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (!items_[i].keep || !items_[i].inode.is_dir()) continue;
      if (i) depth[i] = depth[size_t(items_[i].parent)] + 1;
      walk_dirs.push_back(i);
    }
    std::vector<size_t> level_dirs = walk_dirs;
    std::stable_sort(level_dirs.begin(), level_dirs.end(), [&](size_t a, size_t b) { return depth[a] < depth[b]; });
    for (size_t d : level_dirs) {
      const size_t start = tasks.size();
      for (size_t k = first[d]; k < first[d + 1] && items_[kids[k]].inode.is_dir(); ++k) tasks.push_back({kids[k]});
      if (tasks.size() > start) batches.push_back({start, tasks.size(), d});
    }
    const size_t first_entry_batch = batches.size();
    for (size_t d : walk_dirs) {
      size_t start = tasks.size();
      auto close_batch = [&] {
        if (tasks.size() > start) batches.push_back({start, tasks.size(), d});
        start = tasks.size();
      };
      for (size_t k = first[d]; k < first[d + 1]; ++k) {
        size_t i = kids[k];
        const Item& it = items_[i];
        if (it.link_to >= 0 || it.copy_of >= 0 || it.inode.is_dir()) continue;
        if (!split(it)) {
          if (tasks.size() - start >= kMaxBatch) close_batch();
          tasks.push_back({i});
          continue;
        }
        close_batch();
        auto sf = std::make_unique<SharedFile>();
        const uint64_t step = range_of(it);
        sf->ranges_left = size_t((it.inode.size + step - 1) / step);
        for (uint64_t from = 0; from < it.inode.size; from += step) {
          tasks.push_back({i, from, std::min(from + step, it.inode.size), sf.get()});
          close_batch();
        }
        shared.push_back(std::move(sf));
      }
      close_batch();
    }
    const std::vector<Claim> claims = order_by_stored_data(batches, first_entry_batch, tasks);
    for (const Batch& batch : batches) {
      DirState& st = dir_state_[size_t(items_[batch.dir].dir_slot)];
      ++st.batches_left;
      st.has_batches = true;
    }
    // Directories whose metadata waits for the end: the root (only when we made it), those
    // that get hard links later (a link bumps the mtime), those others may write into (see
    // others_may_write) and, without root, those whose mode would keep us from opening them
    // on the way to their subdirectories.
    dir_state_[size_t(items_[0].dir_slot)].finish_at_end = true;
    for (const Item& it : items_) {
      if (!it.keep) continue;
      if (it.link_to >= 0 || it.copy_of >= 0)
        dir_state_[size_t(items_[size_t(it.parent)].dir_slot)].finish_at_end = true;
      if (it.inode.is_dir() && (needs_late_finish(it.inode) || others_may_write(it.inode)))
        dir_state_[size_t(it.dir_slot)].finish_at_end = true;
    }
    if (opt_.progress) opt_.progress->phase = ExtractPhase::writing_entries;
    unsigned jobs = std::max(1u, opt_.jobs);
    std::vector<std::unique_ptr<DirStack>> stacks;
    for (unsigned w = 0; w < jobs; ++w) stacks.push_back(std::make_unique<DirStack>(root_fd_.get()));
    auto run_batch = [&](size_t b, unsigned w) {
      const Batch& batch = batches[b];
      const Item& dir = items_[batch.dir];
      DirState& dstate = dir_state_[size_t(dir.dir_slot)];
      dstate.state.wait(kPending, std::memory_order_acquire);
      // A directory that failed was reported; what it would have held is left out, and its
      // subdirectories fail too (quietly) so the batches waiting for them go on.
      auto skip = [&] {
        size_t entries = 0;
        for (size_t i = batch.begin; i < batch.end; ++i) entries += !tasks[i].shared || tasks[i].from == 0;
        (stopping() ? not_begun_ : left_out_).fetch_add(entries, std::memory_order_relaxed);
        for (size_t i = batch.begin; i < batch.end; ++i) {
          const Item& it = items_[tasks[i].item];
          if (!it.inode.is_dir()) continue;
          dir_state_[size_t(it.dir_slot)].state.store(kFailed, std::memory_order_release);
          dir_state_[size_t(it.dir_slot)].state.notify_all();
        }
      };
      if (dstate.state.load(std::memory_order_acquire) != kReady) return skip();
      int dfd;
      try {
        dfd = open_dir(*stacks[w], int64_t(batch.dir));
      } catch (const std::exception& e) {
        fail(path_of(dir), e.what());
        return skip();
      }
      for (size_t i = batch.begin; i < batch.end; ++i) {
        const Task& t = tasks[i];
        const Item& it = items_[t.item];
        // (The ranges of a big file run on: each fails at once, and the last removes the file.)
        if (!t.shared && skip_when_stopping()) {
          if (it.inode.is_dir()) {  // what waits for it is left out as well, quietly
            dir_state_[size_t(it.dir_slot)].state.store(kFailed, std::memory_order_release);
            dir_state_[size_t(it.dir_slot)].state.notify_all();
          }
          continue;
        }
        try {
          if (t.shared)
            write_range(dfd, it, t, dstate);
          else if (it.inode.is_dir())
            make_dir(dfd, it, dstate);
          else {
            write_entry(dfd, it, dstate);
            written_[t.item] = 1;
          }
        } catch (const KeptExisting& kept) {
          written_[t.item] = kept.linkable;
          keep_existing();
        } catch (const std::exception& e) {
          fail(path_of(it), e);
        }
        if (!t.shared) entry_done();  // a range of a big file counts once its last range is written
      }
      // Everything this directory holds exists now (its subdirectories' contents do not
      // touch its mtime): finish it here, saving an open and a close per directory later.
      if (dstate.batches_left.fetch_sub(1, std::memory_order_acq_rel) == 1 && !dstate.finish_at_end)
        finish_dir(dfd, dir);
    };
    parallel_for(claims.size(), jobs, [&](size_t c, unsigned w) {
      for (size_t b = claims[c].begin; b < claims[c].end; ++b) run_batch(b, w);
    });
    // Counted as not extracted, but named once: below a directory that failed there may be
    // thousands.
    if (const size_t n = left_out_.load(); n) {
      std::lock_guard lock(mu_);
      errors_ += n;
      if (opt_.problems)
        opt_.problems(Severity::error, "",
                      std::to_string(n) + (n == 1 ? " entry was" : " entries were") +
                          " left out below directories that could not be made or opened");
    }
  }

  // Batches a thread takes at once (a range of the batch list).
  struct Claim {
    size_t begin, end;
  };

  // Entry batches in the order of the stored data they read (the smallest position among their
  // files; batches without content keep their place after the one before them). For an image
  // written in walk order this is walk order. Where files share data (mksquashfs and sqar store
  // a duplicate once, and the copies of a tree lie far apart in walk order), their batches meet,
  // and the data is decoded once for all of them: three copies of /usr/include decoded each
  // fragment block three times in walk order.
  //
  // Batches starting at the same position (the same directory in each copy) form one claim, so
  // one thread writes them one after the other from the cache; given to two threads at once,
  // one waited for the other to decode the block both needed. Ranges of a big file stay one
  // claim each, to be written in parallel. Every claim still comes after those making
  // directories, so a batch's wait for its directory always ends.
  std::vector<Claim> order_by_stored_data(std::vector<Batch>& batches, size_t from,
                                          const std::vector<Task>& tasks) const {
    std::vector<std::pair<uint64_t, size_t>> keyed;  // (position, walk-order index)
    keyed.reserve(batches.size() - from);
    uint64_t key = 0;
    for (size_t b = from; b < batches.size(); ++b) {
      uint64_t least = UINT64_MAX;
      for (size_t t = batches[b].begin; t < batches[b].end; ++t) {
        const InodeSummary& ino = items_[tasks[t].item].inode;
        if (ino.is_regular() && ino.data_pos != 0) least = std::min(least, ino.data_pos);
      }
      if (least != UINT64_MAX) key = least;
      keyed.push_back({key, b});
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<Batch> ordered(batches.begin(), batches.begin() + ptrdiff_t(from));
    ordered.reserve(batches.size());
    std::vector<Claim> claims;
    for (size_t b = 0; b < from; ++b) claims.push_back({b, b + 1});
    auto is_range = [&](size_t b) { return tasks[batches[b].begin].shared != nullptr; };
    for (size_t k = 0; k < keyed.size(); ++k) {
      const size_t b = keyed[k].second;
      const bool joins =
          k > 0 && keyed[k - 1].first == keyed[k].first && !is_range(b) && !is_range(keyed[k - 1].second);
      if (joins)
        ++claims.back().end;
      else
        claims.push_back({ordered.size(), ordered.size() + 1});
      ordered.push_back(batches[b]);
    }
    batches = std::move(ordered);
    return claims;
  }

  // Without root, a directory we could not open (and so not reach its subdirectories
  // through) once its final mode is set gets that mode at the very end.
  bool needs_late_finish(const InodeSummary& ino) const { return euid_ != 0 && (ino.mode & 0500) != 0500; }
  static constexpr size_t kMaxBatch = 256;  // keeps one huge directory spread over threads
  // A file whose content could not all be written (a damaged block, a full disk) is removed,
  // so nothing incomplete looks extracted; the error says so.
  static constexpr const char* kPartRemoved = "; the partly written file was removed";

  // Creates a regular file (never following a symlink at its name); --overwrite replaces
  // an existing non-directory.
  UniqueFd create_file(int dfd, const Item& it) {
    std::string name(name_of(it));
    int fd;
    while ((fd = ::openat(dfd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          create_mode(it.inode))) < 0) {
      if (errno != EEXIST) sys_fail("create");
      replace_existing(dfd, name, it);
    }
    return UniqueFd(fd);
  }

  // One range of a big file. The first range to run creates the file; the last to finish
  // sets its size and metadata and closes it. A failure is reported once, by the range
  // that saw it; the others skip their work.
  void write_range(int dfd, const Item& it, const Task& t, const DirState& dir) {
    SharedFile& sf = *t.shared;
    int fd;
    {
      std::lock_guard lock(sf.mu);
      if (!sf.opened) {
        sf.opened = true;
        try {
          sf.inode.emplace(img_.read_inode(it.inode.ref));
          sf.fd = create_file(dfd, it);
          remember_identity(sf.fd.get(), it);
        } catch (...) {
          sf.failed = true;
          --sf.ranges_left;
          throw;
        }
      }
      fd = sf.fd.get();
    }
    bool report = false, no_space = false, stopped = false;
    std::string why;
    if (!sf.failed) {
      try {
        write_content(fd, *sf.inode, t.from, t.to, /*shared=*/false);
      } catch (const std::exception& e) {
        report = !sf.failed.exchange(true);
        no_space = dynamic_cast<const OutOfSpace*>(&e) != nullptr;
        stopped = dynamic_cast<const Stopped*>(&e) != nullptr;
        why = std::string(e.what()) + kPartRemoved;  // by the last range, below
      }
    }
    const bool last = --sf.ranges_left == 0;
    if (last) entry_done();
    if (last && fd >= 0) {
      try {
        if (!sf.failed && ::ftruncate(fd, off_t(it.inode.size)) != 0) {
          sf.failed = report = true;
          no_space = is_out_of_space(errno);
          why = std::string("truncate: ") + strerror(errno) + kPartRemoved;
        }
        if (!sf.failed) {
          // Ranges were written in any order: the content is hashed from the file.
          if (check_) check_content(dfd, fd, it, *sf.inode, nullptr);
          set_meta_fd(fd, it, owned_when_new(it.inode, dir), mode_at_create(it.inode));
        }
      } catch (const std::exception& e) {
        report = true;
        why = e.what();
      }
      sf.inode.reset();  // the other ranges are done with it
      if (sf.fd.close_checked() != 0 && !report && !sf.failed) {
        report = true;
        why = std::string("close: ") + strerror(errno);
      }
      if (sf.failed) ::unlinkat(dfd, std::string(name_of(it)).c_str(), 0);
      if (!report && !sf.failed) written_[size_t(&it - items_.data())] = 1;
    }
    if (report && stopped) throw Stopped();
    if (report && no_space) throw OutOfSpace(why);
    if (report) throw Error(why);
  }

  void write_entry(int dfd, const Item& it, const DirState& dir) {
    const InodeSummary& ino = it.inode;
    if (ino.is_regular()) {
      UniqueFd fd = create_file(dfd, it);
      remember_identity(fd.get(), it);
      if (ino.size > 0) {
        std::optional<Inode> full;
        std::optional<ContentHasher> hasher;
        if (check_) hasher.emplace(check_->scheme());
        try {
          full.emplace(img_.read_inode(ino.ref));
          if (write_content(fd.get(), *full, 0, ino.size, ino.shares_blocks, hasher ? &*hasher : nullptr) < ino.size &&
              ::ftruncate(fd.get(), off_t(ino.size)) != 0)
            sys_fail("truncate");
        } catch (const std::exception& e) {
          ::unlinkat(dfd, std::string(name_of(it)).c_str(), 0);
          rethrow_with(e, kPartRemoved);
        }
        if (check_) check_content(dfd, fd.get(), it, *full, &*hasher);
      }
      set_meta_fd(fd.get(), it, owned_when_new(ino, dir), mode_at_create(ino));
      if (fd.close_checked() != 0) sys_fail("close");
      return;
    }
    std::string name(name_of(it));
    auto create = [&]() -> int {
      switch (ino.kind) {
        case FileKind::symlink:
          return ::symlinkat(img_.read_symlink(img_.read_inode(ino.ref)).c_str(), dfd, name.c_str());
        case FileKind::block_device:
          return ::mknodat(dfd, name.c_str(), S_IFBLK | 0600, makedev(ino.rdev_major, ino.rdev_minor));
        case FileKind::char_device:
          return ::mknodat(dfd, name.c_str(), S_IFCHR | 0600, makedev(ino.rdev_major, ino.rdev_minor));
        case FileKind::fifo: return ::mknodat(dfd, name.c_str(), S_IFIFO | 0600, 0);
        case FileKind::socket: return ::mknodat(dfd, name.c_str(), S_IFSOCK | 0600, 0);
        default: errno = EINVAL; return -1;
      }
    };
    while (create() != 0) {
      if (errno == EPERM && (ino.kind == FileKind::block_device || ino.kind == FileKind::char_device))
        throw Error("cannot create a device node: " + std::string(strerror(EPERM)) + " (needs root)");
      if (errno != EEXIST) sys_fail(ino.is_symlink() ? "symlink" : "mknod");
      replace_existing(dfd, name, it);
    }
    set_meta_at(dfd, name, it, owned_when_new(ino, dir));
  }

  // Bytes [from, to) of the file (from is block-aligned). Blocks are decompressed straight
  // into a per-thread buffer: a block no other file shares is read once, so the shared cache
  // would only add allocations (page faults were 6% of extracting the log set) and evictions.
  // Returns where the last byte written ends (a shorter file needs the final ftruncate).
  uint64_t write_content(int fd, const Inode& ino, uint64_t from, uint64_t to, bool shared,
                         ContentHasher* hasher = nullptr) {
    const uint64_t bs = img_.super().block_size;
    thread_local std::vector<uint8_t> buf;
    if (buf.size() < bs) buf.resize(bs);
    uint64_t written_end = 0;
    const uint64_t nblocks = img_.block_count(ino);
    for (uint64_t index = from / bs, off = index * bs; off < to; ++index, off += bs) {
      // Looked at before every block: a big file would keep a stop waiting.
      if (stop_requested()) throw Stopped();
      if (index < nblocks && fmt::is_hole_word(img_.block_location(ino, index).size_word)) {  // a hole already
        const uint64_t n = std::min(bs, ino.size - off);
        if (hasher) hasher->update_zeros(n);  // the content check takes the hole's zeros
        if (opt_.progress) opt_.progress->bytes_done.fetch_add(n, std::memory_order_relaxed);
        continue;
      }
      // Tails (fragment blocks are cached anyway) and blocks another file shares are written
      // from the data cache, where the next file sharing them finds them, without a copy; the
      // rest are decoded straight into the buffer.
      reader::Chunk chunk;
      const uint8_t* data = buf.data();
      size_t n;
      if (shared || index >= nblocks) {
        chunk = img_.read_chunk(ino, off, size_t(bs));
        data = chunk.data;
        n = chunk.len;
      } else {
        n = img_.read_block(ino, index, buf.data());
      }
      if (n == 0) throw Error("content ends before the file size");
      if (hasher) hasher->update(data, n);
      if (opt_.progress) opt_.progress->bytes_done.fetch_add(n, std::memory_order_relaxed);
      // All-zero runs (sparse blocks included) become holes: the final ftruncate sets the size.
      if (!all_zero(data, n)) {
        pwrite_all(fd, data, n, off);
        written_end = off + n;
      }
    }
    return written_end;
  }

  void entry_done() {
    if (opt_.progress) opt_.progress->entries_done.fetch_add(1, std::memory_order_relaxed);
  }

  bool has_xattrs(const Item& it) const { return opt_.xattrs && it.inode.xattr_index != 0xFFFFFFFF; }

  void set_xattrs(const Item& it, const std::function<int(const char*, const std::string&)>& set) {
    if (!has_xattrs(it)) return;
    for (const auto& [key, value] : img_.xattrs(img_.read_inode(it.inode.ref, /*with_blocks=*/false)))
      if (set(key.c_str(), value) != 0) warn(shown_path(it), "cannot set xattr " + key + ": " + strerror(errno));
  }

  // A new entry already belongs to us, and to our group unless its directory is set-gid:
  // then the chown can be skipped (root extracting root's files never needs one).
  bool owned_when_new(const InodeSummary& ino, const DirState& dir) const {
    return !dir.setgid && ino.uid == euid_ && ino.gid == egid_;
  }

  // Regular files are created with their final permission bits (the umask is 0 while we
  // run) unless they have set-id bits (a chown or a write could clear them): that saves an
  // fchmod per file (per-file syscalls dominate extracting many small files). Otherwise
  // 0600 until the final mode is set.
  static bool mode_at_create(const InodeSummary& ino) { return !(ino.mode & 07000); }
  static mode_t create_mode(const InodeSummary& ino) { return mode_at_create(ino) ? mode_t(ino.mode & 0777) : 0600; }

  // The image's permission bits without a set-uid (set-gid) bit whose file is not owned by
  // the image's user (group): without the owner restored (--no-same-owner, or not root) a
  // set-uid program of uid 1234 would become one of ours, root's when root extracts.
  // bsdtar and unsquashfs drop the bits the same way. A directory keeps its set-gid bit, as
  // bsdtar keeps it: there it only passes the directory's group on to new entries.
  static mode_t mode_for_owner(const InodeSummary& ino, uid_t uid, gid_t gid) {
    mode_t mode = ino.mode & 07777;
    if (uid != ino.uid) mode &= ~mode_t(S_ISUID);
    if (gid != ino.gid) mode &= ~mode_t(S_ISGID);
    return mode;
  }

  // Owner first (chown clears set-id bits), then xattrs, mode, and the mtime last.
  void set_meta_fd(int fd, const Item& it, bool owned, bool mode_set) {
    const InodeSummary& ino = it.inode;
    if (opt_.same_owner && !owned && ::fchown(fd, ino.uid, ino.gid) != 0) sys_fail("chown");
    if (has_xattrs(it))
      set_xattrs(it, [&](const char* k, const std::string& v) { return ::fsetxattr(fd, k, v.data(), v.size(), 0); });
    mode_t mode = ino.mode & 07777;
    if (!opt_.same_owner && !S_ISDIR(ino.mode) && (mode & (S_ISUID | S_ISGID))) {
      struct stat st;
      if (::fstat(fd, &st) != 0) sys_fail("stat");
      mode = mode_for_owner(ino, st.st_uid, st.st_gid);
    }
    if (!mode_set && ::fchmod(fd, mode) != 0) sys_fail("chmod");
    struct timespec ts[2] = {{time_t(ino.mtime), 0}, {time_t(ino.mtime), 0}};
    if (::futimens(fd, ts) != 0) sys_fail("set mtime");
  }

  // Symlinks, devices, fifos and sockets have no descriptor to write through: the entry is
  // pinned by an O_PATH descriptor and checked to be what we created, so a name swapped for a
  // symlink (possible while its directory is writable by others) never redirects a call.
  void set_meta_at(int dfd, const std::string& name, const Item& it, bool owned) {
    const InodeSummary& ino = it.inode;
    PinnedEntry entry(dfd, name, mode_t(ino.mode & S_IFMT));
    if (opt_.same_owner && !owned) entry.chown(ino.uid, ino.gid);
    if (has_xattrs(it)) set_xattrs(it, [&](const char* k, const std::string& v) { return entry.set_xattr(k, v); });
    // Set-id bits do nothing on these entries; without their owner they simply go.
    const mode_t mode = ino.mode & (opt_.same_owner || owned ? 07777 : 01777);
    if (!entry.is_symlink()) entry.chmod(mode);
    entry.set_mtime(ino.mtime);
  }

  // Compares a written file's content with the manifest (hasher: fed while writing; null: read
  // the file back). A file that does not match is removed, so nothing damaged looks complete;
  // files covered by their fragment block's digest are checked together at the end.
  void check_content(int dfd, int fd, const Item& it, const Inode& full, ContentHasher* hasher) {
    const Hash128 got = hasher ? hasher->digest() : hash_written(fd, full.size, check_->scheme());
    if (check_->in_fragment_digest(full)) {
      std::lock_guard lock(check_mu_);
      read_hashes_.emplace(full.inode_number, got);
      fragment_items_[full.fragment_index].push_back(size_t(&it - items_.data()));
      return;
    }
    const std::optional<Hash128> want = check_->expected(full);
    if (!want || *want == got) return;
    ::unlinkat(dfd, std::string(name_of(it)).c_str(), 0);
    throw Error("content differs from the manifest (content hash " + got.hex() + ", expected " + want->hex() +
                "); the file was removed");
  }

  // The content hash of what was written to fd, holes taken as zeros without reading them.
  static Hash128 hash_written(int fd, uint64_t size, HashScheme scheme) {
    thread_local std::vector<uint8_t> buf(1 << 20);
    ContentHasher hasher(scheme);
    for (uint64_t off = 0; off < size;) {
      off_t data = ::lseek(fd, off_t(off), SEEK_DATA);
      if (data < 0 && errno != ENXIO) sys_fail("seek");
      const uint64_t data_at = data < 0 ? size : std::min<uint64_t>(uint64_t(data), size);
      hasher.update_zeros(data_at - off);
      off = data_at;
      if (off >= size) break;
      off_t hole = ::lseek(fd, off_t(off), SEEK_HOLE);
      if (hole < 0) sys_fail("seek");
      const uint64_t hole_at = std::min<uint64_t>(uint64_t(hole), size);
      for (; off < hole_at;) {
        ssize_t r = ::pread(fd, buf.data(), size_t(std::min<uint64_t>(buf.size(), hole_at - off)), off_t(off));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) sys_fail("read back");
        hasher.update(buf.data(), size_t(r));
        off += uint64_t(r);
      }
    }
    return hasher.digest();
  }

  // Small files covered by their fragment block's digest: a block that does not match has its
  // files removed (which of them is damaged cannot be told), each named.
  void check_fragment_blocks() {
    if (!check_ || read_hashes_.empty()) return;
    DirStack dirs(root_fd_.get());
    for (uint32_t fragment : check_->bad_fragments(read_hashes_)) {
      auto items = fragment_items_.find(fragment);
      if (items == fragment_items_.end()) continue;
      for (size_t i : items->second) {
        const Item& it = items_[i];
        fail(path_of(it), "content differs from the manifest: the digest of fragment block " +
                              std::to_string(fragment) +
                              " over its small files does not match (this file or another of them is damaged); " +
                              remove_damaged(dirs, it));
      }
    }
  }

  // Removes a file found damaged after its directory may have been finished: a directory of
  // ours without write permission (0555) is opened up for the unlink, and one that already
  // has the image's mtime gets it back. Returns how it went, for the message.
  std::string remove_damaged(DirStack& dirs, const Item& it) {
    try {
      const int dfd = open_dir(dirs, it.parent);
      const std::string name(name_of(it));
      int r = ::unlinkat(dfd, name.c_str(), 0);
      struct stat st;
      if (r != 0 && errno == EACCES && ::fstat(dfd, &st) == 0 && st.st_uid == euid_ &&
          ::fchmod(dfd, (st.st_mode & 07777) | S_IWUSR) == 0) {
        r = ::unlinkat(dfd, name.c_str(), 0);
        const int e = errno;
        (void)::fchmod(dfd, st.st_mode & 07777);
        errno = e;
      }
      if (r != 0) return std::string("the file could not be removed (") + strerror(errno) + ")";
      const Item& dir = items_[size_t(it.parent)];
      if (!dir_state_[size_t(dir.dir_slot)].finish_at_end && (it.parent != 0 || created_root_)) {
        struct timespec ts[2] = {{time_t(dir.inode.mtime), 0}, {time_t(dir.inode.mtime), 0}};
        (void)::futimens(dfd, ts);
      }
      return "the file was removed";
    } catch (const std::exception& e) {
      return std::string("the file could not be removed (") + e.what() + ")";
    }
  }

  // The file a copy will be made from, as created: a copy reads it only if the name still
  // leads to that file (one swapped for another, e.g. a hard link to a file outside, in a
  // target others can write into, is not read).
  void remember_identity(int fd, const Item& it) {
    if (!it.has_copies) return;
    struct stat st {};
    if (::fstat(fd, &st) != 0) return;  // then no copy is made from it
    std::lock_guard lock(mu_);
    identity_[size_t(&it - items_.data())] = {st.st_dev, st.st_ino};
  }

  void copy_duplicates() {
    std::vector<size_t> copies;
    for (size_t i = 0; i < items_.size(); ++i)
      if (items_[i].keep && items_[i].copy_of >= 0) copies.push_back(i);
    if (copies.empty()) return;
    const unsigned jobs = std::max(1u, opt_.jobs);
    std::vector<std::unique_ptr<DirStack>> from, to;
    for (unsigned w = 0; w < jobs; ++w) {
      from.push_back(std::make_unique<DirStack>(root_fd_.get()));
      to.push_back(std::make_unique<DirStack>(root_fd_.get()));
    }
    parallel_for(copies.size(), jobs, [&](size_t k, unsigned w) {
      const Item& it = items_[copies[k]];
      if (skip_when_stopping()) return;
      const DirState& dir = dir_state_[size_t(items_[size_t(it.parent)].dir_slot)];
      try {
        const int dfd = open_dir(*to[w], it.parent);
        if (const UniqueFd src = open_copy_source(*from[w], size_t(it.copy_of)))
          copy_entry(dfd, src.get(), it, dir);
        else
          write_entry(dfd, it, dir);  // decoded, as any file
        written_[copies[k]] = 1;
      } catch (const KeptExisting& kept) {
        written_[copies[k]] = kept.linkable;
        keep_existing();
      } catch (const std::exception& e) {
        fail(path_of(it), e);
      }
      entry_done();
    });
  }

  // The extracted first file of a content, opened for reading, or nothing when it was not
  // written or its name no longer leads to it.
  UniqueFd open_copy_source(DirStack& dirs, size_t first) {
    if (!written_[first]) return {};
    std::pair<dev_t, ino_t> id;
    {
      std::lock_guard lock(mu_);
      const auto found = identity_.find(first);
      if (found == identity_.end()) return {};
      id = found->second;
    }
    const Item& it = items_[first];
    const int dfd = open_dir(dirs, it.parent);
    UniqueFd fd(::openat(dfd, std::string(name_of(it)).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return {};
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != id.first || st.st_ino != id.second ||
        uint64_t(st.st_size) != it.inode.size)
      return {};
    return fd;
  }

  // Writes `it` as a copy of src's bytes: the data regions only, so holes stay holes.
  void copy_entry(int dfd, int src, const Item& it, const DirState& dir) {
    UniqueFd fd = create_file(dfd, it);
    try {
      const uint64_t size = it.inode.size;
      for (uint64_t off = 0; off < size;) {
        if (stop_requested()) throw Stopped();
        const off_t data = ::lseek(src, off_t(off), SEEK_DATA);
        if (data < 0 && errno != ENXIO) sys_fail("seek");
        if (data < 0 || uint64_t(data) >= size) break;
        const off_t hole = ::lseek(src, data, SEEK_HOLE);
        if (hole < 0) sys_fail("seek");
        copy_range(src, fd.get(), uint64_t(data), std::min<uint64_t>(uint64_t(hole), size));
        off = uint64_t(hole);
      }
      if (::ftruncate(fd.get(), off_t(size)) != 0) sys_fail("truncate");
      if (opt_.progress) opt_.progress->bytes_done.fetch_add(size, std::memory_order_relaxed);
      // The copy is checked as a decoded file is: against the manifest, read back.
      if (check_) check_content(dfd, fd.get(), it, img_.read_inode(it.inode.ref, true), nullptr);
      set_meta_fd(fd.get(), it, owned_when_new(it.inode, dir), mode_at_create(it.inode));
    } catch (const std::exception& e) {
      fd.reset();  // closed before the unlink
      ::unlinkat(dfd, std::string(name_of(it)).c_str(), 0);
      rethrow_with(e, kPartRemoved);
    }
    if (fd.close_checked() != 0) sys_fail("close");
  }

  // Bytes [begin, end) of src to the same place in dst: copy_file_range, or read and write
  // where the kernel cannot copy between the two (it reports EXDEV, EINVAL or EOPNOTSUPP).
  // ImageFile::append_range is not this loop: it appends at the image's end, counts the bytes
  // the kernel copied, and falls back to reading on any error but ENOSPC.
  static void copy_range(int src, int dst, uint64_t begin, uint64_t end) {
    loff_t in = loff_t(begin), out = loff_t(begin);
    while (uint64_t(in) < end) {
      const ssize_t n =
          ::copy_file_range(src, &in, dst, &out, size_t(std::min<uint64_t>(end - uint64_t(in), 1u << 30)), 0);
      if (n > 0) continue;
      if (n == 0) throw Error("copy: the first copy ends early");
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS) sys_fail("copy");
      thread_local std::vector<uint8_t> buf(1 << 20);
      while (uint64_t(in) < end) {
        const ssize_t r = ::pread(src, buf.data(), size_t(std::min<uint64_t>(buf.size(), end - uint64_t(in))), in);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) throw Error("copy: the first copy ends early");
        pwrite_all(dst, buf.data(), size_t(r), uint64_t(in));
        in += r;
      }
    }
  }

  void make_links() {
    DirStack from(root_fd_.get()), to(root_fd_.get());
    for (const Item& it : items_) {
      if (!it.keep || it.link_to < 0) continue;
      if (skip_when_stopping()) continue;
      const Item& first = items_[size_t(it.link_to)];
      if (!written_[size_t(it.link_to)]) {
        // Whatever is at the first name now is not the image's file (an entry that was in the
        // way, or nothing): a link to it would give this name other content. A name that is
        // itself in the way is reported with the others (without --overwrite).
        try {
          struct stat st;
          const int dfd = open_dir(to, it.parent);
          if (!opt_.overwrite && ::fstatat(dfd, std::string(name_of(it)).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (opt_.skip_existing) throw KeptExisting(false);
            throw AlreadyExists("already exists");
          }
          throw Error("not extracted: it is a hard link to " + path_of(first) + ", which was not extracted");
        } catch (const std::exception& e) {
          fail(path_of(it), e);
        }
        entry_done();
        continue;
      }
      try {
        int fdfd = open_dir(from, first.parent);
        int dfd = open_dir(to, it.parent);
        std::string src(name_of(first)), name(name_of(it));
        while (::linkat(fdfd, src.c_str(), dfd, name.c_str(), 0) != 0) {
          if (errno != EEXIST) sys_fail("hard link to " + path_of(first));
          replace_existing(dfd, name, it);
        }
      } catch (const std::exception& e) {
        fail(path_of(it), e);
      }
      entry_done();
    }
  }

  // Directory metadata once every entry is in place (creating entries bumps the mtime; a
  // read-only mode would lock us out). Most directories were finished by the last batch of
  // their entries; here come the rest: empty ones and those that had to wait (see
  // write_entries). One directory's metadata does not touch its parent's, so this runs in
  // parallel, by name in the parent; without root, directories we could no longer open once
  // their mode is set come last, children before parents.
  void finish_dirs() {
    std::vector<size_t> now, later;
    for (size_t i = items_.size(); i-- > 1;) {
      const Item& it = items_[i];
      if (!it.keep || !it.inode.is_dir()) continue;
      const DirState& st = dir_state_[size_t(it.dir_slot)];
      // A directory that could not be made was reported; so was everything it held.
      if (st.state.load(std::memory_order_acquire) != kReady) continue;
      if (st.has_batches && !st.finish_at_end) continue;  // done by its last batch
      (needs_late_finish(it.inode) ? later : now).push_back(i);
    }
    constexpr size_t kChunk = 64;  // runs of neighbours keep each thread's DirStack short
    unsigned jobs = std::max(1u, opt_.jobs);
    std::vector<std::unique_ptr<DirStack>> stacks;
    for (unsigned w = 0; w < jobs; ++w) stacks.push_back(std::make_unique<DirStack>(root_fd_.get()));
    auto by_name = [&](DirStack& ds, const Item& it) {
      try {
        finish_dir_at(open_dir(ds, it.parent), std::string(name_of(it)), it);
      } catch (const std::exception& e) {
        fail(path_of(it), e);
      }
    };
    parallel_for((now.size() + kChunk - 1) / kChunk, jobs, [&](size_t c, unsigned w) {
      for (size_t k = c * kChunk; k < std::min(now.size(), (c + 1) * kChunk); ++k) by_name(*stacks[w], items_[now[k]]);
    });
    for (size_t i : later) by_name(*stacks[0], items_[i]);
    // The target directory itself only takes the image root's metadata when we created it.
    if (items_[0].keep && created_root_) {
      try {
        set_meta_fd(root_fd_.get(), items_[0], false, false);
      } catch (const std::exception& e) {
        fail("", e.what());
      }
    }
  }

  // What a directory still needs: the owner when we did not make it ours, the mode when
  // mkdir could not give it, and the mtime.
  std::pair<bool, bool> dir_owned_mode_set(const Item& it) const {
    const DirState& self = dir_state_[size_t(it.dir_slot)];
    const DirState& parent = dir_state_[size_t(items_[size_t(it.parent)].dir_slot)];
    // A directory made in a set-gid one inherits the bit: then chmod clears it.
    return {self.created && owned_when_new(it.inode, parent),
            self.created && (it.inode.mode & 07777) == kDirCreateMode && !parent.setgid};
  }

  // Through the directory's own descriptor.
  void finish_dir(int fd, const Item& it) {
    try {
      auto [owned, mode_set] = dir_owned_mode_set(it);
      set_meta_fd(fd, it, owned, mode_set);
    } catch (const std::exception& e) {
      fail(path_of(it), e);
    }
  }

  // By name in its parent dfd, through a descriptor that cannot be a symlink.
  void finish_dir_at(int dfd, const std::string& name, const Item& it) {
    auto [owned, mode_set] = dir_owned_mode_set(it);
    const UniqueFd fd(::openat(dfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) sys_fail("open");
    set_meta_fd(fd.get(), it, owned, mode_set);
  }

  reader::Image& img_;
  const ExtractOptions opt_;
  std::vector<Item> items_;
  // Per item: 1 once a file or other non-directory was written whole. Set by the workers (each
  // for its own items), read by make_links after them: a hard link is made only to a first
  // name this extraction wrote.
  std::vector<uint8_t> written_;
  std::unordered_map<size_t, std::pair<dev_t, ino_t>> identity_;  // files copies are made from (mu_)
  std::string names_;                                             // every entry's name, back to back (see Item)
  // --strip-components: the image parent of each entry moved to the root (for messages).
  std::unordered_map<int64_t, int64_t> image_parent_;
  UniqueFd root_fd_;
  bool created_root_ = false;
  mode_t umask_ = 022;
  bool umask_cleared_ = false;
  bool root_setgid_ = true;
  uid_t euid_ = 0;
  gid_t egid_ = 0;
  std::unique_ptr<DirState[]> dir_state_;  // by Item::dir_slot
  std::mutex mu_;
  size_t errors_ = 0;
  std::atomic<size_t> left_out_{0};          // entries below a directory that could not be made or opened
  std::atomic<bool> out_of_space_{false};    // the target is full: entries not begun are skipped
  std::atomic<bool> no_space_named_{false};  // the first entry it failed was reported
  std::atomic<size_t> not_begun_{0};         // entries left out once the target was full or stop was set
  size_t existing_ = 0;                      // entries in the way (counted in errors_ too)
  std::optional<ManifestCheck> check_;       // with --verify (the default) and a manifest
  std::mutex check_mu_;
  std::unordered_map<uint32_t, Hash128> read_hashes_;                 // files in fragment digests: inode number -> hash
  std::unordered_map<uint32_t, std::vector<size_t>> fragment_items_;  // fragment -> items written
  std::string first_existing_;
};

Extractor::Extractor(reader::Image& image, const ExtractOptions& options)
    : impl_(std::make_unique<Impl>(image, options)) {}
Extractor::~Extractor() = default;
size_t Extractor::run() { return impl_->run(); }

}  // namespace sqar::ops
