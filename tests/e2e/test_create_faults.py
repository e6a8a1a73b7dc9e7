#!/usr/bin/env python3
"""sqar create while the source changes under it: files that grow and shrink during the build, and
a file deleted between the scan and the read. Each build succeeds with an image that verifies
and a warning naming the changed file (test_create_live_tree.py checks the content stored for
each kind of change, and --strict); no temporary file is left, and sqar never changes the
source. (ENOSPC, unreadable files and SIGINT/SIGTERM
are in test_create_behaviour.py.)"""
import hashlib
import os
import subprocess
import threading
import time

from changing import run_changing
from sqartest import (SQAR, check_sanitizers, compare_trees, leftovers, log, main, pseudo_random, run, tempdir,
                      unsquashfs_extract, write)


def tree_hash(root, skip=()):
    """SHA-256 over every path, mode, size, mtime and content below root (except `skip`)."""
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(dirpath, name)
            if os.path.relpath(p, root) in skip:
                continue
            st = os.lstat(p)
            h.update(f"{p} {st.st_mode} {st.st_size} {st.st_mtime_ns}".encode())
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def create(src, img, *args):
    p = subprocess.run([SQAR, "create", "-q", *args, src, img], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    assert p.returncode >= 0, f"sqar create killed by signal {-p.returncode}: {p.stderr}"
    check_sanitizers(p.args, p.returncode, p.stderr)
    assert p.returncode in (0, 1), f"sqar create exited {p.returncode}: {p.stderr}"
    temps = leftovers(img)
    assert not temps, f"temporary file left behind: {temps}"
    if p.returncode != 0:
        assert not os.path.exists(img), "a failed build left an image"
    return p


def test_file_deleted_between_scan_and_read():
    """A large file deleted after the scan saw it and before the data pass reads it (-j1,
    --no-dedup: read on its own): left out with a warning naming it, exit 0, the source
    untouched. The deletion is made when the data pass opens the file before it (a/first),
    with sqar stopped (changing.run_changing); a try where sqar had already opened the victim
    does not count."""
    with tempdir() as d:
        for attempt in range(1, 4):
            src, img = f"{d}/src{attempt}", f"{d}/img{attempt}"
            write(f"{src}/a/first", b"the first file of the data pass\n")
            for i in range(2000):  # read between the trigger and the victim
                write(f"{src}/m/f{i}", pseudo_random(300 + i % 500, 100 + i))
            write(f"{src}/z/victim", pseudo_random(8 << 20, 1))
            write(f"{src}/z/small", b"stays")
            before = tree_hash(src, skip=("z/victim",))
            p, valid = run_changing([SQAR, "create", "-q", "-j1", "--no-dedup", src, img], src,
                                    lambda: os.unlink(f"{src}/z/victim"), changed=("victim",))
            if valid:
                break
            log(f"try {attempt}: sqar had opened the victim before it stopped; trying again")
        else:
            raise AssertionError("in 3 tries sqar always reached the victim before it could be stopped")
        check_sanitizers(p.args, p.returncode, p.stderr)
        assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
        assert not leftovers(img), os.listdir(d)
        assert tree_hash(src) == before, "sqar changed the source"
        run([SQAR, "verify", "-q", img])
        assert f"warning: {src}/z/victim: vanished before it was read; left out" in p.stderr, \
            f"the warning does not name path and cause: {p.stderr!r}"
        listed = run([SQAR, "list", img]).stdout.split()
        assert "z/victim" not in listed and "z/small" in listed, f"the image lists {listed}"
        log(f"ok: deleted file left out with a warning: {p.stderr.strip()}")


def mutate(path, stop, rng_seed, resize=True):
    """Appends to and truncates path in a loop until stop is set; without resize, rewrites
    1 MiB pieces in place instead (same size: what a reader cannot tell from a stable file)."""
    chunk = pseudo_random(1 << 20, rng_seed)
    n = 0
    while not stop.is_set():
        with open(path, "r+b") as f:
            if not resize:
                size = os.fstat(f.fileno()).st_size
                f.seek((n * 7919 << 10) % max(1, size - len(chunk)))
                f.write(chunk)
            elif n % 3 == 2:
                f.truncate(max(0, os.fstat(f.fileno()).st_size // 2))
            else:
                f.seek(0, os.SEEK_END)
                f.write(chunk)
        n += 1
        time.sleep(0.001)


def judge_with_unsquashfs(img, out, src, what):
    """A build that succeeded must give an image unsquashfs reads: the untouched files exact."""
    unsquashfs_extract(img, out)
    compare_trees(f"{src}/stable", f"{out}/stable", f"unsquashfs of {what} (stable part)")


def test_files_growing_and_shrinking_during_the_build():
    with tempdir() as d:
        src = f"{d}/src"
        for i in range(40):
            write(f"{src}/stable/f{i}", pseudo_random(i * 10007 % 300000, i))
        write(f"{src}/growing.log", pseudo_random(24 << 20, 7))
        write(f"{src}/shrinking.bin", pseudo_random((24 << 20) + 4096, 8))  # another size: no hashing pass
        before = tree_hash(src, skip=("growing.log", "shrinking.bin"))
        outcomes = []
        # Files rewritten in place keep their size (the first two attempts); files that grow and
        # shrink (the others). Every build must give an image.
        for attempt, resize in enumerate((False, False, True, True, True)):
            img = f"{d}/img{attempt}"
            stop = threading.Event()
            threads = [threading.Thread(target=mutate, args=(f"{src}/{name}", stop, seed, resize))
                       for seed, name in enumerate(("growing.log", "shrinking.bin"))]
            for t in threads:
                t.start()
            try:
                p = create(src, img, "-j", "4")
            finally:
                stop.set()
                for t in threads:
                    t.join()
            assert p.returncode == 0, f"a live tree failed the build: {p.stderr}"
            # Whatever sizes the changing files were caught at, the image is self-consistent
            # and the files nobody touched are exact, for sqar and for unsquashfs.
            run([SQAR, "verify", "-q", img])
            out = f"{d}/out{attempt}"
            run([SQAR, "extract", "-C", out, img])
            compare_trees(f"{src}/stable", f"{out}/stable", f"image {attempt} (stable part)")
            judge_with_unsquashfs(img, f"{d}/unsquashfs{attempt}", src, f"image {attempt}")
            if not resize:
                for name in ("growing.log", "shrinking.bin"):
                    assert os.path.getsize(f"{d}/unsquashfs{attempt}/{name}") == os.path.getsize(f"{src}/{name}"), \
                        f"image {attempt}: {name} changed size although it was only rewritten in place"
            warned = [n for n in ("growing.log", "shrinking.bin") if f"warning: {src}/{n}:" in p.stderr]
            outcomes.append(f"built, warned about {warned}")
            assert tree_hash(src, skip=("growing.log", "shrinking.bin")) == before, "sqar changed the source"
        log("ok: " + "; ".join(outcomes))


if __name__ == "__main__":
    main([test_file_deleted_between_scan_and_read, test_files_growing_and_shrinking_during_the_build])
