#!/usr/bin/env python3
"""A damaged data block gives EIO for reads of that file only; other files stay readable,
the daemon stays up and unmounting works."""
import errno
import os
import struct
import subprocess
import sys

from sqarfs_common import Mount, rand_bytes, require_fuse, sqarfs_refused
from sqartest import exit_status, file_digest, is_mounted, mksquashfs, tempdir, tree_differences
import random


def export_table_is_not_trusted(tmp):
    """The export table (inode number -> inode) is for NFS; the kernel never reads it to serve
    files, and neither may sqarfs: with two of its entries swapped, every file still lists,
    stats and reads as its source (sqarfs once served one file's content under another's name
    once a readdirplus had run). Returns failures."""
    failures = []
    src, mnt = f"{tmp}/export-src", f"{tmp}/export-mnt"
    os.makedirs(f"{src}/d")
    for i in range(40):
        with open(f"{src}/d/file{i:02}", "wb") as f:
            f.write(b"content of file %d\n" % i * (i + 1))
    img = f"{tmp}/export.sqfs"
    mksquashfs(src, img, "-noI", "-noD", "-noF", "-noX")  # metadata stored uncompressed
    with open(img, "r+b") as f:
        data = bytearray(f.read())
        inode_count = struct.unpack_from("<I", data, 4)[0]
        block = struct.unpack_from("<Q", data, struct.unpack_from("<Q", data, 88)[0])[0]
        header = struct.unpack_from("<H", data, block)[0]
        if not header & 0x8000 or (header & 0x7FFF) != 8 * inode_count:
            return [f"expected one uncompressed export block of {inode_count} refs, header {header:#x}"]
        refs = list(struct.unpack_from(f"<{inode_count}Q", data, block + 2))
        refs[2], refs[20] = refs[20], refs[2]  # inodes 3 and 21 (two files) trade places
        struct.pack_into(f"<{inode_count}Q", data, block + 2, *refs)
        f.seek(0)
        f.write(data)
    with Mount(img, mnt):
        subprocess.run(["ls", "-l", f"{mnt}/d"], stdout=subprocess.DEVNULL, check=True)  # readdirplus
        # The swapped files are read first: once one file of a fragment block is read, its
        # mates are pushed into the page cache from the inodes the listing gave, which hid
        # the damage from later reads.
        swapped = sorted(n for n in os.listdir(f"{mnt}/d") if os.lstat(f"{mnt}/d/{n}").st_ino in (3, 21))
        if len(swapped) != 2:
            failures.append(f"expected the files numbered 3 and 21, found {swapped}")
        for n in swapped:
            if file_digest(f"{mnt}/d/{n}") != file_digest(f"{src}/d/{n}"):
                failures.append(f"swapped export entries: d/{n} read another file's content")
        problems, _ = tree_differences(src, mnt)
        failures += [f"swapped export entries: {p}" for p in problems]
    return failures


def unreadable_fragment_table_is_refused_at_mount(tmp):
    """A fragment table that cannot be read would fail every small file: sqarfs refuses the
    image at mount, naming the table, as the kernel refuses it, instead of mounting and
    answering EIO. Returns failures."""
    src, mnt = f"{tmp}/frag-src", f"{tmp}/frag-mnt"
    os.makedirs(src)
    for i in range(5):
        with open(f"{src}/small{i}", "wb") as f:
            f.write(b"small file %d\n" % i)
    img = f"{tmp}/frag.sqfs"
    mksquashfs(src, img, "-comp", "gzip")
    with open(img, "r+b") as f:
        f.seek(19)  # superblock fragment_count (u32 at 16): its top bit makes the table huge
        top = f.read(1)[0]
        f.seek(19)
        f.write(bytes([top ^ 0x80]))
    os.makedirs(mnt, exist_ok=True)
    r = sqarfs_refused([img, mnt], mnt)
    if r.mounted:
        return [f"an unreadable fragment table was mounted (exit {r.returncode}, {r.stderr!r})"]
    if r.returncode == 0 or "fragment table" not in r.stderr or img not in r.stderr:
        return [f"unreadable fragment table: exit {r.returncode}, {r.stderr!r}"]
    return []


def main():
    require_fuse()
    with tempdir() as tmp:
        src, mnt = f"{tmp}/src", f"{tmp}/mnt"
        os.makedirs(src)
        rng = random.Random(3)
        # The only file with full blocks: mksquashfs writes its blocks first, right after
        # the 96-byte superblock (gzip needs no options block).
        with open(f"{src}/victim", "wb") as f:
            f.write(rand_bytes(rng, 600000, True))
        for i in range(20):
            with open(f"{src}/small{i}", "wb") as f:
                f.write(rand_bytes(rng, 3000 + i, True))
        img = f"{tmp}/img.sqfs"
        mksquashfs(src, img, "-comp", "gzip")
        with open(img, "r+b") as f:
            f.seek(96 + 300)
            chunk = bytearray(f.read(64))
            for i in range(len(chunk)):
                chunk[i] ^= 0x5A
            f.seek(96 + 300)
            f.write(chunk)
        failures = []
        with Mount(img, mnt):
            try:
                with open(f"{mnt}/victim", "rb") as f:
                    f.read()
                failures.append("reading the damaged file succeeded")
            except OSError as e:
                if e.errno != errno.EIO:
                    failures.append(f"expected EIO, got {e}")
            # The rest of the file system is unaffected and the daemon is alive.
            for i in range(20):
                if file_digest(f"{mnt}/small{i}") != file_digest(f"{src}/small{i}"):
                    failures.append(f"small{i} differs")
            # The damaged file's later blocks are intact and still readable.
            with open(f"{mnt}/victim", "rb") as f, open(f"{src}/victim", "rb") as g:
                f.seek(300000)
                g.seek(300000)
                if f.read(100000) != g.read(100000):
                    failures.append("intact blocks of the damaged file differ")
            if not is_mounted(mnt):
                failures.append("the daemon died")
        if is_mounted(mnt):
            failures.append("still mounted after unmount")
        # Corrupt superblock: refused at mount time with a message, nothing mounted.
        with open(img, "r+b") as f:
            f.seek(0)
            f.write(b"JUNK")
        os.makedirs(mnt, exist_ok=True)
        r = sqarfs_refused([img, mnt], mnt)
        if r.returncode == 0 or "not a SquashFS image" not in r.stderr:
            failures.append(f"bad superblock: exit {r.returncode}, {r.stderr!r}")
        failures += export_table_is_not_trusted(tmp)
        failures += unreadable_fragment_table_is_refused_at_mount(tmp)
        return exit_status(failures)


if __name__ == "__main__":
    sys.exit(main())
