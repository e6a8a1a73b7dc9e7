"""sqar verify and sqar diff agree with reality: clean images pass, a flipped byte in a data
block makes verify fail naming the file, and diff reports exactly the changes made to a tree."""
import json
import lzma
import os
import re
import shutil
import stat
import struct
import subprocess
import threading
import time

from clitest import expect_fail, mksquashfs, sqar, sqar_create_image
from craftfs import Codec, Image, xz_codec
from sqartest import (AS_NOBODY, SQAR, kernel_mount, kernel_supports, log, main, make_full_tree, need_root, need_tool,
                      pseudo_random, run,
                      tempdir, write)

TEXT = b"".join(b"line %d of a log file with some words\n" % i for i in range(30000))


def flip(image, offset):
    with open(image, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def one_big_file_tree(root):
    """Only big.log has data blocks, so any flip in the data area is a flip in big.log."""
    write(f"{root}/big.log", TEXT)
    os.makedirs(f"{root}/empty-dir")
    os.symlink("big.log", f"{root}/link")


def test_verify_clean_images():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        for comp in ("gzip", "xz", "zstd"):
            mksquashfs(src, f"{d}/{comp}.sqfs", "-comp", comp)
            out = sqar("verify", f"{d}/{comp}.sqfs").stderr
            if "OK" not in out:
                raise AssertionError(f"verify output: {out}")
        sqar_create_image(src, f"{d}/sqar.sqfs")
        out = sqar("verify", "-j", "2", f"{d}/sqar.sqfs").stderr
        if "manifest" not in out or "OK" not in out:
            raise AssertionError(f"verify of a sqar image did not use the manifest: {out}")
        # --json: the same numbers as the text line, under stable keys.
        r = json.loads(sqar("verify", "--json", f"{d}/sqar.sqfs").stdout)
        assert r["ok"] is True and r["manifest"] is True and r["problems"] == 0 and r["errors"] == [], r
        assert r["image"] == f"{d}/sqar.sqfs", r
        assert f"{r['entries']} entries, {r['files']} files, " in out, (r, out)
        # One of each is named in the singular.
        os.makedirs(f"{d}/one")
        with open(f"{d}/one/f", "w") as f:
            f.write("hi\n")
        sqar_create_image(f"{d}/one", f"{d}/one.sqfs")
        out = sqar("verify", f"{d}/one.sqfs").stderr
        assert ": OK: 2 entries, 1 file, 3 B of content checked" in out, out
        log("ok: clean images verify")


def test_verify_flipped_data_byte_mksquashfs():
    with tempdir() as d:
        one_big_file_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        mksquashfs(f"{d}/src", img, "-comp", "gzip")  # zlib streams carry a checksum
        sqar("verify", img)
        flip(img, 96 + 3000)
        p = expect_fail(["verify", img], 1, img, "big.log")
        log(f"ok: flipped byte found: {p.stderr.strip().splitlines()[0]}")


def test_verify_flipped_data_byte_sqar():
    with tempdir() as d:
        one_big_file_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        sqar_create_image(f"{d}/src", img, "-c", "lz4")  # lz4 has no checksum: the manifest must catch it
        sqar("verify", img)
        with open(img, "rb") as f:
            data = f.read()
        # A byte of the first data block (right after the superblock and any options block).
        flip(img, 96 + 64 + 2000 if len(data) > 5000 else 200)
        p = expect_fail(["verify", img], 1, img, "big.log")
        p = expect_fail(["verify", "--json", img], 1, "big.log")
        r = json.loads(p.stdout)
        assert r["ok"] is False and r["problems"] >= 1 and "big.log" in [e["path"] for e in r["errors"]], r
        assert all(e["message"] for e in r["errors"]), r
        log(f"ok: flipped byte in a sqar image found: {p.stderr.strip().splitlines()[0]}")


def test_verify_names_every_file_sharing_a_damaged_block():
    """verify reads the data that duplicates share once; each of them must still be named."""
    with tempdir() as d:
        one_big_file_tree(f"{d}/src")
        write(f"{d}/src/copy/big-again.log", TEXT)  # a duplicate: shares big.log's blocks
        write(f"{d}/src/other.log", TEXT[:20000])  # its own fragment, after the blocks
        made = []
        mksquashfs(f"{d}/src", f"{d}/mk.sqfs", "-comp", "gzip")
        made.append(f"{d}/mk.sqfs")
        sqar_create_image(f"{d}/src", f"{d}/sqar.sqfs", "-c", "lz4")
        made.append(f"{d}/sqar.sqfs")
        for img in made:
            out = sqar("verify", "-j", "2", img).stderr
            if "OK" not in out:
                raise AssertionError(f"{img}: clean image did not verify: {out}")
            flip(img, 96 + 64 + 2000)
            p = expect_fail(["verify", "-j", "2", img], 1, img)
            for name in ("big.log", "copy/big-again.log"):
                if f": {name}: " not in p.stderr:
                    raise AssertionError(f"{img}: {name} not named:\n{p.stderr}")
            if "other.log" in p.stderr:
                raise AssertionError(f"{img}: an intact file was named:\n{p.stderr}")
        log(f"ok: both files sharing a damaged block are named ({len(made)} images)")


def test_verify_sums_up_a_cause_shared_by_many_entries():
    """One damaged inode block fails hundreds of entries alike: each cause is named for its
    first 10 entries, the rest are counted in one line per cause, and --json lists them all."""
    with tempdir() as d:
        for i in range(2000):
            write(f"{d}/src/f{i:04}", f"file {i}\n".encode())
        sqar("create", "-q", f"{d}/src", f"{d}/img.sqfs")
        data = bytearray(open(f"{d}/img.sqfs", "rb").read())
        inode_table = struct.unpack_from("<Q", data, 64)[0]
        second_block = inode_table + 2 + (struct.unpack_from("<H", data, inode_table)[0] & 0x7FFF)
        data[second_block + 20] ^= 0xFF
        write(f"{d}/bad.sqfs", bytes(data))
        p = run([SQAR, "verify", f"{d}/bad.sqfs"], check=False)
        problems = int(re.search(r"FAILED: (\d+) problems found", p.stderr).group(1))
        prefix = f"sqar verify: {d}/bad.sqfs: "
        lines = [line[len(prefix):] for line in p.stderr.splitlines() if line.startswith(prefix)][:-1]
        summed = [re.match(r"(\d+) more entries: (.*) \(--json names every entry\)$", line) for line in lines]
        named = [line.split(": ", 1)[1] for line, s in zip(lines, summed) if not s]
        assert p.returncode == 1 and any(summed) and problems > 100, p.stderr[-2000:]
        for m in filter(None, summed):
            assert named.count(m.group(2)) == 10, (m.group(2), named.count(m.group(2)))
        assert len(named) + sum(int(m.group(1)) for m in summed if m) == problems, (len(named), problems)
        report = json.loads(run([SQAR, "verify", "--json", f"{d}/bad.sqfs"], check=False).stdout)
        assert len(report["errors"]) == problems == report["problems"], (len(report["errors"]), problems)
        log(f"ok: {problems} problems in {len(lines)} lines; --json lists all {problems}")


def test_verify_damaged_raw_fragment_block():
    """Small files are checked per fragment block (manifest version 3). Random files make the
    fragment blocks incompressible, so they are stored raw and a flipped byte decodes without
    complaint: only the manifest can catch it, and verify must name every file of that block
    (the duplicate too) and no file of another block."""
    with tempdir() as d:
        names = [f"f{i:02d}" for i in range(12)]
        content = {n: pseudo_random(1500, n) for n in names}
        for n in names:
            write(f"{d}/src/{n}", content[n])
        write(f"{d}/src/zz/copy-of-f05", content["f05"])  # shares f05's tail
        img = f"{d}/img.sqfs"
        sqar("create", "-q", "-c", "lz4", "-b", "4K", f"{d}/src", img)
        info = json.loads(sqar("info", "--json", img).stdout)
        if info["manifest_fragment_digests"] != info["fragments"] or info["fragments"] < 4:
            raise AssertionError(f"expected one digest per fragment block: {info}")
        if info["manifest_entries"] != 0:
            raise AssertionError(f"small files got entries of their own: {info}")
        out = sqar("verify", img).stderr
        if "OK" not in out or "manifest" not in out:
            raise AssertionError(f"clean image: {out}")
        data = open(img, "rb").read()
        at = data.find(content["f05"][:64])
        if at < 0 or data.count(content["f05"][:64]) != 1:
            raise AssertionError("f05 is not stored raw exactly once")
        flip(img, at + 700)
        p = expect_fail(["verify", img], 1, img, ": f05: ", ": zz/copy-of-f05: ", "fragment block")
        named = {ln.split(": ")[2] for ln in p.stderr.splitlines() if ln.startswith("sqar verify: ") and "fragment block" in ln}
        # 4 KiB blocks hold two 1500-byte tails: f05, its block mate and f05's duplicate.
        if not 2 <= len(named) <= 3 or {"f00", "f11"} & named:
            raise AssertionError(f"named the wrong files: {sorted(named)}\n{p.stderr}")
        log(f"ok: a flipped byte in a raw fragment block names {sorted(named)}")


def test_verify_progress_and_errors_on_a_terminal():
    with tempdir() as d:
        one_big_file_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        sqar_create_image(f"{d}/src", img, "-c", "lz4")
        # Without a terminal: the OK line on stderr (a summary, not data), nothing on stdout.
        p = sqar("verify", img)
        if p.stdout or "OK" not in p.stderr or "\r" in p.stderr:
            raise AssertionError(f"verify without a terminal: {p.stdout!r} {p.stderr!r}")
        # With --progress, a damaged file is named on a line of its own, never glued to the bar.
        flip(img, 96 + 64 + 2000)
        p = expect_fail(["verify", "--progress", img], 1, "big.log")
        lines = [ln.split("\r")[-1].replace("\x1b[K", "") for ln in p.stderr.splitlines()]
        named = [ln for ln in lines if "big.log" in ln]
        if not named or not named[0].startswith("sqar verify: "):
            raise AssertionError(f"the error line is not clean: {p.stderr!r}")
        log("ok: verify --progress keeps error lines whole")


def test_verify_bad_manifest():
    with tempdir() as d:
        one_big_file_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        sqar_create_image(f"{d}/src", img)
        bytes_used = json.loads(sqar("info", "--json", img).stdout)["image_bytes"]
        manifest_at = (bytes_used + 4095) // 4096 * 4096
        flip(img, manifest_at + 40 + 4 + 3)  # a byte of the first entry's hash
        expect_fail(["verify", img], 1, img, "manifest")
        log("ok: a damaged manifest trailer fails verify")


def test_verify_export_table_mismatch():
    """Swapped export table entries (inode number -> inode) are named by the files they affect;
    the image is otherwise sound, so nothing else is reported."""
    with tempdir() as d:
        src = f"{d}/src"
        for name in ("a", "b", "c"):
            write(f"{src}/{name}", name.encode())
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-noI", "-noD", "-noF", "-noX")  # metadata stored uncompressed
        with open(img, "rb") as f:
            data = bytearray(f.read())
        inode_count = struct.unpack_from("<I", data, 4)[0]
        export_table = struct.unpack_from("<Q", data, 88)[0]  # superblock: export_table_start
        block = struct.unpack_from("<Q", data, export_table)[0]
        header = struct.unpack_from("<H", data, block)[0]
        if not header & 0x8000 or (header & 0x7FFF) != 8 * inode_count:
            raise AssertionError(f"expected one uncompressed export block of {inode_count} refs, header {header:#x}")
        first, second = struct.unpack_from("<QQ", data, block + 2)
        struct.pack_into("<QQ", data, block + 2, second, first)  # inodes 1 and 2 trade places
        with open(img, "wb") as f:
            f.write(data)
        p = expect_fail(["verify", img], 1, img, "export table entry of inode 1 points elsewhere",
                        "export table entry of inode 2 points elsewhere", "2 problems found")
        log(f"ok: verify names the swapped export entries: {p.stderr.splitlines()[0]}")


def kernel_reads(image, mnt, name, expected):
    """Whether the kernel mounts image and reads file `name` as expected (False on EIO)."""
    try:
        with kernel_mount(image, mnt):
            with open(f"{mnt}/{name}", "rb") as f:
                assert f.read() == expected, f"{image}: the kernel read other bytes than were stored"
        return True
    except (OSError, AssertionError) as e:
        if "other bytes" in str(e):
            raise
        return False


def test_verify_reports_what_the_kernel_refuses():
    """Crafted xz images that unsquashfs reads but the kernel does not: blocks whose LZMA2
    dictionary exceeds what the image declares (the kernel allocates the declared size and
    returns EIO), a CRC64 check (the kernel's decoder knows only CRC32), and a declared
    dictionary that is not 2^n or 3*2^n. verify fails on each, naming the cause; it passes
    the same image made within the limits. As root, the kernel's own mount confirms each
    verdict."""
    body = TEXT[:150000]  # one full 128 KiB block and a fragment
    # (codec, what verify must say or None, symlinks beside the file). The tables of a single
    # file stay smaller than xz's framing, so they are stored uncompressed; 200 symlinks make
    # compressed metadata blocks, and the kernel then fails the mount itself.
    cases = {
        "fits": (xz_codec(1 << 17), None, 200),
        "dictionary": (xz_codec(1 << 20), "log: data block at 0x60 needs a 1024 KiB xz dictionary, more than the 128 KiB", 0),
        "metadata": (xz_codec(1 << 20), "metadata: metadata block at 0x", 200),
        "declared": (xz_codec(1 << 17, declared=1 << 16), "needs a 128 KiB xz dictionary, more than the 64 KiB", 0),
        "crc64": (xz_codec(1 << 17, check=lzma.CHECK_CRC64), "integrity check CRC64, and the Linux kernel", 0),
        "odd-size": (xz_codec(1 << 16, declared=5 << 14), "declare an xz dictionary of 81920 bytes", 0),
    }
    kernel = os.geteuid() == 0 and kernel_supports("xz")
    with tempdir() as d:
        for name, (codec, cause, links) in cases.items():
            img = Image(compress_meta=True, compress_data=True, codec=codec)
            entries = {"log": img.file(body)}
            entries.update({f"link-{i:03d}": img.symlink("log") for i in range(links)})
            root = img.dir(entries)
            path = f"{d}/{name}.sqfs"
            with open(path, "wb") as f:
                f.write(img.build(root))
            out = f"{d}/{name}.out"
            run(["unsquashfs", "-q", "-n", "-d", out, path])
            with open(f"{out}/log", "rb") as f:
                assert f.read() == body, f"{name}: unsquashfs read other bytes"
            if cause is None:
                assert "OK" in sqar("verify", path).stderr
            else:
                expect_fail(["verify", path], 1, path, cause)
            if kernel:
                assert kernel_reads(path, f"{d}/mnt", "log", body) == (cause is None), \
                    f"{name}: the kernel {'refused' if cause is None else 'read'} it, verify said {cause}"
        log("ok: verify names what the kernel refuses" + ("" if kernel else " (the kernel's verdicts not checked: "
                                                          "needs root and xz in the kernel)"))


def zstd_frames(window_log):
    """A craftfs codec writing zstd frames through the zstd tool: with --no-content-size the
    frame declares its window (2^window_log), as a stream of unknown size does."""
    def compress(data):
        return run(["zstd", "-q", "-c", "--no-content-size", f"--zstd=wlog={window_log}"], input=data,
                   text=False).stdout
    return Codec(6, compress)


def test_verify_reports_zstd_windows_the_kernel_refuses():
    """The kernel decodes zstd with a window of the block size (at least 8 KiB) and refuses a
    frame declaring more, which unsquashfs reads: verify names it, passes the same image with
    a window that fits, and --reuse of such an OLD compresses its blocks instead of copying
    them. As root, the kernel's own mount confirms each verdict."""
    need_tool("zstd")
    body = TEXT[:3 * 4096]  # three full 4 KiB blocks
    kernel = os.geteuid() == 0 and kernel_supports("zstd")
    with tempdir() as d:
        for name, window_log, cause in (("fits", 12, None), ("wide", 23, "declares a zstd window of 8192 KiB")):
            img = Image(block_size=4096, compress_data=True, codec=zstd_frames(window_log))
            root = img.dir({"log": img.file(body)})
            path = f"{d}/{name}.sqfs"
            with open(path, "wb") as f:
                f.write(img.build(root))
            assert run(["unsquashfs", "-cat", path, "log"], text=False).stdout == body, name
            if cause is None:
                assert "OK" in sqar("verify", path).stderr
            else:
                expect_fail(["verify", path], 1, path, "log: data block at 0x", cause)
            if kernel:
                assert kernel_reads(path, f"{d}/mnt", "log", body) == (cause is None), name
            write(f"{d}/src/log", body)
            p = run([SQAR, "create", "--json", "--force", "-c", "zstd", "-b", "4K", "--reuse", path, f"{d}/src",
                     f"{d}/new.sqfs"])
            reused = json.loads(p.stdout)["blocks_reused"]
            assert reused == (3 if cause is None else 0), (name, reused, p.stderr)
            assert "OK" in sqar("verify", f"{d}/new.sqfs").stderr
        log("ok: verify names a zstd window the kernel refuses, and --reuse does not copy such blocks" +
            ("" if kernel else " (the kernel's verdicts not checked: needs root and zstd in the kernel)"))


def test_diff():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "zstd")
        p = sqar("diff", img, src, check=False)
        if p.returncode != 0 or p.stdout:
            raise AssertionError(f"diff of an image and its own source: exit {p.returncode}\n{p.stdout}{p.stderr}")
        assert json.loads(sqar("diff", "--json", img, src).stdout) == []
        log("ok: an image and its source tree do not differ")
        os.symlink(src, f"{d}/current")  # DIR named through a symlink, as in /srv/current
        p = sqar("diff", img, f"{d}/current", check=False)
        if p.returncode != 0 or p.stdout:
            raise AssertionError(f"diff through a symlink to the tree: exit {p.returncode}\n{p.stdout}{p.stderr}")
        log("ok: DIR may be a symlink to the tree")
        os.chmod(f"{src}/text.log", 0o600)
        with open(f"{src}/random.bin", "r+b") as f:   # same size, other content
            f.seek(1000)
            f.write(b"X")
        os.utime(f"{src}/random.bin", (1_600_000_000 + 9, os.lstat(f"{src}/random.bin").st_mtime))
        write(f"{src}/dup/one.log", TEXT)               # other size
        os.utime(f"{src}/dup/one.log", (0, 1_700_000_000))
        os.unlink(f"{src}/link-rel")
        os.symlink("elsewhere", f"{src}/link-rel")
        os.unlink(f"{src}/empty")
        write(f"{src}/new-file", b"new")
        os.setxattr(f"{src}/small.txt", "user.comment", b"changed")
        p = sqar("diff", "--no-times", img, src, check=False)
        lines = p.stdout.splitlines()
        want = {
            "M text.log: mode 0644 != 0600",
            "M random.bin: content differs",
            "- empty",
            "+ new-file",
            "M link-rel: target \"small.txt\" != \"elsewhere\"",
            "M small.txt: xattrs differ (user.comment)",
        }
        missing = want - set(lines)
        # --json: the same differences, one object per line, in the same order.
        p2 = sqar("diff", "--no-times", "--json", img, src, check=False)
        assert p2.returncode == 1, p2
        as_lines = [{"only_in_image": "- ", "only_in_dir": "+ ", "modified": "M "}[e["change"]] + e["path"] +
                    (": " + e["detail"] if e["change"] == "modified" else "") for e in json.loads(p2.stdout)]
        assert as_lines == lines, (as_lines, lines)
        assert json.loads(sqar("diff", "--json", img, f"{d}/current", check=False).stdout) != []
        size_line = [l for l in lines if l.startswith("M dup/one.log: size ")]
        if p.returncode != 1 or missing or not size_line:
            raise AssertionError(f"diff exit {p.returncode}; missing {missing}; got:\n{p.stdout}{p.stderr}")
        # Side effects of the changes: the new symlink lost its owner and xattr, hard links of
        # small.txt share its xattrs, and the directories' mtimes moved.
        side = ("M .:", "M dup:", "M link-rel: uid", "M link-rel: gid", "M link-rel: xattrs",
                "M hard-1: xattrs", "M dup/hard-2: xattrs")
        unexpected = [l for l in lines if l not in want and l not in size_line and not l.startswith(side)]
        if unexpected:
            raise AssertionError(f"unexpected differences: {unexpected}")
        p = sqar("diff", img, src, check=False)
        # Times in local time to the second, as people read them.
        now = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_000))
        if not re.search(r"^M dup/one.log: mtime \d{4}-\d\d-\d\d \d\d:\d\d:\d\d != " + now + "$", p.stdout, re.M):
            raise AssertionError(f"mtime change not reported as dates:\n{p.stdout}")
        log("ok: diff reports exactly the changes made")
        expect_fail(["diff", img, f"{d}/no-such-dir"], 2, "no-such-dir")
        expect_fail(["diff", img], 2, "need IMAGE and DIR")


def test_diff_quiet():
    """-q prints nothing and answers by its exit status alone: 0 for an image and its source,
    1 once one byte of one file differs (same size and mtime, so only the content comparison
    can tell), as git diff --quiet; --json beside it is a usage error."""
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        sqar_create_image(src, img)
        p = sqar("diff", "-q", img, src, check=False)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p
        st = os.lstat(f"{src}/random.bin")
        with open(f"{src}/random.bin", "r+b") as f:
            f.seek(200_000)
            byte = f.read(1)
            f.seek(200_000)
            f.write(bytes([byte[0] ^ 1]))
        os.utime(f"{src}/random.bin", ns=(st.st_atime_ns, st.st_mtime_ns))
        p = sqar("diff", "--quiet", img, src, check=False)
        assert p.returncode == 1 and p.stdout == "" and p.stderr == "", p
        assert sqar("diff", img, src, check=False).stdout == "M random.bin: content differs\n"
        expect_fail(["diff", "-q", "--json", img, src], 2, "--json does not apply")
        log("ok: diff -q: exit 0 when equal, 1 on one changed byte, no output")


def test_diff_as_a_user_who_cannot_see_trusted_xattrs():
    """trusted.* xattrs are listed only to a caller with CAP_SYS_ADMIN: a user's diff of a
    root-made image against its unchanged source finds nothing, and still finds a user.*
    change."""
    need_root()
    with tempdir() as d:
        write(f"{d}/src/f", b"f\n")
        os.setxattr(f"{d}/src/f", "trusted.note", b"t")
        os.setxattr(f"{d}/src/f", "user.note", b"u")
        run([SQAR, "create", "-q", f"{d}/src", f"{d}/img.sqfs"])
        for path in (d, f"{d}/src", f"{d}/img.sqfs"):
            os.chmod(path, 0o755 if os.path.isdir(path) else 0o644)
        p = run([*AS_NOBODY, SQAR, "diff", f"{d}/img.sqfs", f"{d}/src"], check=False)
        assert p.returncode == 0 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
        os.setxattr(f"{d}/src/f", "user.note", b"changed")
        p = run([*AS_NOBODY, SQAR, "diff", f"{d}/img.sqfs", f"{d}/src"], check=False)
        assert p.returncode == 1 and p.stdout == "M f: xattrs differ (user.note)\n", (p.stdout, p.stderr)
        log("ok: a user's diff leaves out the trusted.* xattrs it cannot see, and finds a user.* change")


def test_diff_subtrees_types_links_devices():
    """Whole subtrees on one side only, a directory that became a file and back, hard links,
    a device's numbers: every line exactly, in path order ('a-c' sorts before 'a/b')."""
    need_root()
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/a/b/c", b"c")
        write(f"{src}/a/x", b"x")
        write(f"{src}/a-c", b"same size")
        write(f"{src}/gone/sub/f", b"f")
        write(f"{src}/t", b"t")
        write(f"{src}/h1", b"linked")
        os.link(f"{src}/h1", f"{src}/h2")
        os.mknod(f"{src}/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(f"{src}/null", 0o666)  # mknod's mode passes through the umask
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "gzip")
        p = sqar("diff", img, src, check=False)
        if p.returncode != 0 or p.stdout:
            raise AssertionError(f"diff of an image and its own source: exit {p.returncode}\n{p.stdout}{p.stderr}")
        shutil.rmtree(f"{src}/a/b")
        write(f"{src}/a/b", b"now a file")
        write(f"{src}/a-c", b"SAME size")
        shutil.rmtree(f"{src}/gone")
        write(f"{src}/fresh/deep/f", b"new")
        os.unlink(f"{src}/t")
        write(f"{src}/t/in", b"in")
        os.chmod(f"{src}/h1", 0o600)
        os.unlink(f"{src}/null")
        os.mknod(f"{src}/null", 0o666 | stat.S_IFCHR, os.makedev(1, 5))
        os.chmod(f"{src}/null", 0o666)
        p = sqar("diff", "--no-times", img, src, check=False)
        want = [
            "M a-c: content differs",
            "M a/b: type dir != file",
            "- a/b/c",
            "+ fresh",
            "+ fresh/deep",
            "+ fresh/deep/f",
            "- gone",
            "- gone/sub",
            "- gone/sub/f",
            "M h1: mode 0644 != 0600",
            "M h2: mode 0644 != 0600",
            "M null: rdev 1,3 != 1,5",
            "M t: type file != dir",
            "+ t/in",
        ]
        if p.returncode != 1 or p.stdout.splitlines() != want:
            raise AssertionError(f"diff exit {p.returncode}, want:\n" + "\n".join(want) + f"\ngot:\n{p.stdout}{p.stderr}")
        log("ok: subtrees on one side, type changes, hard links and devices, in path order")


def test_diff_after_extract_roundtrip():
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "lz4")
        sqar("extract", img, "-C", f"{d}/out")
        p = sqar("diff", img, f"{d}/out", check=False)
        if p.returncode != 0:
            raise AssertionError(f"extract then diff differs:\n{p.stdout}{p.stderr}")
        os.truncate(f"{d}/out/sparse.img", 10)
        p = sqar("diff", img, f"{d}/out", check=False)
        if p.returncode != 1 or "sparse.img: size" not in p.stdout:
            raise AssertionError(f"truncation not found:\n{p.stdout}")
        log("ok: extract then diff agree; a truncated file is reported")


def test_diff_goes_on_past_an_unreadable_file():
    """As diff -r does, a file diff cannot read is reported (exit 2) and the differences found
    elsewhere are still printed; an unreadable directory is named without
    create's --skip-unreadable advice, and the entries after it are still compared."""
    need_root()
    with tempdir() as d:
        os.chmod(d, 0o755)
        write(f"{d}/src/a/f1", b"one\n")
        write(f"{d}/src/secret", b"s\n")
        write(f"{d}/src/sub/g", b"g\n")
        img = f"{d}/img.sqfs"
        sqar("create", "-q", f"{d}/src", img)
        write(f"{d}/src/a/f1", b"changed\n")
        write(f"{d}/src/zz-new", b"new\n")
        os.chmod(f"{d}/src/secret", 0)
        p = run([*AS_NOBODY, SQAR, "diff", img, f"{d}/src"], check=False)
        assert p.returncode == 2 and "secret: Permission denied" in p.stderr, (p.returncode, p.stderr)
        assert "M a/f1: size 4 != 8" in p.stdout and "+ zz-new" in p.stdout, p.stdout
        os.chmod(f"{d}/src/secret", 0o644)
        os.chmod(f"{d}/src/sub", 0)
        p = run([*AS_NOBODY, SQAR, "diff", img, f"{d}/src"], check=False)
        assert p.returncode == 2 and "sub: Permission denied" in p.stderr and "--skip-unreadable" not in p.stderr, \
            p.stderr
        # The walk goes on past it: later entries are compared, and what the directory holds is
        # unknown, not missing.
        assert "M a/f1: size 4 != 8" in p.stdout and "+ zz-new" in p.stdout, p.stdout
        assert "sub/g" not in p.stdout and "not compared" in p.stderr, (p.stdout, p.stderr)
        os.chmod(f"{d}/src/sub", 0o755)
        # --quiet: once a difference answers, contents queued before it are not compared (an
        # unreadable "secret" would be named) and the status is 1.
        os.chmod(f"{d}/src/secret", 0)
        os.chmod(f"{d}/src/zz-new", 0o600)
        os.unlink(f"{d}/src/a/f1")
        write(f"{d}/src/a/f1", b"one\n")
        p = run([*AS_NOBODY, SQAR, "diff", "-q", "--no-times", img, f"{d}/src"], check=False)
        assert p.returncode == 1 and p.stdout == "" and p.stderr == "", (p.returncode, p.stdout, p.stderr)
        os.chmod(f"{d}/src/secret", 0o644)
        log("ok: diff prints what differs and names what it could not read (exit 2)")


def test_diff_file_swapped_for_a_fifo_while_comparing():
    """A file the walk saw that becomes a FIFO before its content is compared: opening the FIFO
    for reading would wait for a writer forever. diff names it and goes on (exit 2)."""
    from changing import run_changing, until_valid

    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/a/first", b"first\n" * 1000)
        write(f"{src}/z/victim", b"victim\n" * 1000)
        write(f"{src}/z/zz-after", b"after\n")
        img = f"{d}/img.sqfs"
        sqar("create", "-q", src, img)
        write(f"{src}/z/zz-after", b"later\n")

        def swap():
            os.unlink(f"{src}/z/victim")
            os.mkfifo(f"{src}/z/victim")

        def attempt(n):
            if n > 1:
                os.unlink(f"{src}/z/victim")
                write(f"{src}/z/victim", b"victim\n" * 1000)
            # A diff that hangs on the FIFO is killed after a minute (signalled to sqar itself:
            # run_changing stops and continues the process it starts).
            watchdog = threading.Timer(60, lambda: subprocess.run(["pkill", "-KILL", "-f", img]))
            watchdog.start()
            try:
                return run_changing([SQAR, "diff", "-j1", img, src], src, swap, changed=["victim"])
            finally:
                watchdog.cancel()

        p = until_valid(5, attempt, "diff had opened z/victim before it stopped")
        assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)  # -9: it hung on the FIFO
        assert "z/victim: is now a FIFO (it changed while being compared)" in p.stderr, p.stderr
        assert "M z/zz-after: content differs" in p.stdout, p.stdout
        log("ok: a file swapped for a FIFO while diff runs is named, and diff goes on")


def test_diff_root_and_content_lines_in_place():
    """The root's own lines (".") come where "." sorts among its entries, after names that
    begin with a byte below '.'; a file's content line comes after its other lines."""
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/b", b"aaaa")
        write(f"{src}/c", b"cccc")
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "gzip")
        write(f"{src}/ sp", b"n")
        write(f"{src}/-new", b"n")
        os.chmod(src, 0o700)
        write(f"{src}/b", b"bbbb")
        os.chmod(f"{src}/b", 0o600)
        want = ["+  sp", "+ -new", "M .: mode 0755 != 0700", "M b: mode 0644 != 0600", "M b: content differs"]
        try:
            os.setxattr(f"{src}/c", "user.x", b"1")
            write(f"{src}/c", b"CCCC")
            want += ["M c: xattrs differ (user.x)", "M c: content differs"]
        except OSError as e:
            log(f"no user xattrs here ({e.strerror}): the xattrs line's place is not checked")
        p = sqar("diff", "--no-times", "--no-owners", img, src, check=False)
        if p.returncode != 1 or p.stdout.splitlines() != want:
            raise AssertionError(f"diff exit {p.returncode}, want:\n" + "\n".join(want) + f"\ngot:\n{p.stdout}{p.stderr}")
        log("ok: the root's lines among its entries, content lines last")


def test_diff_json_stays_valid_when_the_image_is_damaged():
    """A damage found after lines were printed (a directory that lists its own parent) ends
    diff with status 2 and the error named; --json output is still one valid array holding
    what was found before it."""
    with tempdir() as d:
        img = Image(block_size=4096)
        f = img.file(b"x")
        placeholder = img.dir({})
        looping = img.dir({"d": placeholder})
        data = bytearray(img.build(img.dir({"a": img.dir({f"f{i}": f for i in range(50)}), "z": looping})))
        # Point z/d's entry at z itself: both inodes share a metadata block, so only the offset moves.
        dir_table = struct.unpack_from("<Q", data, 72)[0]
        at = data.index(b"\x01\x00\x00\x00d", dir_table) - 4
        assert placeholder.ref >> 16 == looping.ref >> 16
        struct.pack_into("<H", data, at, looping.ref & 0xFFFF)
        image = f"{d}/loop.sqfs"
        with open(image, "wb") as out:
            out.write(data)
        os.mkdir(f"{d}/empty")
        p = sqar("diff", "--json", image, f"{d}/empty", check=False)
        assert p.returncode == 2 and "loop" in p.stderr, (p.returncode, p.stderr)
        found = json.loads(p.stdout)
        assert {"change": "only_in_image", "path": "a/f0"} in found, found[:3]
        log(f"ok: --json holds {len(found)} entries found before the loop, exit 2: {p.stderr.strip()}")


def test_diff_many_changes_stay_in_path_order():
    """diff reports a batch at a time (4,096 contents to compare per batch): across 10,000
    files, every change is named once, in path order, by an image made by mksquashfs."""
    with tempdir() as d:
        src = f"{d}/src"
        names = []
        for i in range(10_000):
            # Siblings 'dN' and 'dN-x' make paths whose order differs from the walk's:
            # 'd1-x/...' sorts before 'd1/...'.
            name = f"d{i % 7}{'-x' if i % 3 == 0 else ''}/f{i:05d}"
            write(f"{src}/{name}", b"%08d" % i)
            names.append(name)
        img = f"{d}/img.sqfs"
        mksquashfs(src, img, "-comp", "zstd", "-all-root")
        want = []
        for i, name in enumerate(names):
            if i % 997 == 0:
                write(f"{src}/{name}", b"%08d" % (i + 1))  # same size
                want.append(f"M {name}: content differs")
            elif i % 1009 == 0:
                os.unlink(f"{src}/{name}")
                want.append(f"- {name}")
        for i in range(0, 10_000, 2503):
            write(f"{src}/d{i % 7}/new{i}", b"n")
            want.append(f"+ d{i % 7}/new{i}")
        want.sort(key=lambda line: line[2:].split(":")[0].encode())
        p = sqar("diff", "-j2", "--no-times", "--no-owners", img, src, check=False)
        if p.returncode != 1 or p.stdout.splitlines() != want:
            raise AssertionError(f"diff exit {p.returncode}, want:\n" + "\n".join(want) + f"\ngot:\n{p.stdout}{p.stderr}")
        log(f"ok: {len(want)} changes among 10,000 files, in path order")


def test_diff_tells_damage_in_the_image_from_a_change_on_disk():
    """Content the image decodes wrong is damage, not a change of the tree: where the manifest
    trailer shows it (random data stored raw: no codec checksum, in a file's own blocks and in
    a fragment block), diff names the file with "content differs from the manifest" and exits
    2 as for any file it cannot compare, instead of "M PATH: content differs" (which would
    tell the user the source changed). A block no codec can decode names the file too, not
    only its inode."""
    with tempdir() as d:
        big, small = pseudo_random(300 * 1024, "diff-big"), pseudo_random(3000, "diff-small")
        write(f"{d}/src/big.bin", big)
        write(f"{d}/src/sub/small.bin", small)
        write(f"{d}/src/text.log", TEXT)
        img = f"{d}/img.sqfs"
        sqar("create", "-q", f"{d}/src", img)
        data = open(img, "rb").read()
        for name, content in (("big.bin", big), ("sub/small.bin", small)):
            damaged = f"{d}/{name.replace('/', '-')}.sqfs"
            shutil.copy(img, damaged)
            flip(damaged, data.index(content[1000:1064]) + 5)
            p = sqar("diff", damaged, f"{d}/src", check=False)
            assert p.returncode == 2 and f"{damaged}: {name}: content differs from the manifest" in p.stderr, p
            assert "content differs" not in p.stdout, p.stdout
            log(f"ok: {p.stderr.strip()}")
        # Unchanged files of the image are still compared: a real change beside the damage shows.
        write(f"{d}/src/text.log", TEXT + b"more")
        p = sqar("diff", f"{d}/big.bin.sqfs", f"{d}/src", check=False)
        assert p.returncode == 2 and "M text.log: size" in p.stdout, p
        # A gzip block that does not decode: the message names the image and the file.
        write(f"{d}/mksrc/text.log", TEXT)
        mk = f"{d}/mk.sqfs"
        mksquashfs(f"{d}/mksrc", mk, "-comp", "gzip")
        flip(mk, 96 + 40)  # inside the first data block, right after the superblock
        p = sqar("diff", mk, f"{d}/mksrc", check=False)
        assert p.returncode == 2 and f"{mk}: text.log: data block at" in p.stderr, p
        log(f"ok: {p.stderr.strip()}")


def test_diff_shows_symlink_targets_as_list_does():
    """A target holding control characters is escaped once, as list escapes it (\\033),
    never twice ("\\\\x1b")."""
    with tempdir() as d:
        os.makedirs(f"{d}/src")
        os.symlink("tgt\033[2J", f"{d}/src/evil-link")
        img = f"{d}/img.sqfs"
        sqar("create", "-q", f"{d}/src", img)
        os.unlink(f"{d}/src/evil-link")
        os.symlink("new\033[5mT", f"{d}/src/evil-link")
        p = sqar("diff", "--no-times", img, f"{d}/src", check=False)
        listed = sqar("list", "-l", img).stdout
        assert "-> tgt\\033[2J" in listed, listed
        assert p.returncode == 1 and p.stdout == 'M evil-link: target "tgt\\033[2J" != "new\\033[5mT"\n', p.stdout
        log(f"ok: {p.stdout.strip()}")


def test_diff_compares_hard_link_groups():
    """A copy that split hard links (cp --no-preserve=links, rsync -a without -H) or joined
    files the image holds apart (ln -f) differs from the image even where every name has the
    same content and metadata: diff names each entry whose grouping differs, against the
    first name of its group in path order, and exits 1. A file also linked from outside DIR
    is no difference, nor is a hard-linked symlink split, and an image mksquashfs made of a
    tree with hard links equals it."""
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/group/one", b"linked\n")
        os.link(f"{src}/group/one", f"{src}/group/two")
        os.makedirs(f"{src}/other")
        os.link(f"{src}/group/one", f"{src}/other/three")
        for name in ("apart-1", "apart-2"):  # separate files sqar stores once (dedup, not links)
            write(f"{src}/{name}", b"same\n")
            os.utime(f"{src}/{name}", (1_700_000_000, 1_700_000_000))
        os.symlink("group/one", f"{src}/sym")  # a hard-linked symlink: mksquashfs stores its names apart
        os.link(f"{src}/sym", f"{src}/sym-2", follow_symlinks=False)
        write(f"{src}/outside-linked", b"out\n")
        os.link(f"{src}/outside-linked", f"{d}/outside")  # st_nlink 2, one name in the tree
        img = f"{d}/img.sqfs"
        sqar_create_image(src, img)
        p = sqar("diff", img, src, check=False)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p

        def copy_keeping_times(to, *cp_args):
            run(["cp", "-a", *cp_args, src, to])
            return to

        def diff_lines(tree, *args):
            p = sqar("diff", *args, img, tree, check=False)
            assert p.returncode == 1 and p.stderr == "", p
            return p.stdout.splitlines()

        split = copy_keeping_times(f"{d}/split", "--no-preserve=links")
        want = ["M group/two: hard link to group/one in the image, not on disk",
                "M other/three: hard link to group/one in the image, not on disk"]
        assert diff_lines(split) == want, diff_lines(split)
        assert json.loads(sqar("diff", "--json", img, split, check=False).stdout) == [
            {"change": "modified", "path": "group/two", "detail": "hard link to group/one in the image, not on disk"},
            {"change": "modified", "path": "other/three", "detail": "hard link to group/one in the image, not on disk"}]
        p = sqar("diff", "-q", img, split, check=False)
        assert p.returncode == 1 and p.stdout == "" and p.stderr == "", p
        log(f"ok: links split by cp --no-preserve=links: {want}")

        # One name copied apart: the other two stay one file, so only that name differs.
        one_apart = copy_keeping_times(f"{d}/one-apart")
        st = os.lstat(f"{one_apart}/group")
        os.unlink(f"{one_apart}/group/two")
        shutil.copy2(f"{one_apart}/group/one", f"{one_apart}/group/two")
        os.utime(f"{one_apart}/group", ns=(st.st_atime_ns, st.st_mtime_ns))
        want = ["M group/two: hard link to group/one in the image, not on disk"]
        assert diff_lines(one_apart) == want, diff_lines(one_apart)
        log(f"ok: one name copied apart: {want}")

        joined = copy_keeping_times(f"{d}/joined")
        st = os.lstat(joined)
        run(["ln", "-f", f"{joined}/apart-1", f"{joined}/apart-2"])
        os.utime(joined, ns=(st.st_atime_ns, st.st_mtime_ns))  # ln -f moved the directory's mtime
        want = ["M apart-2: hard link to apart-1 on disk, not in the image"]
        assert diff_lines(joined) == want, diff_lines(joined)
        assert diff_lines(joined, "--no-times", "--no-owners", "--no-xattrs") == want
        log(f"ok: files joined by ln -f: {want}")

        mk = f"{d}/mk.sqfs"
        mksquashfs(src, mk, "-comp", "gzip")
        p = sqar("diff", mk, src, check=False)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p
        p = sqar("diff", mk, split, check=False)
        assert p.returncode == 1 and p.stdout.splitlines() == [
            "M group/two: hard link to group/one in the image, not on disk",
            "M other/three: hard link to group/one in the image, not on disk"], p
        log("ok: an image mksquashfs made of a tree with hard links equals its source")


if __name__ == "__main__":
    main([test_verify_clean_images, test_verify_flipped_data_byte_mksquashfs, test_verify_flipped_data_byte_sqar,
          test_verify_names_every_file_sharing_a_damaged_block, test_verify_damaged_raw_fragment_block,
          test_verify_sums_up_a_cause_shared_by_many_entries,
          test_verify_progress_and_errors_on_a_terminal, test_verify_bad_manifest, test_verify_export_table_mismatch,
          test_verify_reports_what_the_kernel_refuses, test_verify_reports_zstd_windows_the_kernel_refuses, test_diff, test_diff_quiet, test_diff_as_a_user_who_cannot_see_trusted_xattrs,
          test_diff_subtrees_types_links_devices,
          test_diff_after_extract_roundtrip, test_diff_goes_on_past_an_unreadable_file,
          test_diff_file_swapped_for_a_fifo_while_comparing,
          test_diff_many_changes_stay_in_path_order, test_diff_root_and_content_lines_in_place,
          test_diff_json_stays_valid_when_the_image_is_damaged, test_diff_tells_damage_in_the_image_from_a_change_on_disk,
          test_diff_shows_symlink_targets_as_list_does, test_diff_compares_hard_link_groups])
