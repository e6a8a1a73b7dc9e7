// What sqarfs may tell the process behind a request, as the kernel's squashfs driver decides
// it for its own callers.
#pragma once
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

namespace sqar::fuse {

// Whether the calling thread holds CAP_SYS_ADMIN, which the kernel asks before it lists
// trusted.* xattr names (squashfs_trusted_xattr_list, as ext4 does): other users of an
// allow_other mount must not learn them. Read from /proc/PID/status (CapEff); false when
// that cannot be read, or /proc is not procfs, or the request came from the kernel itself.
bool caller_has_sys_admin(fuse_req_t req);

}  // namespace sqar::fuse
