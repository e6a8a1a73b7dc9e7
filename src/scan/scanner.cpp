#include "scan/scanner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "common/error.h"

namespace sqar {
namespace {

// SquashFS can store only these xattr namespaces.
bool storable_xattr(const std::string& key) {
  return key.rfind("user.", 0) == 0 || key.rfind("trusted.", 0) == 0 || key.rfind("security.", 0) == 0;
}

struct FdCloser {
  void operator()(DIR* d) const { closedir(d); }
};

class Scanner {
 public:
  explicit Scanner(const ScanOptions& opt) : opt_(opt) {}

  Tree run() {
    if (opt_.sources.empty()) throw Error("no source given");
    tree_.nodes.emplace_back();  // the root
    bool root_set = false;
    for (const auto& src : opt_.sources) {
      struct stat st;
      if (lstat(src.c_str(), &st) != 0) throw_errno(src, errno);
      if (S_ISDIR(st.st_mode)) {
        if (!root_set) {
          fill_metadata(0, tree_.nodes[0], st, src);
          root_set = true;
        }
        source_dev_ = st.st_dev;
        source_ = uint16_t(tree_.source_dirs.size());
        tree_.source_dirs.push_back(src);
        int fd = open(src.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) throw_errno(src, errno);
        scan_directory(fd, src, "", 0);
      } else {
        auto slash = src.find_last_of('/');
        std::string name = src.substr(slash + 1);
        source_dev_ = st.st_dev;
        source_ = uint16_t(tree_.source_dirs.size());
        tree_.source_dirs.push_back(slash == std::string::npos ? "." : slash == 0 ? "/" : src.substr(0, slash));
        add_entry(0, name, src, name, st, AT_FDCWD, src);
      }
    }
    if (!root_set) {
      tree_.nodes[0].mode = S_IFDIR | 0755;
    }
    for (auto& n : tree_.nodes) {
      std::sort(n.children.begin(), n.children.end(),
                [&](uint32_t a, uint32_t b) { return tree_.name(tree_.nodes[a]) < tree_.name(tree_.nodes[b]); });
      for (size_t i = 1; i < n.children.size(); ++i)
        if (tree_.name(tree_.nodes[n.children[i]]) == tree_.name(tree_.nodes[n.children[i - 1]]))
          throw Error(tree_.path_of(n.children[i - 1]) + " and " + tree_.path_of(n.children[i]) +
                      " would have the same name in the image");
    }
    collect_files(0);
    return std::move(tree_);
  }

 private:
  void fill_metadata(uint32_t idx, Node& n, const struct stat& st, const std::string& path) {
    n.mode = st.st_mode;
    n.uid = st.st_uid;
    n.gid = st.st_gid;
    n.mtime = st.st_mtim.tv_sec;
    if (S_ISREG(st.st_mode)) n.size = uint64_t(st.st_size);
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
      n.rdev_major = major(st.st_rdev);
      n.rdev_minor = minor(st.st_rdev);
    }
    if (opt_.xattrs) read_xattrs(idx, path);
  }

  void read_xattrs(uint32_t idx, const std::string& path) {
    Xattrs found;
    ssize_t len = llistxattr(path.c_str(), nullptr, 0);
    if (len < 0) {
      if (errno == ENOTSUP || errno == ENODATA) return;
      throw_errno(path, errno);
    }
    if (len == 0) return;
    std::string names(size_t(len), '\0');
    len = llistxattr(path.c_str(), names.data(), names.size());
    if (len < 0) throw_errno(path, errno);
    names.resize(size_t(len));
    for (size_t pos = 0; pos < names.size();) {
      std::string key(names.c_str() + pos);
      pos += key.size() + 1;
      if (key.empty()) continue;
      if (!storable_xattr(key)) {
        if (opt_.warn) opt_.warn(path + ": xattr " + key + " cannot be stored in SquashFS, skipped");
        continue;
      }
      ssize_t vlen = lgetxattr(path.c_str(), key.c_str(), nullptr, 0);
      if (vlen < 0) throw_errno(path + " (xattr " + key + ")", errno);
      std::string value(size_t(vlen), '\0');
      vlen = lgetxattr(path.c_str(), key.c_str(), value.data(), value.size());
      if (vlen < 0) throw_errno(path + " (xattr " + key + ")", errno);
      value.resize(size_t(vlen));
      found.emplace_back(std::move(key), std::move(value));
    }
    if (found.empty()) return;
    std::sort(found.begin(), found.end());
    tree_.xattrs[idx] = std::move(found);
  }

  // Adds one entry below `parent`; recurses into directories.
  void add_entry(uint32_t parent, const std::string& name, const std::string& path, const std::string& rel,
                 const struct stat& st, int dirfd, const std::string& open_name) {
    if (opt_.entries_seen) opt_.entries_seen->fetch_add(1, std::memory_order_relaxed);
    const uint32_t idx = uint32_t(tree_.nodes.size());
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
      auto [it, inserted] = inodes_.try_emplace({st.st_dev, st.st_ino}, idx);
      if (!inserted) {
        Node link;
        tree_.set_name(link, name);
        link.parent = parent;
        link.source = source_;
        link.mode = st.st_mode;
        link.link_target = it->second;
        tree_.nodes[it->second].link_count++;
        tree_.nodes.push_back(std::move(link));
        tree_.nodes[parent].children.push_back(idx);
        return;
      }
    }
    switch (st.st_mode & S_IFMT) {
      case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK: break;
      default:
        if (opt_.warn) opt_.warn(path + ": unsupported file type, skipped");
        return;
    }
    Node n;
    tree_.set_name(n, name);
    n.parent = parent;
    n.source = source_;
    fill_metadata(idx, n, st, path);
    if (S_ISLNK(st.st_mode)) {
      std::string target(size_t(st.st_size) + 1, '\0');
      for (;;) {
        ssize_t r = readlinkat(dirfd, open_name.c_str(), target.data(), target.size());
        if (r < 0) throw_errno(path, errno);
        if (size_t(r) < target.size()) {
          target.resize(size_t(r));
          break;
        }
        target.resize(target.size() * 2);
      }
      tree_.symlink_targets[idx] = std::move(target);
    }
    tree_.nodes.push_back(std::move(n));
    tree_.nodes[parent].children.push_back(idx);
    if (S_ISDIR(st.st_mode)) {
      if (opt_.one_file_system && st.st_dev != source_dev_) return;  // keep the mount point, not its content
      int fd = openat(dirfd, open_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        if (opt_.skip_unreadable) {
          if (opt_.warn) opt_.warn(errno_message(path, errno) + " (stored as an empty directory)");
          return;
        }
        throw_errno(path, errno);
      }
      scan_directory(fd, path, rel, idx);
    }
  }

  // Takes ownership of fd.
  void scan_directory(int fd, const std::string& path, const std::string& rel, uint32_t node) {
    std::unique_ptr<DIR, FdCloser> dir(fdopendir(fd));
    if (!dir) {
      int e = errno;
      close(fd);
      throw_errno(path, e);
    }
    struct Pending {
      std::string name;
      struct stat st;
    };
    std::vector<Pending> entries;
    for (;;) {
      errno = 0;
      dirent* de = readdir(dir.get());
      if (!de) {
        if (errno) throw_errno(path, errno);
        break;
      }
      if (!std::strcmp(de->d_name, ".") || !std::strcmp(de->d_name, "..")) continue;
      Pending p;
      p.name = de->d_name;
      if (fstatat(fd, de->d_name, &p.st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // vanished between readdir and stat: it is simply not there
        throw_errno(path + "/" + p.name, errno);
      }
      const std::string child_rel = rel.empty() ? p.name : rel + "/" + p.name;
      if (!opt_.excludes.empty() && opt_.excludes.excluded(child_rel, p.name, S_ISDIR(p.st.st_mode))) continue;
      entries.push_back(std::move(p));
    }
    // Sorted before recursing so node numbering does not depend on readdir order.
    std::sort(entries.begin(), entries.end(), [](const Pending& a, const Pending& b) { return a.name < b.name; });
    for (const auto& e : entries) {
      const std::string child_rel = rel.empty() ? e.name : rel + "/" + e.name;
      add_entry(node, e.name, path + "/" + e.name, child_rel, e.st, fd, e.name);
    }
  }

  void collect_files(uint32_t idx) {
    // Iterative depth-first walk: image order is sorted pre-order, the order mksquashfs uses.
    std::vector<uint32_t> stack{idx};
    while (!stack.empty()) {
      uint32_t i = stack.back();
      stack.pop_back();
      Node& n = tree_.nodes[i];
      if (n.link_target == kNoNode && S_ISREG(n.mode)) {
        n.file_index = uint32_t(tree_.files.size());
        tree_.files.push_back(i);
        tree_.total_file_bytes += n.size;
      }
      for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.push_back(*it);
    }
  }

  const ScanOptions& opt_;
  Tree tree_;
  dev_t source_dev_ = 0;
  uint16_t source_ = 0;
  std::map<std::pair<dev_t, ino_t>, uint32_t> inodes_;
};

}  // namespace

Tree scan_sources(const ScanOptions& options) { return Scanner(options).run(); }

}  // namespace sqar
