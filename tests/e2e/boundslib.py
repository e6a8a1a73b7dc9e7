"""Crafted images whose claimed counts would cost memory without bound or whose damage must
stay local, and the measurements the bounds tests make on sqar and sqarfs.

Hostile images go to sqar and sqarfs only, never to the kernel's squashfs driver."""
import os
import subprocess
import sys

from craftfs import Image
from sqartest import tempdir

MIB = 1 << 20
SANITIZED = "ASAN_OPTIONS" in os.environ
# ASan's shadow memory and redzones add tens of MiB to a run that allocates a lot; the bombs
# these bounds catch cost hundreds.
READ_BOUND = (128 if SANITIZED else 64) * (1 << 20)


# Runs argv[2:] as a child and writes its peak RSS (KiB) to argv[1]. A fresh, small process forks
# it: a child's ru_maxrss includes the memory of whatever it was forked from before its exec, so
# measuring straight from a test that has just built a large image would count the test.
_MEASURE = """
import os, resource, sys
pid = os.fork()
if pid == 0:
    if os.environ.get("SQAR_TEST_AS_LIMIT"):
        limit = int(os.environ["SQAR_TEST_AS_LIMIT"])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def _measuring_env():
    """The environment of a measured command: outside sanitizer builds the address space is
    capped at 4 GiB. ThreadSanitizer maps its shadow at fixed addresses, which a cap breaks
    (its allocator fails a CHECK at start), and ASan's shadow needs terabytes; ASan's
    quarantine keeps freed memory on purpose, so it is turned off to measure what is held."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":quarantine_size_mb=0"
    elif "TSAN_OPTIONS" not in env:
        env["SQAR_TEST_AS_LIMIT"] = str(4 << 30)
    return env


def measured(cmd, timeout=300, keep_stdout=True):
    """(exit status, stdout, stderr, peak RSS in bytes) of cmd; keep_stdout=False sends its
    output to /dev/null. Outside sanitizer builds (whose shadow memory needs terabytes of address
    space) the address space is capped at 4 GiB, so a regression fails at once instead of pushing
    the machine into swap."""
    env = _measuring_env()
    with tempdir() as tmp, open(f"{tmp}/out", "w+") as out, open(f"{tmp}/err", "w+") as err:
        p = subprocess.run([sys.executable, "-c", _MEASURE, f"{tmp}/rss"] + cmd, env=env, timeout=timeout,
                           stdout=out if keep_stdout else subprocess.DEVNULL, stderr=err)
        out.seek(0)
        err.seek(0)
        with open(f"{tmp}/rss") as f:
            rss = int(f.read()) * 1024
        return p.returncode, out.read(), err.read(), rss


def measured_head(cmd, nbytes, timeout=300):
    """(the first nbytes of cmd's output, peak RSS in bytes): the pipe is closed after them, so a
    command writing terabytes (cat of a huge sparse file) ends on EPIPE."""
    env = _measuring_env()
    with tempdir() as tmp:
        p = subprocess.Popen([sys.executable, "-c", _MEASURE, f"{tmp}/rss"] + cmd, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        head = p.stdout.read(nbytes)
        p.stdout.close()
        p.wait(timeout=timeout)
        with open(f"{tmp}/rss") as f:
            return head, int(f.read()) * 1024


def peak_rss_of(pid):
    """VmHWM of a running process, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def write_image(path, img, root):
    with open(path, "wb") as f:
        f.write(img.build(root))
    return path


XATTR_BOMB_VALUE = bytes(range(256)) * 256


def xattr_bomb_image(path):
    """65536 xattrs on `bomb`, all pointing at one 64 KiB out-of-line value (4 GiB decoded), and
    a sibling `good` without xattrs."""
    img = Image(block_size=4096)
    bomb = img.file(b"bomb\n").set_xattrs([(f"user.k{i:05d}", XATTR_BOMB_VALUE) for i in range(65536)])
    return write_image(path, img, img.dir({"bomb": bomb, "good": img.file(b"good\n")}))


def shared_xattr_set_image(path, names):
    """`names` names f000000... of one file whose 64 xattrs all point at one 64 KiB value: a set
    of 4 MiB decoded (the most the reader takes) in an image of a few dozen KB."""
    img = Image(block_size=4096, compress_meta=True)
    f = img.file(b"x", extended=True).set_xattrs([(f"user.k{i:02d}", XATTR_BOMB_VALUE) for i in range(64)])
    return write_image(path, img, img.dir({f"f{i:06d}": f for i in range(names)}, extended=True))


def sparse_bomb_image(path, block_size=1 << 20):
    """`huge`: 2^25 sparse 1 MiB blocks (32 TiB, 128 MiB of block list in ~0.5 MB of image).
    block_size=4096 makes it 128 GiB, which ext4 (16 TiB at most per file) can hold extracted."""
    img = Image(block_size=block_size, compress_meta=True)
    return write_image(path, img, img.dir({"huge": img.file(blocks=1 << 25, extended=True),
                                           "small": img.file(b"s")}))


def deep_image(path, depth):
    """d/d/.../d (`depth` directories), each but the last also holding `f`; the last holds
    `leaf` ("bottom\\n"). Both files are one inode."""
    img = Image(block_size=4096, compress_meta=True)
    leaf = img.file(b"bottom\n")
    node = img.dir({"leaf": leaf})
    for _ in range(depth - 1):
        node = img.dir({"d": node, "f": leaf})
    return write_image(path, img, img.dir({"d": node}))


def overlapping_block_lists_image(path, n):
    """f000..f{n-1} each claim 2^25 sparse 1 MiB blocks but store an empty list, so each one's
    list runs on over the inodes after it and into `z`'s real list of 2^25 zero words (128 MB
    of inode table in about 0.5 MB of image): n lists of 128 MB from a table of 128 MB. Every
    field of those inodes reads as a valid size word (mode 0, a fragment and an xattr set)."""
    img = Image(block_size=1 << 20, compress_meta=True)
    files = {}
    for i in range(n):
        f = img.file(blocks=[], mode=0, extended=True).set_xattrs([("user.a", b"1")])
        f.size, f.fragment = (1 << 45) + 1, (0, 0)
        files[f"f{i:03d}"] = f
    files["z"] = img.file(blocks=1 << 25, tail=b"z", mode=0, extended=True).set_xattrs([("user.a", b"1")])
    return write_image(path, img, img.dir(files))


def suffix_listings_image(path, n):
    """`a` lists n files, each under a listing header of its own; s00001..s{n-1} are directories
    whose listings are the suffixes of a's from its k-th header on (none starts where a's does):
    n^2/2 entries from a directory table of n."""
    img = Image(block_size=4096, compress_meta=True)
    f = img.file(b"f\n")
    big = img.dir({f"file-{i:05d}": f for i in range(n)}, extended=True)
    big.per_header = 1
    suffixes = {}
    for k in range(1, n):
        d = img.dir({}, extended=True)  # a listing over 64 KiB needs the extended inode
        d.listing_of = (big, k)
        suffixes[f"s{k:05d}"] = d
    return write_image(path, img, img.dir({"a": big, **suffixes}, extended=True))


def bad_sibling_image(path):
    """dir/f00..f19 with content "content N\\n"; f07's fragment index is outside the table."""
    img = Image(block_size=4096)
    files = {f"f{i:02d}": img.file(b"content %d\n" % i) for i in range(20)}
    files["f07"].fragment = (999, 0)
    return write_image(path, img, img.dir({"dir": img.dir(files)}))
