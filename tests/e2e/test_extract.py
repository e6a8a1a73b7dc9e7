"""sqar extract against images made by mksquashfs and gensquashfs (every compressor) and by sqar create:
content and metadata (mode, owner, mtime, hard links, symlinks, devices, fifos, xattrs, sparse
holes) must match the source tree; selection by path and glob; --overwrite; --offset."""
import os
import shutil
import stat

from clitest import COMPRESSORS, expect_fail, sqar, sqar_create_image
from sqartest import (MKSQUASHFS_IGNORE, SQAR, compare_trees, kernel_mount, log, main, make_full_tree, mksquashfs, mksquashfs_supports,
                      need_root, need_tool, pseudo_random, run, skip, tempdir, write)

OWNERS = os.geteuid() == 0
# Debian's libsquashfs is built without lzo, so gensquashfs cannot write it.
GENSQUASHFS_WITHOUT = {"lzo"}


def check_sparse(root):
    st = os.stat(f"{root}/sparse.img")
    if st.st_blocks * 512 >= st.st_size // 2:
        raise AssertionError(f"sparse.img was written densely: {st.st_blocks} blocks for {st.st_size} bytes")
    log(f"ok: sparse.img keeps its holes ({st.st_blocks * 512} bytes allocated of {st.st_size})")


def check_symlinks(root):
    for p in MKSQUASHFS_IGNORE:
        if os.readlink(f"{root}/{p}") != "small.txt":
            raise AssertionError(f"{p}: wrong symlink target")


def test_mksquashfs_images():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        lacking = []
        for comp in COMPRESSORS:
            if not mksquashfs_supports(comp):
                lacking.append(comp)
                continue
            img, out = f"{d}/{comp}.sqfs", f"{d}/out-{comp}"
            mksquashfs(src, img, "-comp", comp)
            sqar("extract", img, "-C", out)
            compare_trees(src, out, f"sqar extract of mksquashfs {comp}", owners=OWNERS, ignore=MKSQUASHFS_IGNORE)
            check_symlinks(out)
            check_sparse(out)
        if lacking:  # the others were checked above; say which were not
            skip(f"this mksquashfs cannot write {', '.join(lacking)}")


def test_gensquashfs_images():
    """squashfs-tools-ng writes its own layout (no export table by default, its own fragment and
    xattr packing): extraction must match the source as well."""
    need_tool("gensquashfs")
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        # What gensquashfs 1.2 --pack-dir cannot store, so not ours to check here: an xattr with
        # an empty value (dropped) and hard links (packed as separate inodes; their content and
        # metadata are still compared).
        os.removexattr(f"{src}/text.log", "user.empty")
        lacking = []
        for comp in COMPRESSORS:
            img, out = f"{d}/{comp}.sqfs", f"{d}/out-{comp}"
            p = run(["gensquashfs", "--pack-dir", src, "-c", comp, "--keep-time", "--keep-xattr", "-q", "-f", img],
                    check=False)
            if p.returncode != 0:
                log(f"note: this gensquashfs cannot write {comp}: {p.stderr.strip()[-120:]}")
                lacking.append(comp)
                continue
            sqar("extract", img, "-C", out)
            compare_trees(src, out, f"sqar extract of gensquashfs {comp}", owners=OWNERS,
                          ignore_keys=("links", "nlink"))
            check_sparse(out)
        unexpected = [c for c in lacking if c not in GENSQUASHFS_WITHOUT]
        if unexpected:  # the others were checked above; say which were not
            skip(f"this gensquashfs cannot write {', '.join(unexpected)}")


def test_sqar_images():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        sqar_create_image(src, img)
        for jobs in ("1", "4"):
            out = f"{d}/out-{jobs}"
            sqar("extract", "-j", jobs, img, "-C", out)
            compare_trees(src, out, f"sqar extract -j {jobs} of a sqar image", owners=OWNERS)
            check_sparse(out)


def test_selection_overwrite_offset():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "gzip")
        out = f"{d}/sel"
        sqar("extract", img, "-C", out, "dup/one.log", "modes/*")
        got = sorted(os.path.relpath(os.path.join(a, n), out) for a, ds, fs in os.walk(out) for n in ds + fs)
        want = ["dup", "dup/one.log", "modes", "modes/all", "modes/none", "modes/setuid", "modes/sticky"]
        if got != want:
            raise AssertionError(f"selection extracted {got}, expected {want}")
        log("ok: PATH and GLOB selection extract exactly the matching entries and their parents")
        expect_fail(["extract", img, "-C", out, "no/such/file"], 1, img, "no/such/file")

        # A second extraction over the first refuses to replace files, naming one.
        full = f"{d}/full"
        sqar("extract", img, "-C", full)
        p = expect_fail(["extract", img, "-C", full], 1, img, "already exists")
        # Said once, with the count and the option, not once per entry.
        existing = sum(1 for a, ds, fs in os.walk(full) for n in fs) + sum(
            1 for a, ds, fs in os.walk(full) for n in ds if os.path.islink(os.path.join(a, n)))
        lines = [ln for ln in p.stderr.splitlines() if "already exists" in ln]
        if len(lines) != 1 or f"and so do {existing - 1} more entries" not in lines[0] or "--overwrite" not in lines[0]:
            raise AssertionError(f"expected one line naming {existing} existing entries and --overwrite: {p.stderr}")
        if len(p.stderr.splitlines()) != 2 or f"{existing} entries could not be extracted" not in p.stderr:
            raise AssertionError(f"expected that line and the count of failures, got: {p.stderr}")
        log(f"ok: existing files are refused once for all: {lines[0]}")
        write(f"{full}/small.txt", b"changed")
        os.unlink(f"{full}/link-rel")
        os.symlink("/etc/passwd", f"{full}/link-rel")
        sqar("extract", "--overwrite", img, "-C", full)
        compare_trees(src, full, "extract --overwrite", owners=OWNERS, ignore=MKSQUASHFS_IGNORE)

        # The image inside a larger file.
        with open(img, "rb") as f:
            data = f.read()
        with open(f"{d}/wrapped", "wb") as f:
            f.write(b"\x5a" * 8192 + data + b"trailing")
        sqar("extract", "--offset", "8192", f"{d}/wrapped", "-C", f"{d}/off")
        compare_trees(src, f"{d}/off", "extract --offset", owners=OWNERS, ignore=MKSQUASHFS_IGNORE)


def test_no_same_owner():
    need_root()
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/f", b"x")
        os.chown(f"{src}/f", 4242, 4343)
        img = f"{d}/img.sqfs"
        mksquashfs(src, img)
        sqar("extract", "--no-same-owner", img, "-C", f"{d}/out")
        st = os.lstat(f"{d}/out/f")
        if (st.st_uid, st.st_gid) != (0, 0):
            raise AssertionError(f"--no-same-owner restored {st.st_uid}:{st.st_gid}")
        sqar("extract", img, "-C", f"{d}/out2")
        st = os.lstat(f"{d}/out2/f")
        if (st.st_uid, st.st_gid) != (4242, 4343) or not stat.S_ISREG(st.st_mode):
            raise AssertionError("owner not restored as root")
        log("ok: owners restored as root, not with --no-same-owner")


def test_progress_only_on_a_terminal():
    with tempdir() as d:
        write(f"{d}/src/big", os.urandom(3 << 20))
        write(f"{d}/src/small", b"s")
        img = f"{d}/img"
        sqar_create_image(f"{d}/src", img)
        # script(1) gives sqar a terminal: a status line and a summary on stderr.
        p = run(["script", "-qec", f"{SQAR} extract {img} -C {d}/tty", "/dev/null"], check=False)
        if p.returncode != 0 or "2 entries, 3.0 MiB of file content" not in p.stdout:
            raise AssertionError(f"no summary on a terminal: {p.stdout!r}")
        # Without a terminal, or with -q: silence, as tar -x.
        p = sqar("extract", img, "-C", f"{d}/pipe")
        if p.stdout or p.stderr:
            raise AssertionError(f"output without a terminal: {p.stdout!r} {p.stderr!r}")
        p = sqar("extract", "--progress", img, "-C", f"{d}/forced")
        if "2 entries" not in p.stderr or p.stdout:
            raise AssertionError(f"--progress did not show the summary on stderr: {p.stderr!r}")
        p = run(["script", "-qec", f"{SQAR} extract -q {img} -C {d}/quiet", "/dev/null"], check=False)
        if p.returncode != 0 or "entries" in p.stdout:
            raise AssertionError(f"-q still printed: {p.stdout!r}")
        compare_trees(f"{d}/src", f"{d}/tty", "extraction with the status line")
        # The same for --tar: a summary on a terminal or with --progress, silence otherwise,
        # and never a byte of it in the archive on standard output.
        p = run(["script", "-qec", f"{SQAR} extract --tar {d}/tty.tar {img}", "/dev/null"], check=False)
        if p.returncode != 0 or f"2 entries, 3.0 MiB of file content into {d}/tty.tar" not in p.stdout:
            raise AssertionError(f"extract --tar: no summary on a terminal: {p.stdout!r}")
        p = sqar("extract", "--tar", f"{d}/pipe.tar", img)
        if p.stdout or p.stderr:
            raise AssertionError(f"extract --tar: output without a terminal: {p.stdout!r} {p.stderr!r}")
        p = run([SQAR, "extract", "--progress", "--tar", "-", img], text=False)
        with open(f"{d}/pipe.tar", "rb") as f:
            if p.stdout != f.read() or b"2 entries, 3.0 MiB of file content into standard output" not in p.stderr:
                raise AssertionError(f"extract --progress --tar -: {p.stderr!r}")
        log("ok: status line and summary on a terminal only")


def test_usage():
    expect_fail(["extract"], 2, "missing IMAGE")
    expect_fail(["extract", "--bogus", "x"], 2, "--bogus")
    expect_fail(["extract", "/nonexistent.sqfs", "-C", "/tmp"], 1, "/nonexistent.sqfs")
    help_text = sqar("extract", "--help").stdout
    if "Examples" not in help_text or "--overwrite" not in help_text:
        raise AssertionError("extract --help does not teach")


def test_hard_link_whose_first_name_is_in_the_way():
    """a and b are one inode. Extracting over a target that already holds another file named a
    (no --overwrite) refuses a, and must not make b a link to that other file: b is named as
    not extracted. With --overwrite both are the image's file, linked."""
    with tempdir() as d:
        write(f"{d}/src/a", b"the image's file\n")
        os.link(f"{d}/src/a", f"{d}/src/b")
        img = f"{d}/img"
        sqar_create_image(f"{d}/src", img)
        write(f"{d}/out/a", b"someone else's file\n")
        p = run([SQAR, "extract", img, "-C", f"{d}/out"], check=False)
        assert p.returncode == 1 and "b: not extracted: it is a hard link to a, which was not extracted" in p.stderr, \
            p.stderr
        assert not os.path.lexists(f"{d}/out/b"), "b was linked to the file that was in the way"
        assert open(f"{d}/out/a", "rb").read() == b"someone else's file\n", "a was replaced without --overwrite"
        sqar("extract", "--overwrite", img, "-C", f"{d}/out")
        a, b = os.stat(f"{d}/out/a"), os.stat(f"{d}/out/b")
        assert a.st_ino == b.st_ino and open(f"{d}/out/b", "rb").read() == b"the image's file\n"
        log(f"ok: {p.stderr.strip()}")


def test_entries_below_a_directory_in_the_way_are_counted():
    """A file in the target where the image has directory a: a is named, and what a would
    have held (six entries, a subdirectory's included) is counted as not extracted, in one
    line rather than one per entry."""
    with tempdir() as d:
        for name in ("f1", "f2", "f3", "b/x", "b/y"):
            write(f"{d}/src/a/{name}", name.encode())
        write(f"{d}/src/z", b"z")
        sqar_create_image(f"{d}/src", f"{d}/img")
        write(f"{d}/out/a", b"in the way")
        p = run([SQAR, "extract", "-q", f"{d}/img", "-C", f"{d}/out"], check=False)
        assert p.returncode == 1, p
        assert "a: already exists" in p.stderr, p.stderr
        assert "6 entries were left out below directories that could not be made or opened" in p.stderr, p.stderr
        assert "7 entries could not be extracted" in p.stderr, p.stderr
        assert open(f"{d}/out/z", "rb").read() == b"z"
        log(f"ok: {p.stderr.strip()}")


def test_strip_components():
    """--strip-components N against GNU tar's on a tar of the same tree: a release tree under
    'proj-1.0/' (every entry type, hard links, xattrs, holes) beside a top-level file, which
    N=1 leaves out as tar does. PATTERNs match image paths, before stripping. Two entries that
    would land on one name ('a/x' and 'b/x') are not merged: the first is extracted, the
    other is named and left out with what lies below it (exit 1)."""
    need_tool("tar")
    with tempdir() as d:
        make_full_tree(f"{d}/src/proj-1.0")
        write(f"{d}/src/TOP", b"a file beside the release directory\n")
        img, tar = f"{d}/img.sqfs", f"{d}/t.tar"
        sqar_create_image(f"{d}/src", img)
        run(["tar", "-C", f"{d}/src", "--xattrs", "--xattrs-include=*", "-cf", tar, "proj-1.0", "TOP"])
        os.makedirs(f"{d}/by-tar")
        run(["tar", "-x", "--xattrs", "--xattrs-include=*", "--numeric-owner", "--same-permissions",
             "--strip-components", "1", "-f", tar, "-C", f"{d}/by-tar"])
        sqar("extract", "--strip-components", "1", img, "-C", f"{d}/by-sqar")
        assert not os.path.lexists(f"{d}/by-sqar/TOP"), "an entry at the stripped depth was extracted"
        # GNU tar leaves sockets out.
        compare_trees(f"{d}/by-tar", f"{d}/by-sqar", "extract --strip-components 1 (GNU tar's as the reference)",
                      owners=OWNERS, ignore=("dev/socket",))
        # Two levels: the release directory's subdirectories' contents land at the top. GNU tar
        # cannot make dup/hard-2 (its link target, proj-1.0/small.txt, is stripped away).
        os.makedirs(f"{d}/by-tar-2")
        run(["tar", "-x", "--xattrs", "--xattrs-include=*", "--numeric-owner", "--same-permissions",
             "--strip-components", "2", "-f", tar, "-C", f"{d}/by-tar-2"], check=False)
        sqar("extract", "--strip-components", "2", img, "-C", f"{d}/by-sqar-2")
        compare_trees(f"{d}/by-tar-2", f"{d}/by-sqar-2", "extract --strip-components 2 (GNU tar's as the reference)",
                      owners=OWNERS, ignore=("socket", "hard-2"))
        sqar("extract", "--strip-components", "1", img, "-C", f"{d}/sel", "proj-1.0/small.txt", "proj-1.0/dup")
        got = sorted(os.path.relpath(os.path.join(r, n), f"{d}/sel") for r, ds, fs in os.walk(f"{d}/sel") for n in ds + fs)
        assert got == ["dup", "dup/hard-2", "dup/one.log", "dup/tail-a", "dup/tail-b", "dup/two.log", "small.txt"], got

        write(f"{d}/two/a/x/first", b"1\n")
        write(f"{d}/two/b/x/second", b"2\n")
        sqar_create_image(f"{d}/two", f"{d}/two.sqfs")
        p = run([SQAR, "extract", "--strip-components", "1", f"{d}/two.sqfs", "-C", f"{d}/two-out"], check=False)
        said = "b/x: not extracted: --strip-components gives it the name of a/x, extracted as x"
        assert p.returncode == 1 and said in p.stderr, (p.returncode, p.stderr)
        assert sorted(os.listdir(f"{d}/two-out/x")) == ["first"], os.listdir(f"{d}/two-out/x")
        expect_fail(["extract", "--strip-components", "-1", img], 2, "--strip-components")

        # --tar: the archive holds the stripped paths; GNU tar unpacks it to the same tree.
        run([SQAR, "extract", "-q", "--tar", f"{d}/stripped.tar", "--strip-components", "1", img])
        os.makedirs(f"{d}/via-tar")
        run(["tar", "-x", "--xattrs", "--xattrs-include=*", "--numeric-owner", "--same-permissions",
             "-f", f"{d}/stripped.tar", "-C", f"{d}/via-tar"])
        compare_trees(f"{d}/by-tar", f"{d}/via-tar", "extract --tar --strip-components 1 | tar -x",
                      owners=OWNERS, ignore=("dev/socket",))

        # A hard link whose first name is stripped: the first name kept gets the content.
        write(f"{d}/hl/TOP", b"linked content\n")
        os.makedirs(f"{d}/hl/d")
        os.link(f"{d}/hl/TOP", f"{d}/hl/d/x")
        os.link(f"{d}/hl/TOP", f"{d}/hl/d/y")
        sqar_create_image(f"{d}/hl", f"{d}/hl.sqfs")
        sqar("extract", "--strip-components", "1", f"{d}/hl.sqfs", "-C", f"{d}/hl-out")
        run([SQAR, "extract", "-q", "--tar", f"{d}/hl.tar", "--strip-components", "1", f"{d}/hl.sqfs"])
        os.makedirs(f"{d}/hl-tar")
        run(["tar", "-xf", f"{d}/hl.tar", "-C", f"{d}/hl-tar"])
        for out in (f"{d}/hl-out", f"{d}/hl-tar"):
            x, y = os.stat(f"{out}/x"), os.stat(f"{out}/y")
            assert open(f"{out}/x", "rb").read() == b"linked content\n" and x.st_ino == y.st_ino, out
            assert sorted(os.listdir(out)) == ["x", "y"], os.listdir(out)
        log(f"ok: matches GNU tar, directly and through --tar; {p.stderr.strip()}")


def test_duplicates_are_copied_not_decoded_again():
    """A file whose stored data an earlier file's is (the image stores it once) is written by
    copying the first one's extracted bytes in the kernel, not by decoding its blocks again:
    the extracted tree is the kernel's, content and metadata, holes and all, and strace sees
    the copies."""
    need_root()
    need_tool("strace")
    block = 128 * 1024
    with tempdir() as d:
        text = b"".join(b"line %d of a log that repeats in a rotated copy\n" % i for i in range(60000))
        write(f"{d}/src/app.log", text)
        write(f"{d}/src/archive/app.log.1", text)
        write(f"{d}/src/zz/app.log.2", text)
        os.chmod(f"{d}/src/zz/app.log.2", 0o640)
        os.chown(f"{d}/src/zz/app.log.2", 1234, 5678)
        os.setxattr(f"{d}/src/zz/app.log.2", "user.rotated", b"2")
        os.utime(f"{d}/src/archive/app.log.1", (1_600_000_000, 1_600_000_000))
        with open(f"{d}/src/sparse-a", "wb") as f:  # a hole between two data blocks
            f.write(pseudo_random(block, 3))
            f.seek(8 * block)
            f.write(pseudo_random(block + 17, 4))
        shutil.copy(f"{d}/src/sparse-a", f"{d}/src/sparse-b", follow_symlinks=False)
        os.link(f"{d}/src/zz/app.log.2", f"{d}/src/zz/hard-link")
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", "-c", "xz", f"{d}/src", img])
        env = dict(os.environ)
        if "ASAN_OPTIONS" in env:  # LeakSanitizer cannot run under ptrace (strace): leaks are checked elsewhere
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
        p = run(["strace", "-f", "-e", "trace=copy_file_range", "-o", f"{d}/trace", SQAR, "extract", "-q", "-C",
                 f"{d}/out", img], env=env)
        copies = open(f"{d}/trace").read().count("copy_file_range(")
        assert copies >= 3, f"duplicates were not copied ({copies} copy_file_range calls): {p.stderr}"
        with kernel_mount(img, f"{d}/mnt") as m:
            compare_trees(m, f"{d}/out", "extract with duplicates copied (the kernel's mount as the reference)")
        assert os.stat(f"{d}/out/zz/app.log.2").st_ino == os.stat(f"{d}/out/zz/hard-link").st_ino
        log(f"ok: duplicates copied ({copies} copy_file_range calls) and equal to the kernel's mount")


if __name__ == "__main__":
    main([test_mksquashfs_images, test_gensquashfs_images, test_sqar_images, test_selection_overwrite_offset, test_no_same_owner,
          test_progress_only_on_a_terminal, test_hard_link_whose_first_name_is_in_the_way, test_entries_below_a_directory_in_the_way_are_counted,
          test_strip_components, test_duplicates_are_copied_not_decoded_again,
          test_usage])
