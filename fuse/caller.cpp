#include "caller.h"

#include <linux/capability.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/proc_fd.h"

namespace sqar::fuse {

bool caller_has_sys_admin(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (!ctx || ctx->pid <= 0 || !proc_is_procfs()) return false;
  // The request's pid is the calling thread's: capabilities are per thread, and /proc/TID
  // answers for any thread.
  const std::string path = "/proc/" + std::to_string(ctx->pid) + "/status";
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return false;
  bool has = false;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "CapEff:", 7) != 0) continue;
    const unsigned long long caps = std::strtoull(line + 7, nullptr, 16);
    has = caps & (1ull << CAP_SYS_ADMIN);
    break;
  }
  std::fclose(f);
  return has;
}

}  // namespace sqar::fuse
