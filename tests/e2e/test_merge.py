#!/usr/bin/env python3
"""sqar merge: three shard images of one tree, built by parallel processes, merged. The result
equals one image of the whole tree entry by entry (unsquashfs of both, and the kernel's mount
against the tree), and a file present in two shards is stored once. Conflicting names,
--replace and a damaged shard are refused without output. Shards with another compressor or
block size are decoded and compressed again, with a warning."""
import base64
import contextlib
import json
import os
import re
import subprocess

from sqartest import (SQAR, compare_trees, kernel_mount, kernel_supports, leftovers, log, main, make_full_tree,
                      mksquashfs, need_root, need_tool, pseudo_random, run, skip, tempdir, unsquashfs_extract, write)

BLOCK = 131072


def merge(*args, check=True):
    p = run([SQAR, "merge", "--json", *args], check=check)
    return json.loads(p.stdout) if p.returncode == 0 else p


def expect_refused(args, out, *words, code=1):
    p = run([SQAR, "merge", *args, out], check=False)
    assert p.returncode == code, f"merge {args} exited {p.returncode}: {p.stderr}"
    for w in words:
        assert w in p.stderr, f"message lacks {w!r}: {p.stderr}"
    assert not os.path.exists(out) and not leftovers(out), "a refused merge left output"
    log(f"ok: refused: {p.stderr.strip()}")
    return p


@contextlib.contextmanager
def equals_whole_tree(d, tree, what, block_size=BLOCK):
    """d/merged.sqfs passes sqar verify, unsquashfs extracts it as it extracts one image of the
    whole tree, and the kernel's mount of it (yielded) equals the tree. Holes are compared in
    whole blocks of d/merged.sqfs's block size, the unit an image can keep them in."""
    run([SQAR, "verify", f"{d}/merged.sqfs"])
    run([SQAR, "create", "-q", tree, f"{d}/whole.sqfs"])
    unsquashfs_extract(f"{d}/whole.sqfs", f"{d}/whole")
    unsquashfs_extract(f"{d}/merged.sqfs", f"{d}/merged")
    compare_trees(f"{d}/whole", f"{d}/merged", f"unsquashfs of {what}", holes=block_size)
    with kernel_mount(f"{d}/merged.sqfs", f"{d}/mnt") as mnt:
        compare_trees(tree, mnt, f"kernel mount of {what}", holes=block_size)
        yield mnt


def test_shards_equal_whole():
    need_root()
    with tempdir() as d:
        t = f"{d}/tree"
        make_full_tree(f"{t}/one")
        for i in range(30):
            write(f"{t}/two/file{i}", b"shard two %d\n" % i * (i + 1))
        write(f"{t}/three/big.log", b"".join(b"log line %d\n" % i for i in range(100000)))
        shared = pseudo_random(4 * BLOCK + 123, 99)
        write(f"{t}/two/shared.bin", shared)       # the same content in two shards
        write(f"{t}/three/shared-copy.bin", shared)
        os.utime(f"{t}/two", (1_650_000_000, 1_650_000_000))
        os.utime(f"{t}/three", (1_650_000_100, 1_650_000_100))
        os.utime(t, (1_650_000_200, 1_650_000_200))
        names = ["one", "two", "three"]
        # Each shard: the whole tree but the other shards' top directories (same root).
        procs = []
        for n in names:
            excl = [a for m in names if m != n for a in ("--exclude", f"/{m}")]
            procs.append(subprocess.Popen([SQAR, "create", "-q", *excl, t, f"{d}/{n}.sqfs"], stderr=subprocess.PIPE,
                                          text=True))
        for p in procs:
            assert p.wait() == 0, p.stderr.read()
        s = merge(*[f"{d}/{n}.sqfs" for n in names], f"{d}/merged.sqfs")
        assert s["duplicate_files"] == 1 and s["duplicate_bytes"] == len(shared), s
        assert s["blocks_compressed"] == 0, s
        # The same count of entries, the root included, as create and info give for the whole tree.
        whole = json.loads(run([SQAR, "create", "--json", t, f"{d}/whole-count.sqfs"]).stdout)
        counts = json.loads(run([SQAR, "info", "--json", f"{d}/merged.sqfs"]).stdout)["counts"]
        named = sum(counts.values()) - counts["hard_links"]  # counts are per name; hard_links repeats some
        assert s["entries"] == whole["entries"] == named, (s["entries"], whole["entries"], named)
        shard_bytes = sum(os.path.getsize(f"{d}/{n}.sqfs") for n in names)
        assert os.path.getsize(f"{d}/merged.sqfs") < shard_bytes - len(shared) // 2, "the shared file is stored twice"
        with equals_whole_tree(d, t, "the merged shards") as mnt:
            st = os.stat(mnt)
            assert int(st.st_mtime) == 1_650_000_200, "root attributes differ from the tree's"


def test_small_files_in_several_shards_are_stored_once():
    """Shards of copies of one directory of small files: a fragment block whose tails are all
    held by an earlier shard is not copied, so the merged image holds the small files' content
    once, as one image of the whole tree does; a block with one new tail beside the duplicates
    is kept whole, since that tail's file points into it."""
    need_root()
    with tempdir() as d:
        t = f"{d}/tree"
        for i in range(200):  # about 150 KiB of tails: two fragment blocks a shard
            body = b"small file %d\n" % i * (40 + i % 17)
            for n in ("a", "b", "c"):
                write(f"{t}/{n}/f{i:03d}", body)
        write(f"{t}/c/unique", b"only in shard c\n" * 30)
        for n in "abc":
            run([SQAR, "create", "-q", "--keep-as-directory", f"{t}/{n}", f"{d}/{n}.sqfs"])
        frags = {n: json.loads(run([SQAR, "info", "--json", f"{d}/{n}.sqfs"]).stdout)["fragments"] for n in "abc"}
        assert frags["a"] == frags["b"] >= 2, frags
        s = merge(f"{d}/a.sqfs", f"{d}/b.sqfs", f"{d}/c.sqfs", f"{d}/merged.sqfs")
        assert s["duplicate_files"] == 400, s
        merged = json.loads(run([SQAR, "info", "--json", f"{d}/merged.sqfs"]).stdout)
        whole = json.loads(run([SQAR, "create", "--json", t, f"{d}/whole-count.sqfs"]).stdout)
        # b's blocks are all duplicates and dropped; c's block holding "unique" is kept.
        kept_of_c = merged["fragments"] - frags["a"]
        assert 1 <= kept_of_c < frags["c"], (merged["fragments"], frags)
        a_bytes = os.path.getsize(f"{d}/a.sqfs")
        assert os.path.getsize(f"{d}/merged.sqfs") < whole["file_bytes"] + a_bytes // 2, (
            "the shards' small files are stored more than once", os.path.getsize(f"{d}/merged.sqfs"),
            whole["file_bytes"])
        with equals_whole_tree(d, t, "merged shards of copies") as mnt:
            with open(f"{mnt}/c/unique", "rb") as f:
                assert f.read() == b"only in shard c\n" * 30
        log(f"ok: {frags['a']} + {kept_of_c} of {sum(frags.values())} fragment blocks kept")


def test_example_slurm_driver():
    """examples/shards.sbatch, run once per array task as sbatch --array would, then merged:
    the image equals the tree, root file and root attributes included."""
    need_root()
    driver = os.path.join(os.environ.get("SQAR_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                          "examples", "shards.sbatch")
    with tempdir() as d:
        t = f"{d}/tree"
        make_full_tree(f"{t}/alpha")
        for i in range(12):
            write(f"{t}/beta/part{i}.dat", pseudo_random(1000 * i + 7, i))
        write(f"{t}/gamma/copy.dat", pseudo_random(1000 * 5 + 7, 5))  # a duplicate across shards
        write(f"{t}/README", b"the root's own file\n")
        # Top directory names that are patterns or break lines: "b[e]ta" as a pattern matches
        # beta, not itself, and would land in the root's shard as well as its own.
        write(f"{t}/b[e]ta/odd.dat", b"brackets\n")
        write(f"{t}/star*/odd.dat", b"star\n")
        write(f"{t}/new\nline/odd.dat", b"newline\n")
        os.chmod(t, 0o750)
        os.utime(t, (1_650_000_300, 1_650_000_300))
        env = dict(os.environ, PATH=f"{os.path.dirname(SQAR)}:{os.environ['PATH']}", SLURM_CPUS_PER_TASK="2")
        tasks = 1 + len([e for e in os.scandir(t) if e.is_dir()])
        procs = [subprocess.Popen(["bash", driver, t, f"{d}/shards"], env=dict(env, SLURM_ARRAY_TASK_ID=str(k)),
                                  stderr=subprocess.PIPE, text=True) for k in range(tasks)]
        for p in procs:
            assert p.wait() == 0, p.stderr.read()
        shards = sorted(os.listdir(f"{d}/shards"))
        assert len(shards) == tasks and shards[0] == "0-root.sqfs", shards
        merge(*[f"{d}/shards/{x}" for x in shards], f"{d}/merged.sqfs")
        unsquashfs_extract(f"{d}/merged.sqfs", f"{d}/merged")
        compare_trees(t, f"{d}/merged", "unsquashfs of the shards the Slurm driver packed")
        st = os.stat(f"{d}/merged")
        assert st.st_mode & 0o777 == 0o750 and int(st.st_mtime) == 1_650_000_300, "root attributes are not the tree's"
        p = subprocess.run(["bash", driver, t, f"{d}/shards"], env=dict(env, SLURM_ARRAY_TASK_ID=str(tasks)),
                           capture_output=True, text=True)
        assert p.returncode != 0 and "no top directory number" in p.stderr, p.stderr
        log(f"ok: {tasks} array tasks merged into the tree")


def test_conflicts_and_replace():
    with tempdir() as d:
        write(f"{d}/a/x", b"from a\n")
        write(f"{d}/a/dir/in-a", b"a\n")
        for i in range(12):
            write(f"{d}/a/many/m{i:02d}", b"a\n")
        write(f"{d}/b/x", b"from b\n")
        write(f"{d}/b/dir/in-b", b"b\n")
        for i in range(12):
            write(f"{d}/b/many/m{i:02d}", b"b\n")
        for n in "ab":
            run([SQAR, "create", "-q", f"{d}/{n}", f"{d}/{n}.sqfs"])
        # The clashes are named in one error: ten of them, and the rest counted.
        p = expect_refused([f"{d}/a.sqfs", f"{d}/b.sqfs"], f"{d}/out", f"in both {d}/a.sqfs and {d}/b.sqfs: ",
                           "many/m00, many/m01", "and 3 more names", "--replace")
        assert p.stderr.count(", ") == 9 and "x, " in p.stderr, p.stderr
        merge("--replace", f"{d}/a.sqfs", f"{d}/b.sqfs", f"{d}/out")
        assert run([SQAR, "cat", f"{d}/out", "x"]).stdout == "from b\n"
        assert run([SQAR, "cat", f"{d}/out", "dir/in-a"]).stdout == "a\n"
        assert run([SQAR, "cat", f"{d}/out", "dir/in-b"]).stdout == "b\n"
        run([SQAR, "verify", f"{d}/out"])


def test_damaged_shard():
    with tempdir() as d:
        write(f"{d}/a/f", pseudo_random(3 * BLOCK, 1))
        write(f"{d}/b/g", pseudo_random(3 * BLOCK, 2))
        for n in "ab":
            run([SQAR, "create", "-q", f"{d}/{n}", f"{d}/{n}.sqfs"])
        with open(f"{d}/b.sqfs", "r+b") as f:
            f.seek(96 + BLOCK + 10)
            b = f.read(1)
            f.seek(96 + BLOCK + 10)
            f.write(bytes([b[0] ^ 1]))
        expect_refused([f"{d}/a.sqfs", f"{d}/b.sqfs"], f"{d}/out", f"{d}/b.sqfs", "damaged")
        # A shard to be recoded (other block size): its raw-stored block still decodes, to
        # other bytes; the check against its manifest refuses it before anything is compressed.
        run([SQAR, "create", "-q", "-b", "64K", f"{d}/b", f"{d}/b64.sqfs"])
        with open(f"{d}/b64.sqfs", "r+b") as f:
            f.seek(96 + 10)
            b = f.read(1)
            f.seek(96 + 10)
            f.write(bytes([b[0] ^ 1]))
        expect_refused([f"{d}/a.sqfs", f"{d}/b64.sqfs"], f"{d}/out", f"{d}/b64.sqfs", "g:", "manifest")


def make_mixed_shards(d):
    """Three shards of d/tree: a sqar zstd one (128 KiB blocks), one by mksquashfs (gzip, no
    manifest trailer) and a sqar zstd one at 64 KiB blocks holding a copy of a file of the first.
    Returns the tree, the shard paths and the shared content."""
    t = f"{d}/tree"
    make_full_tree(f"{t}/one")
    shared = pseudo_random(3 * BLOCK + 77, 5)
    write(f"{t}/one/shared.bin", shared)
    for i in range(20):
        write(f"{t}/two/file{i}", b"gzip shard %d\n" % i * (i + 1))
    write(f"{t}/two/big.txt", b"".join(b"line %d of the gzip shard\n" % i for i in range(40000)))
    os.symlink("big.txt", f"{t}/two/link")
    write(f"{t}/three/shared-copy.bin", shared)  # content the zstd shard holds
    with open(f"{t}/three/sparse", "wb") as f:   # a hole between two data blocks
        f.write(pseudo_random(1000, 6))
        f.seek(4 * BLOCK)
        f.write(pseudo_random(BLOCK + 5, 7))
    for n, when in (("two", 1_650_000_000), ("three", 1_650_000_100), ("", 1_650_000_200)):
        os.utime(f"{t}/{n}" if n else t, (when, when))
    others = {"one": ["two", "three"], "two": ["one", "three"], "three": ["one", "two"]}
    run([SQAR, "create", "-q", *[a for m in others["one"] for a in ("--exclude", f"/{m}")], t, f"{d}/one.sqfs"])
    mksquashfs(t, f"{d}/two.sqfs", "-comp", "gzip", "-e", *others["two"])
    run([SQAR, "create", "-q", "-b", "64K", *[a for m in others["three"] for a in ("--exclude", f"/{m}")], t,
         f"{d}/three.sqfs"])
    return t, [f"{d}/one.sqfs", f"{d}/two.sqfs", f"{d}/three.sqfs"], shared


def files_in(directory):
    return sum(not os.path.islink(f"{directory}/{n}") for n in os.listdir(directory))


def test_other_settings_are_recoded():
    """Shards with another compressor or block size than the first are recoded. Each gets one
    warning line naming it; their files are decoded and compressed again as the first shard's
    (zstd, 128 KiB), content the first shard holds is stored once, and the result equals one
    image of the whole tree (unsquashfs, the kernel's mount, sqar verify)."""
    need_root()
    with tempdir() as d:
        t, shards, shared = make_mixed_shards(d)
        p = run([SQAR, "merge", "--json", *shards, f"{d}/merged.sqfs"])
        s = json.loads(p.stdout)
        warnings = [line for line in p.stderr.splitlines() if "decoded and compressed again" in line]
        assert len(warnings) == 2, f"expected one warning per recoded shard: {p.stderr}"
        assert f"{d}/two.sqfs is gzip" in warnings[0] and f"{d}/three.sqfs is zstd with 64 KiB" in warnings[1], warnings
        assert s["recoded_inputs"] == 2 and s["recoded_files"] == files_in(f"{t}/two") + 2, s
        assert s["dedup_files"] >= 1 and s["dedup_bytes"] >= len(shared), f"shared-copy.bin stored again: {s}"
        assert s["blocks_compressed"] > 0, s
        info = run(["unsquashfs", "-s", f"{d}/merged.sqfs"]).stdout
        assert "Compression zstd" in info and "Block size 131072" in info, info
        with equals_whole_tree(d, t, "the merged, partly recoded shards"):
            pass


def test_output_settings_are_chosen():
    """-c and -b choose the output's settings, the first shard's included: with -c gzip the
    mksquashfs gzip shard is copied and the two zstd ones are recoded; with -c lz4 -b 256K every
    shard is. Either result equals one image of the whole tree and has the settings asked for."""
    need_root()
    with tempdir() as d:
        t, shards, shared = make_mixed_shards(d)
        for sub, args, recoded, header in (("gzip", ["-c", "gzip", "-l", "9"], ["one", "three"], ("gzip", 131072)),
                                           ("lz4", ["-c", "lz4", "-b", "256K"], ["one", "two", "three"],
                                            ("lz4", 262144))):
            out = f"{d}/{sub}"
            os.mkdir(out)
            p = run([SQAR, "merge", "--json", *args, *shards, f"{out}/merged.sqfs"])
            s = json.loads(p.stdout)
            warnings = [line for line in p.stderr.splitlines() if "decoded and compressed again" in line]
            assert [w.split(" is ")[0].split("warning: ")[1] for w in warnings] == [f"{d}/{n}.sqfs" for n in recoded], \
                p.stderr
            assert s["recoded_inputs"] == len(recoded), s
            assert ("two" in recoded) == (s["copied_bytes"] == 0), f"the gzip shard copied or not as expected: {s}"
            assert s["dedup_files"] >= 1 and s["dedup_bytes"] >= len(shared), f"shared-copy.bin stored again: {s}"
            info = run(["unsquashfs", "-s", f"{out}/merged.sqfs"]).stdout
            assert f"Compression {header[0]}" in info and f"Block size {header[1]}" in info, info
            with equals_whole_tree(out, t, f"the shards merged with {' '.join(args)}", header[1]):
                pass
            log(f"ok: merge {' '.join(args)}: {', '.join(recoded)} recoded, {s['copied_bytes']} bytes copied")
        expect_refused(["-c", "gzip", "-l", "13", *shards], f"{d}/bad.sqfs", "level", code=2)  # a usage error
        p = run([SQAR, "merge", "-c", "gzip", "-l", "4294967297", *shards, f"{d}/bad.sqfs"], check=False)
        assert p.returncode == 2 and "invalid level '4294967297'" in p.stderr, (p.returncode, p.stderr)  # not 1
        assert not os.path.exists(f"{d}/bad.sqfs")
        p = run([SQAR, "append", "-c", "gzip", shards[0], t], check=False)
        assert p.returncode == 2 and "recompressing the image is not supported" in p.stderr, p.stderr


def test_files_sharing_a_start_but_not_a_block_list_keep_their_content():
    """A crafted input whose two files have the same size and blocks_start but different block
    lists (a = [A0, A1]; b = [a hole, A0]): they do not share data, so merge and append must
    not give b a's content (and a manifest hash that vouches for it)."""
    need_tool("unsquashfs")
    from craftfs import Image
    with tempdir() as d:
        img = Image(block_size=4096)
        a = img.file(blocks=[b"\x11" * 4096, b"\x22" * 4096])
        b = img.file(blocks=[None, b"\x11" * 4096])
        root = img.dir({"a": a, "b": b})
        img.build(root)
        b.blocks_start = a.blocks_start  # b's A0 is a's first block
        with open(f"{d}/in.sqfs", "wb") as f:
            f.write(img.build(root))
        want = {n: run(["unsquashfs", "-cat", f"{d}/in.sqfs", n], text=False).stdout for n in ("a", "b")}
        assert want["b"] == b"\0" * 4096 + b"\x11" * 4096 and want["a"] != want["b"], "the crafted image is not as meant"
        os.makedirs(f"{d}/empty")
        run([SQAR, "create", "-q", "-b", "4K", f"{d}/empty", f"{d}/empty.sqfs"])
        merge(f"{d}/in.sqfs", f"{d}/empty.sqfs", f"{d}/merged.sqfs")
        run(["cp", f"{d}/in.sqfs", f"{d}/appended.sqfs"])
        run([SQAR, "append", "-q", f"{d}/appended.sqfs", f"{d}/empty"])
        for out in ("merged", "appended"):
            for n in ("a", "b"):
                got = run(["unsquashfs", "-cat", f"{d}/{out}.sqfs", n], text=False).stdout
                assert got == want[n], f"{out}: {n} has {len(got)} bytes of other content"
            run([SQAR, "verify", f"{d}/{out}.sqfs"])
        log("ok: files that share a start but not a block list keep their own content through merge and append")


def test_output_records_its_level():
    """Shards at one xz level give an output that records that level (the options block holds
    none). Shards at two levels give one that says its blocks are mixed: a later --reuse of it
    at another level then copies by content, as from an image without the record, where an
    image known to be all level 0 is refused as OLD of a level 6 build."""
    text = b"".join(b"%d host%d: request %d took %d ms\n" % (i, i % 7, i * 13, i % 997) for i in range(30000))
    with tempdir() as d:
        write(f"{d}/a/one.log", text)
        write(f"{d}/b/two.log", text[::-1])
        run([SQAR, "create", "-q", "-c", "xz", "-l", "0", f"{d}/a", f"{d}/a0.sqfs"])
        run([SQAR, "create", "-q", "-c", "xz", "-l", "0", f"{d}/b", f"{d}/b0.sqfs"])
        run([SQAR, "create", "-q", "-c", "xz", "-l", "6", f"{d}/b", f"{d}/b6.sqfs"])
        merge(f"{d}/a0.sqfs", f"{d}/b0.sqfs", f"{d}/same.sqfs")
        merge(f"{d}/a0.sqfs", f"{d}/b6.sqfs", f"{d}/mixed.sqfs")
        for name in ("same", "mixed"):
            assert json.loads(run([SQAR, "info", "--json", f"{d}/{name}.sqfs"]).stdout)["level"] == 0, name
            run([SQAR, "verify", f"{d}/{name}.sqfs"])
        run(["cp", "-a", f"{d}/b/two.log", f"{d}/a/"])
        reused = {}
        for name in ("same", "mixed"):
            p = run([SQAR, "create", "--json", "-c", "xz", "-l", "6", "--reuse", f"{d}/{name}.sqfs", f"{d}/a",
                     f"{d}/re-{name}.sqfs"])
            reused[name] = json.loads(p.stdout)["blocks_reused"]
            assert ("not reusing" in p.stderr) == (name == "same"), (name, p.stderr)
        assert reused["same"] == 0 and reused["mixed"] > 0, reused
        log(f"ok: merged shards record their xz level, or that it is mixed; blocks reused {reused}")


def test_xz_dictionary_is_declared_for_copied_blocks():
    """The kernel allocates the xz dictionary the options block declares and fails (EIO) on a
    block that needs more. A shard made with a smaller dictionary first (mksquashfs -Xdict-size
    25%) and one made with the block size after it: the output declares the larger one, and
    the copied blocks read back through the kernel. A shard declaring more than the block
    size, which no options block of the output could declare, is recoded with a warning."""
    need_root()
    if not kernel_supports("xz"):
        skip("this kernel's squashfs has no xz")
    with tempdir() as d:
        write(f"{d}/t/a/text", b"".join(b"small dictionary line %d\n" % i for i in range(60000)))
        write(f"{d}/t/b/data", pseudo_random(3 * BLOCK, 8) + b"repeat " * 90000)
        write(f"{d}/t/c/more", b"".join(b"declared too large %d\n" % i for i in range(50000)))
        mksquashfs(f"{d}/t", f"{d}/a.sqfs", "-comp", "xz", "-Xdict-size", "25%", "-e", "b", "c")
        run([SQAR, "create", "-q", "-c", "xz", "--exclude", "/a", "--exclude", "/c", f"{d}/t", f"{d}/b.sqfs"])
        mksquashfs(f"{d}/t", f"{d}/c.sqfs", "-comp", "xz", "-Xdict-size", "50%", "-e", "a", "b")
        with open(f"{d}/c.sqfs", "r+b") as f:  # the options block after the superblock: declare 256 KiB
            f.seek(96)
            assert f.read(6)[:2] == (8 | 0x8000).to_bytes(2, "little"), "mksquashfs wrote no xz options block"
            f.seek(98)
            f.write((256 << 10).to_bytes(4, "little"))
        os.makedirs(f"{d}/ab")
        s = json.loads(run([SQAR, "merge", "--json", f"{d}/a.sqfs", f"{d}/b.sqfs", f"{d}/ab/merged.sqfs"]).stdout)
        assert s["recoded_inputs"] == 0 and s["copied_bytes"] > 0, s
        info = run(["unsquashfs", "-s", f"{d}/ab/merged.sqfs"]).stdout
        assert "Dictionary size 131072" in info, info
        with kernel_mount(f"{d}/ab/merged.sqfs", f"{d}/ab/mnt") as mnt:
            compare_trees(f"{d}/t", mnt, "the kernel's mount of xz shards with two dictionary sizes", ignore=("c",))
        os.makedirs(f"{d}/ac")
        p = run([SQAR, "merge", "--json", f"{d}/a.sqfs", f"{d}/c.sqfs", f"{d}/ac/merged.sqfs"])
        s = json.loads(p.stdout)
        assert s["recoded_inputs"] == 1 and "256 KiB xz dictionary" in p.stderr, (s, p.stderr)
        with kernel_mount(f"{d}/ac/merged.sqfs", f"{d}/ac/mnt") as mnt:
            compare_trees(f"{d}/t", mnt, "the kernel's mount of a recoded xz shard", ignore=("b",))
        # The same when the first shard is recoded too (-c xz), so the output's header is its own.
        run([SQAR, "create", "-q", "--exclude", "/b", "--exclude", "/c", f"{d}/t", f"{d}/a-zstd.sqfs"])
        os.makedirs(f"{d}/zc")
        p = run([SQAR, "merge", "--json", "-c", "xz", f"{d}/a-zstd.sqfs", f"{d}/c.sqfs", f"{d}/zc/merged.sqfs"])
        s = json.loads(p.stdout)
        assert s["recoded_inputs"] == 2 and "256 KiB xz dictionary" in p.stderr, (s, p.stderr)
        with kernel_mount(f"{d}/zc/merged.sqfs", f"{d}/zc/mnt") as mnt:
            compare_trees(f"{d}/t", mnt, "the kernel's mount of xz from a zstd and an xz shard", ignore=("b",))


def test_progress_on_a_tty():
    """On a terminal merge draws a status line per phase; -q draws nothing and prints nothing."""
    with tempdir() as d:
        write(f"{d}/a/text", base64.b64encode(pseudo_random(12 << 20, 5)))
        write(f"{d}/b/small", b"small\n")
        run([SQAR, "create", "-q", "-c", "lz4", f"{d}/a", f"{d}/a.sqfs"])
        run([SQAR, "create", "-q", f"{d}/b", f"{d}/b.sqfs"])
        # script(1) gives sqar a terminal; xz on one thread takes seconds for 16 MiB.
        p = run(["script", "-qec", f"{SQAR} merge -j1 -c xz {d}/a.sqfs {d}/b.sqfs {d}/out.sqfs", "/dev/null"],
                check=False)
        assert p.returncode == 0, p.stdout
        drawn = [part.replace("\x1b[K", "") for part in re.split(r"[\r\n]", p.stdout)]
        assert any(t.startswith("new data: [") and "%" in t for t in drawn), f"no progress bar drawn: {p.stdout!r}"
        quiet = run([SQAR, "merge", "-q", "-f", f"{d}/b.sqfs", f"{d}/a.sqfs", f"{d}/out.sqfs"])
        assert quiet.stdout == "" and "warning" in quiet.stderr and "%" not in quiet.stderr, quiet.stderr
        log("ok: a progress bar on a terminal, none with -q")


def test_replaced_data_of_the_first_input_is_not_copied():
    """merge -r copied the first input's whole data region when none of its files kept their
    data (and from byte 0 to its first kept block otherwise): a 30 MB file replaced by a later
    input's came along, doubling OUT. OUT is now the size of one image of the result."""
    with tempdir() as d:
        write(f"{d}/O1/big", pseudo_random(30 << 20, 1))
        write(f"{d}/O1/zkeep", b"keep\n")
        write(f"{d}/O2/big", pseudo_random(30 << 20, 2))
        for name in ("O1", "O2"):
            run([SQAR, "create", "-q", f"{d}/{name}", f"{d}/{name}.sqfs"])
        run([SQAR, "merge", "-q", "-r", f"{d}/O1.sqfs", f"{d}/O2.sqfs", f"{d}/out.sqfs"])
        write(f"{d}/whole/big", pseudo_random(30 << 20, 2))
        write(f"{d}/whole/zkeep", b"keep\n")
        run([SQAR, "create", "-q", f"{d}/whole", f"{d}/whole.sqfs"])
        size, whole = os.path.getsize(f"{d}/out.sqfs"), os.path.getsize(f"{d}/whole.sqfs")
        assert size <= whole + 64 * 1024, (size, whole)
        run([SQAR, "verify", "-q", f"{d}/out.sqfs"])
        if kernel_supports("zstd"):
            with kernel_mount(f"{d}/out.sqfs", f"{d}/mnt") as m:
                assert open(f"{m}/big", "rb").read() == pseudo_random(30 << 20, 2)
                assert open(f"{m}/zkeep", "rb").read() == b"keep\n"
        # One image merged with itself: the second copy's data is all the first's.
        run([SQAR, "merge", "-q", "-r", f"{d}/O1.sqfs", f"{d}/O1.sqfs", f"{d}/self.sqfs"])
        assert os.path.getsize(f"{d}/self.sqfs") <= os.path.getsize(f"{d}/O1.sqfs") + 64 * 1024
        log(f"ok: merge -r writes {size} bytes where one image of the result is {whole}")


if __name__ == "__main__":
    main([test_shards_equal_whole, test_small_files_in_several_shards_are_stored_once, test_example_slurm_driver,
          test_conflicts_and_replace, test_damaged_shard,
          test_other_settings_are_recoded, test_output_settings_are_chosen,
          test_files_sharing_a_start_but_not_a_block_list_keep_their_content, test_output_records_its_level,
          test_xz_dictionary_is_declared_for_copied_blocks, test_progress_on_a_tty,
          test_replaced_data_of_the_first_input_is_not_copied])
