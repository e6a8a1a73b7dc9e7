// The reply side of libfuse's low-level API, recorded instead of sent, so that fuzz_sqarfs can
// call sqarfs's request handlers (fuse/filesystem.cpp) with no kernel and no FUSE session.
//
// The seam is the link: the harness is linked without libfuse, and fuse_replies.cpp defines
// the libfuse functions the handlers call (fuse_reply_*, fuse_add_direntry*, fuse_req_userdata, fuse_req_ctx,
// fuse_lowlevel_notify_store). sqarfs itself is compiled from the same sources, unchanged.
// Each definition checks what libfuse would otherwise trust: one reply per request, a reply
// no larger than the kernel asked for, an errno the handlers are meant to give.
#pragma once
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <cstddef>
#include <string>
#include <vector>

// One request in flight. libfuse keeps its own fuse_req opaque; linked without libfuse, the
// handlers only ever see this definition.
struct fuse_req {
  void* userdata = nullptr;
  size_t size = 0;  // what the request allows a data reply to hold (read, readdir, xattrs)
  int replies = 0;
  int error = 0;             // fuse_reply_err
  std::string data;          // fuse_reply_buf, fuse_reply_readlink
  fuse_entry_param entry{};  // fuse_reply_entry
  struct stat attr {};       // fuse_reply_attr
  size_t xattr_size = 0;     // fuse_reply_xattr
  off_t seek = -1;           // fuse_reply_lseek
  struct Listed {
    std::string name;
    fuse_ino_t ino;
    off_t next;
  };
  std::vector<Listed> listed;  // entries fuse_add_direntry* put in the buffer
};

namespace sqar::fuzz {
// Traps unless `mode` names one of the seven file types: a reply the kernel would refuse.
void check_mode(mode_t mode);
}  // namespace sqar::fuzz
