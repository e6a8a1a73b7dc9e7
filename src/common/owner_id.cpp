#include "common/owner_id.h"

#include <grp.h>
#include <pwd.h>

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

}  // namespace sqar
