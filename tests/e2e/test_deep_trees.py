"""Trees whose paths are longer than PATH_MAX (4096): create, extract and diff must work on them,
with xattrs, and also on kernels without listxattrat (before Linux 6.13, Debian 12's own kernel
among them), where xattrs are read by path. Checked against the kernel's squashfs driver.

Python's path functions fail with ENAMETOOLONG on such paths too, so this test walks every tree
with descriptors (dir_fd), never with full paths."""
import os
import sys

from clitest import expect_fail, sqar
from sqartest import SQAR, kernel_mount, log, main, need_root, need_tool, run, tempdir

DEPTH = 80
NAME = "d{:03d}_" + "n" * 56  # 61 characters: 80 levels make ~4.9 KB paths
LEAF_CONTENT = b"at the bottom of a deep tree\n" * 100
TWIN_CONTENT = bytes(range(256)) * 6000 + b"twin\n"


def build_deep_tree(root):
    os.makedirs(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(DEPTH):
            name = NAME.format(i)
            os.mkdir(name, dir_fd=fd)
            if i % 20 == 0:  # a file on the way down, so directories are not all single-child
                f = os.open(f"side{i}", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=fd)
                os.write(f, f"side {i}\n".encode())
                os.close(f)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        f = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(f, LEAF_CONTENT)
        os.close(f)
        os.symlink("leaf.txt", "link", dir_fd=fd)
        # Two equal files of over 1 MiB: hashed in a pass of their own before the data pass.
        for twin in ("twin-a.bin", "twin-b.bin"):
            f = os.open(twin, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(f, TWIN_CONTENT)
            os.close(f)
        os.setxattr(f"/proc/self/fd/{fd}/leaf.txt", "user.depth", b"deep", follow_symlinks=False)
        os.setxattr(f"/proc/self/fd/{fd}", "user.dir", b"bottom")
    finally:
        os.close(fd)


def snapshot_fd(root):
    """{relative path: (type, mode, size, content or link target, xattrs)} walked by descriptors."""
    out = {}

    def xattrs(at):
        try:
            return {k: os.getxattr(at, k, follow_symlinks=False) for k in os.listxattr(at, follow_symlinks=False)
                    if k.startswith("user.")}
        except OSError:
            return {}

    def walk(fd, rel):
        for name in sorted(os.listdir(fd)):
            path = f"{rel}/{name}" if rel else name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            at = f"/proc/self/fd/{fd}/{name}"
            kind = st.st_mode & 0o170000
            if kind == 0o040000:
                out[path] = ("dir", st.st_mode & 0o7777, 0, None, xattrs(at))
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    walk(sub, path)
                finally:
                    os.close(sub)
            elif kind == 0o120000:
                out[path] = ("symlink", 0, 0, os.readlink(name, dir_fd=fd), {})
            else:
                f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    data = b""
                    while chunk := os.read(f, 1 << 20):
                        data += chunk
                finally:
                    os.close(f)
                out[path] = ("file", st.st_mode & 0o7777, st.st_size, data, xattrs(at))

    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk(fd, "")
    finally:
        os.close(fd)
    return out


def compare(expected, actual, what):
    if expected.keys() != actual.keys():
        missing = sorted(expected.keys() - actual.keys())[:3]
        extra = sorted(actual.keys() - expected.keys())[:3]
        raise AssertionError(f"{what}: entries differ; missing {missing}, extra {extra}")
    for path, e in expected.items():
        if actual[path] != e:
            raise AssertionError(f"{what}: ...{path[-60:]} differs: {actual[path][:3]} != {e[:3]}")
    longest = max(len(p) for p in expected)
    if longest <= 4096:
        raise AssertionError(f"the tree is not deep enough to test anything: longest path {longest}")
    log(f"ok: {what}: {len(expected)} entries, longest path {longest} bytes")


def test_deep_tree_round_trip():
    need_root()  # kernel mount
    with tempdir() as d:
        src = f"{d}/src"
        build_deep_tree(src)
        expected = snapshot_fd(src)
        # A future epoch fixes the image time and clamps no file time (diff compares times).
        env = dict(os.environ, SOURCE_DATE_EPOCH="4000000000")
        run([SQAR, "create", "-q", src, f"{d}/a.sqfs"], env=env)
        # The path-based fall-back (kernels before 6.13) must read the same xattrs.
        run([SQAR, "create", "-q", src, f"{d}/b.sqfs"], env=dict(env, SQAR_TEST_NO_LISTXATTRAT="1"))
        with open(f"{d}/a.sqfs", "rb") as a, open(f"{d}/b.sqfs", "rb") as b:
            if a.read() != b.read():
                raise AssertionError("the image differs when xattrs are read without listxattrat")
        log("ok: the same image with and without listxattrat")
        # The hashing pass and --verify-dedup open the twins below their SOURCE too, not by a
        # path longer than PATH_MAX.
        p = run([SQAR, "create", "-q", "--verify-dedup", src, f"{d}/c.sqfs"], env=env)
        assert "collision" not in p.stderr and p.stderr == "", p.stderr

        with kernel_mount(f"{d}/a.sqfs", f"{d}/mnt") as mnt:
            compare(expected, snapshot_fd(mnt), "kernel mount of sqar's image")

        sqar("extract", f"{d}/a.sqfs", "-C", f"{d}/out")
        compare(expected, snapshot_fd(f"{d}/out"), "sqar extract")

        sqar("diff", f"{d}/a.sqfs", src)
        log("ok: sqar diff finds no difference")
        # Change the deepest file: diff must name it, however long its path.
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(DEPTH):
            sub = os.open(NAME.format(i), os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.setxattr(f"/proc/self/fd/{fd}/leaf.txt", "user.depth", b"changed", follow_symlinks=False)
        os.close(fd)
        p = expect_fail(["diff", f"{d}/a.sqfs", src], 1)
        if "leaf.txt: xattrs differ (user.depth)" not in p.stdout:
            raise AssertionError(f"sqar diff did not report the changed xattr: {p.stdout[-300:]!r}")
        log("ok: sqar diff names the changed xattr at the bottom")


def build_chain(root, depth):
    """depth nested directories named d, a file on every 100th level and one at the bottom,
    made one relative step at a time."""
    os.makedirs(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            os.mkdir("d", 0o755, dir_fd=fd)
            if i % 100 == 0:
                f = os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(f, f"level {i}\n".encode())
                os.close(f)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        f = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(f, b"the bottom\n")
        os.close(f)
    finally:
        os.close(fd)


def test_thousand_levels_under_the_default_descriptor_limit():
    """Under `ulimit -n 1024`, extract -j2 and diff -j2 of a 1000-deep tree work, as
    unsquashfs does: no descriptor is held per level per thread."""
    need_tool("prlimit")
    need_tool("unsquashfs")
    sys.setrecursionlimit(10000)  # snapshot_fd recurses once per level
    with tempdir() as d:
        src = f"{d}/src"
        build_chain(src, 1000)
        expected = snapshot_fd(src)
        img = f"{d}/deep.sqfs"
        run([SQAR, "create", "-q", "-j1", src, img])
        limit = ["prlimit", "--nofile=1024:1024"]
        run(limit + ["unsquashfs", "-no-progress", "-q", "-d", f"{d}/ref", img])
        if snapshot_fd(f"{d}/ref") != expected:
            raise AssertionError("unsquashfs's extraction differs from the source")
        for jobs in ("1", "2"):
            out = f"{d}/out{jobs}"
            p = run(limit + [SQAR, "extract", "-q", "-j", jobs, img, "-C", out], check=False)
            if p.returncode != 0:
                raise AssertionError(f"extract -j{jobs} under ulimit -n 1024 failed: {p.stderr[-500:]}")
            got = snapshot_fd(out)
            if got != expected:
                missing = sorted(expected.keys() - got.keys(), key=len)[:1]
                raise AssertionError(f"extract -j{jobs}: differs from the source (missing {[m[-40:] for m in missing]})")
            log(f"ok: extract -j{jobs} of 1000 levels under ulimit -n 1024 matches the source and unsquashfs")
        p = run(limit + [SQAR, "diff", "-j2", "--no-times", img, src], check=False)
        if p.returncode != 0:
            raise AssertionError(f"diff -j2 under ulimit -n 1024 exited {p.returncode}: {p.stdout[-300:]} {p.stderr[-300:]}")
        os.unlink(f"{d}/out2/" + "d/" * 1000 + "leaf")
        p = run(limit + [SQAR, "diff", "-j2", "--no-times", img, f"{d}/out2"], check=False)
        if p.returncode != 1 or not p.stdout.strip().endswith("/d/leaf") or not p.stdout.startswith("- "):
            raise AssertionError(f"diff -j2 of the tree without its leaf: exit {p.returncode}, {p.stdout[-200:]}")
        log("ok: diff -j2 of 1000 levels under ulimit -n 1024 finds no difference, then the missing leaf")


def build_spine_with_branches(root, depth, every, branch):
    """A spine of `depth` directories named d with, every `every` levels, a side branch of
    `branch` directories named s and a file at its bottom."""
    os.makedirs(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            if i % every == 0:
                os.mkdir("s", 0o755, dir_fd=fd)
                b = os.open("s", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                for _ in range(branch - 1):
                    os.mkdir("s", 0o755, dir_fd=b)
                    sub = os.open("s", os.O_RDONLY | os.O_DIRECTORY, dir_fd=b)
                    os.close(b)
                    b = sub
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=b))
                os.close(b)
            os.mkdir("d", 0o755, dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)


def test_branching_deep_tree_under_a_small_descriptor_limit():
    """A 1200-deep spine with a 60-deep branch every 40 levels: extract's threads go down a
    branch, back up into the spine and down again, which reopens levels they had closed.
    Those must be closed again as the walk goes deeper: each thread holds the deepest 32
    levels and every 32nd above them (about 70 here), so 100 descriptors do for one thread
    and 200 for two."""
    need_tool("prlimit")
    sys.setrecursionlimit(10000)
    with tempdir() as d:
        src = f"{d}/src"
        build_spine_with_branches(src, 1200, 40, 60)
        expected = snapshot_fd(src)
        img = f"{d}/branching.sqfs"
        run([SQAR, "create", "-q", src, img])
        for jobs, limit in (("1", 100), ("2", 200)):
            out = f"{d}/out{jobs}"
            p = run(["prlimit", f"--nofile={limit}:{limit}", SQAR, "extract", "-q", "-j", jobs, img, "-C", out],
                    check=False)
            assert p.returncode == 0, f"extract -j{jobs} under ulimit -n {limit}: {p.stderr[-300:]}"
            assert snapshot_fd(out) == expected, f"extract -j{jobs}: differs from the source"
            log(f"ok: extract -j{jobs} of a branching 1200-deep tree under ulimit -n {limit} matches the source")


if __name__ == "__main__":
    main([test_deep_tree_round_trip, test_thousand_levels_under_the_default_descriptor_limit,
          test_branching_deep_tree_under_a_small_descriptor_limit])
