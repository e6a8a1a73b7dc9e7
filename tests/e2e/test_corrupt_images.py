#!/usr/bin/env python3
"""Every read command on damaged images: real images (sqar create with gzip and zstd, mksquashfs)
cut at every table boundary and with bits flipped in the superblock, every metadata block, the
pointer arrays, data blocks and the manifest trailer (see corruptlib.py).

For each damaged image, extract, list -l, cat, info, verify and diff must exit by themselves
(no signal, no sanitizer report, within the time limit) with 0, 1 or 2; a failure must name the
image. Where the damage hits something a checksum covers (gzip's adler32, the manifest's XXH3),
verify must fail (the other commands do not read everything verify reads: extract skips the
export table and the manifest, so they may succeed)."""
import collections
import concurrent.futures
import os
import shutil
import subprocess
import time

import corruptlib
from sqartest import SQAR, log, main, need_tool, tempdir

TIMEOUT = 60  # seconds per command; the ASan build is several times slower than the normal one
SANITIZER_MARKS = ("Sanitizer", "runtime error:", "LeakSanitizer")


def run_command(args, cwd):
    t0 = time.monotonic()
    try:
        p = subprocess.run([SQAR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None, b"", f"timed out after {TIMEOUT} s".encode(), TIMEOUT
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def check_image(img, src, damage, work):
    """Runs every command on one damaged image; returns (problems, commands that failed)."""
    problems, failed = [], []
    out = f"{work}/out"
    commands = {
        "extract": ["extract", "-C", out, img],
        "list": ["list", "-l", img],
        "cat": ["cat", img, "text.log"],
        "info": ["info", img],
        "verify": ["verify", img],
        "diff": ["diff", img, src],
    }
    for name, args in commands.items():
        shutil.rmtree(out, ignore_errors=True)
        rc, stdout, stderr, secs = run_command(args, work)
        err = stderr.decode(errors="replace")
        what = f"[{damage.name}] sqar {name}"
        if rc != 0:
            failed.append(name)
        if rc is None:
            problems.append(f"{what}: {err}")
        elif rc < 0:
            problems.append(f"{what}: killed by signal {-rc}\n{err[-2000:]}")
        elif any(m in err for m in SANITIZER_MARKS):
            problems.append(f"{what}: sanitizer report (exit {rc})\n{err[-3000:]}")
        elif rc not in (0, 1, 2):
            problems.append(f"{what}: exit {rc}\n{err[-1000:]}")
        elif rc != 0 and not (name == "diff" and rc == 1) and img not in err:
            problems.append(f"{what}: exit {rc} without naming the image: {err[-500:]!r}")
        elif damage.must_fail and rc == 0 and name == "verify":
            problems.append(f"{what}: exit 0 although the damage hits checked data\n{stdout[-300:]!r}")
    shutil.rmtree(out, ignore_errors=True)
    return problems, failed


def test_every_command_on_every_damage():
    need_tool("mksquashfs")
    with tempdir() as d:
        src = corruptlib.make_source(f"{d}/src")
        images = corruptlib.build_images(src, d, SQAR)
        jobs = []
        for label, path, strong in images:
            data = open(path, "rb").read()
            for i, damage in enumerate(corruptlib.damages(data, strong)):
                work = f"{d}/{label}-{i}"
                os.makedirs(work)
                img = f"{work}/{label}.sqfs"
                with open(img, "wb") as f:
                    f.write(damage.data)
                jobs.append((img, damage, work))
        log(f"{len(jobs)} damaged images, 6 commands each")
        problems, failures = [], collections.Counter()
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for found, failed in pool.map(lambda j: check_image(j[0], src, j[1], j[2]), jobs):
                problems += found
                failures.update(failed)
        # The counts show the damage is real: most damaged images make most commands fail.
        log(f"checked in {time.monotonic() - t0:.1f} s; {sum(j[1].must_fail for j in jobs)} damages verify must catch;"
            f" non-zero exits per command: {dict(failures)}")
        if problems:
            raise AssertionError(f"{len(problems)} problems:\n" + "\n".join(problems[:30]))
        log("ok: every command exited cleanly on every damaged image, and verify caught every checked damage")


if __name__ == "__main__":
    main([test_every_command_on_every_damage])
