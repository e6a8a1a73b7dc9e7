"""sqar list, info and cat on images made by mksquashfs and sqar: paths and long listings
match the tree, info's counts/sizes/dedup/flags are right and fast, cat prints content."""
import json
import os
import shutil
import stat
import time

from clitest import expect_fail, sqar, sqar_create_image, tree_files
from sqartest import SQAR, log, main, make_full_tree, mksquashfs, mtime_seconds, pseudo_random, run, tempdir, write


def test_list():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        mksquashfs(src, img)
        want = sorted(tree_files(src), key=lambda p: [c.encode() for c in p.split("/")])
        assert any("\n" in p for p in want), "the tree has no name with a newline"
        # -0: names as they are, NUL-terminated.
        raw = run([SQAR, "list", "-0", img], text=False).stdout
        assert raw.endswith(b"\0") and raw[:-1].split(b"\0") == [os.fsencode(p) for p in want], raw
        # Text: one entry a line, control characters and '\\' escaped as GNU tar and ls -b do.
        def escaped(name):
            out = name.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
            return "".join(f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7f else c for c in out)
        paths = sqar("list", img).stdout.split("\n")[:-1]
        if paths != [escaped(p) for p in want]:
            raise AssertionError(f"list differs from the tree:\n{paths}")
        # --json: one object per entry, in the same order.
        entries = json.loads(sqar("list", "--json", img).stdout)
        assert [e["path"] for e in entries] == want, entries
        for e in entries:
            st = os.lstat(f"{src}/{e['path']}")
            assert e["mode"] == stat.S_IMODE(st.st_mode) and e["mtime"] == mtime_seconds(st), (e, st)
            assert e["uid"] == st.st_uid and e["gid"] == st.st_gid, (e, st)
            kind = {stat.S_IFDIR: "directory", stat.S_IFREG: "file", stat.S_IFLNK: "symlink", stat.S_IFBLK:
                    "block_device", stat.S_IFCHR: "char_device", stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket"}
            assert e["type"] == kind[stat.S_IFMT(st.st_mode)], (e, st)
            if e["type"] == "file":
                assert e["size"] == st.st_size, (e, st)
            if e["type"] == "symlink":
                assert e["target"] == os.readlink(f"{src}/{e['path']}"), e
            if e["type"] in ("block_device", "char_device"):
                assert (e["rdev_major"], e["rdev_minor"]) == (os.major(st.st_rdev), os.minor(st.st_rdev)), e
            if e["type"] == "file":
                assert e["nlink"] == st.st_nlink, (e, st)
        # Hard links: the files that share an inode number in the JSON are those that share one
        # in the tree. (mksquashfs stores each name of a hard-linked symlink as its own inode.)
        def groups(key_of):
            by_key = {}
            for e in entries:
                if e["type"] == "file":
                    by_key.setdefault(key_of(e), set()).add(e["path"])
            return sorted(sorted(g) for g in by_key.values() if len(g) > 1)
        linked = groups(lambda e: e["inode"])
        assert linked and linked == groups(lambda e: os.lstat(f"{src}/{e['path']}").st_ino), linked
        assert json.loads(sqar("list", "--json", img, "dup/one.log").stdout)[0]["path"] == "dup/one.log"
        sub = sqar("list", img, "dup").stdout.split()
        if sub != ["dup", "dup/hard-2", "dup/one.log", "dup/tail-a", "dup/tail-b", "dup/two.log"]:
            raise AssertionError(f"list IMAGE dup: {sub}")
        env = dict(os.environ, TZ="UTC")
        long = run([SQAR, "list", "-l", "-n", img], env=env).stdout.splitlines()
        by_name = {l.split(" -> ")[0].split(" link to ")[0].split(" ")[-1]: l for l in long}
        # A hard link's later names point at its first, as tar -tv shows them.
        for group in linked:
            first, *later = group
            assert by_name[first].endswith(" " + first), by_name[first]
            for name in later:
                assert by_name[name].endswith(f" {name} link to {first}"), by_name[name]
        checks = {
            "small.txt": ("-rw-r--r--", "1234/5678" if os.geteuid() == 0 else None, " 12 ", "2020-09-13"),
            "link-rel": ("lrwxrwxrwx", "-> small.txt"),
            "modes/setuid": ("-rwsr-xr-x",),
            "modes/sticky": ("drwxrwxrwt",),
            "dev/fifo": ("prw-",),
        }
        if os.geteuid() == 0:
            checks["dev/block"] = (stat.filemode(os.lstat(f"{src}/dev/block").st_mode), " 8,1 ")
            checks["dev/big-minor"] = (stat.filemode(os.lstat(f"{src}/dev/big-minor").st_mode), "250,70000")
        for name, needles in checks.items():
            line = by_name.get(name, "")
            for n in needles:
                if n and n not in line:
                    raise AssertionError(f"list -l line for {name} lacks {n!r}: {line!r}")
        # tar users' -tv spelling gives the same listing.
        assert run([SQAR, "list", "-vn", img], env=env).stdout.splitlines() == long
        assert run([SQAR, "list", "--verbose", "-n", img], env=env).stdout.splitlines() == long
        expect_fail(["list", img, "no/such"], 1, img, "no/such")
        log("ok: list and list -l (-v) match the tree")


def test_info():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "xz")
        info = json.loads(sqar("info", "--json", img).stdout)
        files = dirs = links = 0
        for a, ds, fs in os.walk(src):
            dirs += len(ds)
            for n in ds + fs:
                p = os.path.join(a, n)
                if os.path.islink(p):
                    links += 1
                elif os.path.isfile(p):
                    files += 1
        c = info["counts"]
        # Hard links: 2 extra names of small.txt (+1 symlink hard link that mksquashfs splits).
        if c["directory"] != dirs + 1 or c["regular"] != files or c["symlink"] != links:
            raise AssertionError(f"counts {c} vs dirs {dirs}+root, files {files}, symlinks {links}")
        text_size = os.path.getsize(f"{src}/text.log")
        if info["compressor"] != "xz" or info["block_size"] != 131072 or info["manifest"]:
            raise AssertionError(f"info: {info}")
        if info["dedup_saved_bytes"] < 2 * text_size:
            raise AssertionError(f"dedup savings {info['dedup_saved_bytes']} < 2 copies of text.log ({text_size})")
        if info["image_bytes"] > info["file_size"] or not (0 < info["ratio"] < 1) or not info["xattrs"]:
            raise AssertionError(f"info sizes/flags: {info}")
        human = sqar("info", img).stdout
        # The text counts names (as find does) and gives the image's inode count beside them,
        # so the numbers on the line add up.
        names = sum(v for k, v in c.items() if k != "hard_links")
        if names - c["hard_links"] != info["inodes"]:
            raise AssertionError(f"{names} names - {c['hard_links']} extra hard links != {info['inodes']} inodes")
        def counted(n, one, many):
            return f"{n} {one if n == 1 else many}"
        entries_line = (f"Entries:          {counted(names, 'name', 'names')}: "
                        f"{counted(c['directory'], 'directory', 'directories')}, {counted(c['regular'], 'file', 'files')}")
        inodes_part = (f"; {counted(info['inodes'], 'inode', 'inodes')} "
                       f"({counted(c['hard_links'], 'extra hard link', 'extra hard links')})")
        if entries_line not in human or inodes_part not in human:
            raise AssertionError(f"info text lacks {entries_line!r} or the inode count:\n{human}")
        for n in ("Compressor:       xz", "Dedup savings", "Manifest trailer: no", "Block size"):
            if n not in human:
                raise AssertionError(f"info text lacks {n!r}:\n{human}")
        sqar_create_image(src, f"{d}/sqar.sqfs")
        info = json.loads(sqar("info", "--json", f"{d}/sqar.sqfs").stdout)
        if not info["manifest"] or info["dedup_saved_bytes"] < 2 * text_size:
            raise AssertionError(f"info of a sqar image: {info}")
        log("ok: info counts, sizes, dedup and flags are right")


def test_info_reads_metadata_only():
    """info describes 20k entries from the tables alone: with every data block (and fragment
    block) of the image overwritten by noise it still gives the right counts and sizes, where
    verify, which reads the data, fails."""
    with tempdir() as d:
        src = f"{d}/src"
        for i in range(100):
            os.makedirs(f"{src}/d{i}")
            for j in range(200):
                with open(f"{src}/d{i}/f{j}", "w") as f:
                    f.write(f"file {i} {j}\n" * (j % 7))
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "zstd")
        before = json.loads(sqar("info", "--json", img).stdout)
        with open(img, "r+b") as f:
            sb = f.read(96)
            flags = int.from_bytes(sb[24:26], "little")
            options_len = int.from_bytes(f.read(2), "little") & 0x7FFF  # the compressor options block
            data_start = 96 + (2 + options_len if flags & 0x400 else 0)
            inode_table_start = int.from_bytes(sb[64:72], "little")
            assert inode_table_start - data_start > 20000, (data_start, inode_table_start)
            f.seek(data_start)
            f.write(pseudo_random(inode_table_start - data_start, 7))
        t0 = time.monotonic()
        info = json.loads(sqar("info", "--json", img).stdout)
        secs = time.monotonic() - t0
        if info["counts"]["regular"] != 20000 or info != before:
            raise AssertionError(f"info changed when only file data did: {before} -> {info}")
        p = run([SQAR, "verify", img], check=False)
        if p.returncode == 0:
            raise AssertionError("verify passed an image whose data blocks are noise: the damage did not take")
        log(f"ok: info on 20k entries read no file data ({secs:.3f} s)")


def test_cat():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "lzo")
        for name in ("small.txt", "text.log", "random.bin", "sparse.img", "empty"):
            p = run([SQAR, "cat", img, name], check=False, text=False)
            with open(f"{src}/{name}", "rb") as f:
                if p.returncode != 0 or p.stdout != f.read():
                    raise AssertionError(f"cat {name}: exit {p.returncode}, content differs")
        p = run([SQAR, "cat", img, "link-rel", "/dup/hard-2"], check=False, text=False)
        if p.stdout != b"hello world\n" * 2:
            raise AssertionError(f"cat through a symlink: {p.stdout!r}")
        p = expect_fail(["cat", img, "nope", "dup"], 1, img, "nope: not found", "dup: is a directory")
        expect_fail(["cat", img, "/"], 1, img, ": /: is a directory")  # the root is named, not ""
        expect_fail(["cat", img], 2, "need IMAGE")
        log("ok: cat prints content, follows symlinks, names bad paths")


def test_cat_clamps_escaping_symlinks_at_the_root():
    """A symlink climbing out of the image, absolute or relative, stops at the image root as
    in a chroot: /../../etc/passwd inside the image is the image's etc/passwd. Symlinks are
    followed in every component of the path, as the kernel follows them."""
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/etc/passwd", b"the image's passwd\n")
        os.makedirs(f"{src}/a/b")
        os.symlink("/../../etc/passwd", f"{src}/abs-up")
        os.symlink("/etc/../../../etc/passwd", f"{src}/a/abs-mid")
        os.symlink("../../../../etc/passwd", f"{src}/a/b/rel-up")
        # Symlinks to directories in the middle of the path, chained, relative and absolute.
        os.symlink("../../etc", f"{src}/a/b/etc-dir")
        os.symlink("/../a", f"{src}/a-dir")
        # '..' inside a target climbs from where the symlinks before it led: c is p/x.
        write(f"{src}/x", b"top x\n")
        write(f"{src}/p/x", b"p's x\n")
        os.makedirs(f"{src}/p/q")
        os.symlink("p/q", f"{src}/l")
        os.symlink("l/../x", f"{src}/c")
        os.symlink("nosub/../x", f"{src}/no-sub")
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", src, img])
        for name in ("abs-up", "a/abs-mid", "a/b/rel-up", "a/b/etc-dir/passwd", "a-dir/b/etc-dir/passwd"):
            p = run([SQAR, "cat", img, name], check=False, text=False)
            if p.returncode != 0 or p.stdout != b"the image's passwd\n":
                raise AssertionError(f"cat {name}: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
        # ".." in the path asked for climbs from where the walk is, after the symlinks before
        # it, as the kernel resolves it: a/b/etc-dir is etc, so a/b/etc-dir/.. is the root.
        for name in ("a/b/../../etc/passwd", "../../etc/./passwd", "a/b/etc-dir/../etc/passwd"):
            p = run([SQAR, "cat", img, name], check=False, text=False)
            if p.returncode != 0 or p.stdout != b"the image's passwd\n":
                raise AssertionError(f"cat {name}: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
        expect_fail(["cat", img, "a/b/etc-dir/../passwd"], 1, "a/b/etc-dir/../passwd: not found in the image")
        # The same as the kernel reading the tree the image was made of.
        with open(f"{src}/c", "rb") as f:
            assert f.read() == b"p's x\n"
        p = run([SQAR, "cat", img, "c"], check=False, text=False)
        if p.returncode != 0 or p.stdout != b"p's x\n":
            raise AssertionError(f"cat c (l/../x, l -> p/q): exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
        assert not os.path.exists(f"{src}/no-sub")
        expect_fail(["cat", img, "no-sub"], 1, "no-sub: not found in the image")
        expect_fail(["cat", img, "a/.."], 1, "a/..: is a directory")
        expect_fail(["cat", img, "a-dir/b/etc-dir"], 1, "a-dir/b/etc-dir: is a directory (its symlinks lead to etc)")
        expect_fail(["cat", img, "etc/passwd/x"], 1, "etc/passwd/x: etc/passwd is not a directory")
        log("ok: cat resolves escaping absolute and relative symlinks at the image root, also mid-path, and '..'")


def test_cat_streams_big_files_in_order():
    """Blocks are decoded ahead on several threads but written in order; a damaged block stops
    the output exactly at its start, after everything before it was written."""
    block = 128 * 1024
    content = b"".join(b"block %d line %d of a text that compresses\n" % (i // 3000, i) for i in range(120000))
    after = b"".join(b"the file after the damaged one, line %d\n" % i for i in range(9000))  # 3 blocks
    with tempdir() as d:
        write(f"{d}/src/big.log", content)
        write(f"{d}/src/zz.log", after)  # stored after big.log, a few KiB compressed
        img = f"{d}/img.sqfs"
        mksquashfs(f"{d}/src", img, "-comp", "gzip")  # zlib streams carry a checksum
        for jobs in ("1", "2", "5"):
            p = run([SQAR, "cat", "-j", jobs, img, "big.log"], check=False, text=False)
            if p.returncode != 0 or p.stdout != content:
                raise AssertionError(f"cat -j {jobs}: exit {p.returncode}, {len(p.stdout)} of {len(content)} bytes")
        with open(img, "rb") as f:
            f.seek(64)
            inode_table_start = int.from_bytes(f.read(8), "little")
        middle = 96 + (inode_table_start - 96) // 2  # inside one of big.log's data blocks
        with open(img, "r+b") as f:
            f.seek(middle)
            b = f.read(1)
            f.seek(middle)
            f.write(bytes([b[0] ^ 0xFF]))
        p = run([SQAR, "cat", "-j", "3", img, "big.log"], check=False, text=False)
        out, err = p.stdout, p.stderr.decode()
        if p.returncode != 1 or "big.log" not in err:
            raise AssertionError(f"damaged block: exit {p.returncode}, stderr {err!r}")
        if not (0 < len(out) < len(content)) or len(out) % block or out != content[:len(out)]:
            raise AssertionError(f"damaged block: {len(out)} bytes written, not a whole-block prefix of the file")
        # The next file is still printed whole, by the same threads' successors.
        p = run([SQAR, "cat", "-j", "3", img, "big.log", "zz.log"], check=False, text=False)
        if p.returncode != 1 or not p.stdout.endswith(after) or p.stdout[: -len(after)] != out:
            raise AssertionError(f"after a damaged file: exit {p.returncode}, {len(p.stdout)} bytes")
        # A failed write to standard output ends the command at once, named as such.
        with open("/dev/full", "wb") as full:
            p = run([SQAR, "cat", "-j", "3", img, "zz.log", "zz.log"], check=False, stdout=full)
        if p.returncode != 1 or p.stderr.count("standard output: No space left on device") != 1:
            raise AssertionError(f"cat to /dev/full: exit {p.returncode}, {p.stderr!r}")
        log(f"ok: cat streams in order with 1-5 threads; a damaged block stops it at byte {len(out)}")


def test_hostile_names_are_escaped_everywhere():
    """Names are bytes: an escape sequence, a C1 control (U+009B is CSI on some terminals), a
    newline or bytes that are not UTF-8 must not reach a terminal raw. list and diff write
    them as `ls -b` does in a UTF-8 locale (the reference here), and error messages escape
    them too."""
    names = [b"e\x1b[31mred", b"u\xc2\x9bx", b"bad\xff\xfename", b"new\nline", "\u00fcn\u00efcode".encode(),
             b"back\\slash", b"plain"]
    with tempdir() as d:
        os.makedirs(f"{d}/src")
        os.makedirs(f"{d}/empty")
        for n in names:
            write(os.fsencode(f"{d}/src/") + n, b"x")
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", f"{d}/src", img])
        env = dict(os.environ, LC_ALL="C.UTF-8")
        want = run(["ls", "-b", f"{d}/src"], text=False, env=env).stdout.split(b"\n")[:-1]
        got = run([SQAR, "list", img], text=False).stdout.split(b"\n")[:-1]
        assert sorted(got) == sorted(want), (got, want)
        p = run([SQAR, "diff", img, f"{d}/empty"], check=False, text=False)
        assert p.returncode == 1 and sorted(p.stdout.split(b"\n")[:-1]) == sorted(b"- " + w for w in want), p.stdout
        p = run([SQAR, "cat", img, "e\x1b[2Jgone\u009b"], check=False, text=False)
        assert p.returncode == 1 and b": e\\033[2Jgone\\302\\233: " in p.stderr, p.stderr
        for out in (p.stderr, run([SQAR, "list", img, "new\nmissing"], check=False, text=False).stderr):
            assert not any(c < 0x20 and c != 0x0A for c in out) and out.count(b"\n") == 1, out
        # The image's own name, as info shows it.
        hostile = f"{d}/im\x1b[2Jage.sqfs"
        shutil.copy(img, hostile)
        out = run([SQAR, "info", hostile], text=False).stdout
        assert b"im\\033[2Jage.sqfs" in out and b"\x1b" not in out, out[:200]
        log("ok: list and diff print names as ls -b does; error messages and info escape them as well")


def test_large_directories():
    """A directory of 10,000 entries: sqar's writer indexes every directory header (about one
    per 256 entries), mksquashfs the first header of each metadata block. list, cat and
    verify read both as unsquashfs lists them."""
    with tempdir() as d:
        names = [f"f{i:06d}" for i in range(10000)]
        os.makedirs(f"{d}/src/d")
        for n in names:
            open(f"{d}/src/d/{n}", "w").close()
        write(f"{d}/src/d/zz-last", b"the last one\n")
        for maker in ("sqar", "mksquashfs"):
            img = f"{d}/{maker}.sqfs"
            if maker == "sqar":
                run([SQAR, "create", "-q", f"{d}/src", img])
            else:
                mksquashfs(f"{d}/src", img)
            theirs = [p.lstrip("/") for p in run(["unsquashfs", "-d", "", "-l", img]).stdout.split()]
            ours = sqar("list", img).stdout.split()
            assert ours == sorted(theirs) and len(ours) == 10002, (maker, len(ours), len(theirs))
            assert sqar("cat", img, "d/zz-last").stdout == "the last one\n", maker
            sqar("verify", img)
        log("ok: 10,000-entry directories of sqar's and mksquashfs's images list, cat and verify")


def test_help_and_usage():
    for cmd in ("extract", "list", "cat", "info", "verify", "diff"):
        h = sqar(cmd, "--help").stdout
        if "Usage: sqar " + cmd not in h or "Examples" not in h:
            raise AssertionError(f"{cmd} --help does not teach:\n{h}")
        expect_fail([cmd], 2, f"sqar {cmd}:")
        expect_fail([cmd, "--no-such-option", "x"], 2, "--no-such-option")
    with tempdir() as d:
        write(f"{d}/junk", b"not an image" * 100)
        for cmd in (["list"], ["info"], ["verify"], ["cat"]):
            args = cmd + [f"{d}/junk"] + (["x"] if cmd == ["cat"] else [])
            expect_fail(args, 1, f"sqar {cmd[0]}: {d}/junk")
        expect_fail(["diff", f"{d}/junk", d], 2, f"{d}/junk")
    log("ok: every command teaches with --help and reports usage (2) and errors (1)")


def test_info_names_what_it_finds():
    """An image 4 KiB into a file (after a boot sector, say) is not at offset 0: the error
    names the offset where its superblock is, and --offset reads it. mksquashfs's xz options
    name their BCJ filters."""
    with tempdir() as d:
        write(f"{d}/src/a.txt", b"alpha\n")
        img = f"{d}/img.sqfs"
        mksquashfs(f"{d}/src", img, "-comp", "xz", "-Xbcj", "x86,arm")
        with open(f"{d}/embedded.bin", "wb") as out:
            out.write(pseudo_random(4096, "boot sector") + open(img, "rb").read())
        expect_fail(["info", f"{d}/embedded.bin"], 1, "bad magic", "starts 4096 bytes in")
        assert "a.txt" in sqar("list", "--offset", "4096", f"{d}/embedded.bin").stdout
        write(f"{d}/noise.bin", pseudo_random(8192, "noise"))
        assert "starts" not in expect_fail(["info", f"{d}/noise.bin"], 1, "bad magic").stderr
        line = [l for l in sqar("info", img).stdout.splitlines() if l.startswith("Compressor:")][0]
        assert line.endswith("BCJ filters x86+arm)"), line
        log(f"ok: {line}")
        # lzo's algorithm by the name mksquashfs takes; a level only where it has one.
        for algorithm, want in (("lzo1x_1", "lzo (lzo1x_1)"), ("lzo1x_999", "lzo (lzo1x_999, level 8)")):
            mksquashfs(f"{d}/src", f"{d}/lzo.sqfs", "-comp", "lzo", "-Xalgorithm", algorithm)
            line = [l for l in sqar("info", f"{d}/lzo.sqfs").stdout.splitlines() if l.startswith("Compressor:")][0]
            assert line.split(None, 1)[1].replace("; defaults: no options block", "") == want, (algorithm, line)
        log("ok: lzo algorithms named as mksquashfs names them")


if __name__ == "__main__":
    if shutil.which("mksquashfs") is None:
        print("SKIPPED: mksquashfs is not installed")
        raise SystemExit(77)
    main([test_list, test_info, test_info_reads_metadata_only, test_cat, test_cat_clamps_escaping_symlinks_at_the_root,
          test_cat_streams_big_files_in_order, test_hostile_names_are_escaped_everywhere, test_large_directories,
          test_help_and_usage, test_info_names_what_it_finds])
