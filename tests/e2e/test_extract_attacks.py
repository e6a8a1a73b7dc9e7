"""Crafted malicious images must be refused by sqar extract with a clear error, and nothing
may be written outside the target directory.

The images are built by this test: mksquashfs with -noI -noD -noF -noX stores metadata
uncompressed, so a placeholder name of the right length can be byte-replaced in the directory
table by '..', 'a/b', '.', a NUL name, or the name of a sibling (a symlink followed by an entry
of the same name, as in CVE-2021-40153 / CVE-2021-41072); a directory entry's inode offset can
be pointed at its parent to make a directory loop. ('' cannot be encoded: names store
length - 1.)"""
import os
import stat
import struct
import subprocess

from clitest import expect_fail
from craftfs import Image
from sqartest import AS_NOBODY, SQAR, kernel_mount, kernel_supports, log, main, mksquashfs, need_root, need_tool, run, skip, tempdir, write

UNCOMPRESSED = ("-noI", "-noD", "-noF", "-noX", "-no-xattrs")
# Fixed owner and times make the image the same on every run, so a placeholder cannot also turn up
# by chance inside a timestamp (0x3B9ACA00 holds no placeholder letter).
DETERMINISTIC = ("-all-root", "-mkfs-time", "1000000000", "-all-time", "1000000000")


def patch(image, old, new, count=1):
    assert len(old) == len(new)
    with open(image, "rb") as f:
        data = f.read()
    if data.count(old) != count:
        raise AssertionError(f"placeholder {old!r} occurs {data.count(old)} times in the image, expected {count}")
    with open(image, "wb") as f:
        f.write(data.replace(old, new))


def build(d, populate):
    src = f"{d}/src"
    os.makedirs(src)
    populate(src)
    img = f"{d}/evil.sqfs"
    mksquashfs(src, img, *UNCOMPRESSED, *DETERMINISTIC)
    return img


def refuse(d, img, *needles):
    """Extracts into d/box/out; asserts failure naming the image and that nothing escaped."""
    box = f"{d}/box"
    os.makedirs(box)
    p = expect_fail(["extract", img, "-C", f"{box}/out"], 1, img, *needles)
    escaped = [n for n in os.listdir(box) if n != "out"]
    if escaped:
        raise AssertionError(f"entries written outside the target directory: {escaped}")
    inside = [os.path.join(a, n) for a, ds, fs in os.walk(f"{box}/out") for n in ds + fs]
    if inside:
        raise AssertionError(f"a refused image still wrote into the target: {inside}")
    log(f"ok: refused: {p.stderr.strip().splitlines()[0]}")


def test_dotdot_directory():
    with tempdir() as d:
        img = build(d, lambda s: write(f"{s}/QZ/escaped.txt", b"outside"))
        patch(img, b"QZ", b"..")
        refuse(d, img, '".."')


def test_dotdot_below_the_root():
    """'..' in a subdirectory's listing: that directory is named and the rest of its listing
    left out (a listing is damaged from the bad name on), the other entries extract, and
    nothing lands outside the target. (In the root's listing the whole extraction fails, as
    test_dotdot_directory shows.)"""
    with tempdir() as d:
        def populate(s):
            write(f"{s}/sub/AAA", b"first\n")
            write(f"{s}/sub/QZ/escaped.txt", b"outside")
            write(f"{s}/sub/zzz", b"last\n")
            write(f"{s}/other", b"o\n")

        img = build(d, populate)
        patch(img, b"QZ", b"..")
        box = f"{d}/box"
        os.makedirs(box)
        p = expect_fail(["extract", img, "-C", f"{box}/out"], 1, img, 'sub: ', '".."')
        assert os.listdir(box) == ["out"], os.listdir(box)
        assert sorted(os.listdir(f"{box}/out")) == ["other", "sub"], os.listdir(f"{box}/out")
        assert os.listdir(f"{box}/out/sub") == ["AAA"], os.listdir(f"{box}/out/sub")
        assert not os.path.exists(f"{d}/escaped.txt") and not os.path.exists(f"{box}/escaped.txt")
        log(f"ok: refused below the root: {p.stderr.strip().splitlines()[0]}")


def test_name_with_slash():
    with tempdir() as d:
        img = build(d, lambda s: write(f"{s}/QZQZ", b"outside"))
        patch(img, b"QZQZ", b"../x")
        refuse(d, img, "../x")
        with tempdir() as d2:
            img = build(d2, lambda s: write(f"{s}/QZQ", b"x"))
            patch(img, b"QZQ", b"a/b")
            refuse(d2, img, "a/b")


def test_dot_and_nul_names():
    for new, shown in ((b".", '"."'), (b"\0", "invalid name")):
        with tempdir() as d:
            img = build(d, lambda s: write(f"{s}/Q/f", b"x"))
            # One byte is too short to be unique on its own: match the directory entry's tail
            # (type 1 = directory, name size - 1 = 0) followed by the name.
            entry_tail = struct.pack("<HH", 1, 0)
            patch(img, entry_tail + b"Q", entry_tail + new)
            refuse(d, img, shown)


def test_symlink_then_same_name():
    with tempdir() as d:
        victim = f"{d}/victim"
        os.makedirs(victim)

        def populate(s):
            os.symlink(victim, f"{s}/QZQZQZA")                 # symlink to a directory outside
            write(f"{s}/QZQZQZB/planted", b"would land in victim/")
            os.symlink(f"{victim}/file", f"{s}/QZQZQZC")       # symlink to a file outside
            write(f"{s}/QZQZQZD", b"would overwrite victim/file")

        img = build(d, populate)
        patch(img, b"QZQZQZB", b"QZQZQZA")
        patch(img, b"QZQZQZD", b"QZQZQZC")
        refuse(d, img, "QZQZQZA")
        if os.listdir(victim):
            raise AssertionError(f"wrote through the symlink: {os.listdir(victim)}")


def test_directory_loop():
    with tempdir() as d:
        img = build(d, lambda s: os.makedirs(f"{s}/QLOOPA/QLOOPB"))
        with open(img, "rb") as f:
            data = bytearray(f.read())
        # Directory entry: u16 offset, s16 inode number delta, u16 type, u16 name size - 1, name.
        a = data.index(b"QLOOPA") - 8
        b = data.index(b"QLOOPB") - 8
        # Both directories' inodes sit in the one uncompressed metadata block; point B's entry at
        # A's inode (its own parent) and give it A's inode number.
        a_off, a_num = struct.unpack_from("<Hh", data, a)
        b_hdr_base = struct.unpack_from("<I", data, b - 4)[0]
        a_hdr_base = struct.unpack_from("<I", data, a - 4)[0]
        struct.pack_into("<Hh", data, b, a_off, a_hdr_base + a_num - b_hdr_base)
        with open(img, "wb") as f:
            f.write(data)
        refuse(d, img, "loop")
        # diff walks the image beside the source tree, and must stop at the loop too.
        expect_fail(["diff", img, f"{d}/src"], 2, img, "loop")
        log("ok: diff refuses the loop")


def test_directory_with_two_parents():
    """Two directory inodes pointing at one listing (craftfs): the tree is no longer a tree, and
    each sharing doubles what lies below (20 levels of such pairs would be a million paths).
    Every command that walks the image refuses it as it refuses a loop, naming the second
    path, and merge and append write no image."""
    with tempdir() as d:
        img = Image(block_size=4096)
        shared = img.dir({"f": img.file(b"below both\n")})
        twin = img.dir({})
        twin.listing_of = (shared, 0)
        image = f"{d}/twins.sqfs"
        with open(image, "wb") as f:
            f.write(img.build(img.dir({"a": shared, "b": twin})))
        os.makedirs(f"{d}/empty")
        for args, code in ((["list", image], 1), (["verify", image], 1), (["diff", image, f"{d}/empty"], 2),
                           (["extract", "-q", "--tar", f"{d}/out.tar", image], 1),
                           (["merge", image, f"{d}/merged.sqfs"], 1), (["append", image, f"{d}/empty"], 1)):
            p = expect_fail(args, code, image, '"b": a directory listed twice')
            log(f"ok: sqar {args[0]}: {p.stderr.strip().splitlines()[-1]}")
        refuse(d, image, '"b": a directory listed twice')
        assert not os.path.exists(f"{d}/merged.sqfs"), "merge left an image"


NO_ONE = 0xFFFFFFFF  # (uid_t)-1: chown(2) reads it as "leave the owner as it is"


def test_owner_no_one_is_not_root():
    """An image naming 2^32-1 as an owner: chown(2) takes that id as "leave the owner alone",
    so extracting as root once left such a file root's, a set-uid root program from an image
    that named no one as its owner. The kernel shows the id as the overflow id (65534), and
    sqar extract, extract --tar through GNU tar, and diff give what the kernel mount shows."""
    need_root()
    need_tool("tar")
    with tempdir() as d:
        img = Image(block_size=4096)
        root = img.dir({
            "suid": img.file(b"#!/bin/sh\n", mode=0o4755, uid=NO_ONE, gid=NO_ONE),
            "sgid": img.file(b"#!/bin/sh\n", mode=0o2755, uid=1234, gid=NO_ONE),
            "d": img.dir({"f": img.file(b"f\n", uid=NO_ONE, gid=5678)}, uid=NO_ONE, gid=NO_ONE),
        })
        image = f"{d}/no-one.sqfs"
        with open(image, "wb") as f:
            f.write(img.build(root))
        names = ("suid", "sgid", "d", "d/f")

        def owners(top):
            return {n: (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
                    for n in names for st in [os.lstat(f"{top}/{n}")]}

        if kernel_supports("gzip"):
            with kernel_mount(image, f"{d}/mnt") as mnt:
                want, by = owners(mnt), "the kernel mount"
        else:
            with open("/proc/sys/fs/overflowuid") as u, open("/proc/sys/fs/overflowgid") as g:
                ou, og = int(u.read()), int(g.read())
            want = {"suid": (ou, og, 0o4755), "sgid": (1234, og, 0o2755), "d": (ou, og, 0o755), "d/f": (ou, 5678, 0o644)}
            by = "/proc/sys/fs/overflow{u,g}id (this kernel cannot mount the crafted image)"
        assert all(o[0] != 0 and o[1] != 0 for o in want.values()), f"{by} shows root as an owner: {want}"

        run([SQAR, "extract", "-q", "-C", f"{d}/out", image])
        assert owners(f"{d}/out") == want, f"sqar extract {owners(f'{d}/out')} != {by} {want}"
        archive = subprocess.run([SQAR, "extract", "-q", "--tar", "-", image], stdout=subprocess.PIPE, check=True).stdout
        os.makedirs(f"{d}/tar")
        subprocess.run(["tar", "-C", f"{d}/tar", "-xpf", "-", "--same-owner"], input=archive, check=True)
        assert owners(f"{d}/tar") == want, f"extract --tar | tar -x {owners(f'{d}/tar')} != {by} {want}"
        p = run([SQAR, "diff", image, f"{d}/out"], check=False)
        assert p.returncode == 0, f"diff of the extraction: exit {p.returncode}: {p.stdout}{p.stderr}"
        log(f"ok: owner 2^32-1 extracts as {by} shows it: {want['suid'][:2]}, not root")


def set_id_image(path):
    """Set-uid and set-gid files and a set-gid directory of owners 1234:1234 and root's, and
    a fifo and a device with set-id bits."""
    img = Image(block_size=4096)
    root = img.dir({
        "suid-1234": img.file(b"#!/bin/sh\n", mode=0o4755, uid=1234, gid=1234),
        "suid-root": img.file(b"#!/bin/sh\n", mode=0o4755, uid=0, gid=0),
        "sgid-1234": img.file(b"#!/bin/sh\n", mode=0o2755, uid=0, gid=1234),
        "both-nobody": img.file(b"#!/bin/sh\n", mode=0o6755, uid=65534, gid=65534),
        "sgid-dir": img.dir({"f": img.file(b"f\n", uid=1234, gid=1234)}, mode=0o2775, uid=1234, gid=1234),
        "fifo": img.fifo(mode=0o6644, uid=1234, gid=1234),
    })
    with open(path, "wb") as f:
        f.write(img.build(root))
    return path


def set_id_bits(top, names):
    return {n: (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) for n in names for st in [os.lstat(f"{top}/{n}")]}


def test_set_id_bits_need_their_owner():
    """Without the owner restored (--no-same-owner as root, or extracting as a user) a set-uid
    program of uid 1234 became one of the extracting user's: root's, when root extracts. The
    set-uid (set-gid) bit now stays only where the entry ends up owned by the image's user
    (group), as bsdtar --no-same-owner -p and unsquashfs as a user give them; a directory keeps
    its set-gid bit (it only passes the group on), as bsdtar keeps it."""
    need_root()
    need_tool("bsdtar")
    need_tool("unsquashfs")
    names = ("suid-1234", "suid-root", "sgid-1234", "both-nobody", "sgid-dir", "sgid-dir/f", "fifo")
    with tempdir() as d:
        image = set_id_image(f"{d}/set-id.sqfs")
        run([SQAR, "extract", "-q", "--no-same-owner", "-C", f"{d}/out", image])
        ours = set_id_bits(f"{d}/out", names)
        archive = subprocess.run([SQAR, "extract", "-q", "--tar", "-", image], stdout=subprocess.PIPE, check=True).stdout
        os.makedirs(f"{d}/bsdtar")
        subprocess.run(["bsdtar", "-C", f"{d}/bsdtar", "-xpf", "-", "--no-same-owner"], input=archive, check=True)
        theirs = set_id_bits(f"{d}/bsdtar", names)
        assert ours == theirs, f"sqar extract --no-same-owner {ours} != bsdtar --no-same-owner -p {theirs}"
        assert ours["suid-1234"] == (0, 0, 0o755) and ours["suid-root"] == (0, 0, 0o4755), ours
        assert ours["sgid-1234"] == (0, 0, 0o755) and ours["sgid-dir"][2] == 0o2775, ours

        # As nobody: unsquashfs, which cannot restore owners either, is the reader to agree with.
        os.makedirs(f"{d}/user")
        os.chmod(f"{d}/user", 0o777)
        os.chmod(d, 0o755)
        run([*AS_NOBODY, SQAR, "extract", "-q", "-C", f"{d}/user/sqar", image])
        run([*AS_NOBODY, "unsquashfs", "-no-progress", "-q", "-d", f"{d}/user/unsquashfs", image])
        ours = set_id_bits(f"{d}/user/sqar", names)
        theirs = set_id_bits(f"{d}/user/unsquashfs", names)
        assert all(o[2] & 0o6000 == 0 for n, o in ours.items() if n not in ("both-nobody", "sgid-dir")), ours
        assert ours["both-nobody"] == (65534, 65534, 0o6755), ours
        for n in names:  # unsquashfs drops every set-id bit as a user, also where the owner matches
            assert ours[n][2] & ~0o6000 == theirs[n][2] & ~0o6000 and ours[n][2] & 0o6000 >= theirs[n][2] & 0o6000, \
                (n, ours[n], theirs[n])
        log(f"ok: set-id bits kept only with their owner: {ours}")

def test_proc_that_is_not_procfs():
    """Modes of fifos, devices and symlinks are set through /proc/self/fd/N of a descriptor
    pinned to the entry. With something else mounted on /proc (here a tmpfs whose
    /proc/self/fd/N are symlinks to a file outside, in a mount namespace of the test's own),
    the chmod followed them and changed that file. sqar now checks /proc is procfs first,
    names the entry and the cause, and nothing outside changes."""
    need_root()
    need_tool("unshare")
    if "ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ:
        # The sanitizers' runtimes read /proc/self/maps and /proc/self/exe: over a tmpfs /proc
        # ASan loses the stack's bounds and reports the first exception's unwinding as a
        # stack-buffer-overflow. The normal build runs this test.
        skip("a sanitizer runtime cannot run with a tmpfs mounted over /proc")
    with tempdir() as d:
        victim = f"{d}/victim"
        write(victim, b"secret\n")
        os.chmod(victim, 0o600)
        img = Image(block_size=4096)
        image = f"{d}/fifo.sqfs"
        with open(image, "wb") as f:
            f.write(img.build(img.dir({"fifo": img.fifo(mode=0o644), "file": img.file(b"f\n")})))
        script = ("mount -t tmpfs none /proc && mkdir -p /proc/self/fd && "
                  f"for i in $(seq 0 255); do ln -s {victim} /proc/self/fd/$i; done && "
                  f"exec {SQAR} extract {image} -C {d}/out")
        p = run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], check=False)
        if p.returncode != 1 and "mount" in p.stderr and not os.path.exists(f"{d}/out"):
            skip(f"cannot mount a tmpfs on /proc in a new mount namespace: {p.stderr.strip()}")
        assert p.returncode == 1 and "fifo: /proc is not procfs" in p.stderr, (p.returncode, p.stderr)
        assert stat.S_IMODE(os.stat(victim).st_mode) == 0o600, oct(os.stat(victim).st_mode)
        with open(f"{d}/out/file", "rb") as f:
            assert f.read() == b"f\n"
        log("ok: " + next(line for line in p.stderr.splitlines() if "procfs" in line))

if __name__ == "__main__":
    main([test_dotdot_directory, test_dotdot_below_the_root, test_name_with_slash, test_dot_and_nul_names, test_symlink_then_same_name,
          test_directory_loop, test_directory_with_two_parents, test_owner_no_one_is_not_root,
          test_set_id_bits_need_their_owner, test_proc_that_is_not_procfs])
