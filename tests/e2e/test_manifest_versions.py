#!/usr/bin/env python3
"""Images whose manifest trailer is of version 3 (content hashed as one XXH3-128, as sqar wrote
them before version 4 hashed 64 KiB chunks) keep working: verify, extract and cat check their
content against that manifest, and catch damage it reveals; append, merge and --reuse take
them as inputs (their files decoded and hashed the new way) and write version 4, which verify,
unsquashfs and the kernel agree with. tests/e2e/data/manifest-v3.sqsh was made by the sqar of
that version from the tree make_v3_source() rebuilds (zstd, 4 KiB blocks)."""
import json
import os
import random
import shutil
import subprocess

from sqartest import (SQAR, compare_trees, kernel_mount, log, main, need_tool, run, skip, tempdir, unsquashfs_extract,
                      write)

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "manifest-v3.sqsh")


def make_v3_source(root):
    """The tree the fixture holds: random data twice (dedup), a sparse file, five small files."""
    rng = random.Random(3)
    data = bytes(rng.getrandbits(8) for _ in range(20000))
    os.makedirs(f"{root}/small")
    write(f"{root}/big.bin", data)
    write(f"{root}/dup.bin", data)
    with open(f"{root}/sparse.bin", "wb") as f:
        f.seek(65536)
        f.write(b"end of a sparse file\n" * 200)
    for i in range(5):
        write(f"{root}/small/f{i}.txt", (f"small file {i}\n" * (i + 1)).encode())
    return data


def manifest_line(img):
    """info's line about the trailer; info --json must name the same version."""
    line = next(line for line in run([SQAR, "info", img]).stdout.splitlines() if line.startswith("Manifest trailer:"))
    version = json.loads(run([SQAR, "info", "--json", img]).stdout)["manifest_version"]
    assert f"(version {version})" in line, (version, line)
    return line


def content_only(src, out, what):
    compare_trees(src, out, what, times=False, owners=False, xattrs=False)


def test_version_3_images_are_checked_as_before():
    with tempdir() as d:
        src = f"{d}/src"
        make_v3_source(src)
        assert "(version 3)" in manifest_line(FIXTURE), manifest_line(FIXTURE)
        p = run([SQAR, "verify", FIXTURE])
        assert "checked against the manifest trailer" in p.stdout + p.stderr, p.stdout + p.stderr
        run([SQAR, "extract", "-q", FIXTURE, "-C", f"{d}/out"])
        content_only(src, f"{d}/out", "extract of the version 3 image")
        with open(f"{src}/big.bin", "rb") as f:
            assert run([SQAR, "cat", FIXTURE, "big.bin"], text=False).stdout == f.read()
        archive = subprocess.run([SQAR, "extract", "--tar", "-", FIXTURE], check=True, capture_output=True).stdout
        os.makedirs(f"{d}/untar")
        subprocess.run(["tar", "-x", "-C", f"{d}/untar"], input=archive, check=True)
        content_only(src, f"{d}/untar", "GNU tar -x of extract --tar of the version 3 image")
        # diff reads the manifest at a file that differs, to tell a change on disk from damage
        # in the image: hashed the wrong way, every difference would look like damage (exit 2).
        for root, dirs, files in os.walk(src):
            for name in dirs + files:
                os.utime(os.path.join(root, name), (1700000000, 1700000000))
        os.utime(src, (1700000000, 1700000000))
        assert run([SQAR, "diff", FIXTURE, src]).returncode == 0
        for name in ("big.bin", "small/f0.txt"):
            with open(f"{src}/{name}", "r+b") as f:
                f.write(b"X")
            os.utime(f"{src}/{name}", (1700000000, 1700000000))
        p = run([SQAR, "diff", FIXTURE, src], check=False)
        assert p.returncode == 1 and "big.bin" in p.stdout and "small/f0.txt" in p.stdout, (p.returncode, p.stdout,
                                                                                           p.stderr)
        log("ok: a version 3 image verifies, extracts (to a tree and as tar), cats and diffs against its manifest")


def damaged_copy(d, data):
    """The fixture with one byte of big.bin's first block flipped (stored raw: random data does
    not compress, so the codec cannot notice; only the manifest can)."""
    with open(FIXTURE, "rb") as f:
        img = bytearray(f.read())
    at = img.find(data[:4096])
    assert at > 0, "big.bin's first block is not stored raw in the fixture"
    img[at + 100] ^= 0x55
    path = f"{d}/damaged.sqsh"
    with open(path, "wb") as f:
        f.write(img)
    return path


def test_damage_is_found_by_a_version_3_manifest():
    with tempdir() as d:
        data = make_v3_source(f"{d}/src")
        bad = damaged_copy(d, data)
        p = run([SQAR, "verify", bad], check=False)
        assert p.returncode != 0, "verify passed a damaged block"
        assert "big.bin" in p.stderr and "differs from the manifest" in p.stderr, p.stderr
        p = run([SQAR, "cat", bad, "big.bin"], check=False, text=False)
        assert p.returncode != 0 and b"differs from the manifest" in p.stderr, p.stderr
        p = run([SQAR, "append", bad, f"{d}/src/small"], check=False)
        assert p.returncode != 0 and "does not match the manifest" in p.stderr, p.stderr
        assert "(version 3)" in manifest_line(bad), "a refused append changed the image"
        log("ok: the version 3 manifest still catches a damaged raw block in verify, cat and append")


def test_append_merge_and_reuse_take_version_3_inputs():
    need_tool("unsquashfs")
    with tempdir() as d:
        src = f"{d}/src"
        data = make_v3_source(src)
        new = f"{d}/new"
        write(f"{new}/again.bin", data)  # the content of big.bin: stored as a duplicate
        write(f"{new}/fresh.txt", b"only in the new tree\n")
        with open(f"{new}/holes.bin", "wb") as f:
            f.truncate(3 << 20)
            f.write(b"after three MiB of hole")

        img = f"{d}/appended.sqsh"
        shutil.copyfile(FIXTURE, img)
        p = run([SQAR, "append", img, new])
        assert "1 file stored as duplicates" in p.stdout + p.stderr, p.stdout + p.stderr
        assert "(version 4)" in manifest_line(img), manifest_line(img)
        run([SQAR, "verify", "-q", img])
        union = f"{d}/union"
        shutil.copytree(src, union)
        for name in os.listdir(new):
            shutil.copy2(f"{new}/{name}", f"{union}/{name}")
        unsquashfs_extract(img, f"{d}/unsq")
        content_only(union, f"{d}/unsq", "unsquashfs of the appended version 3 image")
        if os.geteuid() == 0:
            with kernel_mount(img, f"{d}/mnt") as mnt:
                content_only(union, mnt, "kernel mount of the appended version 3 image")

        merged = f"{d}/merged.sqsh"
        run([SQAR, "create", "-q", "-b", "4K", new, f"{d}/new.sqsh"])
        run([SQAR, "merge", "-q", FIXTURE, f"{d}/new.sqsh", merged])
        assert "(version 4)" in manifest_line(merged)
        run([SQAR, "verify", "-q", merged])
        unsquashfs_extract(merged, f"{d}/unsq-merged")
        content_only(union, f"{d}/unsq-merged", "unsquashfs of the merge of a version 3 image")

        p = run([SQAR, "create", "-b", "4K", "--reuse", FIXTURE, src, f"{d}/rebuilt.sqsh"])
        assert "reused: 5 blocks" in p.stdout + p.stderr, p.stdout + p.stderr
        run([SQAR, "verify", "-q", f"{d}/rebuilt.sqsh"])
        log("ok: append, merge and --reuse read a version 3 image, dedup against it, and write version 4")


def test_trailers_of_an_earlier_filesystem_are_not_used():
    """mksquashfs 4.5 appends to a sqar image in place without shortening the file: after a
    small append the old trailers still begin at the new end's 4 KiB boundary. Taken as the
    new filesystem's, they called the appended file damaged (extract removed it, verify
    failed). They are another filesystem's: the image reads as the kernel reads it."""
    need_tool("mksquashfs")
    import struct
    with tempdir() as d:
        for i in range(1, 51):
            write(f"{d}/a/f{i}", bytes(random.Random(i).getrandbits(8) for _ in range(i * 1000)))
        write(f"{d}/b/t", b"tiny\n")
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", f"{d}/a", img])
        run(["mksquashfs", f"{d}/b", img, "-quiet", "-no-progress"])
        with open(img, "rb") as f:
            bytes_used = struct.unpack_from("<Q", f.read(96), 40)[0]
            f.seek(-(-bytes_used // 4096) * 4096)
            if f.read(8) != b"SQARMNF1":
                skip("this mksquashfs shortens the file when it appends: no earlier trailer is left")
        p = run([SQAR, "verify", img])
        assert "(no manifest trailer)" in p.stderr, p.stderr
        run([SQAR, "extract", "-q", "-C", f"{d}/out", img])
        assert run([SQAR, "cat", img, "t"]).stdout == "tiny\n"
        with kernel_mount(img, f"{d}/mnt") as m:
            compare_trees(m, f"{d}/out", "extract of a sqar image mksquashfs appended to (the kernel's mount)")
        info = json.loads(run([SQAR, "info", "--json", img]).stdout)
        assert info["manifest"] is False, info


if __name__ == "__main__":
    main([test_version_3_images_are_checked_as_before, test_damage_is_found_by_a_version_3_manifest,
          test_append_merge_and_reuse_take_version_3_inputs, test_trailers_of_an_earlier_filesystem_are_not_used])
