#!/usr/bin/env python3
"""`sqar create --reuse OLD`: a rebuild copies OLD's compressed blocks of content it already
holds instead of compressing them again, and the image is byte-identical to a fresh build.

The tree is rebuilt after a log rotation (every log moves one name on, the oldest goes, a new one
comes), an append (a changed file of the same name) and a new file; the fresh and the reusing
build must give the same bytes, and the stats must show that exactly the unchanged content's
blocks were copied and never compressed. A damaged OLD must not damage the new image: the
damaged block is compressed instead, with a warning. OLD with other settings or without a
manifest is reported and not used; a missing OLD is an error that leaves nothing behind.
unsquashfs reads the reusing build back against the tree."""
import json
import os
import shutil

from sqartest import (SQAR, compare_trees, log, main, make_full_tree, mksquashfs, need_tool, pseudo_random, run,
                      sqar_create, tempdir, unsquashfs_extract, write)

BLOCK = 16384
ENV = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
CODEC = ["-c", "zstd", "-l", "15", "-b", "16K"]


def log_text(n, seed):
    """Compressible text, different for each seed."""
    lines, size, i = [], 0, 0
    while size < n:
        line = b"%d host%d service[%d]: request %d took %d ms\n" % (seed, i % 7, seed * 31 + i, i * seed, i % 997)
        lines.append(line)
        size += len(line)
        i += 1
    return b"".join(lines)[:n]


def build_tree(src):
    # Rotated logs: one of them is larger than a read unit (1 MiB), so it is hashed in a pass of
    # its own before its blocks are cut; the others are read and hashed in one go.
    sizes = [1_300_000, 200_000, 150_000, 120_000]
    for i, n in enumerate(sizes):
        write(f"{src}/logs/app.log.{i}", log_text(n, 100 + i))
    write(f"{src}/data/growing.csv", log_text(90_000, 7))
    write(f"{src}/data/noise.bin", pseudo_random(5 * BLOCK + 3, 9))  # stored uncompressed
    write(f"{src}/data/copy-of-log", log_text(150_000, 102))        # a duplicate of app.log.2
    return make_full_tree(f"{src}/full", block=BLOCK)


def rotate(src):
    os.remove(f"{src}/logs/app.log.3")
    for i in (2, 1, 0):
        os.rename(f"{src}/logs/app.log.{i}", f"{src}/logs/app.log.{i + 1}")
    write(f"{src}/logs/app.log.0", log_text(60_000, 200))              # new content
    with open(f"{src}/data/growing.csv", "ab") as f:                    # same name, new content
        f.write(log_text(20_000, 8))
    write(f"{src}/data/new.txt", log_text(40_000, 300))
    # Times before SOURCE_DATE_EPOCH, so the image keeps them and the read-back compares them.
    for d in (f"{src}/logs", f"{src}/data"):
        for name in os.listdir(d):
            os.utime(f"{d}/{name}", (1_650_000_000, 1_650_000_000))
        os.utime(d, (1_650_000_000, 1_650_000_000))


def full_blocks(path):
    return os.path.getsize(path) // BLOCK


def test_rebuild_after_rotation_copies_unchanged_blocks_and_is_identical():
    with tempdir() as d:
        src = f"{d}/src"
        build_tree(src)
        sqar_create(src, f"{d}/old.sqfs", *CODEC, env=ENV)
        rotate(src)
        fresh = sqar_create(src, f"{d}/fresh.sqfs", *CODEC, env=ENV)
        reused = sqar_create(src, f"{d}/reused.sqfs", *CODEC, "--reuse", f"{d}/old.sqfs", env=ENV)
        assert open(f"{d}/fresh.sqfs", "rb").read() == open(f"{d}/reused.sqfs", "rb").read(), \
            "the build with --reuse differs from a fresh build"
        log("ok: the reusing build is byte-identical to a fresh one")
        # Without -c/-l/-b the build takes OLD's settings, so it can copy OLD's blocks.
        implicit = sqar_create(src, f"{d}/implicit.sqfs", "--reuse", f"{d}/old.sqfs", env=ENV)
        assert (implicit["compressor"], implicit["level"], implicit["block_size"]) == ("zstd", 15, BLOCK), implicit
        assert open(f"{d}/implicit.sqfs", "rb").read() == open(f"{d}/fresh.sqfs", "rb").read()
        os.remove(f"{d}/implicit.sqfs")
        log("ok: --reuse OLD alone builds with OLD's compressor, level and block size")
        # Each setting left open is OLD's: -b alone keeps OLD's compressor and level (no reuse
        # then, with a warning), as -l alone keeps its block size.
        other_block = sqar_create(src, f"{d}/b.sqfs", "-b", "64K", "--reuse", f"{d}/old.sqfs", env=ENV)
        assert (other_block["compressor"], other_block["level"], other_block["block_size"]) == ("zstd", 15, 65536), \
            other_block
        other_level = sqar_create(src, f"{d}/l.sqfs", "-l", "3", "--reuse", f"{d}/old.sqfs", env=ENV)
        assert (other_level["compressor"], other_level["level"], other_level["block_size"]) == ("zstd", 3, BLOCK), \
            other_level
        log("ok: -b or -l alone with --reuse keeps OLD's other settings")

        # What OLD held unchanged: the three rotated logs (now .1 .. .3) and the full tree's files
        # with full blocks; the random ones are stored raw, which takes no codec time anyway.
        # sparse.img has 3 blocks with data (3 and 4: the run in the middle; 10: "end").
        compressible = [f"{src}/logs/app.log.{i}" for i in (1, 2, 3)] + [f"{src}/full/text.log"]
        incompressible = [f"{src}/data/noise.bin"] + [f"{src}/full/{p}" for p in (
            "exact-blocks.bin", "random.bin", "dup/tail-a", "dup/tail-b")]
        copied_compressible = sum(full_blocks(p) for p in compressible) + 3
        expected = copied_compressible + sum(full_blocks(p) for p in incompressible)
        assert reused["blocks_reused"] == expected, \
            f"{reused['blocks_reused']} blocks copied, expected {expected} (the unchanged content's full blocks)"
        assert reused["reuse_mismatches"] == 0, reused
        assert reused["reused_bytes"] >= expected * BLOCK, reused  # + fragment blocks, if any
        # The codec saw those blocks' bytes fewer, plus those of any fragment block OLD had too.
        changed_bytes = fresh["codec_input_bytes"] - reused["codec_input_bytes"]
        assert 0 <= changed_bytes - copied_compressible * BLOCK <= reused["reused_bytes"] - expected * BLOCK, \
            f"the codec saw {changed_bytes} fewer bytes, expected {copied_compressible * BLOCK} (+ fragments)"
        log(f"ok: {expected} blocks copied from OLD, none of them compressed "
            f"(codec input {fresh['codec_input_bytes']} -> {reused['codec_input_bytes']} bytes)")

        unsquashfs_extract(f"{d}/reused.sqfs", f"{d}/out")
        compare_trees(src, f"{d}/out", "unsquashfs of the reusing build")
        run([SQAR, "verify", f"{d}/reused.sqfs"])
        log("ok: unsquashfs reads it back like the tree; sqar verify checks every file's hash")

        # Any thread count, and with dedup off (files are then hashed only to look them up).
        for extra in (["-j", "1"], ["-j", "4"], ["--no-dedup"], ["--verify-dedup"]):
            plain = sqar_create(src, f"{d}/plain.sqfs", *CODEC, *extra, env=ENV)
            again = sqar_create(src, f"{d}/again.sqfs", *CODEC, *extra, "--reuse", f"{d}/old.sqfs", env=ENV)
            assert open(f"{d}/plain.sqfs", "rb").read() == open(f"{d}/again.sqfs", "rb").read(), \
                f"with {extra}, --reuse changed the image"
            assert again["blocks_reused"] >= expected and plain["blocks_reused"] == 0, (extra, again)
            os.remove(f"{d}/plain.sqfs")
            os.remove(f"{d}/again.sqfs")
        log("ok: the same with -j1, -j4, --no-dedup and --verify-dedup")

        # OLD may be the image being replaced.
        shutil.copy(f"{d}/old.sqfs", f"{d}/same.sqfs")
        again = sqar_create(src, f"{d}/same.sqfs", *CODEC, "--force", "--reuse", f"{d}/same.sqfs", env=ENV)
        assert again["blocks_reused"] == expected, again
        assert open(f"{d}/same.sqfs", "rb").read() == open(f"{d}/fresh.sqfs", "rb").read()
        log("ok: --force --reuse IMAGE rebuilds IMAGE in place from itself")


def test_small_file_tree_reuses_fragment_blocks_after_an_edit():
    # A source tree: 800 small files that all live in fragment blocks (16K blocks, ~60 of
    # them). One file early in the image order grows, so the packing of the blocks after it
    # shifts; greedy packing falls back into step, and from there on the blocks are OLD's.
    with tempdir() as d:
        src = f"{d}/src"
        for i in range(800):
            write(f"{src}/port{i // 20:02d}/file{i:03d}.c", log_text(200 + (i * 7919) % 2500, i))
        sqar_create(src, f"{d}/old.sqfs", *CODEC, env=ENV)
        with open(f"{src}/port01/file025.c", "ab") as f:
            f.write(b"/* one more line */\n")
        os.utime(f"{src}/port01/file025.c", (1_650_000_000, 1_650_000_000))
        fresh = sqar_create(src, f"{d}/fresh.sqfs", *CODEC, env=ENV)
        reused = sqar_create(src, f"{d}/reused.sqfs", *CODEC, "--reuse", f"{d}/old.sqfs", env=ENV)
        assert open(f"{d}/fresh.sqfs", "rb").read() == open(f"{d}/reused.sqfs", "rb").read(), \
            "the build with --reuse differs from a fresh build"
        frags = fresh["fragments"]
        assert reused["fragments_reused"] >= frags - 4 and reused["blocks_reused"] == 0, \
            f"{reused['fragments_reused']} of {frags} fragment blocks copied"
        assert reused["reuse_mismatches"] == 0, reused
        assert reused["codec_input_bytes"] < fresh["codec_input_bytes"] / 4, (fresh, reused)
        log(f"ok: {reused['fragments_reused']} of {frags} fragment blocks copied after an edit, "
            f"image identical (codec input {fresh['codec_input_bytes']} -> {reused['codec_input_bytes']} bytes)")


def test_every_compressor_takes_olds_settings():
    # With only --reuse, the build takes OLD's compressor, level, extras and block size, so an
    # unchanged tree is copied whole: no block or fragment block is compressed.
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/a.log", log_text(5 * BLOCK + 100, 1))
        write(f"{src}/b.txt", log_text(3000, 2))
        # gzip 12, xz 0 and lz4 4 are levels the options block cannot hold: OLD's settings
        # trailer gives them.
        for opts in (["-c", "gzip", "-l", "6"], ["-c", "xz", "-b", "32K"], ["-c", "lz4", "-l", "9"],
                     ["-c", "lzo"], ["-c", "zstd", "-l", "19", "-b", "4K"], ["-c", "gzip", "-l", "12"],
                     ["-c", "xz", "-l", "0"], ["-c", "lz4", "-l", "4"]):
            old = sqar_create(src, f"{d}/old.sqfs", *opts, "--force", env=ENV)
            new = sqar_create(src, f"{d}/new.sqfs", "--force", "--reuse", f"{d}/old.sqfs", env=ENV)
            assert (new["compressor"], new["block_size"]) == (old["compressor"], old["block_size"]), (opts, new)
            assert new["blocks_compressed"] == 0 and new["fragments_reused"] == old["fragments"], (opts, new)
            assert new["blocks_reused"] == old["blocks_compressed"] - old["fragments"], (opts, old, new)
            assert open(f"{d}/old.sqfs", "rb").read() == open(f"{d}/new.sqfs", "rb").read(), opts
            log(f"ok: {' '.join(opts)}: rebuilt from OLD alone, nothing compressed, same image")


def test_old_at_another_level_the_options_block_cannot_tell_is_not_reused():
    # gzip 12 is stored as 9 in the options block, and xz and lz4 store no level: only OLD's
    # settings trailer tells a build at another level that OLD's blocks are not the ones it
    # would write. Copying them would make the image depend on OLD.
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/a.log", log_text(5 * BLOCK + 100, 1))
        write(f"{src}/b.txt", log_text(3000, 2))
        for old_opts, new_opts, why in ((["-c", "gzip", "-l", "12"], ["-c", "gzip", "-l", "9"], "gzip level 12"),
                                        (["-c", "xz", "-l", "0"], ["-c", "xz", "-l", "6"], "xz level 0"),
                                        (["-c", "lz4", "-l", "4"], ["-c", "lz4", "-l", "9"], "lz4 level 4")):
            sqar_create(src, f"{d}/old.sqfs", *old_opts, "--force", env=ENV)
            sqar_create(src, f"{d}/fresh.sqfs", *new_opts, "--force", env=ENV)
            p = run([SQAR, "create", "--json", "--force", *new_opts, "--reuse", f"{d}/old.sqfs", src, f"{d}/new.sqfs"],
                    env=ENV)
            stats = json.loads(p.stdout)
            assert stats["blocks_reused"] == 0 and stats["fragments_reused"] == 0, (old_opts, stats)
            assert "not reusing" in p.stderr and why in p.stderr, (old_opts, p.stderr)
            assert open(f"{d}/fresh.sqfs", "rb").read() == open(f"{d}/new.sqfs", "rb").read(), old_opts
            log(f"ok: {' '.join(new_opts)} --reuse a {why} image: nothing copied, the fresh build's bytes")


def test_old_of_mixed_or_unknown_levels_marks_the_image_mixed():
    # An OLD whose blocks are of several levels (append -l) or of a level nothing records (xz
    # with --no-manifest) is still reused, but the image is then no fresh build: its settings
    # trailer says mixed (info shows it), so a rebuild from it is not taken for one either.
    def compressor_line(img):
        return next(line for line in run([SQAR, "info", img]).stdout.splitlines() if line.startswith("Compressor:"))

    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/one/a.log", log_text(5 * BLOCK + 100, 1))
        write(f"{src}/two/b.log", log_text(4 * BLOCK + 7, 2))
        sqar_create(f"{src}/one", f"{d}/old.sqfs", "-c", "zstd", "-l", "3", "-b", "16K", env=ENV)
        assert "other levels" not in compressor_line(f"{d}/old.sqfs")
        run([SQAR, "append", "-q", "-l", "19", f"{d}/old.sqfs", f"{src}/two/b.log"], env=ENV)
        assert "some blocks at other levels" in compressor_line(f"{d}/old.sqfs"), compressor_line(f"{d}/old.sqfs")
        shutil.copy(f"{src}/two/b.log", f"{src}/one/b.log")
        reused = sqar_create(f"{src}/one", f"{d}/new.sqfs", "--reuse", f"{d}/old.sqfs", env=ENV)
        assert reused["blocks_reused"] > 0, reused
        assert "some blocks at other levels" in compressor_line(f"{d}/new.sqfs"), compressor_line(f"{d}/new.sqfs")
        log("ok: --reuse of an append -l image copies its blocks and marks the image as of mixed levels")

        sqar_create(src, f"{d}/bare.sqfs", "-c", "xz", "-l", "1", "-b", "16K", "--no-manifest", env=ENV)
        p = run([SQAR, "create", "--json", "--reuse", f"{d}/bare.sqfs", src, f"{d}/from-bare.sqfs"], env=ENV)
        assert "does not record its xz level" in p.stderr and "using level 6" in p.stderr, p.stderr
        assert json.loads(p.stdout)["blocks_reused"] > 0, p.stdout
        assert "some blocks at other levels" in compressor_line(f"{d}/from-bare.sqfs")
        # Nothing copied, nothing mixed: a fresh build's bytes.
        sqar_create(src, f"{d}/fresh.sqfs", "-c", "xz", "-b", "16K", env=ENV)
        sqar_create(src, f"{d}/again.sqfs", "--reuse", f"{d}/fresh.sqfs", env=ENV)
        assert open(f"{d}/fresh.sqfs", "rb").read() == open(f"{d}/again.sqfs", "rb").read()
        log("ok: --reuse of an xz --no-manifest image names the level it takes and marks the image mixed")


def test_damaged_old_blocks_are_compressed_instead():
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/a.log", log_text(10 * BLOCK, 1))
        write(f"{src}/b.log", log_text(6 * BLOCK + 100, 2))
        sqar_create(src, f"{d}/old.sqfs", *CODEC, env=ENV)
        fresh = open(f"{d}/old.sqfs", "rb").read()
        # Data starts right after the 96-byte superblock (and a small options block): bytes 300+
        # are inside a.log's first compressed block.
        damaged = bytearray(fresh)
        for i in range(300, 340):
            damaged[i] ^= 0x5A
        open(f"{d}/damaged.sqfs", "wb").write(damaged)
        p = run([SQAR, "create", "--json", *CODEC, "--reuse", f"{d}/damaged.sqfs", src, f"{d}/new.sqfs"], env=ENV)
        stats = json.loads(p.stdout)
        assert open(f"{d}/new.sqfs", "rb").read() == fresh, "a damaged OLD changed the new image"
        assert stats["reuse_mismatches"] >= 1 and stats["blocks_reused"] == 16 - stats["reuse_mismatches"], stats
        assert "damaged.sqfs" in p.stderr and "did not decode" in p.stderr, p.stderr
        log(f"ok: {stats['reuse_mismatches']} damaged block(s) compressed again, warned: {p.stderr.strip()}")


def test_unusable_or_missing_old():
    with tempdir() as d:
        src = f"{d}/src"
        write(f"{src}/a.log", log_text(4 * BLOCK, 1))
        sqar_create(src, f"{d}/old.sqfs", *CODEC, env=ENV)
        sqar_create(src, f"{d}/bare.sqfs", *CODEC, "--no-manifest", env=ENV)
        cases = [
            (["-c", "gzip", "-b", "16K"], "old.sqfs", "this build uses gzip"),
            (["-c", "zstd", "-l", "3", "-b", "16K"], "old.sqfs", "zstd level 15"),
            (["-c", "zstd", "-l", "15", "-b", "32K"], "old.sqfs", "32 KiB blocks"),
            (CODEC, "bad-manifest.sqfs", "damaged"),
        ]
        # A damaged trailer: one byte of its payload (after the 40-byte header) flipped.
        raw = bytearray(open(f"{d}/old.sqfs", "rb").read())
        trailer = (int.from_bytes(raw[40:48], "little") + 4095) // 4096 * 4096
        raw[trailer + 40] ^= 0xFF
        open(f"{d}/bad-manifest.sqfs", "wb").write(raw)
        for opts, old, why in cases:
            p = run([SQAR, "create", "--json", *opts, "--reuse", f"{d}/{old}", src, f"{d}/new.sqfs"])
            stats = json.loads(p.stdout)
            assert stats["blocks_reused"] == 0, stats
            assert "not reusing" in p.stderr and why in p.stderr, f"{opts}: {p.stderr}"
            os.remove(f"{d}/new.sqfs")
            log(f"ok: {' '.join(opts)} with {old}: {p.stderr.strip()}")
        # A missing OLD gives a fresh build with a note (test_create_cli_errors.py has the
        # nightly case); with --reuse-strict it is an error that leaves nothing behind.
        p = run([SQAR, "create", *CODEC, "--reuse-strict", "--reuse", f"{d}/missing.sqfs", src, f"{d}/new.sqfs"],
                check=False)
        assert p.returncode != 0 and "--reuse" in p.stderr and "missing.sqfs" in p.stderr, p.stderr
        assert sorted(os.listdir(d)) == ["bad-manifest.sqfs", "bare.sqfs", "old.sqfs", "src"], os.listdir(d)
        log(f"ok: with --reuse-strict a missing OLD is an error that leaves nothing behind: {p.stderr.strip()}")
        p = run([SQAR, "create", "-q", *CODEC, "--reuse", f"{d}/missing.sqfs", src, f"{d}/new.sqfs"])
        assert "note: --reuse:" in p.stderr and "missing.sqfs" in p.stderr, p.stderr
        run([SQAR, "verify", f"{d}/new.sqfs"])
        log(f"ok: without it the build goes on: {p.stderr.strip()}")


def test_old_without_manifest_is_hashed_by_decoding():
    # sqar --no-manifest and mksquashfs images have no hashes: OLD's files are decoded and
    # hashed when it is indexed. sqar's own OLD gives the fresh build's image exactly; one made
    # by mksquashfs gives a valid image with its blocks (unsquashfs reads it back).
    with tempdir() as d:
        src = f"{d}/src"
        build_tree(src)
        sqar_create(src, f"{d}/bare.sqfs", *CODEC, "--no-manifest", env=ENV)
        rotate(src)
        fresh = sqar_create(src, f"{d}/fresh.sqfs", *CODEC, env=ENV)
        reused = sqar_create(src, f"{d}/reused.sqfs", *CODEC, "--reuse", f"{d}/bare.sqfs", env=ENV)
        assert open(f"{d}/fresh.sqfs", "rb").read() == open(f"{d}/reused.sqfs", "rb").read()
        assert reused["blocks_reused"] > 0 and reused["reuse_mismatches"] == 0, reused
        log(f"ok: --no-manifest OLD: {reused['blocks_reused']} blocks copied, image identical")
        need_tool("mksquashfs")
        mksquashfs(src, f"{d}/mk.sqfs", "-comp", "zstd", "-Xcompression-level", "15", "-b", "16K")
        with open(f"{src}/logs/app.log.0", "ab") as f:
            f.write(log_text(5000, 400))
        os.utime(f"{src}/logs/app.log.0", (1_650_000_000, 1_650_000_000))
        from_mk = sqar_create(src, f"{d}/from-mk.sqfs", *CODEC, "--reuse", f"{d}/mk.sqfs", env=ENV)
        assert from_mk["blocks_reused"] > 0 and from_mk["reuse_mismatches"] == 0, from_mk
        unsquashfs_extract(f"{d}/from-mk.sqfs", f"{d}/out")
        compare_trees(src, f"{d}/out", "unsquashfs of a build reusing a mksquashfs image")
        log(f"ok: mksquashfs OLD: {from_mk['blocks_reused']} blocks and {from_mk['fragments_reused']} fragment "
            "blocks copied; unsquashfs reads the result back like the tree")


if __name__ == "__main__":
    main([test_rebuild_after_rotation_copies_unchanged_blocks_and_is_identical,
          test_small_file_tree_reuses_fragment_blocks_after_an_edit,
          test_every_compressor_takes_olds_settings,
          test_old_at_another_level_the_options_block_cannot_tell_is_not_reused,
          test_old_of_mixed_or_unknown_levels_marks_the_image_mixed,
          test_damaged_old_blocks_are_compressed_instead,
          test_unusable_or_missing_old,
          test_old_without_manifest_is_hashed_by_decoding])
