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
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "format/squashfs.h"
#include "ops/entry_format.h"
#include "ops/parallel.h"
#include "ops/safe_dir.h"
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

std::string quote_value(const std::string& v) {
  std::string out = "\"";
  for (unsigned char ch : v) {
    if (ch >= 32 && ch < 127 && ch != '"' && ch != '\\') {
      out += char(ch);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", ch);
      out += b;
    }
  }
  return out + "\"";
}

// The content of the file at `path` (below the root open in `dirs`) against the image's; true
// when equal. The sizes are known to match. Throws naming `shown` on read errors.
bool same_content(reader::Image& image, reader::InodeRef ref, DirStack& dirs, const std::string& path,
                  const std::string& shown) {
  const reader::Inode ino = image.read_inode(ref);
  auto [dir, name] = split_parent(path);
  const int fd = ::openat(dirs.open(dir), std::string(name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw Error(errno_message(shown, errno));
  struct CloseFd {
    int fd;
    ~CloseFd() { ::close(fd); }
  } closer{fd};
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
      ssize_t r = ::pread(fd, disk.data() + got, n - got, off_t(off + got));
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

// Walks image and tree together in path order. What it finds is held in order until a batch
// is full (kBatchChecks contents to compare, or kBatchBytes of paths and lines), then the
// batch's contents are compared in parallel and the batch is reported. Memory is bounded by
// the batch, not by the output: a crafted image's hundreds of megabytes of paths pass through
// it a batch at a time.
class TreeComparer {
 public:
  static constexpr size_t kBatchChecks = 4096, kBatchBytes = 16 << 20;

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
    root_fd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root_fd_ < 0) throw Error(errno_message(root_, errno));
    struct CloseFd {
      int fd;
      ~CloseFd() { ::close(fd); }
    } closer{root_fd_};
    for (unsigned w = 0; w < std::max(1u, opt_.jobs); ++w) dirs_.push_back(std::make_unique<DirStack>(root_fd_));
    walk();
    flush();
    return counts_;
  }

 private:
  enum class Side { both, image_only, disk_only };

  // A directory whose own entries are still to be walked. They come when the path `key`
  // ("name/") sorts next among its parent's entries: "a-c" is walked before "a/b".
  struct Below {
    std::string key;          // the directory's name followed by '/'; "" for the root
    reader::Inode image_dir;  // unless disk_only
    uint32_t node = kNoNode;  // unless image_only
    Side side = Side::both;
  };
  static constexpr size_t kNone = SIZE_MAX;
  struct Pair {
    size_t image = kNone;     // index in the frame's image_entries; kNone: only on disk
    uint32_t node = kNoNode;  // kNoNode: only in the image
  };
  // An open directory of the walk. Only the directories of one branch are open at a time.
  struct Frame {
    size_t parent_path_length = 0;  // path_'s length before this directory's name was added
    std::vector<reader::DirEntry> image_entries;
    std::vector<Pair> pairs;  // sorted by name
    size_t next = 0;
    std::deque<Below> below;  // sorted by key; entries arrive in name order, so mostly appended
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

  // Compares the batch's contents in parallel, then reports the batch in order.
  void flush() {
    std::vector<size_t> checks;
    for (size_t i = 0; i < batch_.size(); ++i)
      if (batch_[i].kind == Found::Kind::content_same) checks.push_back(i);
    std::atomic<bool> any_differ{false};
    parallel_for(checks.size(), std::max(1u, opt_.jobs), [&](size_t k, unsigned w) {
      if (opt_.stop_at_first_difference && any_differ.load(std::memory_order_relaxed)) return;
      Found& f = batch_[checks[k]];  // each task writes its own element
      try {
        if (!same_content(image_, f.ref, *dirs_[w], f.path, root_ + f.path)) {
          f.kind = Found::Kind::content_differs;
          any_differ = true;
        }
      } catch (const std::exception& e) {
        f.kind = Found::Kind::content_unreadable;
        f.text = e.what();
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
  std::string_view name_of(const Frame& f, const Pair& p) const {
    return p.image != kNone ? std::string_view(f.image_entries[p.image].name) : name_of(p.node);
  }

  void walk() {
    std::vector<Frame> stack;
    const std::string root_path = ".";
    if (auto below = compare_entry(root_path, image_.root(), 0)) open_directory(stack, std::move(*below));
    while (!stack.empty() && !answered()) {
      Frame& f = stack.back();
      const bool entries_left = f.next < f.pairs.size();
      if (!f.below.empty() && (!entries_left || std::string_view(f.below.front().key) < name_of(f, f.pairs[f.next]))) {
        Below b = std::move(f.below.front());
        f.below.pop_front();
        open_directory(stack, std::move(b));  // f is not used after this
        continue;
      }
      if (!entries_left) {
        path_.resize(f.parent_path_length);
        stack.pop_back();
        continue;
      }
      const Pair p = f.pairs[f.next++];
      const size_t length = path_.size();
      if (!path_.empty()) path_ += '/';
      path_ += name_of(f, p);
      std::optional<Below> below = walk_entry(p.image == kNone ? nullptr : &f.image_entries[p.image], p.node);
      path_.resize(length);
      if (below) {
        auto at = std::upper_bound(f.below.begin(), f.below.end(), below->key,
                                   [](const std::string& key, const Below& b) { return key < b.key; });
        f.below.insert(at, std::move(*below));
      }
    }
  }

  // Lists the directory `b` on both sides and pairs its entries, as the next frame.
  void open_directory(std::vector<Frame>& stack, Below b) {
    Frame f;
    f.parent_path_length = path_.size();
    if (!b.key.empty()) {
      if (!path_.empty()) path_ += '/';
      path_.append(b.key, 0, b.key.size() - 1);
    }
    if (b.side != Side::image_only && unlisted(b.node)) {
      path_.resize(f.parent_path_length);
      return;
    }
    if (b.side != Side::disk_only) f.image_entries = image_.read_dir(b.image_dir);
    std::vector<uint32_t> disk;
    if (b.side != Side::image_only)
      for (uint32_t c : tree_.children(tree_.nodes[b.node]))
        if (!tree_.nodes[c].omitted) disk.push_back(c);  // vanished while the tree was scanned
    // Both list entries sorted by name in byte order (SquashFS requires it of the image; the
    // scanner sorts the same way), so one pass pairs them.
    size_t i = 0, j = 0;
    while (i < f.image_entries.size() || j < disk.size()) {
      const int order = i == f.image_entries.size() ? 1
                        : j == disk.size()          ? -1
                                           : std::string_view(f.image_entries[i].name).compare(name_of(disk[j]));
      if (order < 0)
        f.pairs.push_back({i++, kNoNode});
      else if (order > 0)
        f.pairs.push_back({kNone, disk[j++]});
      else
        f.pairs.push_back({i++, disk[j++]});
    }
    stack.push_back(std::move(f));
  }

  // path_ is the entry's path. Returns the directory to walk below it, if any.
  // `image` is null for an entry only on disk, `node` kNoNode for one only in the image.
  std::optional<Below> walk_entry(const reader::DirEntry* image, uint32_t node) {
    if (!image) {
      differ(path_, "+ " + path_);
      if (S_ISDIR(tree_.nodes[node].mode)) return disk_dir(node);
      return std::nullopt;
    }
    if (node == kNoNode) {
      differ(path_, "- " + path_);
      if (image->kind == reader::FileKind::directory) return image_dir(image_.read_inode(image->inode_ref));
      return std::nullopt;
    }
    return compare_entry(path_, image_.read_inode(image->inode_ref, /*with_blocks=*/false), node);
  }

  // Every directory of the image is entered once: a second visit means the directory graph
  // loops (or shares a directory), which a walk must not follow.
  Below image_dir(reader::Inode dir, uint32_t node = kNoNode, Side side = Side::image_only) {
    if (!image_dirs_seen_.insert(dir.ref).second)
      throw Error(image_.path() + ": directory " + (path_.empty() ? "." : path_) +
                  " appears twice in the directory tree (a loop)");
    return {key_of_path(), std::move(dir), node, side};
  }

  Below disk_dir(uint32_t node) { return {key_of_path(), {}, node, Side::disk_only}; }

  // The key of the entry at path_ among its parent's entries: its name and a '/'.
  std::string key_of_path() const {
    if (path_.empty()) return {};
    const size_t slash = path_.rfind('/');
    return path_.substr(slash == std::string::npos ? 0 : slash + 1) + '/';
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

  std::optional<Below> compare_entry(const std::string& path, const reader::Inode& ino, uint32_t node) {
    uint32_t owner;
    const Node& n = owner_of(node, owner);
    const std::string M = "M " + path + ": ";
    if ((ino.mode & S_IFMT) != (n.mode & S_IFMT)) {
      differ(path, M + "type " + type_word(ino.mode) + " != " + type_word(n.mode));
      // What lies below the side that is a directory exists only there.
      if (ino.is_dir()) return image_dir(ino);
      if (S_ISDIR(n.mode)) return disk_dir(node);
      return std::nullopt;
    }
    std::optional<Below> below;
    if (ino.is_dir()) below = image_dir(ino, node, Side::both);
    if (!ino.is_symlink() && (ino.mode & 07777) != (n.mode & 07777))
      differ(path, M + "mode " + octal_mode(ino.mode) + " != " + octal_mode(n.mode));
    if (opt_.owners && ino.uid != n.uid)
      differ(path, M + "uid " + std::to_string(ino.uid) + " != " + std::to_string(n.uid));
    if (opt_.owners && ino.gid != n.gid)
      differ(path, M + "gid " + std::to_string(ino.gid) + " != " + std::to_string(n.gid));
    if (opt_.times && ino.mtime != n.mtime)
      differ(path, M + "mtime " + std::to_string(ino.mtime) + " != " + std::to_string(n.mtime));
    if (ino.is_regular()) {
      if (ino.size != n.size)
        differ(path, M + "size " + std::to_string(ino.size) + " != " + std::to_string(n.size));
      else if (ino.size > 0)
        content_checked(path, ino.ref);
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
    return below;
  }

  void compare_xattrs(const std::string& path, const reader::Inode& ino, uint32_t owner) {
    auto it = tree_.xattrs.find(owner);
    const bool disk_has = it != tree_.xattrs.end() && !it->second.empty();
    if (ino.xattr_index == fmt::kNoXattr && !disk_has) return;  // the common case: none on either side
    std::map<std::string, std::string> a, b;
    try {
      for (auto& [k, v] : image_.xattrs(ino)) a[k] = v;
    } catch (const Error& e) {  // damaged or over the bounds: name the entry, compare the rest
      error(path + ": " + e.what());
      return;
    }
    if (disk_has)
      for (const auto& [k, v] : it->second) b[k] = v;
    if (a == b) return;
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
  int root_fd_ = -1;
  std::vector<std::unique_ptr<DirStack>> dirs_;  // one per worker: DirStack is per thread
  CompareCounts counts_;
  std::string path_;  // the path of the entry or directory the walk is at ("" is the root)
  std::unordered_set<reader::InodeRef> image_dirs_seen_;
  std::vector<Found> batch_;  // in path order
  size_t batch_bytes_ = 0, batch_checks_ = 0;
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
  // and the directory is named as an error after the differences (exit 2, as diff -r).
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
