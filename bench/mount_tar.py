#!/usr/bin/env python3
"""Mounting a .tar.gz to read it: `sqar create --tar` followed by `sqarfs`, against ratarmount
on the same archive. Two times per tool, both from the start: until the first file is readable,
and until every file has been read (in path order). Every file read is checked against the
source tree. Runs are interleaved round-robin so the noise of a shared machine hits both alike;
medians of per-round ratios are printed and written as Markdown.

    python3 bench/mount_tar.py --sets ports,log --scale 0.1 --runs 3 \
        [--sqar build/tools/sqar] [--sqarfs build/fuse/sqarfs] [--ratarmount PATH] \
        [--out bench/results/2026-11-25-mount-tar.md]

ratarmount comes from PyPI: `--install-ratarmount DIR` makes a virtual environment there and
installs it (pip install ratarmount). Runs as root (FUSE mounts, cache drops are not needed:
the archive is read warm by both tools).
"""
import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (data sets, logging, StepFailed)


def file_digests(root):
    """Relative path -> SHA-256 of every regular file below root, in sorted path order."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            out[os.path.relpath(path, root)] = h.hexdigest()
    return out


def wait_mounted(proc, mnt, name, timeout=600):
    t0 = time.monotonic()
    while not os.path.ismount(mnt):
        rc = proc.poll()
        if rc not in (None, 0):
            err = proc.stderr.read().decode(errors="replace").strip().splitlines()
            raise run.StepFailed(f"{name}: mount failed: {err[-1][:200] if err else f'exit {rc}'}")
        if time.monotonic() - t0 > timeout:
            raise run.StepFailed(f"{name}: mount timed out")
        time.sleep(0.002)


def unmount(mnt):
    fm = shutil.which("fusermount3") or shutil.which("fusermount")
    if os.path.ismount(mnt):
        r = subprocess.run([fm, "-u", mnt] if fm else ["umount", mnt], stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", mnt], check=False)


def read_first_then_all(mnt, expected, first):
    """Reads `first`, then every file; returns (seconds to first, seconds to all) from now."""
    t0 = time.perf_counter()
    with open(os.path.join(mnt, first), "rb") as f:
        f.read()
    t_first = time.perf_counter() - t0
    got = file_digests(mnt)
    t_all = time.perf_counter() - t0
    if got != expected:
        missing = sorted(set(expected) - set(got))[:3]
        wrong = sorted(k for k in expected.keys() & got.keys() if expected[k] != got[k])[:3]
        raise run.StepFailed(f"content differs from the source: missing {missing}, wrong {wrong}")
    return t_first, t_all


def bench_sqar(args, archive, work, mnt, expected, first):
    image = os.path.join(work, "from-tar.sqfs")
    if os.path.exists(image):
        os.unlink(image)
    t0 = time.perf_counter()
    subprocess.run([args.sqar, "create", "-q", "--tar", archive, image], check=True, stdin=subprocess.DEVNULL)
    proc = subprocess.Popen([args.sqarfs, image, mnt], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        wait_mounted(proc, mnt, "sqarfs")
        setup = time.perf_counter() - t0
        t_first, t_all = read_first_then_all(mnt, expected, first)
    finally:
        unmount(mnt)
        proc.wait()
    return setup + t_first, setup + t_all


def bench_ratarmount(args, archive, work, mnt, expected, first):
    index = os.path.join(work, "ratarmount.index.sqlite")
    if os.path.exists(index):
        os.unlink(index)
    t0 = time.perf_counter()
    # --index-file keeps the index out of the source directory; recreated every round, as a first
    # mount of a new archive builds it.
    proc = subprocess.Popen([args.ratarmount, "--recreate-index", "--index-file", index, archive, mnt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        wait_mounted(proc, mnt, "ratarmount")
        setup = time.perf_counter() - t0
        t_first, t_all = read_first_then_all(mnt, expected, first)
    finally:
        unmount(mnt)
        proc.wait()
    return setup + t_first, setup + t_all


def tool_versions(args):
    def first_line(cmd):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        return r.stdout.decode(errors="replace").strip().splitlines()[0] if r.stdout else "?"
    return first_line([args.sqar, "--version"]), first_line([args.ratarmount, "--version"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="ports,log")
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sqar", default=os.path.join(run.REPO_DIR, "build", "tools", "sqar"))
    ap.add_argument("--sqarfs", default=os.path.join(run.REPO_DIR, "build", "fuse", "sqarfs"))
    ap.add_argument("--ratarmount", default=shutil.which("ratarmount"))
    ap.add_argument("--install-ratarmount", metavar="DIR", help="make a venv in DIR and pip install ratarmount there")
    ap.add_argument("--gen-data", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.install_ratarmount:
        venv = args.install_ratarmount
        if not os.path.exists(os.path.join(venv, "bin", "ratarmount")):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "ratarmount"], check=True)
        args.ratarmount = os.path.join(venv, "bin", "ratarmount")
    if not args.ratarmount:
        sys.exit("ratarmount not found: pass --ratarmount PATH or --install-ratarmount DIR")
    gen_data = run.find_gen_data(args)
    work = tempfile.mkdtemp(prefix="sqar-bench-mount-tar-")
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    sqar_version, ratarmount_version = tool_versions(args)
    rows = []
    try:
        for name in args.sets.split(","):
            src = run.ensure_data(name, args.scale, gen_data)
            archive = os.path.join(work, f"{name}.tar.gz")
            subprocess.run(["tar", "-C", src, "-czf", archive, "."], check=True)
            expected = file_digests(src)
            first = min(expected)  # the first file in path order: what a user opens first is arbitrary
            times = {"sqar": [], "ratarmount": []}
            for r in range(args.runs):
                order = [("sqar", bench_sqar), ("ratarmount", bench_ratarmount)]
                if r % 2:
                    order.reverse()
                for tool, fn in order:
                    times[tool].append(fn(args, archive, work, mnt, expected, first))
                run.log(f"{name} round {r + 1}: " + ", ".join(
                    f"{t} first {v[-1][0]:.2f} s all {v[-1][1]:.2f} s" for t, v in times.items()))
            ratio_first = statistics.median(s[0] / r[0] for s, r in zip(times["sqar"], times["ratarmount"]))
            ratio_all = statistics.median(s[1] / r[1] for s, r in zip(times["sqar"], times["ratarmount"]))
            rows.append((name, len(expected), os.path.getsize(archive),
                         statistics.median(t[0] for t in times["sqar"]), statistics.median(t[0] for t in times["ratarmount"]),
                         ratio_first,
                         statistics.median(t[1] for t in times["sqar"]), statistics.median(t[1] for t in times["ratarmount"]),
                         ratio_all))
    finally:
        unmount(mnt)
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    lines = [
        f"# Mount a .tar.gz and read it: sqar create --tar + sqarfs against ratarmount (scale {args.scale:g})",
        "",
        f"{sqar_version}; {ratarmount_version} (PyPI). Archives made by GNU tar `-czf`. Both clocks start",
        "before anything touches the archive: sqar's include `sqar create --tar` and the mount,",
        "ratarmount's include building its index (`--recreate-index`). Every file read is compared with the",
        f"source. Medians of {args.runs} interleaved rounds and of per-round ratios; warm page cache;",
        f"2 cores, load average {load:.1f} at the end.",
        "",
        "| set | files | .tar.gz MB | first file: sqar s | ratarmount s | ratio | all files: sqar s | ratarmount s | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, files, size, sf, rf, qf, sa, ra, qa in rows:
        lines.append(f"| {name} | {files} | {size / 1e6:.1f} | {sf:.2f} | {rf:.2f} | **{qf:.2f}x** | {sa:.2f} | {ra:.2f} | **{qa:.2f}x** |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
