#!/usr/bin/env python3
"""sqarfs on damaged images (complements test_sqarfs_corrupt.py, which damages one data block):
for bits flipped in the superblock, every metadata block (inodes, directories, fragment, export,
id and xattr tables), the pointer arrays and data blocks of a sqar image (see corruptlib.py),
sqarfs either refuses to mount with a message, or mounts and answers every stat, readdir,
readlink, getxattr and read with the data or with EIO — and stays up, unmounts cleanly and
reports no sanitizer error. Where the damage hits something a checksum covers (corruptlib's
must_fail), every answer a mounted sqarfs gives must be EIO or exactly what it gives from the
undamaged image (a table sqarfs never reads, such as the manifest, changes nothing)."""
import errno
import hashlib
import os
import stat
import sys

import corruptlib
from sqarfs_common import require_fuse, sqar_create_works, sqarfs_binary
from sqartest import exit_status, is_mounted, tempdir
from sqarfs_foreground import ForegroundMount, run_with_deadline


def walk_everything(mnt):
    """Touches every entry; returns (operations, EIO count, unexpected errors, what was served:
    path -> lstat fields, xattrs, symlink target and content hash)."""
    ops, eio, bad, served = 0, 0, [], {}

    def attempt(what, fn, *args):
        nonlocal ops, eio
        ops += 1
        try:
            value = fn(*args)
        except OSError as e:
            if e.errno == errno.EIO:
                eio += 1
            else:
                bad.append(f"{what} {args[0]}: {e}")
            value = None
        served[(what, os.path.relpath(args[0], mnt))] = value
        return value

    stack = [mnt]
    while stack:
        d = stack.pop()
        names = attempt("listdir", os.listdir, d) or []
        for n in names:
            p = os.path.join(d, n)
            # The fields the image decides (st_dev is the mount's, new on each mount).
            st = attempt("lstat", lambda q: tuple(os.lstat(q)[i] for i in (0, 1, 3, 4, 5, 6, 8)), p)
            if st is None:
                continue
            attempt("getxattr", lambda q: [os.getxattr(q, k, follow_symlinks=False)
                                           for k in os.listxattr(q, follow_symlinks=False)], p)
            mode = st[0]
            if stat.S_ISDIR(mode):
                stack.append(p)
            elif stat.S_ISLNK(mode):
                attempt("readlink", os.readlink, p)
            elif stat.S_ISREG(mode):
                attempt("read", lambda q: hashlib.sha256(open(q, "rb").read()).hexdigest(), p)
    return ops, eio, bad, served


# Files of corruptlib.make_source whose blocks hold random data: sqar stores them raw, so no codec
# checksum covers them, and the manifest holds one hash per whole file, which a reader serving
# single blocks cannot check. A flipped byte there may be served as read (verify and whole-file
# readers catch it); any other damaged answer without EIO is a failure.
RAW_STORED = {"random.bin", "exact-blocks.bin", "dup/tail-a", "dup/tail-b"}

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
    sqarfs = sqarfs_binary()
    failures = []
    with tempdir() as tmp:
        src = corruptlib.make_source(f"{tmp}/src")
        images = corruptlib.build_images(src, tmp, sqar)
        mnt, img = f"{tmp}/mnt", f"{tmp}/damaged.sqfs"
        os.makedirs(mnt)
        # The gzip images: every metadata block, and every data block of the mksquashfs image,
        # is checksummed, so their damage must come out as EIO.
        for label, path, strong in (images[0], images[2]):
            mounted, refused, eio_total = 0, 0, 0
            data = open(path, "rb").read()
            # Truncated images are refused at open (covered by test_corrupt_images.py); the flips
            # are what a mounted file system has to live with.
            damages = [x for x in corruptlib.damages(data, strong) if not x.name.startswith("truncated")]
            with open(img, "wb") as f:
                f.write(data)
            with ForegroundMount([sqarfs, img, mnt, "-o", "cache=256K"], mnt) as m:
                if not m.mounted:
                    raise AssertionError(f"sqarfs refused the undamaged image: {m.stderr}")
                _, clean_eio, clean_bad, clean = walk_everything(mnt)
            if clean_eio or clean_bad or m.problem():
                raise AssertionError(f"the undamaged image: {clean_eio} EIO, {clean_bad[:3]}, {m.problem()}")
            silent = raw_served = 0
            for damage in damages:
                with open(img, "wb") as f:
                    f.write(damage.data)
                with ForegroundMount([sqarfs, img, mnt, "-o", "cache=256K"], mnt) as m:
                    if m.mounted:
                        outcome = run_with_deadline(lambda: walk_everything(mnt), mnt, WALK_SECONDS)
                        if outcome == "hung":
                            failures.append(f"[{label}: {damage.name}] sqarfs stopped answering (no reply in "
                                            f"{WALK_SECONDS} s); image kept as {keep(img, damage)}")
                            continue
                        ops, eio, bad, served = outcome
                        eio_total += eio
                        failures += [f"[{label}: {damage.name}] {b}" for b in bad[:3]]
                        # Answers given (not EIO) that differ from the undamaged image's: damage the
                        # checksums cover must never reach the caller as data.
                        wrong = sorted(k for k, v in served.items() if v is not None and v != clean.get(k))
                        raw = [k for k in wrong if k[0] == "read" and k[1] in RAW_STORED]
                        raw_served += bool(damage.must_fail and raw)
                        wrong = [k for k in wrong if k not in raw]
                        if damage.must_fail and wrong:
                            silent += 1
                            failures.append(f"[{label}: {damage.name}] the damage hits checked data, yet "
                                            f"{len(wrong)} answers ({eio} EIO besides) differ from the undamaged "
                                            f"image's: {wrong[:3]}")
                        if not is_mounted(mnt) or not os.path.isdir(mnt):
                            failures.append(f"[{label}: {damage.name}] the daemon died")
                mounted += m.mounted
                if not m.mounted:
                    refused += 1
                    if img not in m.stderr:
                        failures.append(f"[{label}: {damage.name}] refused without naming the image: {m.stderr!r}")
                why = m.problem()
                if why:
                    failures.append(f"[{label}: {damage.name}] {why}")
            print(f"{label}: {len(damages)} damaged images: {mounted} mounted ({eio_total} EIO answers), "
                  f"{refused} refused at mount time, {silent} served damaged data instead of EIO, {raw_served} served "
                  f"damaged blocks stored raw (no block checksum)")
    return exit_status(failures)


if __name__ == "__main__":
    sys.exit(main())
