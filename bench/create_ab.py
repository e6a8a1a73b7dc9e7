#!/usr/bin/env python3
"""Two builds of sqar side by side on `sqar create`: the check that a change to the builder
costs no speed and changes no byte.

    python3 bench/create_ab.py --before OTHER/build/tools/sqar [--after build/tools/sqar] \
        [--sets ports,log] [--scale 0.3] [--src DIR ...] [--configs zstd-15,zstd-3,gzip-9] [--runs 5] [--out FILE]

Every round runs each build once per data set and configuration, interleaved, so the noise of
a shared machine hits both alike. SOURCE_DATE_EPOCH fixes the superblock time, so the two
images are byte-identical unless the builds differ in what they write; --identical makes a
difference stop the run (for a change meant to keep every byte). The report gives median wall time per build
and the after/before ratio of each round's pair, whose median is the figure to quote.
"""
import argparse
import filecmp
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import run  # noqa: E402  (data sets)

CONFIGS = {label: (codec, level) for label, codec, level in run.CONFIGS}  # as bench/run.py names them


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_ab_arguments(p, run.REPO_DIR)
    p.add_argument("--configs", default="zstd-15,zstd-3")
    p.add_argument("--identical", action="store_true", help="fail unless both builds write the same bytes")
    p.add_argument("--src", action="append", default=[],
                   help="a directory to pack as well, named by its last component (repeatable; --sets '' for these alone)")
    args = p.parse_args()
    os.environ["SOURCE_DATE_EPOCH"] = "1700000000"
    gen = run.find_gen_data(args)
    work = os.path.join(run.WORK_DIR, "create_ab")
    os.makedirs(work, exist_ok=True)
    builds = benchlib.ab_builds(args)
    lines = ["# sqar create: two builds side by side", "",
             f"before: `{builds['before']}`; after: `{builds['after']}`; scale {args.scale:g}, "
             f"{args.runs} interleaved rounds, all cores, 128 KiB blocks.", "",
             "| data set | codec | before | after | after/before (median of rounds) | images |",
             "|---|---|---:|---:|---:|---|"]
    rounds = []
    sources = [(name, run.ensure_data(name, args.scale, gen)) for name in args.sets.split(",") if name]
    sources += [(os.path.basename(os.path.normpath(d)), os.path.abspath(d)) for d in args.src]
    for name, src in sources:
        for label in args.configs.split(","):
            codec, level = CONFIGS[label]
            images = {b: os.path.join(work, f"{name}-{label}-{b}.sqfs") for b in builds}
            cases = {b: (lambda b=b: benchlib.timed([builds[b], "create", "-q", "-f", "-c", codec, "-l", str(level),
                                                        src, images[b]])) for b in builds}
            times = benchlib.interleaved(cases, args.runs)
            same = filecmp.cmp(images["before"], images["after"], shallow=False)
            if not same and args.identical:
                sys.exit(f"{name} {label}: the two builds wrote different images")
            sizes = "byte-identical" if same else "differ: {} against {} bytes".format(
                *(os.path.getsize(images[b]) for b in ("after", "before")))
            per_round = [a / b for a, b in zip(times["after"], times["before"])]
            med = benchlib.medians(times)
            lines.append(f"| {name} | {label} | {med['before']:.2f} s | {med['after']:.2f} s | "
                         f"**{statistics.median(per_round):.3f}x** | {sizes} |")
            rounds.append(f"- {name} {label}: " + ", ".join(f"{r:.2f}" for r in per_round))
    lines += ["", "after/before per round:", ""] + rounds + ["", benchlib.machine_line()]
    benchlib.write_report(lines, args.out)


if __name__ == "__main__":
    main()
