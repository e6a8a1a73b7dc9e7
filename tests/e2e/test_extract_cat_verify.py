"""extract and cat check every file the manifest trailer covers against its XXH3-128 by default.

The image stores random data raw (incompressible), so a flipped bit in it is damage no codec
notices: only the manifest can. A damaged file is named, extract removes it (nothing damaged is
left looking complete) and both exit 1; --no-verify skips the check and hands the bytes over.
Covered are a file with its own entry, a duplicate sharing its blocks, a file split into ranges
written by two threads (-j2, 4 KiB blocks), and small files checked by their fragment block's
digest."""
import contextlib
import json
import os
import struct
import subprocess

from clitest import expect_fail, sqar
from sqartest import AS_NOBODY, SQAR, log, main, mksquashfs, need_root, need_tool, pseudo_random, run, snapshot, tempdir, write

BIG = pseudo_random(600 * 1024, "big")  # > 64 blocks of 4 KiB: split into ranges at -j2
SMALL_A = pseudo_random(1500, "small-a")
SMALL_B = pseudo_random(1700, "small-b")


def build(d):
    src = f"{d}/src"
    write(f"{src}/big.bin", BIG)
    write(f"{src}/copy/big-again.bin", BIG)
    write(f"{src}/small/a.bin", SMALL_A)
    write(f"{src}/small/b.bin", SMALL_B)
    write(f"{src}/fine.txt", b"untouched\n" * 1000)
    img = f"{d}/img.sqfs"
    run([SQAR, "create", "-q", "-b", "4K", src, img])
    return src, img


def flip_inside(img, content, at):
    """Flips one bit of the image where `content`'s bytes at offset `at` are stored raw."""
    with open(img, "rb") as f:
        data = f.read()
    needle = content[at:at + 64]
    pos = data.find(needle)
    if pos < 0 or data.find(needle, pos + 1) >= 0:
        raise AssertionError("the content is not stored raw exactly once in the image")
    with open(img, "r+b") as f:
        f.seek(pos + 10)
        f.write(bytes([data[pos + 10] ^ 0x01]))


def cat(*args):
    return subprocess.run([SQAR, "cat", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def cat_fails(img, path):
    p = cat(img, path)
    err = p.stderr.decode()
    if p.returncode != 1 or f"{path}: content differs from the manifest" not in err or img not in err:
        raise AssertionError(f"cat {path}: exit {p.returncode}, stderr {err!r}")
    return p


def test_clean_image_passes():
    with tempdir() as d:
        src, img = build(d)
        for jobs in ("1", "2"):
            sqar("extract", "-j", jobs, img, "-C", f"{d}/out{jobs}")
            with open(f"{d}/out{jobs}/big.bin", "rb") as f:
                if f.read() != BIG:
                    raise AssertionError("clean extract differs")
        p = subprocess.run([SQAR, "cat", img, "big.bin", "small/a.bin", "copy/big-again.bin"], stdout=subprocess.PIPE)
        if p.returncode != 0 or p.stdout != BIG + SMALL_A + BIG:
            raise AssertionError(f"cat of a clean image: exit {p.returncode}, content differs")
        log("ok: a clean image extracts and prints with exit 0")


def test_flipped_bit_in_a_block():
    with tempdir() as d:
        src, img = build(d)
        flip_inside(img, BIG, 300 * 1024)
        for jobs in ("1", "2"):
            out = f"{d}/out{jobs}"
            p = expect_fail(["extract", "-j", jobs, img, "-C", out], 1, img, "big.bin: content differs from the manifest",
                            "copy/big-again.bin: content differs from the manifest", "removed")
            for gone in ("big.bin", "copy/big-again.bin"):
                if os.path.lexists(f"{out}/{gone}"):
                    raise AssertionError(f"-j{jobs}: the damaged {gone} was left in place")
            for kept, want in (("small/a.bin", SMALL_A), ("fine.txt", b"untouched\n" * 1000)):
                with open(f"{out}/{kept}", "rb") as f:
                    if f.read() != want:
                        raise AssertionError(f"-j{jobs}: {kept} differs")
            log(f"ok: extract -j{jobs} names and removes the damaged files: {p.stderr.splitlines()[0]}")
        sqar("extract", "--no-verify", img, "-C", f"{d}/raw")
        with open(f"{d}/raw/big.bin", "rb") as f:
            got = f.read()
        if got == BIG or len(got) != len(BIG):
            raise AssertionError("--no-verify should hand over the damaged bytes as stored")
        p = cat_fails(img, "big.bin")
        if len(p.stdout) != len(BIG):
            raise AssertionError("cat should print the content, then report the mismatch")
        if cat("--no-verify", img, "big.bin").returncode != 0:
            raise AssertionError("cat --no-verify failed")
        log("ok: cat names the damaged file and exits 1; --no-verify skips the check")


def test_flipped_bit_in_a_fragment_block():
    with tempdir() as d:
        src, img = build(d)
        flip_inside(img, SMALL_A, 700)
        out = f"{d}/out"
        expect_fail(["extract", img, "-C", out], 1, img, "small/a.bin: content differs from the manifest")
        if os.path.lexists(f"{out}/small/a.bin"):
            raise AssertionError("the damaged small file was left in place")
        with open(f"{out}/big.bin", "rb") as f:
            if f.read() != BIG:
                raise AssertionError("big.bin differs")
        cat_fails(img, "small/a.bin")
        sqar("extract", "--no-verify", img, "-C", f"{d}/raw")
        log("ok: a damaged fragment block is caught by extract and cat")


def test_damaged_small_files_leave_a_finished_directory():
    """Small files are checked by their fragment block's digest once all are written, when
    their directory may already have the image's mode and mtime. In a directory of mode 0555
    extracted as a user the unlink failed while the message said the files were removed (a
    second run with --skip-old-files then kept the damaged file), and as root the directory
    was left with the time of the removal. Both now remove the files and keep the image's
    mode and mtime."""
    need_root()
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/small/a.bin", SMALL_A)
        write(f"{src}/small/b.bin", SMALL_B)
        os.chmod(f"{src}/small", 0o555)
        os.utime(f"{src}/small", (1600000000, 1600000000))
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", "-b", "4K", src, img])
        flip_inside(img, SMALL_A, 700)
        os.chmod(d, 0o755)
        os.makedirs(f"{d}/out")
        os.chmod(f"{d}/out", 0o777)
        for who, prefix in (("a user", AS_NOBODY), ("root", [])):
            out = f"{d}/out/{'user' if prefix else 'root'}"
            p = run([*prefix, SQAR, "extract", img, "-C", out], check=False)
            assert p.returncode == 1 and p.stderr.count("the file was removed") == 2, (who, p.stderr)
            st = os.stat(f"{out}/small")
            assert os.listdir(f"{out}/small") == [], (who, os.listdir(f"{out}/small"))
            assert (st.st_mode & 0o7777, st.st_mtime) == (0o555, 1600000000), (who, oct(st.st_mode), st.st_mtime)
        log("ok: damaged small files are removed from a directory of mode 0555, which keeps its mode and mtime")


@contextlib.contextmanager
def small_filesystem(path, size):
    """A tmpfs of `size` mounted at path (made), unmounted afterwards."""
    os.makedirs(path)
    run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path])
    try:
        yield path
    finally:
        run(["umount", path])


def test_a_file_not_written_whole_is_removed():
    """A full disk mid-file: the file is named with the cause and removed (at -j1, and at -j2
    where ranges of it are written by two threads), so nothing incomplete looks extracted."""
    need_root()
    with tempdir() as d:
        src, img = build(d)
        for jobs in ("1", "2"):
            with small_filesystem(f"{d}/tiny{jobs}", "256k") as out:
                p = run([SQAR, "extract", "-j", jobs, img, "-C", out], check=False)
                named = [line for line in p.stderr.splitlines() if "partly written file was removed" in line]
                # Which file the disk fills on depends on the threads' timing; extraction stops there.
                if p.returncode != 1 or not any(".bin: " in line and "No space left on device" in line
                                                for line in named):
                    raise AssertionError(f"-j{jobs}: exit {p.returncode}, stderr {p.stderr}")
                for line in named:
                    path = line.split(": ")[2]
                    if os.path.lexists(f"{out}/{path}"):
                        raise AssertionError(f"-j{jobs}: {path} was left partly written: {line}")
                for name in os.listdir(out):
                    if name.endswith(".bin") and os.path.getsize(f"{out}/{name}") not in (len(BIG), 0):
                        raise AssertionError(f"-j{jobs}: {name} is there with a wrong size")
        log("ok: a file the disk had no room for is named and removed")


def test_a_full_disk_stops_extraction_with_one_message():
    """Thousands of entries onto a filesystem that fills early: the first failure is named,
    the rest are counted in one line instead of one line each, at -j1
    and -j2, and the exit status is 1."""
    need_root()
    with tempdir() as d:
        for i in range(3000):
            write(f"{d}/src/many/f{i:04d}", pseudo_random(700, i))
        write(f"{d}/src/big/big.bin", pseudo_random(3 << 20, 7))
        os.link(f"{d}/src/many/f0001", f"{d}/src/big/link")
        img = f"{d}/img.sqfs"
        run([SQAR, "create", "-q", f"{d}/src", img])
        for jobs in ("1", "2"):
            with small_filesystem(f"{d}/tiny{jobs}", "1m") as out:
                p = run([SQAR, "extract", "-j", jobs, img, "-C", out], check=False)
                lines = p.stderr.splitlines()
                assert p.returncode == 1 and len(lines) == 3, (jobs, p.returncode, lines[:6], len(lines))
                assert "No space left on device" in lines[0] and "extraction stopped" in lines[1], lines
                assert "entries could not be extracted" in lines[2], lines
        # Out of inodes: directories fail to be made, and what waits for them is counted too.
        for i in range(400):
            write(f"{d}/dirs/d{i:03d}/f", b"%d\n" % i)
        run([SQAR, "create", "-q", f"{d}/dirs", f"{d}/dirs.sqfs"])
        for jobs in ("1", "2"):
            with small_filesystem(f"{d}/few{jobs}", "64m,nr_inodes=300") as out:
                p = run([SQAR, "extract", "-j", jobs, f"{d}/dirs.sqfs", "-C", out], check=False)
                lines = p.stderr.splitlines()
                assert p.returncode == 1 and len(lines) == 3 and "extraction stopped" in lines[1], (jobs, lines[:6])
        log(f"ok: a full disk: {lines[1]}")


def test_damaged_manifest_trailer():
    """A damaged trailer cannot vouch for anything: extract still writes every entry, says
    once that content is not checked, and exits 1; no entry is counted as not extracted. info
    describes the image all the same, names the damage, and exits 1."""
    with tempdir() as d:
        src, img = build(d)
        used = json.loads(sqar("info", "--json", img).stdout)["image_bytes"]
        at = (used + 4095) // 4096 * 4096 + 47  # a byte of the trailer's first entry
        with open(img, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x01]))
        p = run([SQAR, "extract", "-C", f"{d}/out", img], check=False)
        assert p.returncode == 1 and p.stderr.count("manifest trailer") == 1, p.stderr
        assert "content is not checked" in p.stderr and "could not be extracted" not in p.stderr, p.stderr
        assert open(f"{d}/out/big.bin", "rb").read() == BIG
        log(f"ok: {p.stderr.strip()}")
        # info still describes the image, with the trailer as damaged, and exits 1.
        for args in ([], ["--json"]):
            p = run([SQAR, "info", *args, img], check=False)
            assert p.returncode == 1 and "manifest trailer checksum mismatch" in p.stderr, (args, p.stderr)
            if args:
                got = json.loads(p.stdout)
                assert not got["manifest"] and "checksum mismatch" in got["manifest_problem"], got
                assert got["counts"]["regular"] == 5, got
            else:
                assert "Manifest trailer: damaged (manifest trailer checksum mismatch)" in p.stdout, p.stdout
                assert "Entries:          " in p.stdout, p.stdout
        log("ok: info describes an image with a damaged trailer and says so")


def test_damaged_inode_block_spares_the_rest():
    """One damaged inode metadata block (mksquashfs's gzip image: zlib's adler32 catches it)
    loses the entries whose inodes it holds, not the image: extract names each of them, exits
    1 and writes every other entry exactly as the source has it; nothing is lost unnamed. A
    PATTERN that selects only intact entries extracts them with exit 0 and no message. list
    names the same entries and lists the others."""
    need_tool("mksquashfs")
    with tempdir() as d:
        src = f"{d}/src"
        for i in range(3000):  # ~100 KB of inodes: a dozen metadata blocks
            write(f"{src}/many/f{i:04}", f"{i}\n".encode() * (i % 9), mode=0o600 + (i % 3) * 0o44)
        write(f"{src}/z-last.txt", b"last\n")
        img = f"{d}/mk.sqfs"
        mksquashfs(src, img, "-comp", "gzip")
        with open(img, "r+b") as f:
            inode_table = struct.unpack_from("<Q", f.read(96), 64)[0]
            f.seek(inode_table + 40)  # inside the first block's deflate stream
            b = f.read(1)
            f.seek(inode_table + 40)
            f.write(bytes([b[0] ^ 0x55]))
        p = run([SQAR, "extract", "-C", f"{d}/out", img], check=False)
        named = {line.split(": ")[2] for line in p.stderr.splitlines() if line.startswith(f"sqar extract: {img}: ")
                 and "could not be extracted" not in line}
        assert p.returncode == 1 and named and f"{len(named)} entries could not be extracted" in p.stderr, p.stderr
        want, got = snapshot(src), snapshot(f"{d}/out")
        lost = set(want) - set(got)
        assert lost == named, f"lost but not named: {sorted(lost - named)[:5]}; named but written: {sorted(named - lost)[:5]}"
        wrong = [rel for rel in got if got[rel] != want[rel] and rel != "many"]  # many's nlink is its own
        assert not wrong, f"written differently from the source: {wrong[:5]}"
        log(f"ok: {len(named)} entries of the damaged block named, the other {len(got)} extracted as the source has them")
        intact = sorted(set(want) - named - {"many"})[-1]
        p = run([SQAR, "extract", "-C", f"{d}/one", img, intact], check=False)
        assert p.returncode == 0 and not p.stderr, p.stderr
        assert open(f"{d}/one/{intact}", "rb").read() == open(f"{src}/{intact}", "rb").read()
        log(f"ok: extracting only {intact} from the damaged image exits 0")
        # list reads around the damage the same way: the same entries named, in the order every
        # message takes (command, image, entry, cause); the intact ones listed.
        p = run([SQAR, "list", img], check=False)
        listed_named = {line.split(": ")[2] for line in p.stderr.splitlines() if line.startswith(f"sqar list: {img}: ")}
        assert p.returncode == 1 and listed_named == named, (p.returncode, sorted(listed_named ^ named)[:5])
        assert set(p.stdout.splitlines()) == set(want) - named, "list did not list every intact entry"
        p = run([SQAR, "list", img, intact], check=False)
        assert p.returncode == 0 and p.stdout == intact + "\n" and not p.stderr, p
        log("ok: list names the same entries and lists the rest; a PATTERN of intact entries exits 0")


if __name__ == "__main__":
    main([test_clean_image_passes, test_flipped_bit_in_a_block, test_flipped_bit_in_a_fragment_block,
          test_damaged_small_files_leave_a_finished_directory,
          test_a_file_not_written_whole_is_removed, test_a_full_disk_stops_extraction_with_one_message, test_damaged_manifest_trailer,
          test_damaged_inode_block_spares_the_rest])
