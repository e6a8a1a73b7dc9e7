#!/usr/bin/env python3
"""sqar append: an image of A, A deleted from disk, B appended, then C with a file identical to
one of A's, from directories and from tar streams (--tar). The kernel's mount and unsquashfs show exactly A ∪ B ∪ C with all metadata; the
stats show A's data copied, never compressed, and C's duplicate stored as a duplicate. A mount
of the old image keeps reading while append replaces it. Name conflicts, --replace, a damaged
IMAGE (with and without stored-data digests), another compressor, an image made by mksquashfs,
and SIGINT/SIGKILL/ENOSPC leave IMAGE byte-identical with nothing beside it."""
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time

from sqartest import (AS_NOBODY, SQAR, compare_trees, image_in_progress, kernel_mount, leftovers, log, main, make_full_tree,
                      need_root, need_tool, pseudo_random, run, skip, tempdir, unsquashfs_extract, write)

BLOCK = 131072


def append(img, *args, check=True):
    p = run([SQAR, "append", "--json", img, *args], check=check)
    return json.loads(p.stdout) if p.returncode == 0 else p


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def copy_into(src, dst):
    """cp -a of src's entries into dst (expected trees), in one call so hard links stay links."""
    run(["cp", "-a", src + "/.", dst + "/"])


def expect_refused(img, args, *words, code=1):
    before = sha(img)
    p = run([SQAR, "append", img, *args], check=False)
    assert p.returncode == code, f"append {args} exited {p.returncode}: {p.stderr}"
    for w in words:
        assert w in p.stderr, f"message lacks {w!r}: {p.stderr}"
    assert sha(img) == before, "a refused append changed IMAGE"
    assert not leftovers(img), f"left behind: {leftovers(img)}"
    log(f"ok: refused: {p.stderr.strip()}")
    return p


def test_append_chain():
    need_root()
    with tempdir() as d:
        a = make_full_tree(f"{d}/A")
        os.makedirs(f"{d}/expected")
        copy_into(a, f"{d}/expected")
        run([SQAR, "create", "-q", a, f"{d}/img"])
        shutil.rmtree(a)  # old sources need not exist
        write(f"{d}/B/new.log", b"".join(b"new line %d\n" % i for i in range(50000)))
        write(f"{d}/B/newdir/small", b"small new file\n")
        os.utime(f"{d}/B/newdir", (1_700_000_000, 1_700_000_000))
        copy_into(f"{d}/B", f"{d}/expected")
        b_bytes = os.path.getsize(f"{d}/B/new.log") + os.path.getsize(f"{d}/B/newdir/small")
        s = append(f"{d}/img", f"{d}/B")
        assert s["copied_bytes"] > 3 * BLOCK and s["checked_bytes"] == s["copied_bytes"], s
        assert s["new_bytes_in"] <= b_bytes, f"A's data went through the codec: {s}"
        # C: one file identical to A's random.bin (several full blocks and a tail)
        write(f"{d}/C/again/random-copy.bin", pseudo_random(3 * BLOCK + 77, 2))
        copy_into(f"{d}/C", f"{d}/expected")
        s = append(f"{d}/img", f"{d}/C")
        assert s["blocks_compressed"] == 0 and s["new_bytes_in"] == 0, f"the duplicate was compressed: {s}"
        assert s["dedup_files"] == 1 and s["dedup_bytes"] == 3 * BLOCK + 77, s
        run([SQAR, "verify", f"{d}/img"])
        with kernel_mount(f"{d}/img", f"{d}/mnt") as mnt:
            compare_trees(f"{d}/expected", mnt, "kernel mount of the appended image")
        unsquashfs_extract(f"{d}/img", f"{d}/un")
        compare_trees(f"{d}/expected", f"{d}/un", "unsquashfs of the appended image")


def test_append_tar_chain():
    """The nightly case with archives: an image of A, A deleted, then B appended from a GNU tar
    pax stream on standard input, then C from a bsdtar .tar.zst holding a file identical to one
    of A's, a hard link, a symlink, a fifo, a device, a sparse file and an xattr. The kernel's
    mount and unsquashfs show exactly A ∪ B ∪ C; A's data and C's duplicate are never compressed."""
    need_root()
    need_tool("bsdtar")
    with tempdir() as d:
        a = make_full_tree(f"{d}/A")
        os.makedirs(f"{d}/expected")
        copy_into(a, f"{d}/expected")
        run([SQAR, "create", "-q", a, f"{d}/img"])
        shutil.rmtree(a)
        write(f"{d}/B/logs/new.log", b"".join(b"tar line %d\n" % i for i in range(50000)))
        write(f"{d}/B/logs/small", b"small\n")
        os.utime(f"{d}/B/logs", (1_700_000_000, 1_700_000_000))
        copy_into(f"{d}/B", f"{d}/expected")
        tar = subprocess.Popen(["tar", "--format=posix", "--xattrs", "--xattrs-include=*", "--numeric-owner", "-C",
                                f"{d}/B", "-cf", "-", "logs"], stdout=subprocess.PIPE)
        p = run([SQAR, "append", "--json", "--tar", "-", f"{d}/img"], stdin=tar.stdout)
        tar.stdout.close()
        assert tar.wait() == 0
        s = json.loads(p.stdout)
        assert s["copied_bytes"] > 3 * BLOCK and s["checked_bytes"] == s["copied_bytes"], s
        assert s["new_bytes_in"] <= os.path.getsize(f"{d}/B/logs/new.log") + 6, f"A's data was compressed: {s}"
        c = f"{d}/C/nightly"
        write(f"{c}/random-copy.bin", pseudo_random(3 * BLOCK + 77, 2))  # A's random.bin again
        write(f"{c}/note", b"a note\n")
        os.link(f"{c}/note", f"{c}/note-link")
        os.symlink("note", f"{c}/note-symlink")
        os.mkfifo(f"{c}/fifo")
        os.mknod(f"{c}/null", 0o20644, os.makedev(1, 3))
        with open(f"{c}/sparse", "wb") as f:
            f.seek(5 * BLOCK)
            f.write(b"end of a sparse file\n")
        os.setxattr(f"{c}/note", "user.origin", b"nightly")
        os.utime(c, (1_700_000_100, 1_700_000_100))
        copy_into(f"{d}/C", f"{d}/expected")
        run(["bsdtar", "--format", "pax", "--numeric-owner", "--zstd", "-C", f"{d}/C", "-cf", f"{d}/c.tar.zst",
             "nightly"])
        s = append(f"{d}/img", "--tar", f"{d}/c.tar.zst")
        assert s["dedup_files"] == 1 and s["dedup_bytes"] == 3 * BLOCK + 77, f"the duplicate was stored again: {s}"
        assert s["new_bytes_in"] < 4096, f"more than the small files went through the codec: {s}"
        run([SQAR, "verify", f"{d}/img"])
        with kernel_mount(f"{d}/img", f"{d}/mnt") as mnt:
            compare_trees(f"{d}/expected", mnt, "kernel mount of the image appended from tar streams")
        unsquashfs_extract(f"{d}/img", f"{d}/un")
        compare_trees(f"{d}/expected", f"{d}/un", "unsquashfs of the image appended from tar streams")
        # A name already in the image, and a damaged stream: refused, IMAGE unchanged.
        expect_refused(f"{d}/img", ["--tar", f"{d}/c.tar.zst"], "nightly/", "in both", "--replace")
        with open(f"{d}/c.tar.zst", "rb") as f:
            data = f.read()
        write(f"{d}/cut.tar.zst", data[: len(data) // 2])
        expect_refused(f"{d}/img", ["--tar", f"{d}/cut.tar.zst"], f"{d}/cut.tar.zst")


def test_old_mount_reads_during_append():
    need_root()
    with tempdir() as d:
        for i in range(40):
            write(f"{d}/A/f{i:02d}", pseudo_random(BLOCK * 2 + i, 100 + i))
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        write(f"{d}/B/big", pseudo_random(64 << 20, 7))
        with kernel_mount(f"{d}/img", f"{d}/mnt") as mnt:
            proc = subprocess.Popen([SQAR, "append", "-q", "-j1", "-l", "19", f"{d}/img", f"{d}/B"],
                                    stderr=subprocess.PIPE, text=True)
            reads = 0
            while proc.poll() is None or reads < 2:
                for i in range(40):
                    with open(f"{mnt}/f{i:02d}", "rb") as f:
                        assert f.read() == pseudo_random(BLOCK * 2 + i, 100 + i), f"f{i:02d} read wrong"
                reads += 1
            assert proc.wait() == 0, proc.stderr.read()
            assert os.listdir(mnt) == sorted(f"f{i:02d}" for i in range(40)) or len(os.listdir(mnt)) == 40
            log(f"ok: the old image's mount read all files {reads} times while and after append ran")
        out = run([SQAR, "list", f"{d}/img"]).stdout.split()
        assert "big" in out and "f39" in out, out


def test_conflict_and_replace():
    with tempdir() as d:
        write(f"{d}/A/name", b"old content\n")
        write(f"{d}/A/dir/keep", b"kept\n")
        write(f"{d}/A/other", b"other\n")
        write(f"{d}/A/tree/a/b", b"below\n")
        write(f"{d}/A/tree/c", b"below\n")
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        write(f"{d}/B/name", b"new content\n")
        write(f"{d}/B/dir/added", b"added\n")
        write(f"{d}/B/other", b"other two\n")
        write(f"{d}/B/tree", b"a file where a directory was\n")
        # One run names every clash, not only the first.
        expect_refused(f"{d}/img", [f"{d}/B"], f"in both {d}/img and the SOURCEs: name, other, tree (--replace")
        os.chmod(f"{d}/img", 0o600)  # a private image stays private
        p = run([SQAR, "append", "-q", "--replace", f"{d}/img", f"{d}/B"])
        # A directory replaced by a file goes with what is below it: never silently.
        assert "tree: the directory from" in p.stderr and "the 3 entries below it are replaced by the file" in p.stderr, \
            p.stderr
        assert "tree/c" not in run([SQAR, "list", f"{d}/img"]).stdout
        assert os.stat(f"{d}/img").st_mode & 0o777 == 0o600, oct(os.stat(f"{d}/img").st_mode)
        assert run([SQAR, "cat", f"{d}/img", "name"]).stdout == "new content\n"
        assert run([SQAR, "cat", f"{d}/img", "dir/keep"]).stdout == "kept\n"  # directories merge
        assert run([SQAR, "cat", f"{d}/img", "dir/added"]).stdout == "added\n"
        run([SQAR, "verify", f"{d}/img"])


def data_region(img):
    """(start, end) of the data blocks: after the superblock, before the inode table."""
    with open(img, "rb") as f:
        sb = f.read(96)
    return 96, int.from_bytes(sb[64:72], "little")


def flip(img, offset):
    with open(img, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def test_damaged_image():
    with tempdir() as d:
        write(f"{d}/A/big", pseudo_random(6 * BLOCK, 11))
        write(f"{d}/A/text", b"some text\n" * 50000)
        write(f"{d}/B/new", b"new\n")
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        good = open(f"{d}/img", "rb").read()
        start, end = data_region(f"{d}/img")
        # With stored-data digests: the copied bytes are hashed, the damage named.
        flip(f"{d}/img", start + 3 * BLOCK + 5)
        expect_refused(f"{d}/img", [f"{d}/B"], f"{d}/img", "damaged", "bytes")
        # An older trailer (manifest only): the data is decoded and checked against it.
        with open(f"{d}/img", "wb") as f:
            f.write(good)
        size = len(good)
        digest_trailer = good.rfind(b"SQARDAT1")
        assert digest_trailer > 0, "no stored-data digests trailer"
        os.truncate(f"{d}/img", digest_trailer)
        s = append(f"{d}/img", f"{d}/B")
        assert s["checked_bytes"] == 0 and s["decoded_bytes"] >= 6 * BLOCK, s
        log(f"ok: without data digests the input was decoded ({s['decoded_bytes']} bytes)")
        with open(f"{d}/img", "wb") as f:
            f.write(good)
        os.truncate(f"{d}/img", digest_trailer)
        flip(f"{d}/img", start + 3 * BLOCK + 5)
        expect_refused(f"{d}/img", [f"{d}/B"], f"{d}/img", "big")
        assert size > digest_trailer


def test_owner_and_time_of_new_entries():
    """--all-root, --uid, --gid and --mtime restamp the appended entries, from directories and
    from a tar stream, and leave IMAGE's entries as they were (kernel mount)."""
    need_root()
    with tempdir() as d:
        write(f"{d}/A/a", b"old\n")
        os.utime(f"{d}/A/a", (1_500_000_000, 1_500_000_000))
        run([SQAR, "create", "-q", "--uid", "1000", "--gid", "1001", f"{d}/A", f"{d}/img"])
        write(f"{d}/B/b/file", b"new\n")
        os.symlink("file", f"{d}/B/b/link")
        os.chown(f"{d}/B/b/file", 42, 43)
        append(f"{d}/img", "--all-root", "--mtime", "1000000000", f"{d}/B")
        write(f"{d}/C/c/member", b"from tar\n")
        os.utime(f"{d}/C/c/member", (1_600_000_000, 1_600_000_000))
        run(["tar", "-C", f"{d}/C", "-cf", f"{d}/c.tar", "c"])
        append(f"{d}/img", "--tar", f"{d}/c.tar", "--uid", "5", "--gid", "6")
        expected = {"a": (1000, 1001, 1_500_000_000), "b": (0, 0, 1_000_000_000), "b/file": (0, 0, 1_000_000_000),
                    "b/link": (0, 0, 1_000_000_000), "c": (5, 6, None), "c/member": (5, 6, 1_600_000_000)}
        with kernel_mount(f"{d}/img", f"{d}/mnt") as mnt:
            for rel, (uid, gid, mtime) in expected.items():
                st = os.lstat(f"{mnt}/{rel}")
                got = (st.st_uid, st.st_gid, int(st.st_mtime) if mtime is not None else None)
                assert got == (uid, gid, mtime), f"{rel}: owner and time {got}, expected {(uid, gid, mtime)}"
        log(f"ok: appended entries restamped, IMAGE's kept: {expected}")
        # --exclude-from, as create reads it: one GLOB a line, '#' a comment
        write(f"{d}/D/d/keep.log", b"kept\n")
        write(f"{d}/D/d/drop.tmp", b"dropped\n")
        write(f"{d}/D/d/cache/x", b"dropped\n")
        write(f"{d}/excludes", b"# scratch files\n*.tmp\n\n/d/cache\n")
        append(f"{d}/img", "--exclude-from", f"{d}/excludes", f"{d}/D")
        listing = run(["unsquashfs", "-l", f"{d}/img"]).stdout.split()
        assert "squashfs-root/d/keep.log" in listing and not any("drop.tmp" in e or "cache" in e for e in listing), \
            listing
        p = run([SQAR, "append", "--exclude-from", f"{d}/no-such-file", f"{d}/img", f"{d}/D"], check=False)
        assert p.returncode == 2 and "no-such-file" in p.stderr, p.stderr
        p = run([SQAR, "append", "--mtime", "-1", f"{d}/img", f"{d}/B"], check=False)
        assert p.returncode == 2 and "--mtime" in p.stderr, p.stderr
        p = run([SQAR, "merge", "--uid", "0", f"{d}/img", f"{d}/out"], check=False)
        assert p.returncode == 2 and "--uid" in p.stderr, p.stderr


def test_verify_checks_data_digests():
    """sqar verify checks the stored-data digests that append and merge rely on."""
    with tempdir() as d:
        write(f"{d}/A/big", pseudo_random(3 * BLOCK, 51))
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        good = open(f"{d}/img", "rb").read()
        flip(f"{d}/img", 96 + BLOCK + 7)
        p = run([SQAR, "verify", f"{d}/img"], check=False)
        assert p.returncode == 1 and "do not match the data digests trailer" in p.stderr, p.stderr
        with open(f"{d}/img", "wb") as f:
            f.write(good)
        flip(f"{d}/img", good.rfind(b"SQARDAT1") + 40)  # the first digest
        p = run([SQAR, "verify", f"{d}/img"], check=False)
        assert p.returncode == 1 and "data digests trailer payload is damaged" in p.stderr, p.stderr
        log("ok: verify reports damaged stored bytes and a damaged digests trailer")


def test_other_compressor_refused():
    with tempdir() as d:
        write(f"{d}/A/a", b"a\n")
        write(f"{d}/B/b", b"b\n")
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        expect_refused(f"{d}/img", ["-c", "gzip", f"{d}/B"], "recompressing", code=2)  # usage errors
        expect_refused(f"{d}/img", ["-b", "64K", f"{d}/B"], "recompressing", code=2)


def test_new_data_takes_the_images_level():
    # xz's options block holds no level (nor lz4's, nor gzip's above 9): the settings trailer
    # does, so an append without -l compresses at the level IMAGE was made at, exactly as an
    # append with that -l does.
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    text = b"".join(b"%d host%d: request %d took %d ms\n" % (i, i % 7, i * 13, i % 997) for i in range(40000))
    with tempdir() as d:
        write(f"{d}/A/a.log", text)
        write(f"{d}/B/b.log", text[::-1])
        run([SQAR, "create", "-q", "-c", "xz", "-l", "0", f"{d}/A", f"{d}/base"], env=env)
        images = {}
        for name, level in (("implicit", []), ("explicit", ["-l", "0"]), ("other", ["-l", "6"])):
            shutil.copy(f"{d}/base", f"{d}/{name}")
            run([SQAR, "append", "-q", *level, f"{d}/{name}", f"{d}/B"], env=env)
            with open(f"{d}/{name}", "rb") as f:
                raw = bytearray(f.read())
            raw[8:12] = bytes(4)  # the superblock's time: the second each append ran in
            images[name] = hashlib.sha256(raw).hexdigest()
        assert images["implicit"] == images["explicit"], "append without -l did not use the image's level 0"
        assert images["implicit"] != images["other"], "-l 6 gave the same bytes as level 0"
        levels = {n: json.loads(run([SQAR, "info", "--json", f"{d}/{n}"]).stdout)["level"] for n in images}
        assert levels == {"implicit": 0, "explicit": 0, "other": 6}, levels
        run([SQAR, "verify", f"{d}/other"])
        log(f"ok: append without -l keeps an xz -l 0 image's level; info's levels {levels}")


def test_mksquashfs_image():
    need_tool("mksquashfs")
    with tempdir() as d:
        write(f"{d}/A/big", pseudo_random(2 * BLOCK + 999, 21))  # tail stored as a short block
        write(f"{d}/A/small", b"small\n")
        write(f"{d}/A/dup", pseudo_random(2 * BLOCK + 999, 21))
        run(["mksquashfs", f"{d}/A", f"{d}/img", "-comp", "zstd", "-noappend", "-no-progress", "-quiet"])
        write(f"{d}/B/again", pseudo_random(2 * BLOCK + 999, 21))
        write(f"{d}/B/new", b"new\n")
        s = append(f"{d}/img", f"{d}/B")
        assert s["decoded_bytes"] > 0 and s["dedup_files"] == 1, s
        os.makedirs(f"{d}/expected")
        copy_into(f"{d}/A", f"{d}/expected")
        copy_into(f"{d}/B", f"{d}/expected")
        unsquashfs_extract(f"{d}/img", f"{d}/un")
        compare_trees(f"{d}/expected", f"{d}/un", "unsquashfs of a mksquashfs image appended to", owners=False)
        run([SQAR, "verify", f"{d}/img"])


def test_signals_leave_image_unchanged():
    with tempdir() as d:
        write(f"{d}/A/a", pseudo_random(4 * BLOCK, 31))
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        write(f"{d}/B/big", b"".join(b"compressible line %d\n" % i for i in range(2_000_000)))
        before = sha(f"{d}/img")
        for sig in (signal.SIGINT, signal.SIGKILL, signal.SIGTERM):
            for delay in (0.0, 0.05, 0.2):
                proc = subprocess.Popen([SQAR, "append", "-q", "-j1", "-l", "19", f"{d}/img", f"{d}/B"],
                                        stderr=subprocess.DEVNULL)
                deadline = time.monotonic() + 30
                while not image_in_progress(proc.pid, f"{d}/img") and proc.poll() is None:
                    assert time.monotonic() < deadline
                    time.sleep(0.001)
                time.sleep(delay)
                proc.send_signal(sig)
                rc = proc.wait()
                if rc == 0:
                    skip("append finished before the signal")
                assert sha(f"{d}/img") == before, f"{sig.name} after {delay}s changed IMAGE"
                assert not leftovers(f"{d}/img"), leftovers(f"{d}/img")
        log("ok: SIGINT, SIGKILL and SIGTERM at 3 points each left IMAGE byte-identical")


def test_enospc():
    need_root()
    with tempdir() as d:
        os.makedirs(f"{d}/tiny")
        run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", f"{d}/tiny"])
        try:
            write(f"{d}/A/a", pseudo_random(3 * BLOCK, 41))
            run([SQAR, "create", "-q", f"{d}/A", f"{d}/tiny/img"])
            write(f"{d}/B/b", pseudo_random(2 << 20, 42))
            expect_refused(f"{d}/tiny/img", [f"{d}/B"], "no space left")
        finally:
            subprocess.run(["umount", f"{d}/tiny"])


def test_symlinked_and_read_only_images():
    """An IMAGE that is a symlink is written through, as mksquashfs and `tar -cf` write: the
    target gets the new image and the symlink stays (create --force, append, extract --tar;
    a dangling one creates its target). An image its owner made read-only (chmod 444) is not
    appended to, as mksquashfs refuses; once writable again it is. The image file's xattrs
    survive an append; other hard links to it keep the old image, with a warning."""
    need_root()
    with tempdir() as d:
        os.chmod(d, 0o777)
        write(f"{d}/a/one", b"one\n")
        write(f"{d}/b/two", b"two\n")
        os.makedirs(f"{d}/images")
        real, link = f"{d}/images/real.sqfs", f"{d}/link.sqfs"
        run([SQAR, "create", "-q", f"{d}/a", real])
        os.symlink("images/real.sqfs", link)
        run([SQAR, "append", "-q", link, f"{d}/b"])
        assert os.readlink(link) == "images/real.sqfs", "the symlink was replaced"
        assert run([SQAR, "list", real]).stdout.split() == ["one", "two"]
        run([SQAR, "create", "-q", "-f", f"{d}/b", link])
        assert os.path.islink(link) and run([SQAR, "list", real]).stdout.split() == ["two"]
        os.symlink("images/new.sqfs", f"{d}/dangling.sqfs")
        run([SQAR, "create", "-q", f"{d}/a", f"{d}/dangling.sqfs"])
        assert os.path.islink(f"{d}/dangling.sqfs") and os.path.isfile(f"{d}/images/new.sqfs")
        os.symlink("images/out.tar", f"{d}/link.tar")
        run([SQAR, "extract", "--tar", f"{d}/link.tar", real])
        assert os.path.islink(f"{d}/link.tar") and os.path.getsize(f"{d}/images/out.tar") > 0
        # Read-only for its owner (nobody): refused, and the bytes stay.
        os.chmod(f"{d}/images", 0o777)
        os.chown(real, 65534, 65534)
        os.chmod(real, 0o444)
        before = open(real, "rb").read()
        p = run([*AS_NOBODY, SQAR, "append", real, f"{d}/a"], check=False)
        assert p.returncode == 1 and f"{real}: Permission denied" in p.stderr, p.stderr
        assert open(real, "rb").read() == before and not leftovers(real)
        os.chmod(real, 0o644)
        run([*AS_NOBODY, SQAR, "append", "-q", real, f"{d}/a"])
        assert run([SQAR, "list", real]).stdout.split() == ["one", "two"]
        # What overwriting in place would keep is kept: the image file's xattrs. A hard link
        # to it cannot follow the new file: the warning says so.
        os.setxattr(real, "user.note", b"nightly archive")
        os.link(real, f"{d}/images/other-name.sqfs")
        p = run([SQAR, "append", "-q", real, f"{d}/b"], check=False)
        assert p.returncode == 1 and "two" in p.stderr, p.stderr  # b/two is there already
        p = run([SQAR, "append", "-q", "--replace", real, f"{d}/b"])
        assert "has 1 other hard link(s), which keep the old image" in p.stderr, p.stderr
        assert os.getxattr(real, "user.note") == b"nightly archive"
        # Another user's symlink in a sticky world-writable directory (/tmp's kind) is not
        # followed, as the kernel's protected_symlinks would not follow it for tar -cf.
        sticky = f"{d}/sticky"
        os.makedirs(sticky)
        os.chmod(sticky, 0o1777)
        victim = f"{d}/images/victim"
        write(victim, b"must stay\n")
        os.symlink(victim, f"{sticky}/out.tar")
        os.lchown(f"{sticky}/out.tar", 65534, 65534)
        for args in (["extract", "--tar", f"{sticky}/out.tar", real], ["create", "-q", "-f", f"{d}/a", f"{sticky}/out.tar"]):
            p = run([SQAR, *args], check=False)
            assert p.returncode == 1 and "not followed" in p.stderr, (args, p.stderr)
        assert open(victim, "rb").read() == b"must stay\n" and os.path.islink(f"{sticky}/out.tar")
        os.lchown(f"{sticky}/out.tar", 0, 0)  # our own symlink there is followed
        run([SQAR, "extract", "--tar", f"{sticky}/out.tar", real])
        assert open(victim, "rb").read(5) != b"must "
        log("ok: symlinked images are written through; a read-only image is not appended to; xattrs kept")


def listed_dirs(img):
    """unsquashfs -lln's mode, owner and time of each directory: {path: (mode, owner, time)}."""
    out = run(["unsquashfs", "-lln", img]).stdout
    return {f[5]: (f[0], f[1], f[3] + " " + f[4]) for f in (line.split() for line in out.splitlines())
            if f and f[0].startswith("d")}


def test_conflict_names_the_inputs_in_order():
    """A file of IMAGE where a SOURCE has a directory: the message names IMAGE first, as for
    any other clash (it named the SOURCE first when the directory came from it)."""
    with tempdir() as d:
        write(f"{d}/A/x", b"a file\n")
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        write(f"{d}/B/x/y", b"below a directory\n")
        expect_refused(f"{d}/img", [f"{d}/B"], f"x: in both {d}/img and the SOURCEs")

def test_replace_keeps_directories_a_tar_only_implies():
    """A tar whose only member is private/new implies private/ and the root: made-up
    directories (0755, the owner and time of the member). append --replace took their
    attributes over IMAGE's, so a private directory of mode 0700 became readable by anyone.
    Directories the tar never names keep IMAGE's attributes, with --replace or without; one it
    names is the new entry, and with --replace it wins."""
    need_root()
    need_tool("tar")
    need_tool("unsquashfs")
    with tempdir() as d:
        write(f"{d}/A/private/secret", b"secret\n")
        for p in (f"{d}/A/private", f"{d}/A"):
            os.chmod(p, 0o700)
            os.chown(p, 1234, 1234)
            os.utime(p, (1600000000, 1600000000))
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        before = listed_dirs(f"{d}/img")
        assert before["squashfs-root/private"][:2] == ("drwx------", "1234/1234"), before
        write(f"{d}/B/private/new", b"new\n")
        os.chmod(f"{d}/B/private", 0o750)
        run(["tar", "-cf", f"{d}/implied.tar", "-C", f"{d}/B", "--owner=42", "--group=43", "private/new"])
        assert run(["tar", "-tf", f"{d}/implied.tar"]).stdout.split() == ["private/new"]
        for args in ([], ["--replace"]):
            shutil.copy(f"{d}/img", f"{d}/img2")
            run([SQAR, "append", "-q", *args, "--tar", f"{d}/implied.tar", f"{d}/img2"])
            after = listed_dirs(f"{d}/img2")
            assert after == before, f"append {args}: {before} became {after}"
            assert run([SQAR, "cat", f"{d}/img2", "private/new"]).stdout == "new\n"
        run(["tar", "-cf", f"{d}/named.tar", "-C", f"{d}/B", "--owner=42", "--group=43", "--mtime=@1700000000",
             "private", "private/new"])
        run([SQAR, "append", "-q", "--replace", "--tar", f"{d}/named.tar", f"{d}/img"])
        after = listed_dirs(f"{d}/img")
        assert after["squashfs-root/private"][:2] == ("drwxr-x---", "42/43"), after
        assert after["squashfs-root"] == before["squashfs-root"], after
        log(f"ok: directories a tar only implies keep IMAGE's attributes: {after}")

def wait_until_locked(img, proc, what):
    """Returns once `proc` holds its flock on img (an append has begun)."""
    import fcntl
    deadline = time.time() + 60
    with open(img, "rb") as f:
        while time.time() < deadline:
            assert proc.poll() is None, f"{what} ended before it was seen holding IMAGE"
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
            except BlockingIOError:
                return
            time.sleep(0.005)
    raise AssertionError(f"{what} never took its lock on IMAGE")


def test_appends_at_once_keep_both():
    """Two appends of one IMAGE at once each renamed its result over the name: both exited 0
    and the first one's files were gone. The second now waits for the first; a program that
    replaces IMAGE without the lock makes the append fail, leaving that program's file."""
    with tempdir() as d:
        write(f"{d}/A/a", b"a\n")
        write(f"{d}/B/b", pseudo_random(24 << 20, 3).hex().encode())
        write(f"{d}/C/c", b"c\n")
        run([SQAR, "create", "-q", f"{d}/A", f"{d}/img"])
        first = subprocess.Popen([SQAR, "append", "-j1", "-l", "19", f"{d}/img", f"{d}/B"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until_locked(f"{d}/img", first, "the first append")
        second = run([SQAR, "append", f"{d}/img", f"{d}/C"], check=False, timeout=600)
        out, err = first.communicate(timeout=600)
        assert first.returncode == 0 and second.returncode == 0, (first.returncode, err, second.stderr)
        assert "another sqar append of this image is running; waiting" in second.stderr, second.stderr
        names = run(["unsquashfs", "-lc", "-d", "", f"{d}/img"]).stdout.split()
        assert sorted(names) == ["/a", "/b", "/c"], names
        # Replaced by another program (a rename, as cp --remove-destination or a create does)
        # while an append runs: the append fails and the other file stays.
        run([SQAR, "create", "-q", f"{d}/C", f"{d}/other"])
        shutil.copy(f"{d}/other", f"{d}/other.copy")
        write(f"{d}/D/d", pseudo_random(24 << 20, 4).hex().encode())
        third = subprocess.Popen([SQAR, "append", "-j1", "-l", "19", f"{d}/img", f"{d}/D"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until_locked(f"{d}/img", third, "the third append")
        os.rename(f"{d}/other.copy", f"{d}/img")
        out, err = third.communicate(timeout=600)
        assert third.returncode == 1 and "replaced by another program during the append" in err, (third.returncode, err)
        assert sha(f"{d}/img") == sha(f"{d}/other"), "the file put at IMAGE was replaced"
        assert not leftovers(f"{d}/img"), leftovers(f"{d}/img")
        log("ok: appends at once wait for each other; a foreign replacement fails the append")


def test_replace_loses_nothing_and_keeps_the_root():
    """--replace with a replacing file that is then left out (unreadable with
    --skip-unreadable) took IMAGE's entry of that name with it, exit 0; files given as
    SOURCEs gave IMAGE's root the mode and owner of the root made up for them (0755, the
    caller's), opening up a private image."""
    need_root()
    with tempdir() as d:
        write(f"{d}/old/zz", b"old important\n")
        write(f"{d}/old/keep", b"keep\n")
        os.chmod(f"{d}/old", 0o700)
        run([SQAR, "create", "-q", f"{d}/old", f"{d}/img"])
        write(f"{d}/src/zz", b"new\n")
        os.chmod(f"{d}/src/zz", 0)
        run(["chown", "-R", "nobody", d])
        before = sha(f"{d}/img")
        p = run([*AS_NOBODY, SQAR, "append", "--replace", "--skip-unreadable", f"{d}/img", f"{d}/src"], check=False)
        assert p.returncode == 1 and "zz: left out (see above), so it does not replace the entry" in p.stderr, \
            (p.returncode, p.stderr)
        assert sha(f"{d}/img") == before and not leftovers(f"{d}/img"), p.stderr
        # A file SOURCE replacing an entry: the root keeps IMAGE's mode, owner and time.
        write(f"{d}/fixed/zz", b"fixed\n")
        root_before = run(["unsquashfs", "-lln", "-d", "", f"{d}/img"]).stdout.splitlines()[0].split()[:2]
        run([SQAR, "append", "-q", "--replace", f"{d}/img", f"{d}/fixed/zz"])
        with kernel_mount(f"{d}/img", f"{d}/mnt") as m:
            st = os.stat(m)
            assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o700, 0, 0), (oct(st.st_mode), st.st_uid, st.st_gid)
            assert open(f"{m}/zz", "rb").read() == b"fixed\n" and open(f"{m}/keep", "rb").read() == b"keep\n"
        assert root_before == ["drwx------", "0/0"], root_before
        log("ok: a replacement left out fails the append; file SOURCEs keep IMAGE's root")


def test_damage_in_an_image_without_digests_is_named_once():
    """The message for a damaged block of a mksquashfs image named the image three times
    ("x: x:/text: x: fragment block ..."); it names it once, then the entry, then the cause."""
    need_tool("mksquashfs")
    with tempdir() as d:
        write(f"{d}/T/text", b"".join(b"%d\n" % i for i in range(20000)))
        write(f"{d}/B/b", b"b\n")
        run(["mksquashfs", f"{d}/T", f"{d}/img", "-comp", "gzip", "-quiet"])
        with open(f"{d}/img", "r+b") as f:
            f.seek(200)
            f.write(b"\xff\xff\xff\xff")
        p = expect_refused(f"{d}/img", [f"{d}/B"], "does not decompress")
        assert p.stderr.startswith(f"sqar append: {d}/img: text: ") and p.stderr.count(f"{d}/img") == 1, p.stderr


if __name__ == "__main__":
    main([test_append_chain, test_append_tar_chain, test_old_mount_reads_during_append, test_conflict_and_replace, test_conflict_names_the_inputs_in_order,
          test_replace_keeps_directories_a_tar_only_implies, test_damaged_image,
          test_owner_and_time_of_new_entries,
          test_verify_checks_data_digests, test_other_compressor_refused, test_new_data_takes_the_images_level,
          test_mksquashfs_image, test_signals_leave_image_unchanged, test_enospc,
          test_symlinked_and_read_only_images, test_appends_at_once_keep_both,
          test_replace_loses_nothing_and_keeps_the_root, test_damage_in_an_image_without_digests_is_named_once])
