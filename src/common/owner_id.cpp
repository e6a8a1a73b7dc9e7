#include "common/owner_id.h"

#include <grp.h>
#include <pwd.h>

#include <cstdio>

namespace sqar {

std::optional<uint32_t> owner_id_by_name(const std::string& name, bool group) {
  if (name.empty()) return std::nullopt;
  if (group) {
    if (const struct group* g = getgrnam(name.c_str())) return g->gr_gid;
  } else if (const struct passwd* p = getpwnam(name.c_str())) {
    return p->pw_uid;
  }
  return std::nullopt;
}

namespace {
uint32_t overflow_id(bool group) {
  uint32_t id = 65534;
  if (FILE* f = std::fopen(group ? "/proc/sys/fs/overflowgid" : "/proc/sys/fs/overflowuid", "re")) {
    unsigned long v = 0;
    if (std::fscanf(f, "%lu", &v) == 1 && v < UINT32_MAX) id = uint32_t(v);
    std::fclose(f);
  }
  return id;
}
}  // namespace

uint32_t extracted_owner_id(uint32_t id, bool group) {
  if (id != UINT32_MAX) return id;
  static const uint32_t user = overflow_id(false), grp = overflow_id(true);
  return group ? grp : user;
}

}  // namespace sqar
