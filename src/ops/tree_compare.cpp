#include "ops/tree_compare.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
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

std::string child_path(const std::string& dir, std::string_view name) {
  return dir == "." ? std::string(name) : dir + "/" + std::string(name);
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

class TreeComparer {
 public:
  // root ends with '/'.
  TreeComparer(reader::Image& image, const Tree& tree, const std::string& root, const CompareOptions& opt)
      : image_(image),
        tree_(tree),
        root_(root),
        opt_(opt),
        unlisted_(tree.unlisted_dirs.begin(), tree.unlisted_dirs.end()) {}

  CompareResult run() {
    walk();
    compare_contents();
    // Lines were found directory by directory; users read them sorted by path (stable: a
    // path's metadata lines stay before its content line).
    std::stable_sort(result_.differences.begin(), result_.differences.end(),
                     [](const Difference& a, const Difference& b) { return a.path < b.path; });
    return std::move(result_);
  }

 private:
  enum class Side { both, image_only, disk_only };
  struct DirPair {
    std::string path;
    reader::Inode image_dir;  // unless disk_only
    uint32_t node = kNoNode;  // unless image_only
    Side side = Side::both;
  };
  struct ContentCheck {
    reader::InodeRef ref;
    std::string path;
  };

  void differ(const std::string& path, std::string line) { result_.differences.push_back({path, std::move(line)}); }

  // Every directory of the image is entered once: a second visit means the directory graph
  // loops (or shares a directory), which a walk must not follow.
  void enter_image_dir(const std::string& path, reader::Inode dir, uint32_t node, Side side) {
    if (!image_dirs_seen_.insert(dir.ref).second)
      throw Error(image_.path() + ": directory " + path + " appears twice in the directory tree (a loop)");
    pending_.push_back({path, std::move(dir), node, side});
  }

  bool answered() const { return opt_.stop_at_first_difference && !result_.differences.empty(); }

  void walk() {
    compare_entry(".", image_.root(), 0);
    while (!pending_.empty() && !answered()) {
      DirPair d = std::move(pending_.back());
      pending_.pop_back();
      if (d.side != Side::image_only && unlisted(d.node)) continue;
      switch (d.side) {
        case Side::both: merge_directory(d); break;
        case Side::image_only:
          for (const auto& e : image_.read_dir(d.image_dir)) only_in_image(child_path(d.path, e.name), e);
          break;
        case Side::disk_only:
          for (uint32_t c : tree_.children(tree_.nodes[d.node]))
            if (!tree_.nodes[c].omitted) only_on_disk(child_path(d.path, name_of(c)), c);
          break;
      }
    }
  }

  std::string_view name_of(uint32_t node) const { return tree_.name(tree_.nodes[node]); }

  // A directory on disk that could not be listed: what it holds is unknown, not absent, so
  // none of the image's entries below it is reported missing; it is named as an error.
  bool unlisted(uint32_t node) {
    const auto it = unlisted_.find(node);
    if (it == unlisted_.end()) return false;
    result_.errors.push_back(it->second + " (its entries were not compared)");
    return true;
  }

  // Both list entries sorted by name in byte order (SquashFS requires it of the image; the
  // scanner sorts the same way), so one pass pairs them.
  void merge_directory(const DirPair& d) {
    const std::vector<reader::DirEntry> entries = image_.read_dir(d.image_dir);
    auto children = tree_.children(tree_.nodes[d.node]);
    auto disk = children.begin();
    size_t i = 0;
    while (true) {
      // A directory that vanished while the tree was scanned is not on disk any more.
      while (disk != children.end() && tree_.nodes[*disk].omitted) ++disk;
      if (i == entries.size() && disk == children.end()) break;
      const int order = i == entries.size()      ? 1
                        : disk == children.end() ? -1
                                                 : std::string_view(entries[i].name).compare(name_of(*disk));
      if (order < 0) {
        only_in_image(child_path(d.path, entries[i].name), entries[i]);
        ++i;
      } else if (order > 0) {
        only_on_disk(child_path(d.path, name_of(*disk)), *disk);
        ++disk;
      } else {
        const std::string path = child_path(d.path, entries[i].name);
        compare_entry(path, image_.read_inode(entries[i].inode_ref, /*with_blocks=*/false), *disk);
        ++i;
        ++disk;
      }
    }
  }

  void only_in_image(const std::string& path, const reader::DirEntry& e) {
    differ(path, "- " + path);
    if (e.kind == reader::FileKind::directory)
      enter_image_dir(path, image_.read_inode(e.inode_ref), kNoNode, Side::image_only);
  }

  void only_on_disk(const std::string& path, uint32_t node) {
    differ(path, "+ " + path);
    if (S_ISDIR(tree_.nodes[node].mode)) pending_.push_back({path, {}, node, Side::disk_only});
  }

  // A hard link's attributes live on the node that owns its inode.
  const Node& owner_of(uint32_t node, uint32_t& owner) const {
    const Node& n = tree_.nodes[node];
    owner = n.link_target == kNoNode ? node : n.link_target;
    return tree_.nodes[owner];
  }

  void compare_entry(const std::string& path, const reader::Inode& ino, uint32_t node) {
    uint32_t owner;
    const Node& n = owner_of(node, owner);
    const std::string M = "M " + path + ": ";
    if ((ino.mode & S_IFMT) != (n.mode & S_IFMT)) {
      differ(path, M + "type " + type_word(ino.mode) + " != " + type_word(n.mode));
      // What lies below the side that is a directory exists only there.
      if (ino.is_dir()) enter_image_dir(path, ino, kNoNode, Side::image_only);
      if (S_ISDIR(n.mode)) pending_.push_back({path, {}, node, Side::disk_only});
      return;
    }
    if (ino.is_dir()) enter_image_dir(path, ino, node, Side::both);
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
        content_checks_.push_back({ino.ref, path});
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

  void compare_xattrs(const std::string& path, const reader::Inode& ino, uint32_t owner) {
    auto it = tree_.xattrs.find(owner);
    const bool disk_has = it != tree_.xattrs.end() && !it->second.empty();
    if (ino.xattr_index == fmt::kNoXattr && !disk_has) return;  // the common case: none on either side
    std::map<std::string, std::string> a, b;
    try {
      for (auto& [k, v] : image_.xattrs(ino)) a[k] = v;
    } catch (const Error& e) {  // damaged or over the bounds: name the entry, compare the rest
      result_.errors.push_back(path + ": " + e.what());
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

  void compare_contents() {
    if (answered()) return;
    const int root_fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root_fd < 0) throw Error(errno_message(root_, errno));
    struct CloseFd {
      int fd;
      ~CloseFd() { ::close(fd); }
    } closer{root_fd};
    const unsigned workers = std::max(1u, opt_.jobs);
    std::vector<std::unique_ptr<DirStack>> dirs;  // DirStack is per thread
    for (unsigned w = 0; w < workers; ++w) dirs.push_back(std::make_unique<DirStack>(root_fd));
    std::mutex mu;
    std::vector<Difference> found;
    std::atomic<bool> any_found{false};
    parallel_for(content_checks_.size(), workers, [&](size_t i, unsigned w) {
      if (opt_.stop_at_first_difference && any_found.load(std::memory_order_relaxed)) return;
      const ContentCheck& c = content_checks_[i];
      try {
        if (!same_content(image_, c.ref, *dirs[w], c.path, root_ + c.path)) {
          std::lock_guard lock(mu);
          found.push_back({c.path, "M " + c.path + ": content differs"});
          any_found = true;
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        result_.errors.push_back(e.what());
      }
    });
    for (auto& f : found) result_.differences.push_back(std::move(f));
    std::sort(result_.errors.begin(), result_.errors.end());
  }

  reader::Image& image_;
  const Tree& tree_;
  const std::string& root_;
  const CompareOptions& opt_;
  std::vector<DirPair> pending_;
  std::unordered_map<uint32_t, std::string> unlisted_;  // node -> why it could not be listed
  std::unordered_set<reader::InodeRef> image_dirs_seen_;
  std::vector<ContentCheck> content_checks_;
  CompareResult result_;
};

}  // namespace

CompareResult compare_image_with_tree(reader::Image& image, const std::string& root, const CompareOptions& opt) {
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
  return TreeComparer(image, tree, dir, opt).run();
}

}  // namespace sqar::ops
