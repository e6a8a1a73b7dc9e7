#include "scan/exclude.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/error.h"
#include "common/path_pattern.h"

namespace sqar {

void ExcludeList::add(std::string pattern) {
  Pattern p;
  p.written = pattern;
  p.dir_only = !pattern.empty() && pattern.back() == '/';
  while (!pattern.empty() && pattern.back() == '/') pattern.pop_back();
  // A leading '/' or './' anchors the pattern at the source root ("/build" is the top-level
  // build only), as a '/' inside it does; it is then dropped, since relative paths have none.
  bool rooted = false;
  while (true) {
    if (!pattern.empty() && pattern.front() == '/') {
      pattern.erase(0, 1);
    } else if (pattern.rfind("./", 0) == 0) {
      pattern.erase(0, 2);
    } else {
      break;
    }
    rooted = true;
  }
  if (pattern.empty() || pattern == ".") {  // the source root itself is never excluded: said once
    root_patterns_.push_back(p.written);
    return;
  }
  p.anchored = rooted || pattern.find('/') != std::string::npos;
  p.rooted = rooted;
  p.glob = std::move(pattern);
  if (p.anchored) {
    p.anchored_index = anchored_.size();
    anchored_.add(p.glob);
  }
  patterns_.push_back(std::move(p));
}

void ExcludeList::add_from_file(const std::string& path) {
  // Read with plain system calls: an ifstream opens a directory and then reads nothing, which
  // silently excluded nothing; an error reading the file must name it and the cause.
  const bool from_stdin = path == "-";  // as tar -X - reads it
  const int fd = from_stdin ? STDIN_FILENO : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno(path, errno);
  std::string text;
  struct stat st;
  int err = fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
  char buf[1 << 16];
  while (!err) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  if (!from_stdin) close(fd);
  if (err) throw_errno(from_stdin ? "standard input" : path, err);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    add(line);
  }
}

void ExcludeList::map_source_paths(const std::vector<std::pair<std::string, std::string>>& sources,
                                   const std::function<void(const std::string&)>& note) {
  for (auto& p : patterns_) {
    if (!p.rooted) continue;
    for (const auto& [disk, image] : sources) {
      // disk is "/var/log": the pattern's glob (its leading '/' dropped) must start "var/log/".
      if (disk.size() < 2 || p.glob.size() <= disk.size() || p.glob.compare(0, disk.size() - 1, disk, 1) != 0 ||
          p.glob[disk.size() - 1] != '/')
        continue;
      const std::string rest = p.glob.substr(disk.size());
      p.glob = image.empty() ? rest : image + "/" + rest;
      if (note)
        note("--exclude '" + p.written + "' names a path below SOURCE " + disk + ": taken as '/" + p.glob +
             (p.dir_only ? "/" : "") + "' in the image");
      break;
    }
  }
  anchored_ = PatternSet();  // the globs rewritten above
  for (auto& p : patterns_)
    if (p.anchored) anchored_.add(p.glob);
}

template <class PathMatches>
bool ExcludeList::excluded_by(std::string_view name, bool is_dir, const PathMatches& path_matches) const {
  const std::string base(name);
  for (const auto& p : patterns_) {
    if (p.dir_only && !is_dir) continue;
    if (p.anchored ? path_matches(p) : glob_match(p.glob.c_str(), base.c_str())) {
      if (!p.hit.set.load(std::memory_order_relaxed)) p.hit.set.store(true, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

bool ExcludeList::excluded(std::string_view relative_path, std::string_view name, bool is_dir) const {
  return excluded_by(name, is_dir, [&](const Pattern& p) { return path_pattern_match(p.glob, relative_path); });
}

bool ExcludeList::excluded(std::span<const uint8_t> state, std::string_view name, bool is_dir) const {
  return excluded_by(name, is_dir, [&](const Pattern& p) { return anchored_.matches(state, p.anchored_index); });
}

namespace {

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  for (size_t i = 0; i < path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// The image path GLOB probably meant: GLOB without its first k components when they are the
// last k components of a SOURCE's path on disk (k as large as possible), below that SOURCE's
// place in the image. Empty when no SOURCE fits.
std::string probable_image_path(const std::string& glob,
                                const std::vector<std::pair<std::string, std::string>>& sources) {
  const std::vector<std::string> g = components(glob);
  if (g.size() < 2) return "";
  for (const auto& [disk, image] : sources) {
    const std::vector<std::string> d = components(disk);
    for (size_t k = std::min(d.size(), g.size() - 1); k >= 1; --k) {
      if (!std::equal(g.begin(), g.begin() + ptrdiff_t(k), d.end() - ptrdiff_t(k))) continue;
      std::string out = image.empty() ? "" : "/" + image;
      for (size_t i = k; i < g.size(); ++i) out += "/" + g[i];
      return out;
    }
  }
  return "";
}

}  // namespace

void ExcludeList::warn_unmatched(const std::vector<std::pair<std::string, std::string>>& sources,
                                 const std::function<void(const std::string&)>& warn) const {
  if (!warn) return;
  for (const std::string& written : root_patterns_)
    warn("--exclude '" + written + "' names the root, which is never excluded: it excludes nothing");
  for (const auto& p : patterns_) {
    if (!p.anchored || p.hit.set.load()) continue;
    std::string msg = "--exclude '" + p.written + "' matched nothing; a GLOB with '/' matches the path in the image";
    if (const std::string meant = probable_image_path(p.glob, sources); !meant.empty())
      msg += ": did you mean '" + meant + (p.dir_only ? "/" : "") + "'?";
    warn(msg);
  }
}

}  // namespace sqar
