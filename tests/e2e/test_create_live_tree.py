#!/usr/bin/env python3
"""`create` on a tree that is written while it is packed (a live /var/log). Files grow, shrink,
vanish and are rewritten between the scan (which fixes each file's size) and the read that
stores them. Without --strict the build warns naming each such file and exits 0, and the image
holds one consistent state of every file: the first N bytes of a file that grew (N: its size
when scanned), the bytes a shrunk file still has, nothing of a vanished one; a large file
rewritten between the hashing pass and its stored read keeps its new content while its former
duplicate keeps its own. With --strict the build fails and leaves no image. Checked with
unsquashfs, on the warm (page cache) and cold (evicted) read paths and with --reuse.

The change is made at a known point, not by racing a writer: the test watches the source with
inotify, and when the data pass opens the first file in image order it stops sqar (SIGSTOP),
rewrites the files that come thousands of files later, and lets it go on (SIGCONT). If any of
them was opened before sqar stopped (a very slow reaction), the try does not count and is
repeated."""
import os
import shutil
import stat

from changing import IN_ACCESS, run_changing, until_valid
from sqarfs_common import resident_pages
from sqartest import (SQAR, kernel_mount, leftovers, log, main, pseudo_random, run, skip, tempdir, unsquashfs_extract,
                      write)

MIB = 1 << 20


ORIGINAL = {
    "grow_small": pseudo_random(10_000, 1),
    "grow_big": pseudo_random(3 * MIB + 5, 2),  # several 1 MiB read units
    "shrink_small": pseudo_random(20_000, 3),
    "shrink_big": pseudo_random(3 * MIB + 77, 4),
    "gone_small": pseudo_random(9_000, 5),
    "gone_big": pseudo_random(2 * MIB + 9, 6),
    # Pairs of equal large files (hashed in a first pass, stored once): the first of each pair
    # changes between that pass and the read that stores it (or, in test_during_hashing_pass,
    # pair2_a while the pass reads pair0_*).
    "pair0_a": pseudo_random(8 * MIB, 14),
    "pair0_b": pseudo_random(8 * MIB, 14),
    "pair1_a": pseudo_random(2 * MIB + 11, 7),
    "pair1_b": pseudo_random(2 * MIB + 11, 7),
    "pair2_a": pseudo_random(2 * MIB + 13, 8),
    "pair2_b": pseudo_random(2 * MIB + 13, 8),
    # Equal small files (hashed in memory): the first one grows or shrinks.
    "same1_a": pseudo_random(5_000, 9),
    "same1_b": pseudo_random(5_000, 9),
    "same2_a": pseudo_random(6_000, 10),
    "same2_b": pseudo_random(6_000, 10),
    "dir_gone/f1": pseudo_random(3_000, 11),
    "dir_gone/f2": pseudo_random(4_000, 12),
    "steady": pseudo_random(7_000, 13),
    # Replaced by something that is not a regular file: a FIFO (whose open would wait for a
    # writer forever), a symlink, a directory.
    "to_fifo": pseudo_random(1_000, 15),
    "to_symlink": pseudo_random(1_100, 16),
    "to_dir": pseudo_random(1_200, 17),
    # A public file replaced by rename with a private one of the same size (mode 0600, another
    # owner), as a key is written: stored with the new file's mode and owner, never the old.
    "secret": b"public placeholder\n",
}
SECRET = b"PRIVATE KEY 1234..\n"
SECRET_OWNER = (1000, 1000) if os.geteuid() == 0 else (os.getuid(), os.getgid())
OLD_OWNER = f"{os.getuid()}:{os.getgid()}"
NEW_OWNER = f"{SECRET_OWNER[0]}:{SECRET_OWNER[1]}"
REWRITTEN = pseudo_random(2 * MIB + 11, 99)


def build_tree(src):
    write(f"{src}/a/first", b"the first file of the data pass\n")
    for i in range(4000):  # what the data pass reads between the trigger and the files changed
        write(f"{src}/m/{i % 40}/f{i}", pseudo_random(200 + i % 700, 1000 + i))
    for name, data in ORIGINAL.items():
        write(f"{src}/z/{name}", data, mode=0o644)


def change_tree(src, evict_after):
    z = f"{src}/z"
    with open(f"{z}/grow_small", "ab") as f:
        f.write(b"appended " * 500)
    with open(f"{z}/grow_big", "ab") as f:
        f.write(b"appended " * 50000)
    os.truncate(f"{z}/shrink_small", 7_000)
    os.truncate(f"{z}/shrink_big", MIB + MIB // 2 + 3)
    os.unlink(f"{z}/gone_small")
    os.unlink(f"{z}/gone_big")
    with open(f"{z}/pair1_a", "r+b") as f:  # same size, other bytes
        f.write(REWRITTEN)
    os.truncate(f"{z}/pair2_a", MIB + 5)
    with open(f"{z}/same1_a", "ab") as f:
        f.write(b"more")
    os.truncate(f"{z}/same2_a", 100)
    for n in ("f1", "f2"):
        os.unlink(f"{z}/dir_gone/{n}")
    os.rmdir(f"{z}/dir_gone")
    for name, make in (("to_fifo", os.mkfifo), ("to_symlink", lambda p: os.symlink("steady", p)),
                       ("to_dir", os.mkdir)):
        os.unlink(f"{z}/{name}")
        make(f"{z}/{name}")
    fd = os.open(f"{z}/secret.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, SECRET)
    os.fchown(fd, *SECRET_OWNER)
    os.close(fd)
    os.rename(f"{z}/secret.tmp", f"{z}/secret")
    if evict_after:
        evict(z)


# name -> (content expected in the image or None when left out, words the warning must hold)
EXPECTED = {
    "grow_small": (ORIGINAL["grow_small"], "grew while being read"),
    "grow_big": (ORIGINAL["grow_big"], "grew while being read"),
    "shrink_small": (ORIGINAL["shrink_small"][:7_000], "shrank while being read"),
    "shrink_big": (ORIGINAL["shrink_big"][:MIB + MIB // 2 + 3], "shrank while being read"),
    "gone_small": (None, "vanished before it was read"),
    "gone_big": (None, "vanished before it was read"),
    "pair1_a": (REWRITTEN, "changed between the hashing pass and the read that stored it"),
    "pair1_b": (ORIGINAL["pair1_b"], None),
    "pair0_a": (ORIGINAL["pair0_a"], None),
    "pair0_b": (ORIGINAL["pair0_b"], None),
    "pair2_a": (ORIGINAL["pair2_a"][:MIB + 5], "shrank while being read"),
    "pair2_b": (ORIGINAL["pair2_b"], None),
    "same1_a": (ORIGINAL["same1_a"], "grew while being read"),
    "same1_b": (ORIGINAL["same1_b"], None),
    "same2_a": (ORIGINAL["same2_a"][:100], "shrank while being read"),
    "same2_b": (ORIGINAL["same2_b"], None),
    "dir_gone/f1": (None, "vanished before it was read"),
    "dir_gone/f2": (None, "vanished before it was read"),
    "steady": (ORIGINAL["steady"], None),
    "to_fifo": (None, "is no longer a regular file"),
    "to_symlink": (None, "is no longer a regular file"),
    "to_dir": (None, "is no longer a regular file"),
    "secret": (SECRET, "changed after the scan (mode 0644 -> 0600" +
               (f", owner {OLD_OWNER} -> {NEW_OWNER}" if OLD_OWNER != NEW_OWNER else "")),
}


def evict(root):
    """Drops the page-cache pages of every file below root; returns how many stay resident."""
    left = 0
    for d, _, names in os.walk(root):
        for n in names:
            if not stat.S_ISREG(os.lstat(os.path.join(d, n)).st_mode):
                continue  # the FIFO, the symlink: no pages of their own (and a FIFO's open waits)
            fd = os.open(os.path.join(d, n), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            left += resident_pages(os.path.join(d, n))[0]
    return left


def build_changing(d, extra=(), strict=False, cold=False):
    """Builds a fresh tree, packs it while changing it; returns (process, src, image)."""
    def attempt(n):
        src, img = f"{d}/src{n}", f"{d}/img{n}.sqfs"
        build_tree(src)
        if cold and evict(f"{src}/z"):
            skip("pages stay in the page cache after POSIX_FADV_DONTNEED (a tmpfs?): no cold reads to test")
        cmd = [SQAR, "create", "-q", "-j", "2", "-b", "64K", *extra, *(["--strict"] if strict else []), src, img]
        p, valid = run_changing(cmd, src, lambda: change_tree(src, cold))
        return (p, src, img), valid

    return until_valid(3, attempt, "sqar had opened files of z/ before it stopped")


def check_image(p, src, img, what):
    assert p.returncode == 0, f"{what}: exit {p.returncode}, stderr: {p.stderr}"
    out = img + ".out"
    unsquashfs_extract(img, out)
    for name, (content, warning) in EXPECTED.items():
        path = f"{out}/z/{name}"
        if content is None:
            assert not os.path.lexists(path), f"{what}: {name} vanished before it was read but is in the image"
        else:
            got = open(path, "rb").read()
            assert got == content, (f"{what}: {name} holds {len(got)} bytes, not the {len(content)} bytes of the "
                                    f"state documented (first difference at "
                                    f"{next((i for i, (a, b) in enumerate(zip(got, content)) if a != b), None)})")
        if warning:
            line = f"warning: {src}/z/{name}: {warning}"
            assert line in p.stderr, f"{what}: no warning '{line}' in:\n{p.stderr}"
        else:
            assert f"{src}/z/{name}:" not in p.stderr, f"{what}: {name} did not change but was warned about"
    st = os.lstat(f"{out}/z/secret")
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o600, *SECRET_OWNER), \
        f"{what}: the replaced secret is stored with mode {st.st_mode:o}, owner {st.st_uid}:{st.st_gid}"
    assert os.path.isdir(f"{out}/z/dir_gone") and not os.listdir(f"{out}/z/dir_gone"), \
        f"{what}: the directory that vanished is not an empty directory in the image"
    # Everything else is as on disk.
    for dirpath, _, names in os.walk(f"{src}/m"):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), src)
            assert open(f"{out}/{rel}", "rb").read() == open(f"{src}/{rel}", "rb").read(), f"{what}: {rel} differs"
    # sqar's own check of the content hashes: each is the hash of the bytes stored.
    run([SQAR, "verify", img])
    log(f"ok: {what}: exit 0, a warning naming each changed file, unsquashfs gives the documented state")


def test_warm():
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        p, src, img = build_changing(d)
        check_image(p, src, img, "warm build")


def test_cold():
    # In the working directory (the build tree, on disk): /tmp may be a tmpfs.
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        p, src, img = build_changing(d, cold=True)
        check_image(p, src, img, "cold build")


def test_reuse():
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        build_tree(f"{d}/old-src")
        run([SQAR, "create", "-q", "-b", "64K", f"{d}/old-src", f"{d}/old.sqfs"])
        p, src, img = build_changing(d, extra=["--reuse", f"{d}/old.sqfs"])
        check_image(p, src, img, "build with --reuse")


def test_during_hashing_pass():
    """pair2_a shrinks while the hashing pass (-j1: one file after the other) reads pair0_a: the
    pass finds it short, so it is not taken as pair2_b's duplicate; each keeps its own state."""
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        def attempt(n):
            src, img = f"{d}/src{n}", f"{d}/img{n}.sqfs"
            build_tree(src)
            cmd = [SQAR, "create", "-q", "-j", "1", "-b", "64K", src, img]
            p, valid = run_changing(cmd, src, lambda: os.truncate(f"{src}/z/pair2_a", MIB + 5),
                                    trigger_at=("z", "pair0_a"), changed=("pair2_a",))
            return (p, src, img), valid

        p, src, img = until_valid(3, attempt, "sqar had opened pair2_a before it stopped")
        assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
        out = img + ".out"
        unsquashfs_extract(img, out)
        assert open(f"{out}/z/pair2_a", "rb").read() == ORIGINAL["pair2_a"][:MIB + 5], "pair2_a: not what it had"
        assert open(f"{out}/z/pair2_b", "rb").read() == ORIGINAL["pair2_b"], "pair2_b: not its own content"
        assert f"warning: {src}/z/pair2_a: shrank while being read" in p.stderr, p.stderr
        run([SQAR, "verify", img])
        log("ok: a file that shrank during the hashing pass is stored as it is, apart from its former twin")


def test_duplicate_written_to_during_the_hashing_pass():
    """pair0_b (8 MiB, equal to pair0_a) is stored as the hashing pass read it, since it turns
    out a duplicate and is not read again. Written to while that pass reads it (here with its
    own bytes, so it still is pair0_a's duplicate), it gets the same warning as a file written
    to during the data pass's read. sqar is stopped at the pass's first read of the file; when
    it had already read all of it and checked it again before it stopped (a slow reaction on a
    loaded machine), no warning is due and the try is repeated. The file is evicted from the
    page cache before each try so that its reads reach the disk and take long enough."""
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        src = f"{d}/src"
        build_tree(src)

        def rewrite_same_bytes():
            with open(f"{src}/z/pair0_b", "r+b") as f:
                f.seek(7 * MIB)
                f.write(ORIGINAL["pair0_b"][7 * MIB:])

        def attempt(n):
            img = f"{d}/img{n}.sqfs"
            with open(f"{src}/z/pair0_b", "rb") as f:
                os.fsync(f.fileno())
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            p, _ = run_changing([SQAR, "create", "-q", "-j", "1", src, img], src, rewrite_same_bytes,
                                trigger_at=("z", "pair0_b"), changed=(), on=IN_ACCESS)
            assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
            out = img + ".out"
            unsquashfs_extract(img, out)
            assert open(f"{out}/z/pair0_b", "rb").read() == ORIGINAL["pair0_b"], "pair0_b: stored bytes differ"
            warned = f"warning: {src}/z/pair0_b: was written to while being read" in p.stderr
            if not warned:
                assert p.stderr == "", f"no warning for pair0_b, but: {p.stderr}"
            return p, warned

        p = until_valid(8, attempt, "no warning: sqar had read and checked all of pair0_b before it stopped")
        log(f"ok: {p.stderr.strip()}")


def test_sparse_duplicate_whose_owner_vanishes():
    """sp_b is a sparse copy of sp_a (12 MiB, data in the first and last MiB). The hashing
    pass makes sp_b share sp_a's data; sp_a is deleted before the data pass reads it, so sp_b
    is read on its own after all, ranges in holes included: it must be stored whole, with its
    holes, not cut at its first hole as if it had shrunk."""
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        content = bytearray(12 * MIB)
        content[:MIB] = pseudo_random(MIB, 31)
        content[11 * MIB:] = pseudo_random(MIB, 32)
        def attempt(n):
            src, img = f"{d}/src{n}", f"{d}/img{n}.sqfs"
            write(f"{src}/a/first", b"the first file of the data pass\n")
            for i in range(3000):  # what the data pass reads between the trigger and sp_a
                write(f"{src}/m/{i % 30}/f{i}", pseudo_random(200 + i % 700, 2000 + i))
            os.makedirs(f"{src}/z")
            for name in ("sp_a", "sp_b"):
                with open(f"{src}/z/{name}", "wb") as f:
                    f.write(content[:MIB])
                    f.seek(11 * MIB)
                    f.write(content[11 * MIB:])
            p, valid = run_changing([SQAR, "create", "-q", "-j", "2", src, img], src,
                                    lambda: os.unlink(f"{src}/z/sp_a"), changed=("sp_a",))
            return (p, src, img), valid

        p, src, img = until_valid(3, attempt, "sqar had opened sp_a again before it stopped")
        assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
        assert "shrank" not in p.stderr, p.stderr
        out = img + ".out"
        unsquashfs_extract(img, out)
        assert not os.path.exists(f"{out}/z/sp_a")
        assert open(f"{out}/z/sp_b", "rb").read() == bytes(content), "sp_b: not stored whole"
        run([SQAR, "verify", img])
        log(f"ok: the sparse duplicate is stored whole once its owner vanished: {p.stderr.strip()}")


def test_directory_vanishing_during_the_scan():
    """A directory removed after its parent was listed and before it is listed itself is left
    out with a warning, as a vanished file is, and the build exits 0 (it failed the build);
    with --strict it fails, naming it, and leaves no image. The removal is made when the scan
    opens a directory listed before it ("a"), with sqar stopped; the try does not count if the
    scan had already opened the directory removed."""
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        for strict in ([], ["--strict"]):
            def attempt(n):
                src, img = f"{d}/src{len(strict)}-{n}", f"{d}/img{len(strict)}-{n}.sqfs"
                write(f"{src}/a/file", b"a\n")
                for i in range(300):  # listed between "a" and the directory removed
                    write(f"{src}/b{i:03d}/file", b"%d\n" % i)
                write(f"{src}/z_gone/file", b"gone\n")
                p, valid = run_changing([SQAR, "create", "-q", "-j", "1", *strict, src, img], src,
                                        lambda: shutil.rmtree(f"{src}/z_gone"), trigger_at=("", "a"),
                                        guarded="z_gone", dirs=True)
                return (p, src, img), valid

            p, src, img = until_valid(3, attempt, "the scan had opened z_gone before it stopped")
            err = p.stderr
            said = f"{src}/z_gone: No such file or directory (the directory vanished during the scan; "
            if strict:
                assert p.returncode == 1 and said + "--strict)" in err, f"exit {p.returncode}: {err}"
                assert not os.path.exists(img) and not leftovers(img), "--strict: an image was left behind"
                continue
            assert p.returncode == 0 and f"warning: {said}left out)" in err, f"exit {p.returncode}: {err}"
            listed = run([SQAR, "list", img]).stdout.split()
            assert "z_gone" not in listed and "a/file" in listed and "b299/file" in listed, listed
            run([SQAR, "verify", img])
        log(f"ok: {err.strip()}")


def test_directory_swapped_for_a_symlink_after_the_scan():
    """z/, scanned as a directory, is renamed away and a symlink to a directory outside the
    tree put at its name (with a file big there of the same content as a/big, another mode,
    owner and xattr). When this happens as the hashing pass starts (-j1, at a/big), that pass
    opened z/big by its full path and followed the symlink: the image took the outside file's
    mode, owner and xattr. When it happens as the data pass starts, z replaced by a plain file
    stopped the build ("Not a directory"). Both passes now open each name below its SOURCE
    without following a symlink: z/big and z/f are left out as vanished, and the build ends
    with 0."""
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        big = os.urandom(16 * MIB + 3)  # read for a while before z/big's turn

        def hashing_attempt(n):
            src, img, outside = f"{d}/src{n}", f"{d}/img{n}.sqfs", f"{d}/outside{n}"
            write(f"{src}/a/big", big)
            write(f"{src}/z/big", big)
            write(f"{outside}/big", big)
            os.chmod(f"{outside}/big", 0o600)
            os.chown(f"{outside}/big", 4242, 4343)
            os.setxattr(f"{outside}/big", "user.outside", b"not in the tree")

            def swap():
                os.rename(f"{src}/z", f"{src}/z.scanned")
                os.symlink(outside, f"{src}/z")

            cmd = [SQAR, "create", "-q", "-j", "1", src, img]
            p, valid = run_changing(cmd, src, swap, trigger_at=("a", "big"), changed=("big",))
            return (p, src, img), valid

        p, src, img = until_valid(3, hashing_attempt, "sqar had opened z/big before it stopped")
        assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
        assert f"{src}/z/big: vanished before it was read; left out" in p.stderr, p.stderr
        listing = run(["unsquashfs", "-lln", img]).stdout
        assert "4242" not in listing and "squashfs-root/z/big" not in listing, listing
        assert "squashfs-root/a/big" in listing, listing

        def data_attempt(n):
            src, img = f"{d}/data{n}", f"{d}/data{n}.sqfs"
            write(f"{src}/a/first", os.urandom(64 * MIB))  # read ahead for a while before z/f's turn
            write(f"{src}/z/f", b"in z\n")

            def swap():
                os.rename(f"{src}/z", f"{src}/z.scanned")
                write(f"{src}/z", b"a file where z/ was\n")

            p, valid = run_changing([SQAR, "create", "-q", "-j", "1", src, img], src, swap, changed=("f",))
            return (p, src, img), valid

        p, src, img = until_valid(3, data_attempt, "sqar had opened z/f before it stopped")
        assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
        assert f"{src}/z/f: vanished before it was read; left out" in p.stderr, p.stderr
        log("ok: a directory swapped for a symlink or a file after the scan: its files are left out as vanished")

def test_hard_link_whose_first_name_vanishes():
    """z/a, z/b and zz/c are one file, read through z/a, the name the scan found first; z/big_a
    and z/big_b another, of several read units. z/a and z/big_a are removed after the scan: the
    inodes live on under their other names, so each is read through its next name and stored
    under the names it still has, hard-linked to each other, with a warning naming the name
    that went (the file was left out with all its names). z/gone_a and z/gone_b lose both
    names: left out, the warning naming both. Checked with unsquashfs and the kernel's mount."""
    small, big = b"one file, three names\n", pseudo_random(3 * MIB + 5, 41)
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        def vanish(src):
            for name in ("a", "big_a", "gone_a", "gone_b"):
                os.unlink(f"{src}/z/{name}")

        def attempt(n):
            src, img = f"{d}/src{n}", f"{d}/img{n}.sqfs"
            write(f"{src}/a/first", os.urandom(64 * MIB))  # read ahead for a while before z's turn
            write(f"{src}/z/a", small)
            os.link(f"{src}/z/a", f"{src}/z/b")
            os.makedirs(f"{src}/zz")
            os.link(f"{src}/z/a", f"{src}/zz/c")
            write(f"{src}/z/big_a", big)
            os.link(f"{src}/z/big_a", f"{src}/z/big_b")
            write(f"{src}/z/gone_a", b"gone with both names\n")
            os.link(f"{src}/z/gone_a", f"{src}/z/gone_b")
            p, valid = run_changing([SQAR, "create", "-q", "-j", "1", src, img], src, lambda: vanish(src),
                                    changed=("a", "b", "big_a", "big_b", "gone_a", "gone_b"))
            return (p, src, img), valid

        p, src, img = until_valid(3, attempt, "sqar had opened z/ before it stopped")
        assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
        for said in (f"{src}/z/a: vanished before it was read; stored through its hard link {src}/z/b",
                     f"{src}/z/big_a: vanished before it was read; stored through its hard link {src}/z/big_b",
                     f"{src}/z/gone_a: vanished before it was read; left out, and with it its hard links "
                     f"{src}/z/gone_b"):
            assert f"warning: {said}\n" in p.stderr, f"no warning '{said}' in:\n{p.stderr}"
        listing = run(["unsquashfs", "-lls", img]).stdout
        for gone in ("z/a", "z/big_a", "z/gone_a", "z/gone_b"):
            assert f"squashfs-root/{gone}\n" not in listing, f"{gone} vanished but is in the image:\n{listing}"
        out = img + ".out"
        unsquashfs_extract(img, out)
        kept = {"z/b": small, "zz/c": small, "z/big_b": big}
        for name, content in kept.items():
            assert os.path.isfile(f"{out}/{name}") and open(f"{out}/{name}", "rb").read() == content, f"{name}: not stored whole"
        run([SQAR, "verify", img])
        if os.geteuid() == 0:
            with kernel_mount(img, f"{d}/mnt") as mnt:
                st = {name: os.stat(f"{mnt}/{name}") for name in kept}
                assert st["z/b"].st_ino == st["zz/c"].st_ino and st["z/b"].st_nlink == 2, \
                    f"z/b and zz/c are not one inode of 2 links: {st}"
                assert st["z/big_b"].st_nlink == 1, f"z/big_b: {st['z/big_b'].st_nlink} links"
                for name, content in kept.items():
                    assert open(f"{mnt}/{name}", "rb").read() == content, f"{name}: the kernel reads other bytes"
        log(f"ok: the names left of a hard-linked file whose first name vanished are stored: {p.stderr.strip()}")


def test_hard_link_whose_first_name_vanishes_before_the_hashing_pass():
    """z/p_a and z/p_b are one file, z/q another of the same content and size (2 MiB: hashed in
    a first pass, then stored once). z/p_a is removed as that pass (-j1) reads a/big: the file
    is hashed and stored through z/p_b, and z/q still shares its data (--verify-dedup compares
    it through z/p_b too, so no collision is reported)."""
    content = pseudo_random(2 * MIB + 17, 42)
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        def attempt(n):
            src, img = f"{d}/src{n}", f"{d}/img{n}.sqfs"
            for name in ("big1", "big2"):  # hashed before z/'s files
                write(f"{src}/a/{name}", pseudo_random(16 * MIB, 43))
            write(f"{src}/z/p_a", content)
            os.link(f"{src}/z/p_a", f"{src}/z/p_b")
            write(f"{src}/z/q", content)
            p, valid = run_changing([SQAR, "create", "-q", "-j", "1", "--verify-dedup", src, img], src,
                                    lambda: os.unlink(f"{src}/z/p_a"), trigger_at=("a", "big1"),
                                    changed=("p_a", "p_b"))
            return (p, src, img), valid

        p, src, img = until_valid(3, attempt, "sqar had opened z/p_a before it stopped")
        assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
        said = f"warning: {src}/z/p_a: vanished before it was read; stored through its hard link {src}/z/p_b\n"
        assert p.stderr.count("warning:") == 1 and said in p.stderr, p.stderr
        out = img + ".out"
        unsquashfs_extract(img, out)
        assert not os.path.lexists(f"{out}/z/p_a"), "z/p_a vanished but is in the image"
        for name in ("p_b", "q"):
            assert open(f"{out}/z/{name}", "rb").read() == content, f"z/{name}: not stored whole"
        run([SQAR, "verify", img])
        log(f"ok: hashed and stored through the hard link left: {p.stderr.strip()}")


def test_written_to_between_its_reads():
    """A large file is read in 1 MiB units, each through its own open; one written to in place
    between two of them (same size, same inode: only its ctime tells) may mix two versions. The
    build warns, as tar's "file changed as we read it", and --strict fails. The write is made
    when the data pass first reads the file, with sqar stopped. 64 units of text at zstd-15
    keep the readers within their read-ahead budget (32 MiB at -j2) of the compressors, so most
    units are opened after the write."""
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        content = b"".join(b"log line %09d of a file written to\n" % i for i in range(1_900_000))
        units = (len(content) + MIB - 1) // MIB
        for strict in ([], ["--strict"]):
            def attempt(n):
                src, img = f"{d}/src{len(strict)}-{n}", f"{d}/img{len(strict)}-{n}.sqfs"
                write(f"{src}/z/torn", content)

                def rewrite():
                    with open(f"{src}/z/torn", "r+b") as f:
                        f.seek(len(content) - 9000)
                        f.write(b"rewritten" * 1000)

                # Stopped at its first read: that unit's open and fstat (the times compared) are
                # usually done, so it holds the version before the write. The read may instead
                # be the second unit's, on the other reader thread, with the first unit's thread
                # between its open and its fstat: then every unit sees the new version, which is
                # stored whole and rightly without a warning (--strict fails naming the new mtime
                # when its second differs from the scan's). That try did not test a write
                # between reads, and is checked and made again.
                p, _ = run_changing([SQAR, "create", "-q", "-j", "2", "-l", "15", *strict, src, img], src, rewrite,
                                    trigger_at=("z", "torn"), changed=(), on=IN_ACCESS)
                if "written to" not in p.stderr:
                    if p.returncode == 0 and not p.stderr:
                        unsquashfs_extract(img, f"{d}/out{n}")
                        with open(f"{d}/out{n}/z/torn", "rb") as f:
                            assert f.read() == content[:-9000] + b"rewritten" * 1000, "a mixed version, unwarned"
                    else:
                        said = f"{src}/z/torn: changed after the scan (mtime "
                        assert strict and p.returncode == 1 and said in p.stderr, (p.returncode, p.stderr)
                    return (p, src, img), False
                return (p, src, img), p.trigger_opens < units  # some unit was opened after the write

            p, src, img = until_valid(5, attempt, f"all {units} units were opened before sqar stopped, or the "
                                      "write came before sqar's first fstat of the file")
            line = f"{src}/z/torn: was written to while being read"
            if strict:
                assert p.returncode == 1 and line + " (--strict)" in p.stderr, (p.returncode, p.trigger_opens, p.stderr)
                assert not os.path.exists(img), "--strict: an image was left behind"
            else:
                assert p.returncode == 0 and f"warning: {line}" in p.stderr, (p.returncode, p.trigger_opens, p.stderr)
                run([SQAR, "verify", img])
        log(f"ok: {line}")


def test_mode_changed_between_its_reads():
    """As above, but the file is only chmod-ed between its units: its ctime moves and its mtime
    does not, so the warning names a change of mode, owner or links, not a write."""
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        content = b"".join(b"log line %09d of a file chmod-ed\n" % i for i in range(1_900_000))
        units = (len(content) + MIB - 1) // MIB
        def attempt(n):
            src, img = f"{d}/src{n}", f"{d}/img{n}.sqfs"
            write(f"{src}/z/torn", content, mode=0o644)
            p, _ = run_changing([SQAR, "create", "-q", "-j", "2", "-l", "15", src, img], src,
                                lambda: os.chmod(f"{src}/z/torn", 0o600), trigger_at=("z", "torn"), changed=(),
                                on=IN_ACCESS)
            # The first read the test sees may be a later unit's, on the other reader thread,
            # while the first unit's thread is between its open and its fstat: then the chmod
            # lands before sqar took the file's attributes, and the right outcome is the file
            # stored with the new mode and a warning that it changed after the scan. That try
            # did not test a change during the read.
            before_first_fstat = f"warning: {src}/z/torn: changed after the scan (mode 0644 -> 0600)"
            if before_first_fstat in p.stderr:
                assert p.returncode == 0, (p.returncode, p.stderr)
                unsquashfs_extract(img, f"{d}/out{n}")
                stored_mode = stat.S_IMODE(os.lstat(f"{d}/out{n}/z/torn").st_mode)
                assert stored_mode == 0o600, oct(stored_mode)
                return (p, src, img), False
            return (p, src, img), p.trigger_opens < units

        p, src, img = until_valid(5, attempt, f"all {units} units were opened before sqar stopped, or the chmod "
                                  "came before sqar's first fstat of the file")
        line = f"warning: {src}/z/torn: had its mode, owner or links changed while being read"
        assert p.returncode == 0 and line in p.stderr, (p.returncode, p.trigger_opens, p.stderr)
        assert "written to" not in p.stderr, p.stderr
        run([SQAR, "verify", img])
        log(f"ok: {p.stderr.strip()}")


def test_written_to_during_its_one_read():
    """A file of one read unit (under 1 MiB) rewritten in place while sqar reads it: same size,
    same inode, so only its ctime, checked again after the read, tells. The file is evicted from
    the page cache except its first pages, so sqar's first, non-blocking read returns those
    (inotify IN_ACCESS: sqar is stopped there and the file's tail rewritten) and the rest comes
    from disk. A thread stops only when its system call returns, so the rewrite lands after the
    read that was in flight, before the check that follows it: the stored bytes may be the old
    version or the old head with the new tail, and either way the build must warn. When sqar
    was already done with the file before it stopped, the image holds the old version and no
    warning is due; the try is repeated."""
    content = pseudo_random(900_000, 21)
    tail = pseudo_random(9000, 22)
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        def attempt(n):
            src, img, out = f"{d}/src{n}", f"{d}/img{n}.sqfs", f"{d}/out{n}"
            write(f"{src}/z/torn", content)
            with open(f"{src}/z/torn", "rb") as f:
                os.fsync(f.fileno())
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                os.pread(f.fileno(), 4096, 0)  # the head (and its read-ahead) back in the cache
            resident, pages = resident_pages(f"{src}/z/torn")
            if resident == pages:
                skip("the page cache keeps evicted pages of this filesystem (tmpfs?): no read reaches the disk")

            def rewrite():
                with open(f"{src}/z/torn", "r+b") as f:
                    f.seek(len(content) - len(tail))
                    f.write(tail)

            p, _ = run_changing([SQAR, "create", "-q", "-j", "2", src, img], src, rewrite, trigger_at=("z", "torn"),
                                changed=(), on=IN_ACCESS)
            assert p.returncode == 0, (p.returncode, p.stderr)
            unsquashfs_extract(img, out)
            with open(f"{out}/z/torn", "rb") as f:
                stored = f.read()
            warned = f"warning: {src}/z/torn: was written to while being read" in p.stderr
            if not warned:
                assert stored == content, f"a mixed or new version was stored without a warning: {p.stderr}"
            return (p, stored), warned

        p, stored = until_valid(8, attempt, "no warning: sqar read the whole file before it stopped (or did not "
                                            "notice the rewrite)")
        mixed = stored == content[: -len(tail)] + tail
        assert mixed or stored == content, "stored neither the old version nor the old head with the new tail"
        log(f"ok: warned{' (the image holds the mixed version)' if mixed else ''}: {p.stderr.strip()}")


def test_strict():
    with tempdir(prefix=os.path.join(os.getcwd(), "sqar-live-")) as d:
        p, src, img = build_changing(d, strict=True)
        assert p.returncode == 1, f"--strict: exit {p.returncode}, stderr: {p.stderr}"
        assert f"{src}/z/" in p.stderr and "(--strict)" in p.stderr, f"--strict: the error names no file: {p.stderr}"
        assert not os.path.exists(img), "--strict: an image was left behind"
        assert not leftovers(img), f"--strict: temporary files left behind: {leftovers(img)}"
        log(f"ok: --strict fails naming the file: {p.stderr.strip()}")


if __name__ == "__main__":
    if not hasattr(os, "posix_fadvise"):
        skip("no posix_fadvise")
    main([test_warm, test_cold, test_reuse, test_during_hashing_pass, test_duplicate_written_to_during_the_hashing_pass,
          test_sparse_duplicate_whose_owner_vanishes,
          test_directory_vanishing_during_the_scan, test_directory_swapped_for_a_symlink_after_the_scan,
          test_hard_link_whose_first_name_vanishes, test_hard_link_whose_first_name_vanishes_before_the_hashing_pass,
          test_written_to_between_its_reads, test_mode_changed_between_its_reads,
          test_written_to_during_its_one_read, test_strict])
