#!/usr/bin/env python3
"""sqar benchmark: the nightly rebuild of a tree, with and without `--reuse`.

    python3 bench/rebuild.py [--set log|ports] [--scale 0.5] [--runs 5] [--level 15] [--out FILE] \
        [--peers-run /work/peers-sid-run.sh]

Day 1 is a data set of ../shared/bench/gen_data.py; its image is built once with sqar (zstd,
128 KiB blocks). Day 2 is day 1 after a night of work, as hard links to day 1's files plus
what changed:
  log    a logrotate: every app-N.log and small-N.log moves to NAME.1 unchanged, each gets a
         new NAME with fresh lines (a tenth of its size); the archive stays;
  ports  an update: 20 files picked at random (fixed seed) get a line appended.
Day 2 is then packed, interleaved round-robin, by mksquashfs, by sqar from scratch and by
sqar with `--reuse day1.sqfs`; the report gives medians of wall time, CPU and peak RSS, and the
ratios. With --peers-run, mksquashfs is the newest one, run in the Debian sid chroot of
../shared/bench/newest-peers.sh (bench/ bound into it; entering it costs ~40 ms a run, which
is charged to mksquashfs). The first run of each is checked: sqar's two images must be byte-identical, and
unsquashfs must read the reusing one back like the tree. A benchmark, not a test: it never fails
on speed.
"""
import argparse
import datetime
import importlib.util
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (the shared measuring helpers of bench/run.py)

BLOCK = bench.BLOCK_SIZE


def load_gen_data(path):
    spec = importlib.util.spec_from_file_location("gen_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_day2_ports(day1, day2):
    """Day 1 after an update of 20 files, as hard links to day 1's files plus the edited ones."""
    bench.rmtree(day2)
    files = []
    for dirpath, _, names in os.walk(day1):
        rel = os.path.relpath(dirpath, day1)
        os.makedirs(os.path.join(day2, rel), exist_ok=True)
        for name in names:
            os.link(os.path.join(dirpath, name), os.path.join(day2, rel, name))
            files.append(os.path.join(rel, name))
    changed = 0
    for rel in random.Random(8).sample(sorted(files), 20):
        path = os.path.join(day2, rel)
        with open(path, "rb") as f:
            data = f.read()
        os.remove(path)  # the hard link: day 1 keeps its file
        with open(path, "wb") as f:
            f.write(data + b"# updated upstream\n")
        changed += len(data) + 19
    return changed


def make_day2_log(day1, day2, gen_data):
    """Day 1 after a logrotate, as hard links to day 1's files plus the new logs."""
    bench.rmtree(day2)
    new_bytes = 0
    for dirpath, _, files in os.walk(day1):
        rel = os.path.relpath(dirpath, day1)
        os.makedirs(os.path.join(day2, rel), exist_ok=True)
        for name in sorted(files):
            src = os.path.join(dirpath, name)
            rotated = rel == "." and name.endswith(".log")
            os.link(src, os.path.join(day2, rel, name + ".1" if rotated else name))
            if rotated:
                size = os.path.getsize(src) // 10
                gen_data.gen_log(os.path.join(day2, rel, name), size, seed=1000 + len(name) + size)
                new_bytes += size
    return new_bytes


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", default="log", choices=("log", "ports"), help="data set (default log)")
    p.add_argument("--scale", type=float, default=0.5, help="gen_data.py scale of the data set (default 0.5)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per tool after the checked one (default 5)")
    p.add_argument("--level", type=int, default=15, help="zstd level for every tool (default 15)")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--sqar", help="sqar binary (default build/tools/sqar)")
    p.add_argument("--gen-data", help="path of gen_data.py (default ../shared/bench/gen_data.py)")
    p.add_argument("--out", help="report file (default bench/results/YYYY-MM-DD-rebuild.md)")
    p.add_argument("--peers-run", help="the newest peers' chroot runner (../shared/bench/newest-peers.sh makes it)")
    args = p.parse_args()
    peer = []
    if args.peers_run:
        peer = [args.peers_run]
        os.environ["CHROOT_BIND"] = bench.BENCH_DIR  # data and work directories, at the same paths
    args.sqarfs = None
    tools = bench.Tools(args)
    gen_path = bench.find_gen_data(args)
    day1 = bench.ensure_data(args.set, args.scale, gen_path)
    work = os.path.join(bench.WORK_DIR, "rebuild-" + args.set)
    os.makedirs(work, exist_ok=True)
    day2 = os.path.join(work, "day2")
    if args.set == "log":
        new_bytes = make_day2_log(day1, day2, load_gen_data(gen_path))
        change = f"{new_bytes / 2**20:.1f} MiB are new logs and the rest day 1's content under rotated names"
    else:
        new_bytes = make_day2_ports(day1, day2)
        change = f"20 files ({new_bytes / 1024:.0f} KiB) got a line appended and the rest is day 1's"
    old = os.path.join(work, "day1.sqfs")
    codec = ["-c", "zstd", "-l", str(args.level), "-b", str(BLOCK)]
    bench.log("building day 1's image ...")
    bench.run_measured([tools.sqar, "create", "-q", "--force", "-j", str(args.jobs), *codec, day1, old], 3600)

    def sqar_cmd(out, *extra):
        return [tools.sqar, "create", "-q", "--force", "-j", str(args.jobs), *codec, *extra, day2, out]

    cmds = {
        "sqar --reuse": (sqar_cmd(os.path.join(work, "reuse.sqfs"), "--reuse", old), os.path.join(work, "reuse.sqfs")),
        "sqar": (sqar_cmd(os.path.join(work, "fresh.sqfs")), os.path.join(work, "fresh.sqfs")),
        "mksquashfs": ([*peer, "mksquashfs", day2, os.path.join(work, "mksquashfs.sqfs"), "-noappend", "-processors",
                        str(args.jobs), "-comp", "zstd", "-Xcompression-level", str(args.level), "-b", str(BLOCK),
                        "-quiet", "-no-progress"], os.path.join(work, "mksquashfs.sqfs")),
    }
    results = {name: [] for name in cmds}
    bench.log("checked runs ...")
    # A fixed image time, so that the two sqar images can be compared byte for byte.
    fixed_time = dict(os.environ, SOURCE_DATE_EPOCH=str(int(os.path.getmtime(day1))))
    for name, (cmd, _) in cmds.items():
        bench.run_measured(cmd, 3600, env=fixed_time)
    if open(cmds["sqar"][1], "rb").read() != open(cmds["sqar --reuse"][1], "rb").read():
        sys.exit("bench: the --reuse image differs from the fresh one")
    stats = json.loads(bench.run_quiet(sqar_cmd(cmds["sqar --reuse"][1], "--reuse", old, "--json")))
    bench.check_output(tools, cmds["sqar --reuse"][1], bench.describe_tree(day2), os.path.join(work, "check"), 3600)
    for i in range(args.runs):
        bench.log(f"run {i + 1}/{args.runs}")
        for name, (cmd, _) in cmds.items():
            results[name].append(bench.run_measured(cmd, 3600))

    def medians(name):
        rs = results[name]
        return (bench.med([r.wall for r in rs]), bench.med([r.cpu for r in rs]),
                bench.med([r.rss_kib for r in rs]) / 1024, os.path.getsize(cmds[name][1]) / 2**20)

    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(day2) for f in fs)
    lines = [f"# sqar benchmark: nightly rebuild of the {args.set} set, {datetime.date.today()}", "",
             f"Command: `python3 bench/rebuild.py --set {args.set} --scale {args.scale:g} --runs {args.runs} "
             f"--level {args.level}{' --peers-run ' + args.peers_run if peer else ''}`", "",
             bench.machine_description(tools), "",
             *([f"mksquashfs: {bench.run_quiet([*peer, 'mksquashfs', '-version']).splitlines()[0]}, run in the "
                "newest peers' chroot (~40 ms of its wall time is entering it)", ""] if peer else []),
             f"Day 2: {total / 2**20:.1f} MiB of files, of which {change}. Every tool: zstd-{args.level}, 128 KiB blocks, "
             f"{args.jobs} cores, warm page cache. Medians of {args.runs} interleaved runs after a checked one "
             "(sqar's two images byte-identical; unsquashfs of the --reuse image matches the tree).", "",
             "| tool | wall s | CPU s | peak RSS MiB | size MiB | wall vs mksquashfs | wall vs sqar |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    base, fresh = medians("mksquashfs")[0], medians("sqar")[0]
    for name in cmds:
        wall, cpu, rss, size = medians(name)
        lines.append(f"| {name} | {wall:.2f} | {cpu:.2f} | {rss:.0f} | {size:.1f} | {wall / base:.2f} | "
                     f"{wall / fresh:.2f} |")
    lines += ["", f"- `--reuse` copied {stats['blocks_reused']} blocks and {stats['fragments_reused']} of "
              f"{stats['fragments']} fragment blocks ({stats['reused_bytes'] / 2**20:.1f} MiB) and compressed "
              f"{stats['blocks_compressed']} ({stats['codec_input_bytes'] / 2**20:.1f} MiB of codec input); "
              f"{stats['reuse_mismatches']} blocks of day 1 did not match.",
              "- Per-run wall times (s): " + "; ".join(
                  f"{n}: " + ", ".join(f"{r.wall:.2f}" for r in results[n]) for n in cmds)]
    report = "\n".join(lines) + "\n"
    out = args.out or os.path.join(bench.RESULTS_DIR, f"{datetime.date.today()}-rebuild-{args.set}.md")
    with open(out, "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
