#include "options.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/owner_id.h"
#include "common/parse_size.h"

namespace sqar::fuse {

namespace {
// Kernel mount flags libfuse understands: passed through unchanged.
const char* const kForwarded[] = {"allow_other", "allow_root", "auto_unmount", "default_permissions",
                                  "ro",          "dev",        "nodev",        "suid",
                                  "nosuid",      "exec",       "noexec",       "atime",
                                  "noatime",     "sync",       "async",        "dirsync"};
const char* const kForwardedPrefixes[] = {
    "fsname=", "subtype=", "context=", "fscontext=", "defcontext=", "rootcontext="};
// Options only mount(8), mount.fuse3 or fstab care about, and flags that mean nothing on a
// read-only mount but that mount.fuse3 forwards and libfuse would refuse (the atime
// variants, iversion, nosymfollow): accepted and ignored.
const char* const kIgnored[] = {"defaults",      "noauto",     "auto",         "nofail",         "_netdev",
                                "user",          "users",      "nouser",       "owner",          "group",
                                "relatime",      "norelatime", "diratime",     "nodiratime",     "strictatime",
                                "nostrictatime", "lazytime",   "nolazytime",   "nosymfollow",    "symfollow",
                                "iversion",      "noiversion", "mand",         "nomand",         "silent",
                                "loud",          "loop",       "kernel_cache", "drop_privileges"};
const char* const kIgnoredPrefixes[] = {"x-", "comment=", "setuid=", "helper="};

bool in(const char* const* list, size_t n, const std::string& s) {
  return std::any_of(list, list + n, [&](const char* x) { return s == x; });
}
bool has_prefix_in(const char* const* list, size_t n, const std::string& s) {
  return std::any_of(list, list + n, [&](const char* x) { return s.rfind(x, 0) == 0; });
}

uint64_t parse_number(const std::string& opt, const std::string& value) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
    throw Error("option " + opt + "=" + value + ": expected a non-negative integer");
  try {
    return std::stoull(value);
  } catch (...) {
    throw Error("option " + opt + "=" + value + ": number out of range");
  }
}

void apply_option(Options& o, const std::string& opt) {
  if (opt.empty()) return;
  auto eq = opt.find('=');
  std::string key = opt.substr(0, eq);
  std::string value = eq == std::string::npos ? "" : opt.substr(eq + 1);
  if (key == "offset") {
    auto v = parse_size(value);  // as sqar's --offset takes it: 8K, 1M
    if (!v) throw Error("option offset=" + value + ": expected a byte count such as 4096 or 8K");
    o.offset = *v;
  } else if (key == "cache") {
    auto v = parse_size(value);
    if (!v) throw Error("option cache=" + value + ": expected a size such as 64M, 512K or 2G");
    o.cache_bytes = size_t(*v);
  } else if (key == "threads") {
    uint64_t n = parse_number(key, value);
    if (n < 1 || n > 256) throw Error("option threads=" + value + ": expected 1..256");
    o.threads = unsigned(n);
  } else if (key == "spin") {
    uint64_t n = parse_number(key, value);
    if (n > 10000) throw Error("option spin=" + value + ": expected 0..10000 microseconds");
    o.spin = std::chrono::microseconds(n);
  } else if (key == "handoff") {
    if (value == "auto")
      o.handoff = Options::Handoff::automatic;
    else if (value == "queued")
      o.handoff = Options::Handoff::queued;
    else if (value == "slow")
      o.handoff = Options::Handoff::slow;
    else
      throw Error("option handoff=" + value + ": expected auto, queued or slow");
  } else if (key == "max_read") {
    const uint64_t n = parse_number(key, value);
    if (n > UINT32_MAX) throw Error("option max_read=" + value + ": number out of range");
    o.max_read = uint32_t(n);
    o.fuse_mount_options.push_back(opt);
  } else if (key == "readahead") {
    uint64_t n = parse_number(key, value);
    if (n > 64) throw Error("option readahead=" + value + ": expected 0..64 blocks");
    o.readahead_blocks = unsigned(n);
  } else if (key == "uid" || key == "gid") {
    // A number, or a name as mount(8) users give it (uid=nobody). (uid_t)-1 means "no
    // change" to chown and cannot own a file: 0..4294967294.
    const bool group = key == "gid";
    std::optional<uint32_t> id;
    if (!value.empty() && value.find_first_not_of("0123456789") != std::string::npos) {
      id = owner_id_by_name(value, group);
      if (!id) throw Error("option " + opt + ": no " + (group ? "group" : "user") + " of that name here");
    } else {
      const uint64_t n = parse_number(key, value);
      if (n >= UINT32_MAX) throw Error("option " + opt + ": expected 0..4294967294 or a name");
      id = uint32_t(n);
    }
    (group ? o.gid : o.uid) = *id;
  } else if (opt == "rw") {
    o.rw_requested = true;  // mount(8)'s default: mounted read-only all the same
  } else if (key == "debug") {
    o.debug = true;
  } else if (in(kForwarded, std::size(kForwarded), opt) ||
             has_prefix_in(kForwardedPrefixes, std::size(kForwardedPrefixes), opt)) {
    if (opt != "ro") o.fuse_mount_options.push_back(opt);
  } else if (in(kIgnored, std::size(kIgnored), opt) ||
             has_prefix_in(kIgnoredPrefixes, std::size(kIgnoredPrefixes), opt)) {
    // handled by mount(8) / mount.fuse3
  } else {
    throw Error("unknown mount option -o " + opt + " (see sqarfs --help)");
  }
}

void apply_option_list(Options& o, const std::string& list) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    apply_option(o, list.substr(start, comma - start));
    start = comma + 1;
  }
}
}  // namespace

unsigned default_threads() { return std::clamp(2 * std::max(1u, std::thread::hardware_concurrency()), 4u, 16u); }

Options parse_options(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "-V" || a == "--version") {
      o.version = true;
    } else if (a == "-f") {
      o.foreground = true;
    } else if (a == "-d") {
      o.debug = o.foreground = true;
    } else if (a == "-s") {
      o.single_thread = true;
    } else if (a == "-o") {
      if (i + 1 >= argc) throw Error("option -o needs an argument");
      apply_option_list(o, argv[++i]);
    } else if (a.rfind("-o", 0) == 0) {
      apply_option_list(o, a.substr(2));
    } else if (a == "--") {
      for (++i; i < argc; ++i) positional.push_back(argv[i]);
    } else if (a.size() > 1 && a[0] == '-') {
      throw Error("unknown option " + a + " (see sqarfs --help)");
    } else {
      positional.push_back(a);
    }
  }
  if (o.debug) o.foreground = true;
  if (o.help || o.version) return o;
  if (positional.size() != 2)
    throw Error(positional.size() < 2 ? "expected IMAGE and MOUNTPOINT (see sqarfs --help)"
                                      : "too many arguments: " + positional[2] + " (see sqarfs --help)");
  o.image = positional[0];
  o.mountpoint = positional[1];
  return o;
}

const char* help_text() {
  return R"(sqarfs - mount a SquashFS image (sqar, mksquashfs, gensquashfs; any compressor)

Usage: sqarfs IMAGE MOUNTPOINT [-o OPTION[,OPTION...]] [-f] [-d] [-s]

The image is opened and checked before mounting, so a bad image or mount point is
reported here with a non-zero exit status. Mounting takes milliseconds whatever the
image size: nothing is read until it is needed. sqarfs then runs in the background
(use -f to stay in the foreground) until unmounted with `fusermount3 -u MOUNTPOINT`
or `umount MOUNTPOINT`, or until SIGTERM, SIGINT or SIGHUP, on which it unmounts (even
a busy mount, whose open files then fail with ENOTCONN; fusermount3 -u refuses one).

Options:
  -o offset=N       the image starts N bytes into IMAGE (e.g. appended to a binary;
                    4096 or 4K)
  -o cache=SIZE     cache of decompressed blocks shared by all threads (default 64M;
                    suffixes K, M, G). Bigger helps random reads of large files.
  -o threads=N      maximum threads serving requests (default 2 per core, 4..16). With
                    at least 2 per CPU they form one group per CPU, pinned to it, and
                    while several client threads read, each CPU's group answers the
                    clients running there (no wake-up of another CPU per request)
  -o readahead=N    data blocks to decompress ahead of a sequential reader (default 2);
                    0 also stops decompressing a file's first block when it is looked up
  -o spin=USEC      after a request, keep polling for the next one up to this long before
                    sleeping (default 100; 0 = never, libfuse's own loop). A busy client
                    is then answered without a wake-up, which on virtual machines costs
                    an interrupt per request. The window shrinks for slower clients; an
                    idle mount uses no CPU.
  -o handoff=MODE   when the listening thread lets another thread take over: `slow` only
                    before decompressing a block, `queued` also whenever more requests
                    wait (parallel cached requests, at the price of a wake-up each);
                    `auto` (default): queued with more than 2 CPUs, slow otherwise
  -o uid=N,gid=N    present every file as owned by this user / group (a number or a name)
  -o max_read=N     the largest read request the kernel sends, in bytes (a plain number);
                    passed on to the mount
  -o debug          the same as -d
  -o allow_other    let other users see the files (needs user_allow_other in
                    /etc/fuse.conf when not mounting as root)
  -o ro, dev, suid, noatime, ...  kernel mount flags, passed on
  -o noauto, nofail, _netdev, defaults, user, x-...  fstab options, accepted and ignored,
                    as are flags meaningless on a read-only mount (relatime, iversion, ...)
  -o rw             mount(8)'s default: accepted; the mount is read-only all the same
                    (logged once). Any other option is an error: nothing is mounted.
  -f                stay in the foreground (errors go to stderr, not syslog)
  -d                debug: foreground and log every FUSE request
  -s                single-threaded (for debugging)
  -h, --help        this text;  -V, --version  the version

Permissions are checked by the kernel against the stored modes (default_permissions).
A damaged block makes that read fail with EIO and logs one line (syslog when in the
background); everything else stays readable.

Exit status: 0 mounted (or, with -f, unmounted cleanly); 1 not mounted: bad option,
image or mount point (the message names the cause).

Examples:
  sqarfs backup.sqfs /mnt/backup
  sqarfs -o cache=512M,threads=8 data.sqfs /srv/data
  fusermount3 -u /mnt/backup

/etc/fstab (mount(8) runs mount.fuse3, which runs sqarfs; sqarfs must be in PATH,
e.g. /usr/local/bin where `cmake --install` puts it):
  /srv/images/data.sqfs  /srv/data  fuse.sqarfs  ro,allow_other,nofail  0 0
The kernel's own driver reads the same images:
  /srv/images/data.sqfs  /srv/data  squashfs     ro,loop               0 0
)";
}

}  // namespace sqar::fuse
