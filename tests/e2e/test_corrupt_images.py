#!/usr/bin/env python3
"""Every read command on damaged images: real images (sqar create with gzip and zstd, mksquashfs)
cut at every table boundary and with bits flipped in the superblock, every metadata block, the
pointer arrays, data blocks and the manifest trailer (see corruptlib.py).

For each damaged image, extract, list -l, cat, info, verify and diff must exit by themselves
(no signal, no sanitizer report, within the time limit) with 0, 1 or 2; a failure must name the
image. Where the damage hits something a checksum covers (gzip's adler32, the manifest's XXH3),
verify must fail. The other readers do not read everything verify reads (extract skips the
export table, cat reads one file), so they may succeed on such damage only when what they
produce is exactly what they produce from the undamaged image: extract's tree (content and
metadata), cat's bytes, list's and diff's output."""
import collections
import concurrent.futures
import os
import shutil
import subprocess
import time

import corruptlib
from sqartest import SQAR, log, main, need_tool, sanitizer_problem, snapshot, tempdir

TIMEOUT = 60  # seconds per command; the ASan build is several times slower than the normal one
# The readers judged by what they produce: a zero exit on damage a checksum covers must give
# exactly the undamaged image's output.
JUDGED = ("extract", "list", "cat", "diff")


def run_command(args, cwd):
    t0 = time.monotonic()
    try:
        p = subprocess.run([SQAR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None, b"", f"timed out after {TIMEOUT} s".encode(), TIMEOUT
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def commands(label, img, src, out):
    # random.bin is stored raw (incompressible): no codec checksum covers its blocks. The
    # mksquashfs image leaves it out (see corruptlib.build_images).
    cat_files = ["text.log"] + (["random.bin"] if label.startswith("sqar") else [])
    return {
        "extract": ["extract", "-C", out, img],
        "list": ["list", "-l", img],
        "cat": ["cat", img, *cat_files],
        "info": ["info", img],
        "verify": ["verify", img],
        "diff": ["diff", img, src],
    }


def produced(name, rc, stdout, out):
    """What a reader produced, to compare with the undamaged image's: the extracted tree for
    extract (content and metadata), the exit code and output for the others. The image's own
    path is replaced, as each damaged copy has its own."""
    if name == "extract":
        return snapshot(out) if os.path.isdir(out) else None
    return rc, stdout


def reference_outputs(label, img, src, work):
    """What every judged reader produces from the undamaged image (each must exit 0 or, for
    diff against the full source, 1)."""
    out = f"{work}/out"
    ref = {}
    for name, args in commands(label, img, src, out).items():
        shutil.rmtree(out, ignore_errors=True)
        rc, stdout, stderr, _ = run_command(args, work)
        if rc not in ((0, 1) if name == "diff" else (0,)):
            raise AssertionError(f"sqar {name} of the undamaged {img} exited {rc}: {stderr.decode(errors='replace')}")
        ref[name] = produced(name, rc, stdout.replace(img.encode(), b"IMAGE"), out)
    shutil.rmtree(out, ignore_errors=True)
    return ref


def check_image(label, img, src, damage, work, ref):
    """Runs every command on one damaged image; returns (problems, commands that failed)."""
    problems, failed = [], []
    out = f"{work}/out"
    for name, args in commands(label, img, src, out).items():
        shutil.rmtree(out, ignore_errors=True)
        rc, stdout, stderr, secs = run_command(args, work)
        err = stderr.decode(errors="replace")
        what = f"[{label}: {damage.name}] sqar {name}"
        if rc != 0:
            failed.append(name)
        report = sanitizer_problem(["sqar", *args], rc, err)
        if rc is None:
            problems.append(f"{what}: {err}")
        elif rc < 0:
            problems.append(f"{what}: killed by signal {-rc}\n{err[-2000:]}")
        elif report:
            problems.append(f"{what}: {report}")
        elif rc not in (0, 1, 2):
            problems.append(f"{what}: exit {rc}\n{err[-1000:]}")
        elif rc != 0 and not (name == "diff" and rc == 1) and img not in err:
            problems.append(f"{what}: exit {rc} without naming the image: {err[-500:]!r}")
        elif damage.must_fail and rc == 0 and name == "verify":
            problems.append(f"{what}: exit 0 although the damage hits checked data\n{stdout[-300:]!r}")
        elif damage.must_fail and rc == 0 and name in JUDGED and \
                produced(name, rc, stdout.replace(img.encode(), b"IMAGE"), out) != ref[name]:
            problems.append(f"{what}: exit 0 with output that differs from the undamaged image's, although "
                            f"the damage hits checked data")
    shutil.rmtree(out, ignore_errors=True)
    return problems, failed


def test_every_command_on_every_damage():
    need_tool("mksquashfs")
    with tempdir() as d:
        src = corruptlib.make_source(f"{d}/src")
        images = corruptlib.build_images(src, d, SQAR)
        jobs, refs = [], {}
        for label, path, strong in images:
            os.makedirs(f"{d}/{label}-clean")
            refs[label] = reference_outputs(label, path, src, f"{d}/{label}-clean")
            data = open(path, "rb").read()
            for i, damage in enumerate(corruptlib.damages(data, strong)):
                work = f"{d}/{label}-{i}"
                os.makedirs(work)
                img = f"{work}/{label}.sqfs"
                with open(img, "wb") as f:
                    f.write(damage.data)
                jobs.append((label, img, damage, work))
        log(f"{len(jobs)} damaged images, 6 commands each")
        problems, failures = [], collections.Counter()
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for found, failed in pool.map(
                    lambda j: check_image(j[0], j[1], src, j[2], j[3], refs[j[0]]), jobs):
                problems += found
                failures.update(failed)
        # The counts show the damage is real: most damaged images make most commands fail.
        log(f"checked in {time.monotonic() - t0:.1f} s; {sum(j[2].must_fail for j in jobs)} damages verify must catch;"
            f" non-zero exits per command: {dict(failures)}")
        if problems:
            raise AssertionError(f"{len(problems)} problems:\n" + "\n".join(problems[:30]))
        log("ok: every command exited cleanly on every damaged image; verify caught every checked damage, and "
            "every other reader either failed or produced the undamaged image's output")


if __name__ == "__main__":
    main([test_every_command_on_every_damage])
