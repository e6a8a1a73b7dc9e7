#!/usr/bin/env python3
"""sqar against squashfs-tools (the Debian sid chroot's mksquashfs/unsquashfs 4.7): `sqar create
-c CODEC -l LEVEL` against `mksquashfs -comp CODEC -Xcompression-level LEVEL` (gzip 9 by
default, the mksquashfs default), then extracting mksquashfs's image with `sqar extract`
against `unsquashfs` into a tmpfs. After the timed rounds, both images (unpacked by the host's
unsquashfs) and sqar's extraction are compared with the source tree. Peers are timed inside the chroot, so its mount setup
(~40 ms a call) is not charged to them; peak RSS comes from GNU time on each side. Rounds
interleave the tools and alternate which goes first; each round's ratio is sqar / peer, and
the medians of those ratios are the result (a shared machine's load swings single runs by
2-4x). Prints a Markdown report with the load average seen at each round.

    python3 bench/gzip_peers.py SRC --work /tmp/x --rounds 5 [--codec zstd --level 15] \\
        [--no-extract] [--sqar build/tools/sqar] [--peers-run /work/peers-sid-run.sh] \\
        [--out bench/results/....md]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (describe_tree, compare_trees: the round-trip check)
from benchlib import PEERS_RUN, timed, timed_chroot  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sqar", default=os.path.join(HERE, "..", "build", "tools", "sqar"))
    ap.add_argument("--peers-run", default=PEERS_RUN)
    ap.add_argument("--tmpfs", default="/dev/shm/sqar-gzip-peers")
    ap.add_argument("--codec", default="gzip", choices=("gzip", "zstd", "xz", "lz4", "lzo"))
    ap.add_argument("--level", type=int, default=None, help="compression level (gzip and zstd; default: the codec's)")
    ap.add_argument("--no-extract", action="store_true", help="time create only")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    level = args.level if args.level is not None else {"gzip": 9, "zstd": 15}.get(args.codec)
    sqar_level = ["-l", str(level)] if level is not None else []
    mk_level = f" -Xcompression-level {level}" if level is not None else ""
    src, work = os.path.abspath(args.src), os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.tmpfs, exist_ok=True)
    binds = [src, work, args.tmpfs]
    tag = {"gzip": "gz"}.get(args.codec, args.codec)
    ours, theirs = os.path.join(work, f"sqar-{tag}.sqfs"), os.path.join(work, f"mk-{tag}.sqfs")
    rss_file = os.path.join(work, "rss")
    rss = {"sqar": [], "mksquashfs": []}

    def peak_rss():
        with open(rss_file) as f:
            return int(f.read().split()[-1])

    def sqar_create():
        t = timed(["/usr/bin/time", "-f", "%M", "-o", rss_file, args.sqar, "create", "-q", "-f", "-c", args.codec,
                   *sqar_level, src, ours])
        rss["sqar"].append(peak_rss())
        return t

    def mk_create():
        if os.path.exists(theirs):
            os.unlink(theirs)
        t = timed_chroot(binds, f"/usr/bin/time -f %M -o {rss_file!r} mksquashfs {src!r} {theirs!r} -noappend -quiet "
                                f"-no-progress -comp {args.codec}{mk_level}", args.peers_run)
        rss["mksquashfs"].append(peak_rss())
        return t

    def sqar_extract():
        shutil.rmtree(f"{args.tmpfs}/s", ignore_errors=True)
        t = timed([args.sqar, "extract", "-q", "-C", f"{args.tmpfs}/s", theirs])
        shutil.rmtree(f"{args.tmpfs}/s", ignore_errors=True)
        return t

    def unsquashfs_extract():
        shutil.rmtree(f"{args.tmpfs}/u", ignore_errors=True)
        t = timed_chroot(binds, f"unsquashfs -q -n -d {args.tmpfs + '/u'!r} {theirs!r}", args.peers_run)
        shutil.rmtree(f"{args.tmpfs}/u", ignore_errors=True)
        return t

    rows = []
    for r in range(args.rounds):
        load = os.getloadavg()[0]
        pair = [("sqar", sqar_create), ("mksquashfs", mk_create)]
        got = {name: fn() for name, fn in (pair if r % 2 == 0 else pair[::-1])}
        if not args.no_extract:
            pair = [("sqar x", sqar_extract), ("unsquashfs", unsquashfs_extract)]
            got.update({name: fn() for name, fn in (pair if r % 2 == 0 else pair[::-1])})
        rows.append((load, got))
        print(f"round {r + 1} (load {load:.1f}): " + ", ".join(f"{k} {v:.2f} s" for k, v in got.items()), flush=True)

    # Round trips, after the timing: both images unpacked by the host's unsquashfs, and sqar's
    # extraction of mksquashfs's image, each compared with the source tree.
    reference = bench.describe_tree(src)
    checked = os.path.join(args.tmpfs, "check")
    for image in (ours, theirs):
        bench.rmtree(checked)
        bench.run_quiet(["unsquashfs", "-d", checked, "-q", "-n", image], timeout=3600)
        bench.compare_trees(reference, checked)
    if not args.no_extract:
        bench.rmtree(checked)
        bench.run_quiet([args.sqar, "extract", "-q", "-C", checked, theirs], timeout=3600)
        bench.compare_trees(reference, checked)
    bench.rmtree(checked)

    size_s, size_m = os.path.getsize(ours), os.path.getsize(theirs)
    c_ratio = [g["sqar"] / g["mksquashfs"] for _, g in rows]
    x_ratio = [g["sqar x"] / g["unsquashfs"] for _, g in rows] if not args.no_extract else []
    files = sum(len(f) for _, _, f in os.walk(src))
    mib = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs
              if not os.path.islink(os.path.join(d, f))) / 2**20
    loads = [l for l, _ in rows]
    med = statistics.median
    lines = [f"Input: {src}, {mib:.0f} MiB in {files} files; {args.codec}{f' level {level}' if level else ''}. "
             f"{args.rounds} rounds, load average {min(loads):.1f}-{max(loads):.1f} at their start.", "",
             "| round | load | sqar create s | mksquashfs s | ratio |" +
             ("" if args.no_extract else " sqar extract s | unsquashfs s | ratio |"),
             "|---|---:|---:|---:|---:|" + ("" if args.no_extract else "---:|---:|---:|")]
    for i, (load, g) in enumerate(rows):
        lines.append(f"| {i + 1}{' (sqar first)' if i % 2 == 0 else ''} | {load:.1f} | {g['sqar']:.2f} | "
                     f"{g['mksquashfs']:.2f} | {c_ratio[i]:.2f} |" +
                     ("" if args.no_extract else f" {g['sqar x']:.2f} | {g['unsquashfs']:.2f} | {x_ratio[i]:.2f} |"))
    lines += [f"| **median** | | {med(g['sqar'] for _, g in rows):.2f} | {med(g['mksquashfs'] for _, g in rows):.2f} "
              f"| **{med(c_ratio):.2f}** |" +
              ("" if args.no_extract else
               f" {med(g['sqar x'] for _, g in rows):.2f} | {med(g['unsquashfs'] for _, g in rows):.2f} | "
               f"**{med(x_ratio):.2f}** |"), "",
              f"Size: sqar {size_s:,} bytes, mksquashfs {size_m:,}: **{size_s / size_m:.4f}x** (sqar's includes its "
              "manifest trailer). Both images unpacked by unsquashfs" +
              ("" if args.no_extract else ", and sqar's extraction of mksquashfs's,") +
              " match the source tree (paths, types, modes, sizes, content).",
              f"Create peak RSS (medians): sqar {med(rss['sqar']) / 1024:.0f} MiB, mksquashfs "
              f"{med(rss['mksquashfs']) / 1024:.0f} MiB."]
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.out:
        pathlib.Path(args.out).write_text(report)


if __name__ == "__main__":
    sys.exit(main())
