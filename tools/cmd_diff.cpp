// `sqar diff`: differences in content and metadata between an image and a directory tree.
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "command.h"
#include "common/error.h"
#include "entry_format.h"
#include "parallel.h"
#include "read_common.h"
#include "safe_dir.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar diff [OPTIONS] IMAGE DIR\n"
    "\n"
    "Compare IMAGE with the tree at DIR and print one line per difference, sorted by path:\n"
    "  - PATH                  only in the image\n"
    "  + PATH                  only in the directory\n"
    "  M PATH: WHAT A != B     in both but different; A is the image's value, B the directory's\n"
    "WHAT is one of type, mode, uid, gid, mtime, size, content, target (symlinks), rdev\n"
    "(devices) and xattrs. The root is shown as '.'. Content is compared byte by byte, in\n"
    "parallel, only when the sizes match.\n"
    "\n"
    "Options:\n"
    "      --no-times      ignore mtimes\n"
    "      --no-owners     ignore uid and gid\n"
    "      --no-xattrs     ignore extended attributes\n"
    "  -j, --threads N     worker threads for content comparison (default: all cores)\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar diff backup.sqfs /srv/data              what changed since the backup\n"
    "  sqar diff --no-owners image.sqfs ./unpacked  ignore ownership (unpacked as a user)\n"
    "\n"
    "Exit status: 0 when they are equal, 1 when they differ, 2 on errors or bad usage.\n";

struct Options {
  bool times = true, owners = true, xattrs = true;
  unsigned jobs = 1;
};

using Xattrs = std::map<std::string, std::string>;

// `path` is what the l*xattr calls use: /proc/self/fd/DIRFD/NAME (see entry_at_path), so a tree
// deeper than PATH_MAX can be compared.
Xattrs disk_xattrs(const std::string& path) {
  Xattrs out;
  std::vector<char> names(4096);
  ssize_t n;
  while ((n = ::llistxattr(path.c_str(), names.data(), names.size())) < 0 && errno == ERANGE)
    names.resize(names.size() * 4);
  if (n < 0) return out;  // no xattr support: nothing to compare
  for (const char* p = names.data(); p < names.data() + n; p += std::strlen(p) + 1) {
    if (!std::strncmp(p, "system.", 7)) continue;  // ACLs etc. are not stored by the writers
    std::string value(256, '\0');
    ssize_t v;
    while ((v = ::lgetxattr(path.c_str(), p, value.data(), value.size())) < 0 && errno == ERANGE)
      value.resize(value.size() * 4);
    if (v >= 0) out[p] = value.substr(0, size_t(v));
  }
  return out;
}

// Every entry below the directory open as `fd` (taken over and closed), never following
// symlinks, keyed by path relative to the root. Works relative to descriptors, so trees deeper
// than PATH_MAX compare too; one descriptor per level is open at a time.
void scan_dir(int fd, const std::string& root, const std::string& rel, std::map<std::string, struct stat>& out) {
  const std::string shown = rel.empty() ? root : root + "/" + rel;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    const int err = errno;
    ::close(fd);
    throw Error(errno_message(shown, err));
  }
  std::vector<std::string> subdirs;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    std::string child = rel.empty() ? e->d_name : rel + "/" + e->d_name;
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      const int err = errno;
      ::closedir(d);
      throw Error(errno_message(root + "/" + child, err));
    }
    out[child] = st;
    if (S_ISDIR(st.st_mode)) subdirs.emplace_back(e->d_name);
  }
  for (const auto& name : subdirs) {
    const std::string child = rel.empty() ? name : rel + "/" + name;
    int sub = ::openat(::dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      const int err = errno;
      ::closedir(d);
      throw Error(errno_message(root + "/" + child, err));
    }
    try {
      scan_dir(sub, root, child, out);
    } catch (...) {
      ::closedir(d);
      throw;
    }
  }
  ::closedir(d);
}

// The name path-based calls use for `rel` (not ".") below the root: its directory is opened
// component by component without following symlinks (DirStack), then reached through
// /proc/self/fd, which keeps the path short however deep the entry is.
std::string entry_at_path(DirStack& dirs, const std::string& rel) {
  auto [parent, name] = split_parent(rel);
  return "/proc/self/fd/" + std::to_string(dirs.open(parent)) + "/" + std::string(name);
}

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

// Compares file content with the image's; true when equal. Throws on read errors.
// `at` opens the file (by entry_at_path); `path` names it in messages.
bool same_content(reader::Image& image, const reader::Inode& ino, const std::string& at, const std::string& path) {
  int fd = ::open(at.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw Error(errno_message(path, errno));
  std::vector<uint8_t> buf;
  bool same = true;
  for (uint64_t off = 0; same && off < ino.size;) {
    reader::Chunk c = image.read_chunk(ino, off, 1u << 20);
    if (c.len == 0) {
      ::close(fd);
      throw Error(image.path() + ": content of " + path + " ends early in the image");
    }
    buf.resize(c.len);
    size_t got = 0;
    while (got < c.len) {
      ssize_t r = ::pread(fd, buf.data() + got, c.len - got, off_t(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += size_t(r);
    }
    same = got == c.len && std::memcmp(buf.data(), c.data, c.len) == 0;
    off += c.len;
  }
  ::close(fd);
  return same;
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

int diff_main(int argc, char** argv) {
  return run_guarded(
      "diff",
      [&] {
        enum { kOffset = 256, kNoTimes, kNoOwners, kNoXattrs };
        static const option longopts[] = {
            {"no-times", no_argument, nullptr, kNoTimes},   {"no-owners", no_argument, nullptr, kNoOwners},
            {"no-xattrs", no_argument, nullptr, kNoXattrs}, {"threads", required_argument, nullptr, 'j'},
            {"offset", required_argument, nullptr, kOffset}, {"help", no_argument, nullptr, 'h'},
            {nullptr, 0, nullptr, 0}};
        Options opt;
        opt.jobs = default_jobs();
        uint64_t offset = 0;
        optind = 1;
        opterr = 0;
        for (int c; (c = getopt_long(argc, argv, ":j:h", longopts, nullptr)) != -1;) {
          switch (c) {
            case kNoTimes: opt.times = false; break;
            case kNoOwners: opt.owners = false; break;
            case kNoXattrs: opt.xattrs = false; break;
            case 'j': opt.jobs = parse_jobs_arg(optarg); break;
            case kOffset: offset = parse_offset_arg(optarg); break;
            case 'h': std::fputs(kHelp, stdout); return 0;
            case ':': throw UsageError(std::string("option '") + argv[optind - 1] + "' needs a value");
            default: throw UsageError(std::string("unknown option '") + argv[optind - 1] + "'");
          }
        }
        if (argc - optind != 2) throw UsageError("need IMAGE and DIR");
        std::string image_path = argv[optind], root = argv[optind + 1];
        auto image = open_image(image_path, offset);

        std::map<std::string, reader::Inode> in_image;
        image->walk([&](const std::string& path, const reader::Inode& ino) {
          in_image.emplace(path.empty() ? "." : path, ino);
          return true;
        });
        std::map<std::string, struct stat> on_disk;
        struct stat root_st;
        if (::lstat(root.c_str(), &root_st) != 0) throw Error(errno_message(root, errno));
        if (!S_ISDIR(root_st.st_mode)) throw Error(root + ": not a directory");
        on_disk["."] = root_st;
        const int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_fd < 0) throw Error(errno_message(root, errno));
        struct CloseFd {
          int fd;
          ~CloseFd() { ::close(fd); }
        } root_closer{root_fd};
        scan_dir(::dup(root_fd), root, "", on_disk);
        DirStack dirs(root_fd);
        auto at_path = [&](const std::string& rel) {
          return rel == "." ? "/proc/self/fd/" + std::to_string(root_fd) + "/." : entry_at_path(dirs, rel);
        };

        std::map<std::string, std::vector<std::string>> lines;  // path -> its difference lines
        std::vector<std::pair<const reader::Inode*, std::string>> content_checks;
        auto differ = [&](const std::string& path, const std::string& what) { lines[path].push_back(what); };
        auto disk_path = [&](const std::string& rel) { return rel == "." ? root : root + "/" + rel; };

        for (const auto& [path, ino] : in_image) {
          auto it = on_disk.find(path);
          if (it == on_disk.end()) {
            lines[path].push_back("-");
            continue;
          }
          const struct stat& st = it->second;
          std::string M = "M " + path + ": ";
          if ((ino.mode & S_IFMT) != (st.st_mode & S_IFMT)) {
            differ(path, M + "type " + type_word(ino.mode) + " != " + type_word(st.st_mode));
            continue;
          }
          if (!ino.is_symlink() && (ino.mode & 07777) != (st.st_mode & 07777))
            differ(path, M + "mode " + octal_mode(ino.mode) + " != " + octal_mode(st.st_mode));
          if (opt.owners && ino.uid != st.st_uid)
            differ(path, M + "uid " + std::to_string(ino.uid) + " != " + std::to_string(st.st_uid));
          if (opt.owners && ino.gid != st.st_gid)
            differ(path, M + "gid " + std::to_string(ino.gid) + " != " + std::to_string(st.st_gid));
          if (opt.times && int64_t(ino.mtime) != int64_t(st.st_mtime))
            differ(path, M + "mtime " + std::to_string(ino.mtime) + " != " + std::to_string(int64_t(st.st_mtime)));
          if (ino.is_regular()) {
            if (ino.size != uint64_t(st.st_size))
              differ(path, M + "size " + std::to_string(ino.size) + " != " + std::to_string(st.st_size));
            else
              content_checks.emplace_back(&ino, path);
          } else if (ino.is_symlink()) {
            std::string target = image->read_symlink(ino);
            std::vector<char> buf(size_t(st.st_size) + 2);
            ssize_t n = ::readlink(at_path(path).c_str(), buf.data(), buf.size());
            if (n < 0) throw Error(errno_message(disk_path(path), errno));
            std::string disk_target(buf.data(), size_t(n));
            if (target != disk_target) differ(path, M + "target " + quote_value(target) + " != " + quote_value(disk_target));
          } else if (ino.kind == reader::FileKind::block_device || ino.kind == reader::FileKind::char_device) {
            if (ino.rdev_major != major(st.st_rdev) || ino.rdev_minor != minor(st.st_rdev))
              differ(path, M + "rdev " + std::to_string(ino.rdev_major) + "," + std::to_string(ino.rdev_minor) +
                               " != " + std::to_string(major(st.st_rdev)) + "," + std::to_string(minor(st.st_rdev)));
          }
          if (opt.xattrs) {
            Xattrs a, b = disk_xattrs(at_path(path));
            for (auto& [k, v] : image->xattrs(ino)) a[k] = v;
            if (a != b) {
              std::string names;
              for (const auto& [k, v] : a)
                if (!b.count(k) || b.at(k) != v) names += (names.empty() ? "" : ",") + k;
              for (const auto& [k, v] : b)
                if (!a.count(k)) names += (names.empty() ? "" : ",") + k;
              differ(path, M + "xattrs differ (" + names + ")");
            }
          }
        }
        for (const auto& [path, st] : on_disk)
          if (!in_image.count(path)) lines[path].push_back("+");

        std::mutex mu;
        std::vector<std::string> errors;
        std::vector<std::unique_ptr<DirStack>> worker_dirs;  // DirStack is per thread
        for (unsigned w = 0; w < std::max(1u, opt.jobs); ++w) worker_dirs.push_back(std::make_unique<DirStack>(root_fd));
        parallel_for(content_checks.size(), opt.jobs, [&](size_t i, unsigned w) {
          const auto& [ino, path] = content_checks[i];
          try {
            if (!same_content(*image, *ino, entry_at_path(*worker_dirs[w], path), disk_path(path))) {
              std::lock_guard lock(mu);
              lines[path].push_back("M " + path + ": content differs");
            }
          } catch (const std::exception& e) {
            std::lock_guard lock(mu);
            errors.push_back(e.what());
          }
        });
        if (!errors.empty()) {
          for (const auto& e : errors) report("diff", image_path, e);
          return 2;
        }
        bool any = false;
        for (const auto& [path, ls] : lines) {
          for (const auto& l : ls) {
            if (l == "-" || l == "+")
              std::printf("%s %s\n", l.c_str(), path.c_str());
            else
              std::printf("%s\n", l.c_str());
            any = true;
          }
        }
        std::fflush(stdout);
        return any ? 1 : 0;
      },
      2);
}

RegisterCommand reg("diff", "compare an image with a directory tree", &diff_main);

}  // namespace
}  // namespace sqar::cli
