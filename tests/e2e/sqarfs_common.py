"""Helpers for the sqarfs end-to-end tests: the daemon, its mounts and the page cache.

Building, packing and comparing trees are in sqartest. Every mount made here is unmounted in
a finally block by Mount's context manager, so a failing test never leaves a mount behind.
"""
import contextlib
import os
import random
import shutil
import stat
import subprocess
import sys
import time

from sqartest import check_sanitizers, is_mounted, make_full_tree, run, skip, tempdir, unmount_fuse

@contextlib.contextmanager
def fuse_workspace():
    """For a test that mounts: skips without FUSE (require_fuse), then yields (tmp, src, mnt),
    paths in a temporary directory that is removed afterwards (nothing is created in it)."""
    require_fuse()
    with tempdir() as tmp:
        yield tmp, f"{tmp}/src", f"{tmp}/mnt"


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
        if not unmount_fuse(self.mnt):
            print(f"WARNING: could not unmount {self.mnt}", file=sys.stderr)
        return False


def sqarfs_refused(args, mnt):
    """Runs sqarfs ARGS where it should refuse before mounting. Returns the CompletedProcess
    (text output; sanitizer reports fail the test) with .mounted telling whether MNT got
    mounted after all, in which case it is unmounted again."""
    r = subprocess.run([sqarfs_binary(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    check_sanitizers(r.args, r.returncode, r.stderr)
    r.mounted = is_mounted(mnt)
    if r.mounted:
        unmount_fuse(mnt)
    return r


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
    """sqartest's full tree plus what reads through a mount need by name: a directory of 1500
    entries (readdir over several buffers, pushes to fragment-block mates), files across block
    boundaries, a 3000-byte xattr, a hard link, a dangling symlink and a device with a large
    minor."""
    def mount_shapes(root):
        rng = random.Random(seed)
        os.makedirs(f"{root}/sub/deeper")
        os.makedirs(f"{root}/big")
        files = {
            "zero": b"",
            "one": b"x",
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
        os.symlink("/nonexistent/" + "L" * 200, f"{root}/sub/dangling")
        os.mknod(f"{root}/blk", 0o600 | stat.S_IFBLK, os.makedev(259, 70000))
        for i in range(1500):
            with open(f"{root}/big/entry-with-a-longer-name-{i:05d}", "w") as f:
                f.write(str(i))
        os.chmod(f"{root}/sub", 0o750)
        os.chown(f"{root}/one", 1234, 5678)
        os.chown(f"{root}/sub/deeper", 42, 43)
        os.setxattr(f"{root}/sub/4095", "user.big", b"v" * 3000)
        os.setxattr(f"{root}/sub", "user.dir", b"d")
        os.setxattr(f"{root}/one", "user.empty", b"")

    make_full_tree(root, extra=mount_shapes)


def sqar_create_works():
    """The sqar binary (built with sqarfs, so a sqar that does not run fails the test)."""
    sqar = os.environ.get("SQAR", "")
    if not sqar or not os.access(sqar, os.X_OK):
        raise AssertionError(f"sqar is not built (SQAR={sqar!r})")
    run([sqar, "create", "--help"])
    return sqar
