"""Shared helpers for the sqarfs end-to-end tests (mounting, tree building, comparing).

Every mount made here is unmounted in a finally block by the caller via Mount's context
manager, so a failing test never leaves a mount behind.
"""
import hashlib
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import time

from sqartest import check_sanitizers, skip  # noqa: F401 - skip is part of this module's interface


def sqarfs_binary():
    path = os.environ.get("SQARFS", "")
    if not path or not os.access(path, os.X_OK):
        skip(f"sqarfs binary not built (SQARFS={path!r})")
    return path


def require_fuse():
    if os.geteuid() != 0:
        skip("needs root for FUSE mounts, mknod and chown")
    if not os.path.exists("/dev/fuse"):
        skip("/dev/fuse is missing")
    if not shutil.which("fusermount3"):
        skip("fusermount3 is not installed")


def daemon_pids(mnt):
    """Pids of the sqarfs processes serving mnt (by command line)."""
    real = os.path.realpath(mnt)
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == "sqarfs" and any(os.path.realpath(a) == real for a in argv[1:] if a):
            pids.append(int(pid))
    return pids


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    check_sanitizers(cmd, p.returncode, p.stderr)
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd, p.stdout, p.stderr)
    return p


def unmount(mnt):
    for cmd in (["fusermount3", "-u", mnt], ["umount", mnt], ["umount", "-l", mnt]):
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            return True
        time.sleep(0.2)
    return False


def is_mounted(mnt):
    real = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == real for line in f)


class Mount:
    """`with Mount(image, mnt, opts) as m:` mounts with sqarfs, always unmounts."""

    def __init__(self, image, mnt, opts=None, extra=None):
        self.image, self.mnt = image, mnt
        self.cmd = [sqarfs_binary(), image, mnt] + (["-o", opts] if opts else []) + (extra or [])

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        t0 = time.monotonic()
        r = subprocess.run(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        self.mount_seconds = time.monotonic() - t0
        check_sanitizers(self.cmd, r.returncode, r.stderr)
        if r.returncode != 0:
            raise AssertionError(f"sqarfs failed ({r.returncode}): {r.stderr}")
        if not is_mounted(self.mnt):
            raise AssertionError("sqarfs exited 0 but nothing is mounted")
        return self

    def __exit__(self, *exc):
        if not unmount(self.mnt):
            print(f"WARNING: could not unmount {self.mnt}", file=sys.stderr)
        return False


def resident_pages(path):
    """(pages of PATH in the page cache, pages in all) by mincore(2), without reading the file:
    a read through a FUSE mount would send a request for every page that is not resident."""
    flags = resident_map(path)
    return sum(flags), len(flags)


def resident_map(path):
    """One bool per page of PATH: is it in the page cache? (mincore(2); reads nothing.)"""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.stat(path).st_size
    page = os.sysconf("SC_PAGE_SIZE")
    pages = (size + page - 1) // page
    if pages == 0:
        return []
    fd = os.open(path, os.O_RDONLY)
    try:
        PROT_READ, MAP_SHARED = 1, 1
        addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return [bool(b & 1) for b in vec.raw]
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def rand_bytes(rng, n, compressible):
    if compressible:
        words = [b"alpha", b"beta", b"gamma", b"delta", b"\n", b"squash", b"0123456789"]
        out = bytearray()
        while len(out) < n:
            out += rng.choice(words) + b" "
        return bytes(out[:n])
    return rng.randbytes(n)


def make_tree(root, seed=1):
    """A tree with every kind of entry a POSIX reader can ask about."""
    rng = random.Random(seed)
    os.makedirs(f"{root}/sub/deeper")
    os.makedirs(f"{root}/empty")
    os.makedirs(f"{root}/big")
    files = {
        "zero": b"",
        "one": b"x",
        "small.txt": b"hello, sqarfs\n",
        "sub/4095": rand_bytes(rng, 4095, True),
        "sub/block": rand_bytes(rng, 131072, False),
        "sub/deeper/multi": rand_bytes(rng, 3 * 131072 + 777, True),
        "random": rand_bytes(rng, 700000, False),
        "text": rand_bytes(rng, 900000, True),
        "dup1": rand_bytes(random.Random(9), 200000, True),
        "dup2": rand_bytes(random.Random(9), 200000, True),
    }
    for name, data in files.items():
        with open(f"{root}/{name}", "wb") as f:
            f.write(data)
    with open(f"{root}/sparse", "wb") as f:
        f.seek(5 * 131072 + 10)
        f.write(rng.randbytes(1000))
        f.truncate(9 * 131072 + 5)
    os.link(f"{root}/small.txt", f"{root}/sub/hardlink")
    os.symlink("small.txt", f"{root}/link")
    os.symlink("/nonexistent/" + "L" * 200, f"{root}/sub/dangling")
    os.mkfifo(f"{root}/fifo", 0o640)
    os.mknod(f"{root}/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(f"{root}/blk", 0o600 | stat.S_IFBLK, os.makedev(259, 70000))
    for i in range(1500):
        with open(f"{root}/big/entry-with-a-longer-name-{i:05d}", "w") as f:
            f.write(str(i))
    os.chmod(f"{root}/small.txt", 0o640)
    os.chmod(f"{root}/sub", 0o750)
    os.chown(f"{root}/one", 1234, 5678)
    os.chown(f"{root}/sub/deeper", 42, 43)
    os.setxattr(f"{root}/small.txt", "user.comment", b"hi there")
    os.setxattr(f"{root}/sub/4095", "user.big", b"v" * 3000)
    os.setxattr(f"{root}/sub", "user.dir", b"d")
    os.setxattr(f"{root}/one", "user.empty", b"")
    # Stable mtimes (including one before 1970 is not portable: keep them positive).
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for n in filenames + dirnames:
            os.utime(f"{dirpath}/{n}", (1600000000 + len(n), 1600000000 + len(n)), follow_symlinks=False)
    os.utime(root, (1600000000, 1600000000))


def file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def user_xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return {}
    return {n: os.getxattr(path, n, follow_symlinks=False) for n in sorted(names) if n.startswith("user.")}


def compare_trees(src, mnt, check_owner=True, uid=None, gid=None):
    """Returns a list of differences between the source tree and the mounted tree."""
    problems = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        names = sorted(dirnames + filenames)
        mdir = os.path.normpath(os.path.join(mnt, rel_dir))
        listed = sorted(os.listdir(mdir))
        if listed != names:
            problems.append(f"{rel_dir}: listing differs: {set(names) ^ set(listed)}")
        for n in names:
            s_path, m_path = os.path.join(dirpath, n), os.path.join(mdir, n)
            rel = os.path.relpath(s_path, src)
            seen += 1
            try:
                a, b = os.lstat(s_path), os.lstat(m_path)
            except OSError as e:
                problems.append(f"{rel}: {e}")
                continue
            want_uid = a.st_uid if uid is None else uid
            want_gid = a.st_gid if gid is None else gid
            fields = [("mode", a.st_mode, b.st_mode), ("mtime", int(a.st_mtime), int(b.st_mtime)),
                      ("nlink", a.st_nlink, b.st_nlink)]
            if check_owner:
                fields += [("uid", want_uid, b.st_uid), ("gid", want_gid, b.st_gid)]
            if not stat.S_ISDIR(a.st_mode):
                fields.append(("size", a.st_size, b.st_size))
            if stat.S_ISCHR(a.st_mode) or stat.S_ISBLK(a.st_mode):
                fields.append(("rdev", a.st_rdev, b.st_rdev))
            for what, x, y in fields:
                if x != y:
                    problems.append(f"{rel}: {what} {x} != {y}")
            if stat.S_ISLNK(a.st_mode) and os.readlink(s_path) != os.readlink(m_path):
                problems.append(f"{rel}: symlink target differs")
            if stat.S_ISREG(a.st_mode) and file_hash(s_path) != file_hash(m_path):
                problems.append(f"{rel}: content differs")
            if user_xattrs(s_path) != user_xattrs(m_path):
                problems.append(f"{rel}: xattrs {user_xattrs(s_path)} != {user_xattrs(m_path)}")
    return problems, seen


def mksquashfs(src, img, *opts):
    if not shutil.which("mksquashfs"):
        skip("mksquashfs is not installed")
    run(["mksquashfs", src, img, "-noappend", "-quiet", "-no-progress", *opts])


def sqar_create_works():
    """The sqar binary (built with sqarfs, so a sqar that does not run fails the test)."""
    sqar = os.environ.get("SQAR", "")
    if not sqar or not os.access(sqar, os.X_OK):
        raise AssertionError(f"sqar is not built (SQAR={sqar!r})")
    run([sqar, "create", "--help"])
    return sqar


class TempDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="sqarfs-e2e-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False
