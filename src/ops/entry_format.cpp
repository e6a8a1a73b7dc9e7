#include "ops/entry_format.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <mutex>
#include <unordered_map>

namespace sqar::ops {

std::string mode_string(uint32_t mode) {
  std::string s = "?---------";
  switch (mode & S_IFMT) {
    case S_IFDIR: s[0] = 'd'; break;
    case S_IFREG: s[0] = '-'; break;
    case S_IFLNK: s[0] = 'l'; break;
    case S_IFBLK: s[0] = 'b'; break;
    case S_IFCHR: s[0] = 'c'; break;
    case S_IFIFO: s[0] = 'p'; break;
    case S_IFSOCK: s[0] = 's'; break;
  }
  const char rwx[] = "rwx";
  for (int i = 0; i < 9; ++i)
    if (mode & (0400u >> i)) s[1 + i] = rwx[i % 3];
  // Set-id and sticky bits replace the execute slot: lower case when execute is also set.
  if (mode & S_ISUID) s[3] = (mode & S_IXUSR) ? 's' : 'S';
  if (mode & S_ISGID) s[6] = (mode & S_IXGRP) ? 's' : 'S';
  if (mode & S_ISVTX) s[9] = (mode & S_IXOTH) ? 't' : 'T';
  return s;
}

namespace {

// getpwuid/getgrgid are slow (NSS) and not thread-safe: cache under a lock.
template <typename Lookup>
std::string cached_name(std::unordered_map<uint32_t, std::string>& cache, uint32_t id, Lookup lookup) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  auto it = cache.find(id);
  if (it != cache.end()) return it->second;
  std::string name = lookup(id);
  cache.emplace(id, name);
  return name;
}

}  // namespace

std::string user_name(uint32_t uid) {
  static std::unordered_map<uint32_t, std::string> cache;
  return cached_name(cache, uid, [](uint32_t id) {
    const passwd* pw = getpwuid(id);
    return pw ? std::string(pw->pw_name) : std::to_string(id);
  });
}

std::string group_name(uint32_t gid) {
  static std::unordered_map<uint32_t, std::string> cache;
  return cached_name(cache, gid, [](uint32_t id) {
    const group* gr = getgrgid(id);
    return gr ? std::string(gr->gr_name) : std::to_string(id);
  });
}

namespace {
std::string local_time(uint32_t seconds, const char* format) {
  time_t t = time_t(seconds);
  struct tm tm {};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}
}  // namespace

std::string format_mtime(uint32_t seconds) { return local_time(seconds, "%Y-%m-%d %H:%M"); }
std::string format_mtime_seconds(uint32_t seconds) { return local_time(seconds, "%Y-%m-%d %H:%M:%S"); }

std::string octal_mode(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

}  // namespace sqar::ops
