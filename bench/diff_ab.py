#!/usr/bin/env python3
"""Two builds of sqar side by side on `sqar diff`: an image against the tree it was made from
(every entry compared, every file's content read), wall time and peak memory.

    python3 bench/diff_ab.py --before OTHER/build/tools/sqar [--after build/tools/sqar] \
        [--sets ports,log] [--scale 0.3] [--runs 5] [--out FILE]

Rounds interleave the two builds so a shared machine's noise hits both alike; the figure to
quote is the median of each round's after/before ratio.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import run  # noqa: E402  (data sets)


def timed_with_rss(cmd):
    """(wall seconds, peak RSS in MiB) of one run of cmd; exit 0 (no differences) is required."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)}: exit {os.waitstatus_to_exitcode(status)}: {p.stderr.read().decode()[:500]}")
    return wall, usage.ru_maxrss / 1024


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_ab_arguments(p, run.REPO_DIR)
    args = p.parse_args()
    gen = run.find_gen_data(args)
    work = os.path.join(run.WORK_DIR, "diff_ab")
    os.makedirs(work, exist_ok=True)
    builds = benchlib.ab_builds(args)
    lines = ["# sqar diff: two builds side by side", "",
             f"before: `{builds['before']}`; after: `{builds['after']}`; scale {args.scale:g}, "
             f"{args.runs} interleaved rounds, all cores; the image (zstd-3) against its own source tree.", "",
             "| data set | before | after | after/before (median of rounds) | peak RSS before | peak RSS after |",
             "|---|---:|---:|---:|---:|---:|"]
    rounds = []
    for name in args.sets.split(","):
        src = run.ensure_data(name, args.scale, gen)
        image = os.path.join(work, f"{name}.sqfs")
        subprocess.run([builds["after"], "create", "-q", "-f", "-c", "zstd", "-l", "3", src, image], check=True)
        rss = {b: [] for b in builds}

        def case(b):
            wall, peak = timed_with_rss([builds[b], "diff", image, src])
            rss[b].append(peak)
            return wall

        times = benchlib.interleaved({b: (lambda b=b: case(b)) for b in builds}, args.runs)
        per_round = [a / b for a, b in zip(times["after"], times["before"])]
        med = benchlib.medians(times)
        lines.append(f"| {name} | {med['before']:.2f} s | {med['after']:.2f} s | "
                     f"**{statistics.median(per_round):.3f}x** | {statistics.median(rss['before']):.0f} MiB | "
                     f"{statistics.median(rss['after']):.0f} MiB |")
        rounds.append(f"- {name}: " + ", ".join(f"{r:.2f}" for r in per_round))
    lines += ["", "after/before per round:", ""] + rounds + ["", benchlib.machine_line()]
    benchlib.write_report(lines, args.out)


if __name__ == "__main__":
    main()
