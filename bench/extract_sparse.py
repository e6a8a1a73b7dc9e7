#!/usr/bin/env python3
"""sqar benchmark: extracting one 64 GiB sparse file, with one thread and with two.

    python3 bench/extract_sparse.py [--sqar build/tools/sqar] [--before OTHER_SQAR] [--runs 3]
                                    [--dir /tmp] [--out FILE]

The file is 64 GiB of holes with a few KiB of data at four places; sqar packs it (sparse
blocks) and then `sqar extract -j1`, `sqar extract -j2` (each 8 MiB range written by either
thread) and `unsquashfs` unpack it, interleaved round-robin for --runs rounds. --before adds
the same two extracts by another sqar binary (an older build) to each round. The report gives
the median wall time of each and the -j2 / -j1 ratio. A benchmark, not a test: it never fails
on speed.
"""
import argparse
import datetime
import os
import shutil
import subprocess
import tempfile

from benchlib import interleaved, machine_line, medians, timed, write_report

SIZE = 64 << 30


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sqar", default="build/tools/sqar")
    ap.add_argument("--before", help="another sqar binary to compare with")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--out")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sqar-bench-sparse-", dir=a.dir)
    try:
        src = f"{work}/src"
        os.makedirs(src)
        with open(f"{src}/big", "wb") as f:
            f.truncate(SIZE)
            for off in (0, 5 << 30, 3000 * (8 << 20) - 100, SIZE - 4096):
                f.seek(off)
                f.write(b"data" * 1024)
        img = f"{work}/sparse.sqfs"
        create_s = timed([a.sqar, "create", "-q", src, img])
        cases = [("sqar extract -j1", [a.sqar, "extract", "-q", "-j1", img, "-C"]),
                 ("sqar extract -j2", [a.sqar, "extract", "-q", "-j2", img, "-C"]),
                 ("unsquashfs", ["unsquashfs", "-no-progress", "-q", "-d"])]
        if a.before:
            cases += [("before: sqar extract -j1", [a.before, "extract", "-q", "-j1", img, "-C"]),
                      ("before: sqar extract -j2", [a.before, "extract", "-q", "-j2", img, "-C"])]
        out = f"{work}/out"
        times = interleaved({name: (lambda cmd=cmd, name=name: timed(cmd + [out] + ([img] if name == "unsquashfs" else [])))
                             for name, cmd in cases}, a.runs, lambda _: shutil.rmtree(out, ignore_errors=True))
        med = medians(times)
        version = subprocess.run(["unsquashfs", "-version"], stdout=subprocess.PIPE, text=True).stdout.splitlines()[0]
        lines = [f"# Extract of a 64 GiB sparse file ({datetime.date.today()})", "", machine_line(),
                 f"Image built by `sqar create` in {create_s:.1f} s; {version}.",
                 f"Medians of {a.runs} interleaved runs (`python3 bench/extract_sparse.py`).", "",
                 "| command | median s | runs |", "|---|---:|---|"]
        for name, _ in cases:
            lines.append(f"| {name} | {med[name]:.2f} | {', '.join(f'{t:.2f}' for t in times[name])} |")
        lines += ["", f"-j2 / -j1: {med['sqar extract -j2'] / med['sqar extract -j1']:.2f}"]
        if a.before:
            lines.append(f"before: -j2 / -j1: {med['before: sqar extract -j2'] / med['before: sqar extract -j1']:.2f}")
        write_report(lines, a.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
