"""sqar extract --tar: the pax archive of an image, extracted by GNU tar and by bsdtar (readers
nobody here wrote), must give back the source tree: content, modes, numeric owners, mtimes,
symlinks, hard links, devices, fifos, xattrs and holes. Also the pipe form, selection by path and
glob, and a damaged image (an error naming the file, no archive left behind), including damage
only the manifest trailer catches."""
import os
import stat
import struct
import subprocess
import tarfile
import zlib

from clitest import expect_fail, sqar
from test_extract import check_sparse
from sqartest import (SQAR, compare_trees, log, main, make_full_tree, need_tool, pseudo_random, run, sqar_create,
                      tempdir, write)

OWNERS = os.geteuid() == 0
# tar has no socket type: sockets are left out (with a warning).
NO_SOCKET = ("dev/socket",)
GNU_TAR = ["tar", "-x", "--xattrs", "--xattrs-include=*", "--numeric-owner", "--same-permissions"]
# bsdtar restores xattrs, owners (as root) and modes with -p; --numeric-owner ignores names.
BSDTAR = ["bsdtar", "-x", "-p", "--xattrs", "--numeric-owner"]


def full_image(d):
    """The tree with every entry type, and its image."""
    src, img = make_full_tree(f"{d}/src"), f"{d}/img.sqfs"
    sqar_create(src, img)
    return src, img


def untar(cmd, archive, dest):
    os.makedirs(dest)
    p = run([*cmd, "-f", archive, "-C", dest])
    # Records a reader does not know (LIBARCHIVE.xattr, hdrcharset for GNU tar) mean warnings.
    if p.stderr:
        raise AssertionError(f"{cmd[0]} warned while extracting {archive}:\n{p.stderr[:2000]}")


def test_full_tree_gnu_tar_and_bsdtar():
    need_tool("tar")
    need_tool("bsdtar")
    with tempdir() as d:
        src, img = full_image(d)
        tar = f"{d}/out.tar"
        p = sqar("extract", "--tar", tar, img)
        if "dev/socket" not in p.stderr:
            raise AssertionError(f"no warning about the skipped socket: {p.stderr!r}")
        for name, cmd in (("GNU tar", GNU_TAR), ("bsdtar", BSDTAR)):
            out = f"{d}/{name.replace(' ', '-')}"
            untar(cmd, tar, out)
            compare_trees(src, out, f"{name} -x of sqar extract --tar", owners=OWNERS, ignore=NO_SOCKET)
            check_sparse(out)
            # The holes come back page for page, not only the image's whole sparse blocks.
            got, want = os.stat(f"{out}/sparse.img").st_blocks, os.stat(f"{src}/sparse.img").st_blocks
            if got > want:
                raise AssertionError(f"{name}: sparse.img allocates {got} sectors, the source {want}")
        # Holes are in the archive as a sparse map, not as zeros (2 of its 16 blocks hold data).
        sparse_tar = f"{d}/sparse.tar"
        sqar("extract", "--tar", sparse_tar, img, "sparse.img")
        if os.path.getsize(sparse_tar) >= os.path.getsize(f"{src}/sparse.img") // 2:
            raise AssertionError(f"the archive ({os.path.getsize(sparse_tar)} bytes) holds sparse.img's holes as data")
        listing = run(["tar", "-tvf", tar]).stdout
        linked = sorted(line.split(" link to ")[0].split()[-1] for line in listing.splitlines() if line.startswith("h"))
        if linked != ["hard-1", "small.txt", "sym-for-hardlink"]:
            raise AssertionError(f"hard links are not tar hard-link entries:\n{listing}")


def test_non_utf8_name():
    """Names are bytes in an image: one that is not UTF-8 goes byte for byte (pax hdrcharset=BINARY,
    which GNU tar warns about but honours)."""
    need_tool("tar")
    need_tool("bsdtar")
    with tempdir() as d:
        name = b"latin1-\xe9t\xe9"
        write(os.fsencode(f"{d}/src/") + name, b"not utf-8")
        img, tar = f"{d}/img.sqfs", f"{d}/out.tar"
        sqar_create(f"{d}/src", img)
        p = sqar("extract", "--tar", tar, img, errors="surrogateescape")
        assert p.stderr == "", f"nothing is lost, yet extract --tar warned: {p.stderr!r}"
        for cmd in (GNU_TAR, BSDTAR):
            out = f"{d}/{cmd[0]}"
            os.makedirs(out)
            run([*cmd, "-f", tar, "-C", out], errors="surrogateescape")
            if os.listdir(os.fsencode(out)) != [name]:
                raise AssertionError(f"{cmd[0]}: {os.listdir(os.fsencode(out))} != {[name]}")
        # A glob selects it by its bytes, as list and extract do.
        sqar("extract", "--tar", f"{d}/sel.tar", img, "latin1-*", errors="surrogateescape")
        with tarfile.open(f"{d}/sel.tar", errors="surrogateescape") as t:
            names = [os.fsencode(n) for n in t.getnames()]
        assert names == [name], names
        log("ok: a name that is not UTF-8 comes back byte for byte from GNU tar and bsdtar, with no warning")


def test_pipe_to_tar():
    need_tool("tar")
    with tempdir() as d:
        src, img = full_image(d)
        out = f"{d}/out"
        os.makedirs(out)
        producer = subprocess.Popen([SQAR, "extract", "--tar", "-", img], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
        consumer = subprocess.run([*GNU_TAR, "-f", "-", "-C", out], stdin=producer.stdout, capture_output=True,
                                  text=True)
        producer.stdout.close()
        if producer.wait() != 0 or consumer.returncode != 0:
            raise AssertionError(f"sqar exited {producer.returncode}, tar {consumer.returncode}: {consumer.stderr}")
        compare_trees(src, out, "sqar extract --tar - | tar -x", owners=OWNERS, ignore=NO_SOCKET)
        check_sparse(out)


# Suffix, the magic its stream starts with, and the decoder nobody here wrote that reads it.
COMPRESSIONS = (
    ("tar.gz", b"\x1f\x8b", ["gzip", "-dc"]),
    ("tgz", b"\x1f\x8b", ["gzip", "-dc"]),
    ("tar.xz", b"\xfd7zXZ\x00", ["xz", "-dc"]),
    ("tar.zst", b"\x28\xb5\x2f\xfd", ["zstd", "-dc"]),
    ("tar.bz2", b"BZh", ["bzip2", "-dc"]),
    ("tar.lz4", b"\x04\x22\x4d\x18", ["lz4", "-dc"]),
    ("tar.lzma", b"\x5d\x00\x00", ["xz", "--format=lzma", "-dc"]),
    ("tar.Z", b"\x1f\x9d", ["gzip", "-dc"]),
)


def test_compressed_archives():
    """extract --tar FILE compresses by FILE's suffix, as tar -a does. Each archive is decoded by
    its own tool (gzip, xz, zstd, bzip2, lz4) into GNU tar and read by bsdtar directly, and both
    must give back the tree. The archive must not depend on -j (xz and zstd compress on
    threads), nor end in the zeros libarchive pads a block with, which lz4 -d and zstd -d refuse."""
    for tool in ("tar", "bsdtar", "gzip", "xz", "zstd", "bzip2", "lz4"):
        need_tool(tool)
    with tempdir() as d:
        src, img = full_image(d)
        for suffix, magic, decoder in COMPRESSIONS:
            archive, again = f"{d}/out.{suffix}", f"{d}/again.{suffix}"
            sqar("extract", "-j", "1", "--tar", archive, img)
            sqar("extract", "-j", "3", "--tar", again, img)
            data = open(archive, "rb").read()
            if not data.startswith(magic):
                raise AssertionError(f"out.{suffix} does not start with {magic!r}: {data[:8]!r}")
            if data != open(again, "rb").read():
                raise AssertionError(f"out.{suffix}: -j3 wrote other bytes than -j1")
            with open(archive, "rb") as f:
                plain = subprocess.run(decoder, stdin=f, capture_output=True)
            if plain.returncode != 0 or plain.stderr:
                raise AssertionError(f"{' '.join(decoder)} of out.{suffix}: exit {plain.returncode}, "
                                     f"{plain.stderr.decode(errors='replace')}")
            out = f"{d}/gnu-{suffix}"
            os.makedirs(out)
            p = subprocess.run([*GNU_TAR, "-f", "-", "-C", out], input=plain.stdout, capture_output=True)
            if p.returncode != 0 or p.stderr:
                raise AssertionError(f"GNU tar -x of {' '.join(decoder)} out.{suffix}: {p.stderr.decode()}")
            compare_trees(src, out, f"{' '.join(decoder)} | tar -x of out.{suffix}", owners=OWNERS,
                          ignore=NO_SOCKET)
            check_sparse(out)
            out = f"{d}/bsd-{suffix}"
            untar(BSDTAR, archive, out)
            compare_trees(src, out, f"bsdtar -x of out.{suffix}", owners=OWNERS, ignore=NO_SOCKET)
            log(f"ok: out.{suffix}: {len(data)} bytes, the same for -j1 and -j3, read back by "
                f"{decoder[0]} + GNU tar and by bsdtar")
        # Asked for by name, on standard output; and a plain archive whatever the name says.
        producer = subprocess.Popen([SQAR, "extract", "--tar", "-", "--zstd", img], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
        plain = subprocess.run(["zstd", "-dc"], stdin=producer.stdout, capture_output=True)
        producer.stdout.close()
        if producer.wait() != 0 or plain.returncode != 0:
            raise AssertionError(f"sqar extract --tar - --zstd exited {producer.returncode}, zstd -d {plain.returncode}")
        out = f"{d}/piped"
        os.makedirs(out)
        run([*GNU_TAR, "-f", "-", "-C", out], input=plain.stdout, text=False)
        compare_trees(src, out, "sqar extract --tar - --zstd | zstd -d | tar -x", owners=OWNERS, ignore=NO_SOCKET)
        sqar("extract", "--tar", f"{d}/plain.tar.gz", "--compress", "none", img)
        with tarfile.open(f"{d}/plain.tar.gz", "r:") as tf:  # "r:" refuses a compressed file
            if not tf.getnames():
                raise AssertionError("--compress none wrote an empty archive")
        # Names nobody knows, two compressions, or one for a directory: usage errors, nothing written.
        expect_fail(["extract", "--tar", f"{d}/x.tar", "--compress", "rar", img], 2, "--compress wants one of")
        expect_fail(["extract", "--tar", f"{d}/x.tar", "-z", "--xz", img], 2, "conflicts with --gzip")
        expect_fail(["extract", "--zstd", img, "-C", f"{d}/dir"], 2, "compresses a --tar archive")
        if os.path.exists(f"{d}/x.tar") or os.path.exists(f"{d}/dir"):
            raise AssertionError("a usage error left something behind")


def test_gzip_archive_in_members():
    """A .tar.gz is compressed on every core as independent gzip members of 4 MiB each (one
    stream to gzip -d, GNU tar and bsdtar, as bgzip's is). Several members here, the content
    the plain tar's, the size no more than `gzip -6` gives the same tar, whatever -j."""
    for tool in ("tar", "bsdtar", "gzip"):
        need_tool(tool)
    with tempdir() as d:
        src = make_full_tree(f"{d}/src")
        text = b"".join(b"%08d GET /index.html 200 %d\n" % (i, i * 7 % 1000) for i in range(300_000))
        write(f"{src}/big/access.log", text)  # 9.9 MB: three members
        img = f"{d}/img.sqfs"
        sqar_create(src, img)
        sqar("extract", "-j", "2", "--tar", f"{d}/out.tar.gz", img)
        sqar("extract", "-j", "1", "--tar", f"{d}/one.tar.gz", img)
        gz = open(f"{d}/out.tar.gz", "rb").read()
        if gz != open(f"{d}/one.tar.gz", "rb").read():
            raise AssertionError("-j2 and -j1 wrote different .tar.gz archives")
        plain = run([SQAR, "extract", "--tar", "-", img], text=False).stdout
        members, rest = 0, gz
        while rest:
            z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            z.decompress(rest)
            if not z.eof:
                raise AssertionError(f"member {members + 1} is truncated")
            members, rest = members + 1, z.unused_data
        if members < 3:
            raise AssertionError(f"{members} gzip members for {len(plain)} bytes of tar")
        unzipped = run(["gzip", "-dc", f"{d}/out.tar.gz"], text=False).stdout
        if unzipped != plain:
            raise AssertionError("gzip -dc of out.tar.gz is not the plain archive")
        reference = run(["gzip", "-6", "-n", "-c"], input=plain, text=False).stdout
        if len(gz) > len(reference):
            raise AssertionError(f"out.tar.gz {len(gz)} bytes, gzip -6 of the same tar {len(reference)}")
        for cmd, name in (([*GNU_TAR, "-z"], "gnu"), (BSDTAR, "bsd")):
            untar(cmd, f"{d}/out.tar.gz", f"{d}/{name}")
            compare_trees(src, f"{d}/{name}", f"{cmd[0]} -x of out.tar.gz", owners=OWNERS, ignore=NO_SOCKET)
        log(f"ok: {members} members, {len(gz)} bytes against gzip -6's {len(reference)}")


def test_patterns():
    need_tool("tar")
    with tempdir() as d:
        src, img = full_image(d)
        tar = f"{d}/sel.tar"
        sqar("extract", "--tar", tar, img, "dup", "modes/s*")
        names = sorted(run(["tar", "-tf", tar]).stdout.split("\n")[:-1])
        expected = sorted(["dup/", "dup/one.log", "dup/two.log", "dup/tail-a", "dup/tail-b", "dup/hard-2",
                           "modes/", "modes/setuid", "modes/sticky/"])
        if names != expected:
            raise AssertionError(f"selection: {names} != {expected}")
        out = f"{d}/out"
        untar(GNU_TAR, tar, out)
        # Selected entries and the directories leading to them carry their own metadata.
        ignore = [e for e in os.listdir(src) if e not in ("dup", "modes")] + ["modes/none", "modes/all"]
        # dup/hard-2's other names are not selected: there it is a plain file.
        compare_trees(src, out, "tar -x of a selection", owners=OWNERS, ignore=ignore, ignore_keys=("links", "nlink"))
        expect_fail(["extract", "--tar", f"{d}/none.tar", img, "no/such/*"], 1, "not found")
        # Every PATTERN that matches nothing is named, as tar -x and extract -C name them.
        expect_fail(["extract", "--tar", f"{d}/none.tar", img, "dup", "no/such/*", "nor-this"], 1,
                    "no/such/*, nor-this: not found in the image")
        expect_fail(["extract", "--tar", f"{d}/c.tar", "-C", d, img], 2, "-C does not apply")
        if os.path.exists(f"{d}/none.tar") or os.path.exists(f"{d}/c.tar"):
            raise AssertionError("a pattern that matches nothing left an archive behind")


def test_names_of_one_file_stripped_to_one():
    """x/f and y/f, two names of one file, both become f with --strip-components 1: the second
    was archived as a hard link of f to f, which bsdtar refuses to extract ("hardlink pointing
    to itself"). It is left out with a warning, and both tars extract f."""
    need_tool("bsdtar")
    need_tool("tar")
    with tempdir() as d:
        write(f"{d}/src/x/f", b"one file\n")
        os.makedirs(f"{d}/src/y")
        os.link(f"{d}/src/x/f", f"{d}/src/y/f")
        run([SQAR, "create", "-q", f"{d}/src", f"{d}/img.sqfs"])
        p = run([SQAR, "extract", "--tar", f"{d}/s.tar", "--strip-components", "1", f"{d}/img.sqfs"])
        assert "f: a further name of the same file" in p.stderr, p.stderr
        assert run(["tar", "-tf", f"{d}/s.tar"]).stdout.split() == ["f"]
        for tool in ("bsdtar", "tar"):
            os.makedirs(f"{d}/{tool}")
            run([tool, "-xf", f"{d}/s.tar", "-C", f"{d}/{tool}"])
            with open(f"{d}/{tool}/f", "rb") as f:
                assert f.read() == b"one file\n", tool

def test_names_stripped_to_one_are_archived_once():
    """a/x a symlink out of the tree and b/x/f a file both become x with --strip-components 1.
    Both were archived, so a tar reader that follows symlinks (Python's tarfile without a
    filter) wrote f outside its target. As extract into a directory does, the first keeps the
    name and the later is named and left out with what lies below it (exit 1)."""
    import tarfile
    with tempdir() as d:
        os.makedirs(f"{d}/src/a")
        os.makedirs(f"{d}/outside")
        os.symlink(f"{d}/outside", f"{d}/src/a/x")
        write(f"{d}/src/b/x/f", b"escaped\n")
        run([SQAR, "create", "-q", f"{d}/src", f"{d}/img.sqfs"])
        p = run([SQAR, "extract", "--tar", f"{d}/s.tar", "--strip-components", "1", f"{d}/img.sqfs"], check=False)
        said = "b/x: not archived: --strip-components gives it the name of a/x, archived as x"
        assert p.returncode == 1 and said in p.stderr, (p.returncode, p.stderr)
        with tarfile.open(f"{d}/s.tar") as t:
            assert t.getnames() == ["x"] and t.getmember("x").issym(), t.getnames()
            t.extractall(f"{d}/py")  # no filter: follows what the archive holds
        assert os.listdir(f"{d}/outside") == [], os.listdir(f"{d}/outside")
        # Two names of one file are still one archived name, not an error.
        os.makedirs(f"{d}/same/y")
        write(f"{d}/same/x/g", b"one file\n")
        os.link(f"{d}/same/x/g", f"{d}/same/y/g")
        run([SQAR, "create", "-q", f"{d}/same", f"{d}/same.sqfs"])
        p = run([SQAR, "extract", "--tar", f"{d}/same.tar", "--strip-components", "1", f"{d}/same.sqfs"])
        assert run(["tar", "-tf", f"{d}/same.tar"]).stdout.split() == ["g"], p.stderr


def test_xattr_names_libarchive_encodes_are_named():
    """libarchive's pax writer %-encodes an xattr name with a space, '%', '=' or a byte outside
    ASCII, and GNU tar and bsdtar restore such a name changed ("user.my%20key"). No option of
    libarchive writes it raw, so extract --tar says so, naming the entry and the xattr; a plain
    name passes without a word."""
    need_tool("bsdtar")
    with tempdir() as d:
        write(f"{d}/src/f", b"x\n")
        write(f"{d}/src/g", b"y\n")
        os.setxattr(f"{d}/src/f", "user.my key", b"1")
        os.setxattr(f"{d}/src/g", "user.plain", b"2")
        run([SQAR, "create", "-q", f"{d}/src", f"{d}/img.sqfs"])
        p = run([SQAR, "extract", "--tar", f"{d}/x.tar", f"{d}/img.sqfs"])
        assert p.stderr.count("warning") == 1 and "f: xattr user.my key: libarchive writes this name %-encoded" in p.stderr, \
            p.stderr
        os.makedirs(f"{d}/b")
        run(["bsdtar", "-xpf", f"{d}/x.tar", "-C", f"{d}/b"])
        assert os.listxattr(f"{d}/b/g") == ["user.plain"]
        assert os.listxattr(f"{d}/b/f") == ["user.my%20key"], os.listxattr(f"{d}/b/f")  # what the warning says

def test_threads_give_the_same_archive():
    """Blocks are decoded ahead on worker threads while one thread writes: the archive must be
    byte for byte the one -j1 writes, for any thread count, and GNU tar must give back the tree.
    Small blocks (4 KiB) and many files put hundreds of blocks and entries in flight at once."""
    need_tool("tar")
    with tempdir() as d:
        src = make_full_tree(f"{d}/src", block=4096)
        for i in range(600):  # small files spread over many fragment blocks
            write(f"{src}/many/d{i % 7}/f{i:04d}", pseudo_random(37 * i % 3000 + 1, 100 + i))
        for i in range(6):  # files of many blocks, each block different
            write(f"{src}/big/b{i}", pseudo_random(4096 * (20 + 9 * i) + 123 * i, 900 + i) * (1 + i % 2))
        img = f"{d}/img.sqfs"
        sqar_create(src, img, "-b", "4096", "-c", "gzip")
        archives = {}
        for j in (1, 2, 3, 8, 32):
            archives[j] = f"{d}/j{j}.tar"
            sqar("extract", "-j", str(j), "--tar", archives[j], img)
        want = open(archives[1], "rb").read()
        for j, path in archives.items():
            if open(path, "rb").read() != want:
                raise AssertionError(f"extract --tar -j{j} wrote another archive than -j1")
        out = f"{d}/out"
        untar(GNU_TAR, archives[32], out)
        compare_trees(src, out, "GNU tar -x of sqar extract -j32 --tar", owners=OWNERS, ignore=NO_SOCKET)
        check_sparse(out)
        log(f"ok: -j1, -j2, -j3, -j8 and -j32 wrote the same {len(want)} bytes; GNU tar gives back the tree")


def test_damaged_image():
    with tempdir() as d:
        src = f"{d}/src"
        text = b"".join(b"line %d of a log file with some words\n" % i for i in range(40000))
        write(f"{src}/victim.log", text)
        img, tar = f"{d}/img.sqfs", f"{d}/out.tar"
        sqar_create(src, img, "-c", "gzip")  # zlib's adler32 catches the damage when decoding
        data = bytearray(open(img, "rb").read())
        for pos in range(200, 400, 7):  # inside the first compressed data block (data starts at 96)
            data[pos] ^= 0x5A
        open(img, "wb").write(data)
        p = run([SQAR, "extract", "--tar", tar, img], check=False)
        if p.returncode != 1 or "victim.log" not in p.stderr:
            raise AssertionError(f"damaged block: exit {p.returncode}, stderr {p.stderr!r}")
        if os.path.exists(tar) or [n for n in os.listdir(d) if n.startswith("out.tar")]:
            raise AssertionError(f"a failed extract --tar left {os.listdir(d)}")
        log(f"ok: damaged image refused: {p.stderr.strip()}")
        p = run([SQAR, "extract", "--tar", "-", img], check=False, stdout=subprocess.DEVNULL)
        if p.returncode != 1 or "victim.log" not in p.stderr:
            raise AssertionError(f"damaged block to stdout: exit {p.returncode}, stderr {p.stderr!r}")
        # Many entries queued before the damaged block and many blocks decoded after it: the
        # error still names the file. (Empty files before it keep it the first data block.)
        for i in range(300):
            write(f"{src}/a-before/{i:03d}", b"")
            write(f"{src}/z-after/{i:03d}", pseudo_random(5000, i))
        sqar_create(src, img, "-c", "gzip", "-f")
        data = bytearray(open(img, "rb").read())
        for pos in range(200, 400, 7):
            data[pos] ^= 0x5A
        open(img, "wb").write(data)
        for j in ("1", "8"):
            p = run([SQAR, "extract", "-j", j, "--tar", tar, img], check=False)
            if p.returncode != 1 or "victim.log" not in p.stderr or os.path.exists(tar):
                raise AssertionError(f"damaged block with -j{j}: exit {p.returncode}, stderr {p.stderr!r}")
        # A damaged directory listing: the walk (on its own thread) fails, and so does the export.
        sqar_create(src, img, "-c", "gzip", "-f")
        data = bytearray(open(img, "rb").read())
        dir_table = struct.unpack_from("<Q", data, 72)[0]  # superblock: directory_table_start
        for pos in range(dir_table + 10, dir_table + 60, 5):
            data[pos] ^= 0x5A
        open(img, "wb").write(data)
        p = run([SQAR, "extract", "--tar", tar, img], check=False)
        if p.returncode != 1 or "corrupt" not in p.stderr or os.path.exists(tar):
            raise AssertionError(f"damaged listing: exit {p.returncode}, stderr {p.stderr!r}")


def test_content_checked_against_the_manifest():
    """Damage that decodes cleanly (blocks stored raw carry no checksum) is caught by the
    manifest trailer, as extract and cat catch it: a file with its own entry, a duplicate
    (the manifest lists each content once) and small files under their fragment block's
    digest. An error naming the file, exit 1, no archive left; --no-verify writes it."""
    with tempdir() as d:
        src, img, tar = f"{d}/src", f"{d}/img.sqfs", f"{d}/out.tar"
        write(f"{src}/big.bin", pseudo_random(3 * 131072, 1))  # random: stored raw
        for i in range(3):
            write(f"{src}/small/{i}", pseudo_random(5000, 10 + i))  # a raw fragment block
        sqar_create(src, img)
        run([SQAR, "extract", "--tar", tar, img])
        good = open(img, "rb").read()
        data_start = 96
        cases = [("big.bin", data_start + 1000, ["big.bin"], []),
                 # the fragment block follows the big file's 3 blocks
                 ("a small file", data_start + 3 * 131072 + 100, ["small/0", "fragment block 0"], []),
                 # only the duplicate is exported: its owner is not among the entries
                 ("the copy of big.bin", data_start + 1000, ["copy/big.bin"], ["copy"])]
        write(f"{src}/copy/big.bin", pseudo_random(3 * 131072, 1))
        sqar_create(src, f"{d}/dup.sqfs")
        for what, pos, needles, patterns in cases:
            image = f"{d}/dup.sqfs" if patterns else img
            data = bytearray(good if not patterns else open(image, "rb").read())
            data[pos] ^= 0x5A
            bad = f"{d}/bad.sqfs"
            open(bad, "wb").write(data)
            os.remove(tar)
            p = run([SQAR, "extract", "--tar", tar, bad, *patterns], check=False)
            if p.returncode != 1 or "content differs from the manifest" not in p.stderr or os.path.exists(tar):
                raise AssertionError(f"damaged {what}: exit {p.returncode}, stderr {p.stderr!r}")
            for n in needles:
                if n not in p.stderr:
                    raise AssertionError(f"damaged {what}: stderr does not name {n!r}: {p.stderr!r}")
            if [n for n in os.listdir(d) if n.startswith("out.tar")]:
                raise AssertionError(f"damaged {what}: a failed extract --tar left {os.listdir(d)}")
            p = run([SQAR, "extract", "--tar", "-", bad, *patterns], check=False, stdout=subprocess.DEVNULL)
            if p.returncode != 1 or "standard output is incomplete" not in p.stderr:
                raise AssertionError(f"damaged {what} to stdout: exit {p.returncode}, stderr {p.stderr!r}")
            run([SQAR, "extract", "--no-verify", "--tar", tar, bad, *patterns])
            log(f"ok: damaged {what}: {p.stderr.strip()}")


def test_archive_into_a_device_or_fifo():
    """As `tar -cf` does, an archive named by a device or a FIFO is written into it, not into a
    new file renamed over it (which would replace /dev/null with a regular file)."""
    need_tool("tar")
    with tempdir() as d:
        src, img = full_image(d)
        sqar("extract", "--tar", "/dev/null", img)
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null was replaced"
        fifo, out = f"{d}/fifo", f"{d}/out"
        os.mkfifo(fifo)
        # The reader drains the FIFO to its end: GNU tar reading it directly may stop at the
        # end-of-archive blocks and close it before the last record's padding is written,
        # which would end the writer with SIGPIPE, as it ends tar -c in that pipe.
        with open(f"{d}/from-fifo.tar", "wb") as sink:
            consumer = subprocess.Popen(["cat", fifo], stdout=sink)
            sqar("extract", "--tar", fifo, img)
            if consumer.wait(timeout=120) != 0:
                raise AssertionError(f"cat reading the FIFO exited {consumer.returncode}")
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
        untar(GNU_TAR, f"{d}/from-fifo.tar", out)
        compare_trees(src, out, "sqar extract --tar FIFO, tar -x of what came out", owners=OWNERS, ignore=NO_SOCKET)
        if os.path.exists("/dev/full"):
            p = run([SQAR, "extract", "--tar", "/dev/full", img], check=False)
            assert p.returncode == 1 and "/dev/full: No space left on device" in p.stderr, p.stderr
            assert stat.S_ISCHR(os.stat("/dev/full").st_mode), "/dev/full was replaced"
        log("ok: archives go into /dev/null, a FIFO and /dev/full, which stay what they are")


if __name__ == "__main__":
    main([test_full_tree_gnu_tar_and_bsdtar, test_non_utf8_name, test_pipe_to_tar, test_compressed_archives,
          test_gzip_archive_in_members, test_patterns, test_names_of_one_file_stripped_to_one,
          test_names_stripped_to_one_are_archived_once,
          test_xattr_names_libarchive_encodes_are_named,
          test_threads_give_the_same_archive, test_damaged_image, test_content_checked_against_the_manifest,
          test_archive_into_a_device_or_fifo])
