#!/usr/bin/env python3
"""sqarfs pushes decompressed data into the kernel's page cache so that neighbours cost no request.

1. A random reader of a big file: the first read of a block pushes the block's other pages,
   for every block. (Blocks 2k and 2k+1 of a file once shared a key in the table of recent
   pushes, so every second block was never pushed and each of its pages cost a READ: random
   4 KiB reads of the log set ran at 0.44x the kernel's speed instead of ~1x.)
2. Small files that share a fragment block, listed by readdirplus, whose inodes lie past the
   first 64 KiB of the inode table: their node ids (inode positions) need more than 32 bits.
   The list of fragment mates kept the id cut to 32 bits, so those pushes named no inode (or,
   by chance, another file's inode, which would have put one file's bytes in another's cache).
Residency is checked with mincore(2), which reads nothing. The kernel may reclaim clean pages
at any moment (DAMON here pages out idle memory), so each check gets three fresh mounts.
"""
import os
import random
import struct
import sys
import time

from sqarfs_common import require_fuse, resident_map, sqarfs_binary
from sqartest import mksquashfs, tempdir
from sqarfs_foreground import ForegroundMount

BLOCK = 131072
PAGE = 4096


def text(n, seed):
    rng = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"eta", b"theta"]
    out = bytearray()
    while len(out) < n:
        out += b" ".join(rng.choice(words) for _ in range(12)) + b" %d\n" % rng.randrange(10**6)
    return bytes(out[:n])


def wait_resident(paths, timeout=10.0):
    """Waits until every page of PATHS is resident; returns the paths that are not."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [p for p in paths if not all(resident_map(p))]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.01)


def with_mount(img, mnt, work, attempts=3):
    """Runs work(mnt) -> problem or None on up to ATTEMPTS fresh mounts; returns the last problem."""
    problem = None
    for attempt in range(1, attempts + 1):
        with ForegroundMount([sqarfs_binary(), img, mnt], mnt) as m:
            if not m.mounted:
                raise AssertionError(f"sqarfs did not mount: {m.stderr[-2000:]}")
            problem = work(mnt)
        if m.problem():
            raise AssertionError(m.problem())
        print(f"  attempt {attempt}: {problem or 'ok'}")
        if problem is None:
            return None
    return problem


def every_block_pushed(src, tmp):
    data = text(40 * BLOCK + 777, seed=7)
    os.makedirs(f"{src}/big")
    with open(f"{src}/big/file.log", "wb") as f:
        f.write(data)
    img, mnt = f"{tmp}/big.sqfs", f"{tmp}/mnt-big"
    os.makedirs(mnt)
    mksquashfs(f"{src}/big", img, "-comp", "zstd", "-b", str(BLOCK))

    def work(mnt):
        path = f"{mnt}/file.log"
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            blocks = list(range((len(data) + BLOCK - 1) // BLOCK))
            random.Random(3).shuffle(blocks)
            for b in blocks:  # the third page of each block, in random order
                at = min(b * BLOCK + 2 * PAGE, len(data) - 1)
                if os.pread(fd, PAGE, at) != data[at:at + PAGE]:
                    return f"block {b}: wrong bytes"
            if wait_resident([path]):
                flags = resident_map(path)
                per_block = BLOCK // PAGE
                missing = [b for b in sorted(blocks) if not all(flags[b * per_block:(b + 1) * per_block])]
                return (f"{flags.count(False)} of {len(flags)} pages never became resident; blocks not "
                        f"pushed: {missing[:12]}{' ...' if len(missing) > 12 else ''}")
            with open(path, "rb") as f:
                if f.read() != data:
                    return "the file read through the page cache differs from the source"
            return None
        finally:
            os.close(fd)

    return with_mount(img, mnt, work)


def late_mates_pushed(src, tmp):
    # 15000 files before them make the inode table well over 64 KiB (random mtimes keep the
    # inodes from compressing to nothing); "zz-late" sorts last, so its inodes come last.
    rng = random.Random(5)
    root = f"{src}/tree"
    for d in range(30):
        os.makedirs(f"{root}/a-filler-{d:02d}")
        for i in range(500):
            p = f"{root}/a-filler-{d:02d}/file-{i:04d}"
            with open(p, "wb") as f:
                f.write(b"filler %d %d\n" % (d, i))
            t = rng.randrange(10**9)
            os.utime(p, (t, t))
    late = [f"zz-late/mate-{i:03d}" for i in range(200)]
    os.makedirs(f"{root}/zz-late")
    for rel in late:
        with open(f"{root}/{rel}", "wb") as f:
            f.write(b"late mate %s\n" % rel.encode())
    img, mnt = f"{tmp}/late.sqfs", f"{tmp}/mnt-late"
    os.makedirs(mnt)
    mksquashfs(root, img, "-comp", "zstd")
    with open(img, "rb") as f:
        sb = f.read(96)
    inode_table, dir_table = struct.unpack_from("<QQ", sb, 64)
    if dir_table - inode_table < 80 * 1024:  # the late files are the last ~1.3% of it
        raise AssertionError(f"the inode table is only {dir_table - inode_table} bytes: the late files' "
                             f"node ids would fit in 32 bits and the test would prove nothing")

    def work(mnt):
        names = set(os.listdir(f"{mnt}/zz-late"))  # readdirplus: the kernel now knows them all
        if len(names) != len(late):
            return f"listed {len(names)} of {len(late)} files"
        with open(f"{mnt}/{late[0]}", "rb") as f:
            if f.read() != b"late mate %s\n" % late[0].encode():
                return f"{late[0]}: wrong content"
        missing = wait_resident([f"{mnt}/{rel}" for rel in late[1:]])
        if missing:
            return f"{len(missing)} of {len(late) - 1} fragment mates never became resident (first: {missing[0]})"
        for rel in late:
            with open(f"{mnt}/{rel}", "rb") as f:
                if f.read() != b"late mate %s\n" % rel.encode():
                    return f"{rel}: wrong content"
        return None

    return with_mount(img, mnt, work)


def main():
    require_fuse()
    failures = []
    with tempdir() as tmp:
        src = f"{tmp}/src"
        for name, check in (("every block of a randomly read file is pushed", every_block_pushed),
                            ("fragment mates past 64 KiB of inode table are pushed", late_mates_pushed)):
            print(name)
            problem = check(src, tmp)
            if problem:
                failures.append(f"{name}: {problem}")
    for f in failures:
        print("FAIL:", f)
    print(f"{2 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
