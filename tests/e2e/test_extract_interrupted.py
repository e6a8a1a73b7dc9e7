#!/usr/bin/env python3
"""`sqar extract` interrupted by SIGINT, SIGTERM or SIGHUP at a known point: sqar is stopped
(SIGSTOP) when inotify sees it create a chosen entry in the target, sent the signal, and let go
on (SIGCONT). It must begin no entry after the signal, remove the file it was writing, give
every directory it made the image's mode and mtime, name in one line how many entries it left
out, and end by the signal itself, as tar's callers expect of an interrupted command. Run
again with --skip-old-files, it finishes the tree.
`extract --tar ARCHIVE` interrupted leaves no archive and no temporary file.

Each entry left in the target is compared with the source it was packed from (content, mode,
owner, mtime, xattrs); the count in the message must be the source's entries less those in the
target. A try where sqar had finished writing the chosen file before it stopped proves nothing
about the file being written, and is made again."""
import os
import re
import signal
import subprocess
import time

from changing import IN_ISDIR, Inotify, all_stopped, until_valid
from clitest import sqar_create_image
from sqartest import (AS_NOBODY, SQAR, check_sanitizers, compare_trees, dir_without_o_tmpfile, image_in_progress, leftovers, log,
                      main, make_full_tree, need_root, run, snapshot, tempdir, write)

IN_CREATE = 0x100
BIG = "big.log"
BIG_SIZE = 48 << 20  # xz-decoded at ~100-200 MB/s: tenths of a second to stop inside it


def make_source(root):
    """make_full_tree (every entry type, hard links, xattrs, holes) beside 30 directories of
    small files with their own modes and times, and one big compressible file at the top."""

    def extra(r):
        for i in range(30):
            for j in range(20):
                write(f"{r}/dirs/d{i:02d}/f{j:02d}", b"file %d of directory %d\n" % (j, i) * (50 + j))
            os.chmod(f"{r}/dirs/d{i:02d}", 0o750 if i % 2 else 0o705)
        line = b"".join(b"%08x request served in %d ms for client %d\n" % (i * 2654435761 % 2**32, i % 997, i % 61)
                        for i in range(4096))
        with open(f"{r}/{BIG}", "wb") as f:
            for _ in range(BIG_SIZE // len(line)):
                f.write(line)

    return make_full_tree(root, extra=extra)


def interrupt_at(cmd, out, trigger, signals, preexec_fn=None):
    """Runs cmd (an extract into the existing empty directory out); when it creates `trigger`
    (a name in out; None: any first entry) stops it, sends each of `signals` and continues it.
    Returns the finished process (stderr as text)."""
    ino = Inotify()
    ino.watch(out, IN_CREATE)
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
    fired = ended = False
    p.trigger_size = None  # the size of trigger while sqar was stopped
    try:
        while not fired and not ended:
            ended = p.poll() is not None  # its last events may still be queued
            fired = any(trigger is None or (name == trigger and not mask & IN_ISDIR)
                        for _wd, mask, name in ino.events(0.05))
        if fired and not ended:  # (a process reaped already has no pid of its own to signal)
            os.kill(p.pid, signal.SIGSTOP)
            while not all_stopped(p.pid):
                pass
            if trigger is not None and os.path.lexists(f"{out}/{trigger}"):
                p.trigger_size = os.lstat(f"{out}/{trigger}").st_size
            for sig in signals:
                os.kill(p.pid, sig)
            os.kill(p.pid, signal.SIGCONT)
        _, stderr = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        ino.close()
    assert fired, f"sqar extract never created {trigger or 'anything'} in {out}: {stderr}"
    assert not ended, f"sqar extract ended before it could be stopped at {trigger or 'its first entry'}: {stderr}"
    check_sanitizers(cmd, p.returncode, stderr)
    p.stderr = stderr
    return p


def check_what_is_left(src_snap, out, p, sig, what):
    """The stopped extraction's promises; returns the number of entries left out."""
    assert p.returncode == -sig, f"{what}: exit status {p.returncode}, not killed by {signal.Signals(sig).name}: " \
                                 f"{p.stderr}"
    lines = [l for l in p.stderr.splitlines() if "extraction stopped" in l]
    assert len(lines) == 1, f"{what}: not one 'extraction stopped' line: {p.stderr}"
    m = re.search(r"extraction stopped: (\d+) entr(?:y was|ies were) not extracted; the directories made have "
                  r"their modes and times$", lines[0])
    assert m, f"{what}: {lines[0]}"
    assert "could not be extracted" not in p.stderr, f"{what}: {p.stderr}"
    left_out = int(m.group(1))
    got = snapshot(out)
    problems = []
    for rel, e in got.items():
        want = src_snap.get(rel)
        if want is None:
            problems.append(f"{rel!r} is not in the source")
            continue
        # A directory's link count follows its subdirectories, and a hard link group is whole
        # only when every name was made: both may be short after a stop.
        for key in sorted(set(want) | set(e)):
            if key in ("nlink", "links"):
                continue
            if want.get(key) != e.get(key):
                problems.append(f"{rel!r}: {key} {want.get(key)!r} != {e.get(key)!r}")
    assert not problems, f"{what}: {len(problems)} entries differ from the source:\n" + "\n".join(problems[:20])
    assert left_out == len(src_snap) - len(got), \
        f"{what}: the message says {left_out} entries were not extracted; {len(src_snap) - len(got)} are missing"
    assert left_out > 0, f"{what}: nothing was left out, so nothing was interrupted"
    log(f"ok: {what}: {len(got)} entries as in the image, {left_out} left out: {lines[0].split(': ', 2)[-1]}")
    return left_out


def resume(src, img, out, what):
    """Running the stopped extraction again with --skip-old-files finishes it: the tree is the
    source's, and a file the user changed meanwhile is kept as it is, as tar --skip-old-files
    keeps it. Without the option, the entries in the way are refused in one line that names it."""
    files = sorted(rel for rel, e in snapshot(out).items() if e["type"] == 0o100000 and e["nlink"] == 1)
    assert files, f"{what}: no file was extracted before the stop"
    mine = os.path.join(out, files[0])
    os.chmod(mine, 0o644)
    write(mine, b"the user's own version\n")
    p = run([SQAR, "extract", "--skip-old-files", img, "-C", out])
    assert f"warning: {img}: {files[0]}: kept, but it has 23 bytes where the image has" in p.stderr, p.stderr
    compare_trees(src, out, f"{what}, then extract --skip-old-files", ignore=(files[0],))
    assert open(mine, "rb").read() == b"the user's own version\n", f"{files[0]} was replaced"
    p = run([SQAR, "extract", img, "-C", out], check=False)
    assert p.returncode == 1 and "--skip-old-files to keep them" in p.stderr, (p.returncode, p.stderr)


def test_interrupted_extract_finishes_its_directories():
    with tempdir() as d:
        src = make_source(f"{d}/src")
        src_snap = snapshot(src)
        img = f"{d}/img.sqfs"
        sqar_create_image(src, img, "-c", "xz")

        # While the first directories are made: almost everything is left out.
        out = f"{d}/out-first"
        os.makedirs(out)
        p = interrupt_at([SQAR, "extract", "-j", "1", img, "-C", out], out, None, [signal.SIGINT])
        check_what_is_left(src_snap, out, p, signal.SIGINT, "SIGINT at the first entry, -j1")

        # Inside the big file, which is removed. At -j1 every directory exists by then (they are
        # made first), so each one's mode and mtime are checked; at -j2 the file is written in
        # ranges by both threads.
        for jobs, sig in ((1, signal.SIGTERM), (2, signal.SIGINT), (2, signal.SIGHUP)):
            def inside_big(n, jobs=jobs, sig=sig):
                out = f"{d}/out-j{jobs}-{sig}-{n}"
                os.makedirs(out)
                p = interrupt_at([SQAR, "extract", "-j", str(jobs), img, "-C", out], out, BIG, [sig])
                return (p, out), not os.path.lexists(f"{out}/{BIG}")

            p, out = until_valid(3, inside_big, f"{BIG} was written whole before sqar stopped")
            what = f"{signal.Signals(sig).name} inside {BIG}, -j{jobs}"
            check_what_is_left(src_snap, out, p, sig, what)
            if jobs == 1:  # with two threads the other may still be making directories
                dirs = [rel for rel, e in snapshot(out).items() if e["type"] == 0o040000]
                assert len(dirs) == sum(e["type"] == 0o040000 for e in src_snap.values()), \
                    f"{what}: {len(dirs)} directories made, not all of them"

        # Later, when files are written (the top directory's come first, and the 30 directories
        # of small files after them), and then the same extraction again to finish it. Not at
        # text.log: it is a duplicate of dup/one.log, copied once every other file is written,
        # so a signal sent at its creation may find sqar done.
        out = f"{d}/out-resumed"
        os.makedirs(out)
        p = interrupt_at([SQAR, "extract", "-j", "1", img, "-C", out], out, "sparse.img", [signal.SIGINT])
        what = "SIGINT at sparse.img, -j1"
        check_what_is_left(src_snap, out, p, signal.SIGINT, what)
        resume(src, img, out, what)

        # A signal the caller ignores (nohup, a shell's background job) stays ignored: the
        # extraction completes.
        def ignored(n):
            out = f"{d}/out-ignored-{n}"
            os.makedirs(out)
            p = interrupt_at([SQAR, "extract", "-j", "1", img, "-C", out], out, BIG, [signal.SIGHUP],
                             preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
            return (p, out), p.trigger_size is not None and p.trigger_size < BIG_SIZE

        p, out = until_valid(3, ignored, f"{BIG} was written whole before sqar stopped")
        assert p.returncode == 0 and "extraction stopped" not in p.stderr, (p.returncode, p.stderr)
        got = snapshot(out)
        assert got == src_snap, f"{len(got)} entries extracted of {len(src_snap)}, or some differ"
        log(f"ok: SIGHUP inherited ignored, sent inside {BIG}: all {len(got)} entries extracted")


def test_skip_old_files_never_goes_through_what_is_in_the_way():
    """--skip-old-files keeps a file where the image has a file, but a symlink or file where it
    has a directory cannot hold the directory's entries: that is an error naming the entry,
    and nothing is written through the symlink. A hard link is never made to a kept entry of
    another type than the image's (here a symlink where the image has the link's file)."""
    with tempdir() as d:
        for name in ("a/x", "a/y", "b/z", "c", "e"):
            write(f"{d}/src/{name}", name.encode())
        os.link(f"{d}/src/e", f"{d}/src/hl")
        img = f"{d}/img.sqfs"
        sqar_create_image(f"{d}/src", img)
        out, elsewhere = f"{d}/out", f"{d}/elsewhere"
        os.makedirs(out)
        os.makedirs(elsewhere)
        os.symlink(elsewhere, f"{out}/a")
        write(f"{out}/c", b"mine")
        write(f"{elsewhere}/target", b"not the image's e")
        os.symlink(f"{elsewhere}/target", f"{out}/e")  # kept, but no hard link is made to it
        p = run([SQAR, "extract", "--skip-old-files", img, "-C", out], check=False)
        assert p.returncode == 1, (p.returncode, p.stderr)
        assert "a: already exists and is not a directory: what the image has below it is left out (use --overwrite " \
            "to replace it)" in p.stderr, p.stderr
        assert "2 entries were left out below directories" in p.stderr, p.stderr
        assert "hl: not extracted: it is a hard link to e, which was not extracted" in p.stderr, p.stderr
        # Kept as asked, but not without a word: it cannot be the image's entry.
        assert f"warning: {img}: e: kept, but it is a symlink where the image has a file (--overwrite replaces it)" \
            in p.stderr, p.stderr
        assert not os.path.lexists(f"{out}/hl"), "hl was linked to the symlink in the way"
        assert os.listdir(elsewhere) == ["target"], f"written through the symlink: {os.listdir(elsewhere)}"
        assert open(f"{out}/c", "rb").read() == b"mine" and open(f"{out}/b/z", "rb").read() == b"b/z"
        log(f"ok: {p.stderr.strip()}")


def test_skip_old_files_without_root_fills_a_read_only_directory():
    """Without root, an interrupted extraction may already have given a directory its read-only
    mode (0555) when entries of it are still missing: --skip-old-files must still fill it, and
    leave it 0555. (The stop is simulated by removing entries of a finished extraction.)"""
    need_root()  # to run as nobody, and to remove entries from the read-only directory
    with tempdir() as d:
        for i in range(20):
            write(f"{d}/src/ro/f{i:02d}", b"read-only directory's file %d\n" % i)
        write(f"{d}/src/top", b"top")
        os.chmod(f"{d}/src/ro", 0o555)
        os.chmod(d, 0o755)
        img = f"{d}/img.sqfs"
        sqar_create_image(f"{d}/src", img)
        out = f"{d}/out"
        os.makedirs(out)
        os.chown(out, 65534, 65534)
        run([*AS_NOBODY, SQAR, "extract", "--no-same-owner", img, "-C", out])
        for i in range(10, 20):
            os.unlink(f"{out}/ro/f{i:02d}")
        os.unlink(f"{out}/top")
        p = run([*AS_NOBODY, SQAR, "extract", "--no-same-owner", "--skip-old-files", img, "-C", out], check=False)
        assert p.returncode == 0, (p.returncode, p.stderr)
        compare_trees(f"{d}/src", out, "extract --skip-old-files as nobody into a 0555 directory", owners=False)


def interrupted_archive(img, archive, sig):
    """`extract --tar ARCHIVE` sent sig while it writes: ARCHIVE does not appear, and nothing
    is left beside it."""
    cmd = [SQAR, "extract", "-q", "-j", "1", "--tar", archive, img]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not image_in_progress(p.pid, archive) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.005)
        assert image_in_progress(p.pid, archive), f"no archive in progress (exit {p.poll()})"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check_sanitizers(cmd, p.returncode, err)
    assert p.returncode == -sig, f"{signal.Signals(sig).name}: exit status {p.returncode}: {err}"
    for _ in range(100):  # FUSE drops a .fuse_hidden file when the kernel releases it, just after
        left = [n for n in os.listdir(os.path.dirname(archive)) if not n.startswith(".fuse_hidden")]
        if not left:
            break
        time.sleep(0.05)
    assert not left and not leftovers(archive), f"{signal.Signals(sig).name}: left {left}"


def test_interrupted_archive_leaves_nothing():
    """extract --tar builds the archive unnamed and names it when complete. Where O_TMPFILE is
    missing (a bindfs view) the archive has a temporary name until then, which SIGINT, SIGTERM
    and SIGHUP must remove, as they do for create's image."""
    with tempdir() as d:
        src = make_source(f"{d}/src")
        img = f"{d}/img.sqfs"
        sqar_create_image(src, img, "-c", "xz")
        os.makedirs(f"{d}/plain")
        for sig in (signal.SIGINT, signal.SIGTERM):
            interrupted_archive(img, f"{d}/plain/out.tar.xz", sig)
        log("ok: SIGINT and SIGTERM while the archive is written: no archive, nothing beside it")
        with dir_without_o_tmpfile(f"{d}/lower", f"{d}/mnt") as mnt:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                interrupted_archive(img, f"{mnt}/out.tar.xz", sig)
        log("ok: the same without O_TMPFILE, where the archive had a temporary name")


if __name__ == "__main__":
    main([test_interrupted_extract_finishes_its_directories, test_skip_old_files_never_goes_through_what_is_in_the_way,
          test_skip_old_files_without_root_fills_a_read_only_directory, test_interrupted_archive_leaves_nothing])
