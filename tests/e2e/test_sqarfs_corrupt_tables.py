#!/usr/bin/env python3
"""sqarfs on damaged images (complements test_sqarfs_corrupt.py, which damages one data block):
for bits flipped in the superblock, every metadata block (inodes, directories, fragment, export,
id and xattr tables), the pointer arrays and data blocks of a sqar image (see corruptlib.py),
sqarfs either refuses to mount with a message, or mounts and answers every stat, readdir,
readlink, getxattr and read with the data or with EIO — and stays up, unmounts cleanly and
reports no sanitizer error."""
import errno
import os
import stat
import sys

import corruptlib
from sqarfs_common import TempDir, is_mounted, require_fuse, sqar_create_works, sqarfs_binary
from sqarfs_foreground import ForegroundMount, run_with_deadline


def walk_everything(mnt):
    """Touches every entry; returns (operations, EIO count, unexpected errors)."""
    ops, eio, bad = 0, 0, []

    def attempt(what, fn, *args):
        nonlocal ops, eio
        ops += 1
        try:
            return fn(*args)
        except OSError as e:
            if e.errno == errno.EIO:
                eio += 1
            else:
                bad.append(f"{what} {args[0]}: {e}")
            return None

    stack = [mnt]
    while stack:
        d = stack.pop()
        names = attempt("listdir", os.listdir, d) or []
        for n in names:
            p = os.path.join(d, n)
            st = attempt("lstat", os.lstat, p)
            if st is None:
                continue
            attempt("getxattr", lambda q: [os.getxattr(q, k, follow_symlinks=False)
                                           for k in os.listxattr(q, follow_symlinks=False)], p)
            if stat.S_ISDIR(st.st_mode):
                stack.append(p)
            elif stat.S_ISLNK(st.st_mode):
                attempt("readlink", os.readlink, p)
            elif stat.S_ISREG(st.st_mode):
                attempt("read", lambda q: open(q, "rb").read(), p)
    return ops, eio, bad


WALK_SECONDS = 60  # a walk of the whole tree takes well under a second


def keep(img, damage):
    """Copies a damaged image that broke sqarfs to /tmp for reproduction."""
    dest = f"/tmp/sqarfs-hang-{abs(hash(damage.name)) % 100000}.sqfs"
    with open(img, "rb") as a, open(dest, "wb") as b:
        b.write(a.read())
    return dest


def main():
    require_fuse()
    sqar = sqar_create_works()
    if not sqar:
        print("SKIP: `sqar create` is not available")
        return 77
    sqarfs = sqarfs_binary()
    failures, mounted, refused, eio_total = [], 0, 0, 0
    with TempDir() as tmp:
        src = corruptlib.make_source(f"{tmp}/src")
        label, path, strong = corruptlib.build_images(src, tmp, sqar)[0]
        data = open(path, "rb").read()
        # Truncated images are refused at open (covered by test_corrupt_images.py); the flips are
        # what a mounted file system has to live with.
        damages = [x for x in corruptlib.damages(data, strong) if not x.name.startswith("truncated")]
        mnt, img = f"{tmp}/mnt", f"{tmp}/damaged.sqfs"
        os.makedirs(mnt)
        for damage in damages:
            with open(img, "wb") as f:
                f.write(damage.data)
            with ForegroundMount([sqarfs, img, mnt, "-o", "cache=256K"], mnt) as m:
                if m.mounted:
                    outcome = run_with_deadline(lambda: walk_everything(mnt), mnt, WALK_SECONDS)
                    if outcome == "hung":
                        failures.append(f"[{damage.name}] sqarfs stopped answering (no reply in {WALK_SECONDS} s);"
                                        f" image kept as {keep(img, damage)}")
                        continue
                    ops, eio, bad = outcome
                    eio_total += eio
                    failures += [f"[{damage.name}] {b}" for b in bad[:3]]
                    if not is_mounted(mnt) or not os.path.isdir(mnt):
                        failures.append(f"[{damage.name}] the daemon died")
            mounted += m.mounted
            if not m.mounted:
                refused += 1
                if img not in m.stderr:
                    failures.append(f"[{damage.name}] refused without naming the image: {m.stderr!r}")
            why = m.problem()
            if why:
                failures.append(f"[{damage.name}] {why}")
        print(f"{label}: {len(damages)} damaged images: {mounted} mounted ({eio_total} EIO answers), "
              f"{refused} refused at mount time")
    for f in failures[:40]:
        print("FAIL:", f)
    print("OK" if not failures else f"{len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
