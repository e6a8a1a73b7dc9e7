// sqarfs: mount a SquashFS image with FUSE (low-level API, multithreaded).
//
// Order matters: the image and the mount point are checked and the kernel mount is made
// while still attached to the terminal, so every failure is reported with a non-zero exit
// before we daemonize. Threads are started only after the fork.
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/open_file_limit.h"
#include "filesystem.h"
#include "log.h"
#include "request_loop.h"
#include "sqar_version.h"

using namespace sqar;
using namespace sqar::fuse;

namespace {
// fuse_opt treats ',' as a separator: escape it in option values.
std::string escape_opt(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  raise_open_file_limit();
  Options o;
  try {
    o = parse_options(argc, argv);
  } catch (const Error& e) {
    fprintf(stderr, "sqarfs: %s\n", e.what());
    return 1;
  }
  if (o.help) {
    fputs(help_text(), stdout);
    return 0;
  }
  if (o.version) {
    printf("sqarfs %s (libfuse %s)\n", SQAR_VERSION, fuse_pkgversion());
    return 0;
  }

  char resolved[PATH_MAX];
  std::string image_path = realpath(o.image.c_str(), resolved) ? std::string(resolved) : o.image;
  std::unique_ptr<Filesystem> fs;
  try {
    auto image = reader::Image::open(image_path, {.offset = o.offset,
                                                  .cache_bytes = o.cache_bytes,
                                                  .before_block_load = yield_listener_role,
                                                  .before_metadata_load = yield_listener_role_if_slow});
    fs = std::make_unique<Filesystem>(std::move(image), o);
  } catch (const Error& e) {
    fprintf(stderr, "sqarfs: %s\n", e.what());
    return 1;
  }
  // Absolute: the daemon changes to / when it goes to the background, and a relative path
  // would then name nothing when it unmounts on SIGTERM, leaving a dead mount.
  if (!realpath(o.mountpoint.c_str(), resolved)) {
    fprintf(stderr, "sqarfs: mount point %s: %s\n", o.mountpoint.c_str(), strerror(errno));
    return 1;
  }
  const std::string mountpoint = resolved;
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) {
    fprintf(stderr, "sqarfs: mount point %s: %s\n", o.mountpoint.c_str(), strerror(errno));
    return 1;
  }
  if (!S_ISDIR(st.st_mode)) {
    fprintf(stderr, "sqarfs: mount point %s is not a directory\n", o.mountpoint.c_str());
    return 1;
  }

  std::string mount_opts = "ro,default_permissions,subtype=sqarfs,fsname=" + escape_opt(image_path);
  for (const auto& m : o.fuse_mount_options) mount_opts += "," + m;
  std::vector<std::string> args_storage = {"sqarfs", "-o", mount_opts};
  if (o.debug) args_storage.push_back("-d");
  std::vector<char*> args_ptrs;
  for (auto& a : args_storage) args_ptrs.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(int(args_ptrs.size()), args_ptrs.data());

  const fuse_lowlevel_ops& ops = Filesystem::operations();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, fs.get());
  fuse_opt_free_args(&args);  // fuse_session_new may have replaced argv with its own allocation
  if (!se) {
    fprintf(stderr, "sqarfs: cannot set up FUSE (bad mount options?)\n");
    return 1;
  }
  int ret = 0;
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return 1;
  }
  if (fuse_session_mount(se, mountpoint.c_str()) != 0) {
    fprintf(stderr, "sqarfs: cannot mount on %s\n", o.mountpoint.c_str());
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return 1;
  }
  if (o.rw_requested) log_info(mountpoint + ": mounted read-only (SquashFS images cannot be written)");
  if (fuse_daemonize(o.foreground ? 1 : 0) != 0) {
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return 1;
  }
  if (!o.foreground) log_to_syslog(true);

  fs->start_background_threads(se);
  if (o.spin.count() > 0) {
    const bool handoff_on_queue = o.handoff == Options::Handoff::queued ||
                                  (o.handoff == Options::Handoff::automatic && std::thread::hardware_concurrency() > 2);
    ret = run_request_loop(se, o.single_thread ? 1 : o.threads, o.spin, handoff_on_queue);
  } else if (o.single_thread) {  // spin=0: libfuse's own loops, threads sleep in read()
    ret = fuse_session_loop(se) < 0 ? 1 : 0;
  } else {
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(cfg, o.threads);
    fuse_loop_cfg_set_idle_threads(cfg, o.threads);
    fuse_loop_cfg_set_clone_fd(cfg, 1);
    ret = fuse_session_loop_mt(se, cfg) < 0 ? 1 : 0;  // > 0: the signal that ended it
    fuse_loop_cfg_destroy(cfg);
  }
  fs->stop_background_threads();
  log_held_back_count();
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return ret;
}
