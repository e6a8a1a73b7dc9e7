#include "ops/tree_compare.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/file_type_name.h"
#include "common/owner_id.h"
#include "common/unique_fd.h"
#include "format/squashfs.h"
#include "ops/entry_format.h"
#include "ops/manifest_check.h"
#include "ops/parallel.h"
#include "ops/safe_dir.h"
#include "reader/walk_guard.h"
#include "scan/scanner.h"

namespace sqar::ops {
namespace {

const char* type_word(uint32_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR: return "dir";
    case S_IFREG: return "file";
    case S_IFLNK: return "symlink";
    case S_IFBLK: return "block-device";
    case S_IFCHR: return "char-device";
    case S_IFIFO: return "fifo";
    case S_IFSOCK: return "socket";
  }
  return "unknown";
}

// A symlink target in a difference line. The bytes stay as they are: the front end escapes the
// whole line as it escapes names (escape_name, as list prints targets), so escaping here too
// showed every escape twice ("\\x1b").
std::string quote_value(const std::string& v) { return "\"" + v + "\""; }

// The content of the file at `path` (below the root open in `dirs`) against the image's; true
// when equal. The sizes are known to match. Throws naming `shown` on read errors.
bool same_content(reader::Image& image, reader::InodeRef ref, DirStack& dirs, const std::string& path,
                  const std::string& shown) {
  const reader::Inode ino = image.read_inode(ref);
  auto [dir, name] = split_parent(path);
  // O_NONBLOCK: the scan saw a file, but a FIFO put in its place since would block the open
  // until some writer came.
  const UniqueFd fd(
      ::openat(dirs.open(dir), std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) throw Error(errno_message(shown, errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw Error(errno_message(shown, errno));
  if (!S_ISREG(st.st_mode))
    throw Error(shown + ": is now a " + file_type_name(st.st_mode) + " (it changed while being compared)");
  // Full blocks are decoded into a per-thread buffer, not the shared cache: each is read once
  // here, and caching them would evict the fragment blocks the next files need.
  thread_local std::vector<uint8_t> block, disk;
  block.resize(image.super().block_size);
  disk.resize(image.super().block_size);
  uint64_t off = 0;
  for (uint64_t index = 0; off < ino.size; ++index) {
    const size_t n = image.read_block(ino, index, block.data());
    if (n == 0) throw Error(image.path() + ": content of " + path + " ends early in the image");
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd.get(), disk.data() + got, n - got, off_t(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw Error(errno_message(shown, errno));
      if (r == 0) break;
      got += size_t(r);
    }
    if (got != n || std::memcmp(disk.data(), block.data(), n) != 0) return false;
    off += n;
  }
  return true;
}

// Walks image and tree together in the order the output is sorted in: byte order of the whole
// path, where a directory's subtree ("name/...") comes after siblings such as "name-x" and
// the root's own lines (".") among its entries, after " x" and before "a".
//
// What the walk finds is held in order until a batch is full (kBatchChecks contents to
// compare, or kBatchBytes of paths and lines); then the batch's contents are compared in
// parallel and the batch is reported. Memory is one batch plus, per open directory, a cursor
// into its image listing (not the listing) and at most one pending subtree per prefix of a
// name (255): a crafted image of deep branches of thousands of long names each passes through
// it without being held.
class TreeComparer {
 public:
  static constexpr size_t kBatchChecks = 4096, kBatchBytes = 4 << 20;

  // root ends with '/'.
  TreeComparer(reader::Image& image, const Tree& tree, const std::string& root, const CompareOptions& opt,
               const CompareReport& report)
      : image_(image),
        tree_(tree),
        root_(root),
        opt_(opt),
        report_(report),
        unlisted_(tree.unlisted_dirs.begin(), tree.unlisted_dirs.end()) {}

  CompareCounts run() {
    const UniqueFd root(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root) throw Error(errno_message(root_, errno));
    for (unsigned w = 0; w < std::max(1u, opt_.jobs); ++w) dirs_.push_back(std::make_unique<DirStack>(root.get()));
    try {
      walk();
    } catch (const Error&) {
      flush();  // what was found before the damage is reported, then the damage
      throw;
    }
    flush();
    if (opt_.stop_at_first_difference) counts_.differences = std::min<uint64_t>(counts_.differences, 1);
    return counts_;
  }

 private:
  enum class Side { both, image_only, disk_only };

  // A directory whose own entries are still to be walked: they come once its key, its name
  // followed by '/', sorts before the next entry of its parent. Such a directory's name is a
  // prefix of every entry walked in its parent since (any other name sorts after "name/"),
  // so the pending ones form a stack, the longest name on top, and their names are kept as
  // lengths of the parent's last name.
  struct Below {
    uint16_t name_length = 0;  // of Frame::last_name; 0 for the root
    reader::InodeRef image_dir = 0;
    uint32_t node = kNoNode;  // unless image_only
    Side side = Side::both;
  };
  // An open directory of the walk. Only the directories of one branch are open at a time.
  struct Frame {
    size_t parent_path_length = 0;                    // path_'s length before this directory's name
    std::unique_ptr<reader::Image::Listing> listing;  // null: on disk only
    std::optional<reader::DirEntry> image_next;       // the listing's next entry, read ahead
    uint32_t disk_next = 0, disk_end = 0;             // the tree's children not walked yet
    std::string last_name;                            // of the entry walked last
    std::vector<Below> below;                         // a stack (see Below)
  };
  // Something the walk found, held until its batch is reported.
  struct Found {
    enum class Kind : uint8_t { difference, error, content_same, content_differs, content_unreadable } kind;
    std::string path;
    std::string text;          // the line, or the error message
    reader::InodeRef ref = 0;  // content_*: what to compare (the outcome is set by the batch)
  };

  bool answered() const { return opt_.stop_at_first_difference && counts_.differences > 0; }

  void hold(Found f) {
    batch_bytes_ += f.path.size() + f.text.size() + sizeof(Found);
    batch_.push_back(std::move(f));
    if (batch_bytes_ >= kBatchBytes || batch_checks_ >= kBatchChecks) flush();
  }

  void differ(const std::string& path, std::string line) {
    if (opt_.stop_at_first_difference) {  // nothing is printed; the first one answers
      ++counts_.differences;
      return;
    }
    hold({Found::Kind::difference, path, std::move(line)});
  }

  void error(std::string message) { hold({Found::Kind::error, {}, std::move(message)}); }

  void content_checked(const std::string& path, reader::InodeRef ref) {
    ++batch_checks_;
    hold({Found::Kind::content_same, path, {}, ref});
  }

  // Compares the batch's contents in parallel (none once --quiet has its answer), then
  // reports the batch in order.
  void flush() {
    std::vector<size_t> checks;
    for (size_t i = 0; i < batch_.size() && !answered(); ++i)
      if (batch_[i].kind == Found::Kind::content_same) checks.push_back(i);
    std::atomic<bool> any_differ{false};
    parallel_for(checks.size(), std::max(1u, opt_.jobs), [&](size_t k, unsigned w) {
      if (opt_.stop_at_first_difference && any_differ.load(std::memory_order_relaxed)) return;
      Found& f = batch_[checks[k]];  // each task writes its own element
      try {
        if (!same_content(image_, f.ref, *dirs_[w], f.path, root_ + f.path)) {
          if (image_content_damaged(f.ref)) {
            f.kind = Found::Kind::content_unreadable;
            f.text = image_.path() + ": " + f.path + ": content differs from the manifest (the image is damaged)";
          } else {
            f.kind = Found::Kind::content_differs;
            any_differ = true;
          }
        }
      } catch (const std::exception& e) {
        f.kind = Found::Kind::content_unreadable;
        f.text = naming_the_entry(f.path, e.what());
      }
    });
    for (Found& f : batch_) {
      switch (f.kind) {
        case Found::Kind::difference: report_difference(f.path, f.text); break;
        case Found::Kind::content_differs: report_difference(f.path, "M " + f.path + ": content differs"); break;
        case Found::Kind::error:
        case Found::Kind::content_unreadable:
          ++counts_.errors;
          if (report_.error) report_.error(f.text);
          break;
        case Found::Kind::content_same: break;
      }
    }
    batch_.clear();
    batch_bytes_ = batch_checks_ = 0;
  }

  void report_difference(const std::string& path, const std::string& line) {
    ++counts_.differences;
    if (report_.difference && !opt_.stop_at_first_difference) report_.difference({path, line});
  }

  std::string_view name_of(uint32_t node) const { return tree_.name(tree_.nodes[node]); }

  // The name of frame f's next entry (the smaller of the image's and the tree's), if any.
  std::optional<std::string_view> next_name(const Frame& f) const {
    const bool disk = f.disk_next < f.disk_end;
    if (!f.image_next) return disk ? std::optional(name_of(f.disk_next)) : std::nullopt;
    const std::string_view image_name = f.image_next->name;
    return disk ? std::min(image_name, name_of(f.disk_next)) : image_name;
  }

  // Whether "dir/" sorts before `name`: unless name extends dir with a byte below '/'.
  static bool subtree_before(std::string_view dir, std::string_view name) {
    if (name.compare(0, dir.size(), dir) != 0) return dir < name;
    return name.size() > dir.size() && static_cast<unsigned char>(name[dir.size()]) > '/';
  }

  // The name of the pending subtree on top of f's stack.
  static std::string_view top_name(const Frame& f) {
    return std::string_view(f.last_name).substr(0, f.below.back().name_length);
  }

  void walk() {
    const reader::Inode root = image_.root();
    std::vector<Frame> stack;
    // The root's own lines wait for their place among its entries: "." sorts after " x".
    bool root_pending = true;
    if (std::optional<Below> below = compare_entry(".", root, 0, Part::below_only)) open_directory(stack, *below);
    while (!stack.empty() && !answered()) {
      Frame& f = stack.back();
      const std::optional<std::string_view> next = next_name(f);
      const bool subtree_next = !f.below.empty() && (!next || subtree_before(top_name(f), *next));
      if (stack.size() == 1 && root_pending) {  // the root's frame is the bottom one
        // "." takes its place before the first entry or subtree that sorts after it.
        const std::string first = subtree_next ? std::string(top_name(f)) + '/' : std::string(next.value_or(""));
        if (first.empty() || first > ".") {
          compare_entry(".", root, 0, Part::lines_only);
          root_pending = false;
          continue;
        }
      }
      if (subtree_next) {
        const Below b = f.below.back();
        f.below.pop_back();
        if (f.listing) f.listing->release();  // read again when the walk comes back
        open_directory(stack, b);             // f is not used after this
        continue;
      }
      if (!next) {
        path_.resize(f.parent_path_length);
        stack.pop_back();
        continue;
      }
      walk_next_entry(f, *next);
    }
    if (root_pending && !answered()) compare_entry(".", root, 0, Part::lines_only);
  }

  // Pairs frame f's next entry (named `name`, which views one of the two) on both sides and
  // compares it.
  void walk_next_entry(Frame& f, std::string_view name) {
    const bool in_image = f.image_next && f.image_next->name == name;
    const bool on_disk = f.disk_next < f.disk_end && name_of(f.disk_next) == name;
    std::optional<reader::DirEntry> image;
    uint32_t node = kNoNode;
    if (in_image) {
      image = std::move(f.image_next);
      f.image_next.reset();
      reader::DirEntry e;
      if (f.listing->next(e)) f.image_next = std::move(e);
    }
    if (on_disk) {
      node = f.disk_next++;
      skip_omitted(f);
    }
    f.last_name = image ? image->name : std::string(name_of(node));
    const size_t length = path_.size();
    if (!path_.empty()) path_ += '/';
    path_ += f.last_name;
    std::optional<Below> below = walk_entry(image ? &*image : nullptr, node);
    path_.resize(length);
    if (below) {
      below->name_length = uint16_t(f.last_name.size());
      f.below.push_back(*below);
    }
  }

  // A directory that vanished while the tree was scanned is not on disk any more.
  void skip_omitted(Frame& f) const {
    while (f.disk_next < f.disk_end && tree_.nodes[f.disk_next].omitted) ++f.disk_next;
  }

  // Opens the directory `b` below the current frame (its name: the frame's last name).
  void open_directory(std::vector<Frame>& stack, const Below& b) {
    Frame f;
    f.parent_path_length = path_.size();
    if (b.name_length > 0) {
      if (!path_.empty()) path_ += '/';
      path_.append(stack.back().last_name, 0, b.name_length);
    }
    if (b.side != Side::image_only && unlisted(b.node)) {
      path_.resize(f.parent_path_length);
      return;
    }
    if (b.side != Side::disk_only) {
      const reader::Inode dir = image_.read_inode(b.image_dir, /*with_blocks=*/false);
      guard_.enter_directory(dir, [&] { return path_; });
      f.listing = image_.open_listing(dir, guard_.listings());
      reader::DirEntry e;
      if (f.listing->next(e)) f.image_next = std::move(e);
    }
    if (b.side != Side::image_only) {
      const Tree::NodeRange children = tree_.children(tree_.nodes[b.node]);
      f.disk_next = children.first;
      f.disk_end = children.last;
      skip_omitted(f);
    }
    stack.push_back(std::move(f));
  }

  // path_ is the entry's path; `image` is null for an entry only on disk, `node` kNoNode for
  // one only in the image. Returns the directory to walk below it, if any.
  std::optional<Below> walk_entry(const reader::DirEntry* image, uint32_t node) {
    if (!image) {
      differ(path_, "+ " + path_);
      if (S_ISDIR(tree_.nodes[node].mode)) return Below{0, 0, node, Side::disk_only};
      return std::nullopt;
    }
    if (node == kNoNode) {
      differ(path_, "- " + path_);
      if (image->kind == reader::FileKind::directory) return image_dir(image->inode_ref);
      return std::nullopt;
    }
    return compare_entry(path_, image_.read_inode(image->inode_ref, /*with_blocks=*/false), node);
  }

  // An image directory to walk below (WalkGuard refuses it when opened if it was listed before).
  static Below image_dir(reader::InodeRef ref, uint32_t node = kNoNode, Side side = Side::image_only) {
    return {0, ref, node, side};
  }

  // A directory on disk that could not be listed: what it holds is unknown, not absent, so
  // none of the image's entries below it is reported missing; it is named as an error.
  bool unlisted(uint32_t node) {
    const auto it = unlisted_.find(node);
    if (it == unlisted_.end()) return false;
    error(it->second + " (its entries were not compared)");
    return true;
  }

  // A hard link's attributes live on the node that owns its inode.
  const Node& owner_of(uint32_t node, uint32_t& owner) const {
    const Node& n = tree_.nodes[node];
    owner = n.link_target == kNoNode ? node : n.link_target;
    return tree_.nodes[owner];
  }

  // What compare_entry does: both, or for the root (whose lines wait for their place among
  // its entries) each half on its own.
  enum class Part { lines_and_below, below_only, lines_only };

  // The entry's lines and the directory to walk below it, if any. A path's content line comes
  // last.
  std::optional<Below> compare_entry(const std::string& path, const reader::Inode& ino, uint32_t node,
                                     Part part = Part::lines_and_below) {
    uint32_t owner;
    const Node& n = owner_of(node, owner);
    const bool lines = part != Part::below_only, below = part != Part::lines_only;
    guard_.count_entry(ino, [&] { return path; });
    if ((ino.mode & S_IFMT) != (n.mode & S_IFMT)) {
      if (lines) differ(path, "M " + path + ": type " + type_word(ino.mode) + " != " + type_word(n.mode));
      // What lies below the side that is a directory exists only there.
      if (below && ino.is_dir()) return image_dir(ino.ref);
      if (below && S_ISDIR(n.mode)) return Below{0, 0, node, Side::disk_only};
      return std::nullopt;
    }
    std::optional<Below> dir;
    if (below && ino.is_dir()) dir = image_dir(ino.ref, node, Side::both);
    if (!lines) return dir;
    compare_attributes(path, ino, n, owner);
    compare_hard_links(path, ino, node, owner);
    if (ino.is_regular() && ino.size == n.size && ino.size > 0) content_checked(path, ino.ref);
    return dir;
  }

  void compare_attributes(const std::string& path, const reader::Inode& ino, const Node& n, uint32_t owner) {
    const std::string M = "M " + path + ": ";
    if (!ino.is_symlink() && (ino.mode & 07777) != (n.mode & 07777))
      differ(path, M + "mode " + octal_mode(ino.mode) + " != " + octal_mode(n.mode));
    // Owners as extract gives them: a stored 2^32-1 is the overflow id (common/owner_id.h).
    const uint32_t uid = extracted_owner_id(ino.uid, false), gid = extracted_owner_id(ino.gid, true);
    if (opt_.owners && uid != n.uid) differ(path, M + "uid " + std::to_string(uid) + " != " + std::to_string(n.uid));
    if (opt_.owners && gid != n.gid) differ(path, M + "gid " + std::to_string(gid) + " != " + std::to_string(n.gid));
    if (opt_.times && ino.mtime != n.mtime)
      differ(path, M + "mtime " + format_mtime_seconds(ino.mtime) + " != " + format_mtime_seconds(n.mtime));
    if (ino.is_regular()) {
      if (ino.size != n.size) differ(path, M + "size " + std::to_string(ino.size) + " != " + std::to_string(n.size));
    } else if (ino.is_symlink()) {
      const std::string target = image_.read_symlink(ino);
      auto it = tree_.symlink_targets.find(owner);
      const std::string disk_target = it == tree_.symlink_targets.end() ? std::string() : it->second;
      if (target != disk_target) differ(path, M + "target " + quote_value(target) + " != " + quote_value(disk_target));
    } else if (ino.kind == reader::FileKind::block_device || ino.kind == reader::FileKind::char_device) {
      const uint32_t major = fmt::dev_major(n.rdev), minor = fmt::dev_minor(n.rdev);
      if (ino.rdev_major != major || ino.rdev_minor != minor)
        differ(path, M + "rdev " + std::to_string(ino.rdev_major) + "," + std::to_string(ino.rdev_minor) +
                         " != " + std::to_string(major) + "," + std::to_string(minor));
    }
    if (opt_.xattrs) compare_xattrs(path, ino, owner);
  }

  // Hard links are compared as grouping, not as counts: each name's inode must be shared
  // with the same earlier names on both sides. The walk is one thread in path order, so the
  // first name of a group is always the same one and the lines stay in their place. Only
  // names both sides have take part, so links to files outside DIR (a larger st_nlink) or
  // names present on one side only make no difference of their own.
  //
  // Directories have no hard links. Symlinks are left out: a target cannot be changed through
  // one name, so whether names share a symlink's inode shows in nothing they lead to, and
  // mksquashfs (4.5) stores each name of a hard-linked symlink apart, so its images of such a
  // tree would never equal their source.
  void compare_hard_links(const std::string& path, const reader::Inode& ino, uint32_t node, uint32_t owner) {
    if (ino.is_dir() || ino.is_symlink()) return;
    const bool image_linked = ino.nlink > 1, disk_linked = tree_.nodes[owner].link_count > 1;
    if (!image_linked && !disk_linked) return;  // the common case: nothing to remember
    if (image_linked) {
      const auto [first, fresh] = image_first_name_.try_emplace(ino.inode_number, node);
      uint32_t first_owner = owner;
      if (!fresh) owner_of(first->second, first_owner);
      if (first_owner != owner)
        differ(path, "M " + path + ": hard link to " + tree_.rel_path_of(tree_.nodes[first->second]) +
                         " in the image, not on disk");
    }
    if (disk_linked) {
      const auto [first, fresh] = disk_first_name_.try_emplace(owner, FirstName{node, ino.inode_number});
      if (!fresh && first->second.image_inode != ino.inode_number)
        differ(path, "M " + path + ": hard link to " + tree_.rel_path_of(tree_.nodes[first->second.node]) +
                         " on disk, not in the image");
    }
  }

  // An image-side error names the image and a block ("... (file inode 1, block 0)"): the
  // entry's path goes after the image's, as every sqar message names an entry. Errors of the
  // tree name its file already.
  std::string naming_the_entry(const std::string& path, const std::string& message) const {
    const std::string rest = without_path_prefix(message, image_.path());
    return rest == message ? message : image_.path() + ": " + path + ": " + rest;
  }

  // Whether a file whose content differs from the tree's is damaged in the image rather than
  // changed on disk: its content as the image decodes it does not match the manifest trailer
  // (a codec without a checksum, zstd's frames as written, or a block stored raw, hands damaged
  // bytes over). Only asked about differing files, so the manifest is read and every regular
  // inode learned (duplicates are covered by another inode's entry) the first time. Without
  // a trailer, or with a damaged one, nothing can be told: false.
  bool image_content_damaged(reader::InodeRef ref) {
    std::call_once(manifest_loaded_, [&] {
      try {
        manifest_.emplace(image_);
        if (!manifest_->has_manifest()) return manifest_.reset();
        manifest_->learn_all();
      } catch (const std::exception&) {
        manifest_.reset();
      }
    });
    if (!manifest_) return false;
    try {
      const reader::Inode ino = image_.read_inode(ref);
      const Hash128 hash = reader::stored_content_hash(image_, ino, manifest_->scheme());
      if (auto want = manifest_->expected(ino)) return !(*want == hash);
      if (!manifest_->in_fragment_digest(ino)) return false;
      // A fragment block's verdict is the same whoever asks: checked once per block (it hashes
      // every small file in it), however many of its files differ from the tree.
      std::lock_guard lock(manifest_mu_);
      auto [verdict, fresh] = fragment_damaged_.try_emplace(ino.fragment_index, false);
      if (fresh) verdict->second = !manifest_->fragment_matches(ino.fragment_index, {{ino.inode_number, hash}});
      return verdict->second;
    } catch (const std::exception&) {
      return true;  // it decoded a moment ago; failing now, it is damaged all the same
    }
  }

  using XattrMap = std::map<std::string, std::string>;
  // The image's xattrs of one set as compared (trusted.* left out where the disk cannot show
  // them), or why they cannot be read.
  struct ImageXattrs {
    XattrMap values;
    std::string error;
  };

  // Decoded once per set: entries share sets (hard links, and writers that store one copy of
  // identical sets), and one set may decode to 4 MiB, so decoding it again for each entry let
  // a 45 KB image of 20,000 names keep diff busy for half a minute. Kept within
  // kXattrCacheBytes; past it the cache starts over.
  const ImageXattrs& image_xattrs(const reader::Inode& ino) {
    static constexpr size_t kXattrCacheBytes = size_t(64) << 20;
    if (auto it = xattr_sets_.find(ino.xattr_index); it != xattr_sets_.end()) return *it->second;
    auto set = std::make_shared<ImageXattrs>();
    size_t bytes = 0;
    try {
      for (auto& [k, v] : image_.xattrs(ino)) {
        bytes += k.size() + v.size();
        set->values[k] = std::move(v);
      }
    } catch (const Error& e) {
      set->values.clear();
      set->error = e.what();
    }
    // The kernel lists trusted.* names only to a caller with CAP_SYS_ADMIN: anyone else cannot
    // see them on disk, so the image's are not compared (a user's `diff -q || create` would
    // otherwise rebuild every time).
    static const bool sees_trusted = geteuid() == 0;
    if (!sees_trusted) std::erase_if(set->values, [](const auto& kv) { return kv.first.rfind("trusted.", 0) == 0; });
    if (xattr_cache_bytes_ + bytes > kXattrCacheBytes) {
      xattr_sets_.clear();
      xattr_cache_bytes_ = 0;
    }
    xattr_cache_bytes_ += bytes;
    return *xattr_sets_.emplace(ino.xattr_index, std::move(set)).first->second;
  }

  void compare_xattrs(const std::string& path, const reader::Inode& ino, uint32_t owner) {
    auto it = tree_.xattrs.find(owner);
    const bool disk_has = it != tree_.xattrs.end() && !it->second->empty();
    if (ino.xattr_index == fmt::kNoXattr && !disk_has) return;  // the common case: none on either side
    static const XattrMap kNone;
    const ImageXattrs* image = nullptr;
    if (ino.xattr_index != fmt::kNoXattr) {
      image = &image_xattrs(ino);
      if (!image->error.empty()) {  // damaged or over the bounds: name the entry, compare the rest
        error(path + ": " + image->error);
        return;
      }
    }
    const XattrMap& a = image ? image->values : kNone;
    // Each further name of a hard link compares the same set with the same file on disk.
    const uint64_t pair = uint64_t(ino.xattr_index) << 32 | owner;
    if (xattrs_same_.count(pair)) return;
    XattrMap b;
    if (disk_has)
      for (const auto& [k, v] : *it->second) b[k] = v;
    if (a == b) {
      xattrs_same_.insert(pair);
      return;
    }
    std::string names;
    for (const auto& [k, v] : a)
      if (!b.count(k) || b.at(k) != v) names += (names.empty() ? "" : ",") + k;
    for (const auto& [k, v] : b)
      if (!a.count(k)) names += (names.empty() ? "" : ",") + k;
    differ(path, "M " + path + ": xattrs differ (" + names + ")");
  }

  reader::Image& image_;
  const Tree& tree_;
  const std::string& root_;
  const CompareOptions& opt_;
  const CompareReport& report_;
  std::unordered_map<uint32_t, std::string> unlisted_;  // node -> why it could not be listed
  std::vector<std::unique_ptr<DirStack>> dirs_;         // one per worker: DirStack is per thread
  CompareCounts counts_;
  std::string path_;                 // the path of the entry or directory the walk is at ("" is the root)
  reader::WalkGuard guard_{image_};  // loops, overlapping listings and block lists
  std::vector<Found> batch_;         // in path order
  size_t batch_bytes_ = 0, batch_checks_ = 0;
  std::once_flag manifest_loaded_;
  std::optional<ManifestCheck> manifest_;  // read at the first content difference
  std::mutex manifest_mu_;
  std::unordered_map<uint32_t, bool> fragment_damaged_;  // fragment block -> its digest does not match
  std::unordered_map<uint32_t, std::shared_ptr<const ImageXattrs>> xattr_sets_;  // by xattr index
  size_t xattr_cache_bytes_ = 0;
  std::unordered_set<uint64_t> xattrs_same_;  // (xattr index, disk node) pairs whose sets are equal
  // The first name, walked on both sides, of each hard-linked inode: by image inode number,
  // and by the disk node owning the (st_dev, st_ino). Names are kept as the disk node of the
  // entry (its path is derived when a line needs it), so a tree of millions of hard links
  // costs a few bytes each, not a path each; inodes with one name are never kept.
  std::unordered_map<uint32_t, uint32_t> image_first_name_;  // image inode number -> disk node
  struct FirstName {
    uint32_t node;         // on disk, at the same path as in the image
    uint32_t image_inode;  // the image's inode number there
  };
  std::unordered_map<uint32_t, FirstName> disk_first_name_;  // disk inode owner node -> first name
};

}  // namespace

CompareCounts compare_image_with_tree(reader::Image& image, const std::string& root, const CompareOptions& opt,
                                      const CompareReport& report) {
  struct stat st;
  if (::stat(root.c_str(), &st) != 0) throw Error(errno_message(root, errno));
  if (!S_ISDIR(st.st_mode)) throw Error(root + ": not a directory");
  // DIR may be a symlink to a directory, as users name trees (`diff img /srv/current`); a
  // trailing slash makes the scanner and the opens below follow it. Nothing below DIR is
  // ever followed.
  const std::string dir = root.back() == '/' ? root : root + "/";
  ScanOptions scan;
  scan.sources = {dir};
  scan.xattrs = opt.xattrs;
  // A directory that cannot be listed ends no comparison: the rest of the tree is compared,
  // and the directory is named as an error where the walk meets it (exit 2, as diff -r).
  scan.skip_unreadable = true;
  // As in `sqar create`: listing is system calls, so two listers per core, and more while the
  // listings wait on the disk.
  scan.threads = std::min(2 * std::max(1u, opt.jobs), 16u);
  scan.max_threads = 16;
  // No warnings: xattrs SquashFS cannot store (system.*: ACLs and the like) are left out of
  // the comparison on purpose, as no image can hold them.
  const Tree tree = scan_sources(scan);
  return TreeComparer(image, tree, dir, opt, report).run();
}

}  // namespace sqar::ops
