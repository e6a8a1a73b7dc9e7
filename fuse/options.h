// Command line of sqarfs: `sqarfs IMAGE MOUNTPOINT [-o opt,...] [-f] [-d] [-s]`.
//
// Parsed by hand rather than with fuse_opt so that every option mount(8)/mount.fuse3 may
// pass (noauto, nofail, _netdev, defaults, user, ...) is accepted, kernel mount flags are
// forwarded to libfuse, and our own options (offset=, cache=, threads=, uid=, gid=) are
// consumed here.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sqar::fuse {

// Two per core, 4..16. Most requests never block (the image is in the page cache), so
// more threads than that only add context switches: reading every file of the ports set
// (60k small files, 2 cores) took 1.11 s with 4 threads and 1.98 s with 16.
unsigned default_threads();

struct Options {
  std::string image;
  std::string mountpoint;
  uint64_t offset = 0;
  size_t cache_bytes = 64u << 20;
  unsigned threads = default_threads();
  unsigned readahead_blocks = 2;  // 0 also stops decompressing a looked-up file's first block
  // How long the listening thread keeps polling /dev/fuse after a request before it sleeps
  // (see request_loop.h); 0 sleeps at once.
  std::chrono::microseconds spin{100};
  // Whether the listener also hands its role on when requests are queued (not only before a
  // slow one); auto = only with more than 2 CPUs (see request_loop.h).
  enum class Handoff { automatic, queued, slow } handoff = Handoff::automatic;
  std::optional<uint32_t> uid, gid;
  // -o max_read=N: the largest read the kernel sends. libfuse forwards it to the mount and
  // refuses the session unless init() asks for the same (so it is kept here too).
  std::optional<uint32_t> max_read;
  bool foreground = false;
  bool debug = false;
  bool single_thread = false;
  bool help = false;
  bool version = false;
  bool rw_requested = false;                    // -o rw (mount(8) passes it unless told ro): logged, not obeyed
  std::vector<std::string> fuse_mount_options;  // forwarded to fuse_session_new
};

// Throws sqar::Error with a user-facing message on invalid input.
Options parse_options(int argc, char** argv);
const char* help_text();

}  // namespace sqar::fuse
