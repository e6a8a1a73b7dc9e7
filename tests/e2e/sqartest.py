"""Shared helpers for sqar's end-to-end tests: running commands, building, packing (sqar,
mksquashfs) and comparing trees, and the readers to compare against. sqarfs_common.py adds
only what is specific to the sqarfs daemon, clitest.py only the CLI expectations.

Tests prove behaviour against readers nobody here wrote (unsquashfs, the kernel, squashfuse):
they build trees with every entry type, pack them, read them back through those readers and
compare content and metadata entry by entry. A test that cannot run calls skip(reason): main()
records that test as skipped and runs the next one; a file whose tests all skip exits 77 (ctest
reports it as skipped), any failure makes it exit 1. With CI=true a skip that
expected_skips.py does not list is a failure.

Every command a test runs goes through a check for sanitizer reports: scripts/test.sh gives
ASan, UBSan and TSan their own exit code (SANITIZER_EXIT_CODE), and a report on stderr fails the
test even when the command was expected to fail.
"""
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

from expected_skips import unexpected_in_ci

# A runner started in the background of a non-interactive shell passes SIGINT and SIGQUIT on
# ignored (nohup: SIGHUP), and sqar leaves a signal it inherits ignored alone, as tar does: the
# tests that interrupt sqar with them give its processes the default actions.
for _sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT else signal.SIG_DFL)

SQAR = os.environ.get("SQAR", "sqar")
SQARFS = os.environ.get("SQARFS", "sqarfs")
# A prefix that runs a command as nobody. setpriv changes the ids keeping its capabilities
# until the exec, so the binary is found even when the build lies below a directory only root
# may enter (a clone under `mktemp -d` is 0700); dropping the ids in a preexec_fn would not.
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
SKIP = 77
# The exitcode= that scripts/test.sh gives ASan, UBSan and TSan: sqar's own codes are 0, 1 and 2.
SANITIZER_EXIT_CODE = 86
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                   "ThreadSanitizer:", "runtime error:", "SUMMARY: AddressSanitizer",
                   "SUMMARY: UndefinedBehaviorSanitizer")


class Skipped(SystemExit):
    """Raised by skip(). main() records it per test; outside main() it exits 77 as SystemExit."""

    def __init__(self, reason):
        super().__init__(SKIP)
        self.reason = reason


def skip(reason):
    unexpected = unexpected_in_ci(reason)
    if unexpected:
        raise AssertionError(unexpected)
    print(f"SKIPPED: {reason}", flush=True)
    raise Skipped(reason)


def sanitizer_problem(cmd, returncode, stderr):
    """Why a finished command shows a sanitizer report (exit code or stderr), or None."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    stderr = stderr or ""
    if returncode == SANITIZER_EXIT_CODE or any(m in stderr for m in SANITIZER_MARKS):
        return f"sanitizer report from {cmd} (exit {returncode}):\n{stderr[-4000:]}"
    return None


def check_sanitizers(cmd, returncode, stderr):
    problem = sanitizer_problem(cmd, returncode, stderr)
    if problem:
        raise AssertionError(problem)


def log(msg):
    print(msg, flush=True)


def run(cmd, check=True, **kw):
    """Runs a command, returns CompletedProcess with text output; raises with its output on failure."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("text", True)
    p = subprocess.run(cmd, **kw)
    check_sanitizers(cmd, p.returncode, p.stderr)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def sqar_create(src, image, *args, env=None, check=True, timeout=None):
    srcs = [src] if isinstance(src, str) else list(src)
    p = run([SQAR, "create", "--json", *args, *srcs, image], check=check, env=env, timeout=timeout)
    return json.loads(p.stdout) if p.returncode == 0 else p


def need_root():
    if os.geteuid() != 0:
        skip("needs root (devices, ownership, mounts)")


def need_tool(name):
    if shutil.which(name) is None:
        skip(f"{name} is not installed")


@contextlib.contextmanager
def tempdir(prefix="sqar-test-"):
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- building trees

def write(path, data, mode=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)


def pseudo_random(n, seed):
    out = bytearray()
    h = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h
    return bytes(out[:n])


def make_full_tree(root, block=131072, extra=None):
    """Every entry type a tree can hold, with varied metadata. extra(root), if given, adds
    entries before the times are fixed. Returns the root path."""
    os.makedirs(root, exist_ok=True)
    text = b"".join(b"line %d of a log file with some words\n" % i for i in range(20000))
    write(f"{root}/empty", b"")
    write(f"{root}/small.txt", b"hello world\n")
    write(f"{root}/text.log", text)                       # several blocks plus a tail
    write(f"{root}/exact-blocks.bin", pseudo_random(2 * block, 1))
    write(f"{root}/random.bin", pseudo_random(3 * block + 77, 2))  # incompressible
    write(f"{root}/dup/one.log", text)                    # duplicate of text.log
    write(f"{root}/dup/two.log", text)
    write(f"{root}/dup/tail-a", pseudo_random(block, 3) + b"same tail")
    write(f"{root}/dup/tail-b", pseudo_random(block, 4) + b"same tail")
    with open(f"{root}/sparse.img", "wb") as f:         # holes at start, middle and end
        f.seek(3 * block)
        f.write(b"data in the middle" * 1000)
        f.seek(10 * block + 5)
        f.write(b"end")
        f.truncate(16 * block)
    write(f"{root}/modes/setuid", b"x", 0o4755)
    write(f"{root}/modes/none", b"x", 0o000)
    write(f"{root}/modes/all", b"x", 0o777)
    os.makedirs(f"{root}/modes/sticky")
    os.chmod(f"{root}/modes/sticky", 0o1777)
    os.makedirs(f"{root}/empty-dir")
    long_name = "L" * 255
    write(f"{root}/names/{long_name}", b"long name")
    write(f"{root}/names/héllo wörld 世界", b"utf-8 name")
    write(f"{root}/names/with\nnewline", b"newline in name")
    os.symlink("small.txt", f"{root}/link-rel")
    os.symlink("/nonexistent/absolute/target", f"{root}/link-abs")
    os.symlink("t" * 1000, f"{root}/link-long")
    os.link(f"{root}/small.txt", f"{root}/hard-1")
    os.link(f"{root}/small.txt", f"{root}/dup/hard-2")
    os.symlink("small.txt", f"{root}/sym-for-hardlink")
    os.link(f"{root}/sym-for-hardlink", f"{root}/names/sym-hardlink", follow_symlinks=False)
    os.makedirs(f"{root}/dev", exist_ok=True)
    if os.geteuid() == 0:
        os.mknod(f"{root}/dev/null-like", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.mknod(f"{root}/dev/block", 0o660 | stat.S_IFBLK, os.makedev(8, 1))
        os.mknod(f"{root}/dev/big-minor", 0o600 | stat.S_IFCHR, os.makedev(250, 70000))
        os.chown(f"{root}/small.txt", 1234, 5678)
        os.chown(f"{root}/link-rel", 4321, 8765, follow_symlinks=False)
        os.chown(f"{root}/dup", 1000, 1000)
    os.mkfifo(f"{root}/dev/fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(f"{root}/dev/socket")
    s.close()
    set_xattr(f"{root}/small.txt", "user.comment", b"a user attribute")
    set_xattr(f"{root}/text.log", "user.empty", b"")
    set_xattr(f"{root}/dup", "user.dir", b"on a directory")
    set_xattr(f"{root}/link-rel", "trusted.onlink", b"on a symlink", follow=False)
    set_xattr(f"{root}/random.bin", "security.selinux", b"system_u:object_r:bin_t:s0\0")
    set_xattr(f"{root}/random.bin", "user.binary", bytes(range(256)))
    for i in range(12):  # a name list longer than the scan's first 256-byte try
        set_xattr(f"{root}/text.log", f"user.a-rather-long-attribute-name-number-{i:02d}", b"v%d" % i)
    if extra:
        extra(root)
    # Fixed, varied times (directories last: creating entries touches their mtime).
    t = 1_600_000_000
    for i, (dirpath, dirs, files) in enumerate(sorted(os.walk(root, topdown=False))):
        for j, name in enumerate(sorted(files + dirs)):
            with contextlib.suppress(OSError):
                os.utime(os.path.join(dirpath, name), (t + i * 100 + j, t + i * 100 + j), follow_symlinks=False)
        os.utime(dirpath, (t + 7 * i, t + 7 * i))
    return root


def set_xattr(path, key, value, follow=True):
    try:
        os.setxattr(path, key, value, follow_symlinks=follow)
    except OSError as e:
        log(f"note: cannot set xattr {key} on {path}: {e}")


# ---------------------------------------------------------------- comparing trees

def mtime_seconds(st):
    """The whole seconds of an mtime, as SquashFS stores it (tv_sec). int(st.st_mtime) goes
    through a double, which at today's times resolves 0.24 us: an mtime in the last ~120 ns of a
    second rounds up to the next one, and a file then differs by a second from its copy."""
    return st.st_mtime_ns // 1_000_000_000


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def xattrs_of(path):
    try:
        keys = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return {}
    out = {}
    for k in keys:
        if k.startswith("system."):
            continue
        try:
            out[k] = os.getxattr(path, k, follow_symlinks=False)
        except OSError as e:
            out[k] = f"<error {e}>"
    return out


# mksquashfs does not keep hard links between symlinks (it stores two symlink inodes): the
# entries of make_full_tree() to leave out when a tree goes through a mksquashfs image.
MKSQUASHFS_IGNORE = ("sym-for-hardlink", "names/sym-hardlink")
DEFAULT_BLOCK = 131072


def data_regions(path):
    """[(start, end)] of the file's data as SEEK_DATA / SEEK_HOLE report it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size, off, out = os.fstat(fd).st_size, 0, []
        while off < size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            off = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, off))
        return out
    finally:
        os.close(fd)


def hole_blocks(path, block):
    """[(first, end)] ranges of the file's whole BLOCK-sized, BLOCK-aligned pieces that are
    holes throughout: what an image of that block size stores as sparse blocks, and what every
    reader that keeps holes must give back as holes. (A partial last block may go to a
    fragment, so it does not count.)"""
    size = os.lstat(path).st_size
    ranges, hole_start = [], 0
    for start, end in data_regions(path) + [(size, size)]:
        first, last = -(-hole_start // block), min(start, size) // block
        if last > first:
            ranges.append((first, last))
        hole_start = end
    return ranges


def uncovered(want, got):
    """The ranges of WANT (sorted, disjoint [first, end) pairs) not inside one of GOT's."""
    missing = []
    for first, end in want:
        if not any(f <= first and end <= e for f, e in got):
            missing.append((first, end))
    return missing


def snapshot(root, times=True, owners=True, xattrs=True, holes=True):
    """Maps each relative path to its content and metadata, hard links as groups of names.
    holes: False, or the block size whose whole-block holes are recorded (True: 128 KiB), only
    for a file that has one."""
    hole_block = DEFAULT_BLOCK if holes is True else int(holes)
    entries = {}
    inode_names = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            e = {"type": stat.S_IFMT(st.st_mode), "mode": stat.S_IMODE(st.st_mode), "nlink": st.st_nlink}
            if owners:
                e["uid"], e["gid"] = st.st_uid, st.st_gid
            if times:
                e["mtime"] = mtime_seconds(st)
            if stat.S_ISREG(st.st_mode):
                e["size"] = st.st_size
                e["sha256"] = file_digest(p)
                if holes and (ranges := hole_blocks(p, hole_block)):
                    e["holes"] = ranges
            elif stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                e["rdev"] = (os.major(st.st_rdev), os.minor(st.st_rdev))
            if xattrs:
                e["xattrs"] = xattrs_of(p)
            if not stat.S_ISDIR(st.st_mode):
                inode_names.setdefault((st.st_dev, st.st_ino), []).append(rel)
            entries[rel] = e
    for names in inode_names.values():
        for n in names:
            entries[n]["links"] = sorted(names)
    return entries


def tree_differences(expected_root, actual_root, what="the copy", times=True, owners=True, xattrs=True, holes=True,
                     ignore=(), ignore_keys=(), uid=None, gid=None):
    """(list of differences, number of entries compared) between two trees: the entries, each
    one's type, mode, link count, owner, mtime, size, content, symlink target, device numbers,
    xattrs (all but system.*) and hard-link group, and that every whole block that is a hole
    in the expected file is a hole in the actual one (a reader may turn more zeros into holes,
    never fill one). holes: the image's block size (True: 128 KiB), or False for readers that
    report no holes (squashfuse). uid/gid: the owner every entry of the actual tree is expected
    to show (sqarfs -o uid=,gid=)."""
    a = snapshot(expected_root, times, owners, xattrs, holes)
    b = snapshot(actual_root, times, owners, xattrs, holes)
    problems = []
    for rel in sorted(set(a) | set(b)):
        if any(rel == i or rel.startswith(i + "/") for i in ignore):
            continue
        if rel not in b:
            problems.append(f"missing in {what}: {rel!r}")
            continue
        if rel not in a:
            problems.append(f"unexpected in {what}: {rel!r}")
            continue
        want, got = dict(a[rel]), b[rel]
        if owners and uid is not None:
            want["uid"] = uid
        if owners and gid is not None:
            want["gid"] = gid
        if "holes" not in ignore_keys and (lost := uncovered(want.get("holes", []), got.get("holes", []))):
            problems.append(f"{what}: {rel!r}: holes at blocks {lost} are data")
        for k in sorted(set(want) | set(got)):
            if k in ignore_keys or k == "holes":
                continue
            if want.get(k) != got.get(k):
                problems.append(f"{what}: {rel!r}: {k} {want.get(k)!r} != {got.get(k)!r}")
    return problems, len(a)


def compare_trees(expected_root, actual_root, what, times=True, owners=True, xattrs=True, ignore=(), ignore_keys=(),
                  holes=True, uid=None, gid=None):
    """Raises AssertionError naming every difference tree_differences() finds."""
    problems, count = tree_differences(expected_root, actual_root, what, times, owners, xattrs, holes, ignore,
                                       ignore_keys, uid, gid)
    if problems:
        raise AssertionError(f"{len(problems)} differences between source and {what}:\n" + "\n".join(problems[:40]))
    log(f"ok: {what} matches the source ({count} entries, content and metadata)")


# ---------------------------------------------------------------- readers

def open_files(pid):
    """The paths process pid holds open, as /proc/PID/fd shows them ([] once it has gone)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return out


def image_in_progress(pid, image):
    """True while process pid holds open the image it is writing: sqar writes an unnamed
    (O_TMPFILE) file in IMAGE's directory, or IMAGE.sqar-tmp-* where the filesystem lacks
    O_TMPFILE. Either shows in /proc/PID/fd as a path in that directory."""
    d = os.path.dirname(os.path.abspath(image)) + "/"
    return any(t.startswith(d) and (t.endswith(" (deleted)") or ".sqar-tmp-" in t) for t in open_files(pid))


def leftovers(image):
    """Files a build of IMAGE may leave beside it if it cleans up badly: temporary images and
    scratch files."""
    d = os.path.dirname(os.path.abspath(image))
    base = os.path.basename(image)
    return [n for n in os.listdir(d) if n.startswith(base + ".sqar-tmp-") or n.startswith(".sqar-scratch")]


def o_tmpfile_works(directory):
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except OSError:
        return False
    os.close(fd)
    return True


@contextlib.contextmanager
def dir_without_o_tmpfile(lower, mnt):
    """A bindfs (FUSE) view of directory `lower` at `mnt`, where O_TMPFILE fails: sqar then
    writes its image as IMAGE.sqar-tmp-XXXXXX, the fallback whose cleanup the interrupt tests
    must reach. Skips when bindfs is missing or the FUSE stack implements O_TMPFILE."""
    need_tool("bindfs")
    os.makedirs(lower, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    # In the foreground, so that the daemon's exit can be awaited: fusermount -u returns before
    # bindfs has closed `lower`, and a tmpfs under it would then be "busy" to umount.
    daemon = subprocess.Popen(["bindfs", "-f", "--no-allow-other", lower, mnt],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not is_mounted(mnt):
            if daemon.poll() is not None:
                raise AssertionError(f"bindfs {lower} {mnt} exited {daemon.returncode}: {daemon.stderr.read()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"bindfs {lower} {mnt} did not mount within 30 s")
            time.sleep(0.02)
        if o_tmpfile_works(mnt):
            skip(f"O_TMPFILE works on the FUSE mount {mnt} (bindfs): no filesystem here lacks it")
        yield mnt
    finally:
        unmount_fuse(mnt)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def unsquashfs_extract(image, dest):
    need_tool("unsquashfs")
    run(["unsquashfs", "-no-progress", "-d", dest, image])


def kernel_supports(comp):
    """Whether this kernel's squashfs can decompress `comp` (probed by mounting a tiny image)."""
    return _probe_mount(comp)


_probe_cache = {}


def _probe_mount(comp):
    if comp in _probe_cache:
        return _probe_cache[comp]
    with tempdir() as d:
        os.makedirs(f"{d}/src")
        write(f"{d}/src/f", b"probe")
        run([SQAR, "create", "-q", "-c", comp, f"{d}/src", f"{d}/img"])
        os.makedirs(f"{d}/mnt")
        p = run(["mount", "-t", "squashfs", "-o", "loop,ro", f"{d}/img", f"{d}/mnt"], check=False)
        ok = p.returncode == 0
        if ok:
            run(["umount", f"{d}/mnt"])
        else:
            log(f"note: kernel cannot mount {comp} images: {p.stderr.strip()}")
    _probe_cache[comp] = ok
    return ok


def kernel_reports_holes():
    """Whether this kernel's squashfs answers SEEK_HOLE (older kernels report every byte as
    data): the holes= argument for comparing a kernel mount. Probed once."""
    if "holes" not in _probe_cache:
        with tempdir() as d:
            os.makedirs(f"{d}/src")
            with open(f"{d}/src/f", "wb") as f:
                f.seek(1 << 20)
                f.write(b"end")
            run([SQAR, "create", "-q", f"{d}/src", f"{d}/img"])
            with kernel_mount(f"{d}/img", f"{d}/mnt") as mnt:
                regions = data_regions(f"{mnt}/f")
        _probe_cache["holes"] = bool(regions) and regions[0][0] > 0
        if not _probe_cache["holes"]:
            log("note: this kernel's squashfs reports no holes: kernel mounts are compared without them")
    return _probe_cache["holes"]


@contextlib.contextmanager
def kernel_mount(image, mnt):
    os.makedirs(mnt, exist_ok=True)
    run(["mount", "-t", "squashfs", "-o", "loop,ro", image, mnt])
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt])


@contextlib.contextmanager
def squashfuse_mount(image, mnt):
    need_tool("squashfuse")
    os.makedirs(mnt, exist_ok=True)
    run(["squashfuse", image, mnt])
    try:
        yield mnt
    finally:
        unmount_fuse(mnt)


def unmount_fuse(mnt):
    """Unmounts a FUSE mount; True if one of the ways worked."""
    for cmd in (["fusermount3", "-u", mnt], ["fusermount", "-u", mnt], ["umount", mnt], ["umount", "-l", mnt]):
        if shutil.which(cmd[0]) and subprocess.run(cmd, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL).returncode == 0:
            return True
        time.sleep(0.2)
    return False


def is_mounted(mnt):
    real = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == real for line in f)


def mksquashfs(src, image, *args):
    """Builds IMAGE from SRC (a path or a list of them) with mksquashfs, the reference writer;
    skips when it is missing."""
    need_tool("mksquashfs")
    srcs = [src] if isinstance(src, str) else list(src)
    run(["mksquashfs", *srcs, image, "-noappend", "-quiet", "-no-progress", *args])


def mksquashfs_supports(comp):
    p = subprocess.run(["mksquashfs", "-help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return f"\t{comp}" in p.stdout or f" {comp}" in p.stdout


def exit_status(problems):
    """For tests that gather problems in a list: prints them (the first 40) and a verdict,
    returns the exit status (1 if any, else 0)."""
    for p in problems[:40]:
        print("FAIL:", p, flush=True)
    print("OK" if not problems else f"{len(problems)} problems", flush=True)
    return 1 if problems else 0


def main(tests):
    """Runs every test function in order. A skip() marks that test skipped and the next one
    runs. Exits 1 if any test failed, 77 if every test skipped, else 0. The last line names the
    failures and skips too: CI summaries often keep only a test's last line."""
    failures, skips = [], []
    # A test function left out of the list would never run and never be missed.
    script = sys.modules["__main__"]
    listed = {t.__name__ for t in tests}
    unlisted = [name for name in sorted(vars(script))
                if name.startswith("test_") and callable(getattr(script, name)) and name not in listed]
    for name in unlisted:
        failures.append(f"{name}: defined in {os.path.basename(script.__file__)} but not passed to main()")
        log(f"FAILED {name}: not passed to main(), so it never runs")
    for t in tests:
        log(f"--- {t.__name__}")
        try:
            t()
        except Skipped as s:
            skips.append(f"{t.__name__}: {s.reason}")
            log(f"SKIPPED {t.__name__}: {s.reason}")
        except SystemExit as e:  # sys.exit() inside a test is a bug of the test, not a verdict
            failures.append(f"{t.__name__}: called sys.exit({e.code})")
            log(f"FAILED {t.__name__}: called sys.exit({e.code})")
        except Exception as e:  # noqa: BLE001 - report every failing test, then fail
            failures.append(f"{t.__name__}: {' '.join(str(e).split())[:400]}")
            log(f"FAILED {t.__name__}: {e}")
    passed = len(tests) - (len(failures) - len(unlisted)) - len(skips)
    summary = f"{passed} passed, {len(failures)} failed, {len(skips)} skipped"
    details = [f"failed {f}" for f in failures] + [f"skipped {s}" for s in skips]
    log(summary + (" (" + "; ".join(details) + ")" if details else ""))
    if failures:
        sys.exit(1)
    sys.exit(SKIP if tests and len(skips) == len(tests) else 0)
