#!/usr/bin/env python3
"""gzip against squashfs-tools (the Debian sid chroot's mksquashfs/unsquashfs 4.7): `sqar create
-c gzip -l 9` against `mksquashfs -comp gzip` (level 9), then extracting mksquashfs's image with
`sqar extract` against `unsquashfs` into a tmpfs. Peers are timed inside the chroot, so its
mount setup (~40 ms a call) is not charged to them. Rounds interleave the tools and alternate
which goes first; each round's ratio is sqar / peer, and the medians of those ratios are the
result (a shared machine's load swings single runs by 2-4x). Prints a Markdown report with the
load average seen at each round.

    python3 bench/gzip_peers.py SRC --work /tmp/x --rounds 5 [--sqar build/tools/sqar] \\
        [--peers-run /work/peers-sid-run.sh] [--out bench/results/....md]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import sys

from benchlib import PEERS_RUN, timed, timed_chroot

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sqar", default=os.path.join(HERE, "..", "build", "tools", "sqar"))
    ap.add_argument("--peers-run", default=PEERS_RUN)
    ap.add_argument("--tmpfs", default="/dev/shm/sqar-gzip-peers")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    src, work = os.path.abspath(args.src), os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.tmpfs, exist_ok=True)
    binds = [src, work, args.tmpfs]
    ours, theirs = os.path.join(work, "sqar-gz.sqfs"), os.path.join(work, "mk-gz.sqfs")

    def sqar_create():
        return timed([args.sqar, "create", "-q", "-f", "-c", "gzip", "-l", "9", src, ours])

    def mk_create():
        if os.path.exists(theirs):
            os.unlink(theirs)
        return timed_chroot(binds, f"mksquashfs {src!r} {theirs!r} -noappend -quiet -no-progress -comp gzip",
                            args.peers_run)

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
        pair = [("sqar x", sqar_extract), ("unsquashfs", unsquashfs_extract)]
        got.update({name: fn() for name, fn in (pair if r % 2 == 0 else pair[::-1])})
        rows.append((load, got))
        print(f"round {r + 1} (load {load:.1f}): " + ", ".join(f"{k} {v:.2f} s" for k, v in got.items()), flush=True)

    size_s, size_m = os.path.getsize(ours), os.path.getsize(theirs)
    c_ratio = [g["sqar"] / g["mksquashfs"] for _, g in rows]
    x_ratio = [g["sqar x"] / g["unsquashfs"] for _, g in rows]
    files = sum(len(f) for _, _, f in os.walk(src))
    mib = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs
              if not os.path.islink(os.path.join(d, f))) / 2**20
    loads = [l for l, _ in rows]
    lines = [f"Input: {src}, {mib:.0f} MiB in {files} files. {args.rounds} rounds, load average "
             f"{min(loads):.1f}-{max(loads):.1f} at their start.", "",
             "| round | load | sqar create s | mksquashfs s | ratio | sqar extract s | unsquashfs s | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for i, (load, g) in enumerate(rows):
        lines.append(f"| {i + 1}{' (sqar first)' if i % 2 == 0 else ''} | {load:.1f} | {g['sqar']:.2f} | "
                     f"{g['mksquashfs']:.2f} | {c_ratio[i]:.2f} | {g['sqar x']:.2f} | {g['unsquashfs']:.2f} | "
                     f"{x_ratio[i]:.2f} |")
    lines += [f"| **median** | | {statistics.median(g['sqar'] for _, g in rows):.2f} | "
              f"{statistics.median(g['mksquashfs'] for _, g in rows):.2f} | **{statistics.median(c_ratio):.2f}** | "
              f"{statistics.median(g['sqar x'] for _, g in rows):.2f} | "
              f"{statistics.median(g['unsquashfs'] for _, g in rows):.2f} | **{statistics.median(x_ratio):.2f}** |", "",
              f"Size: sqar {size_s:,} bytes, mksquashfs {size_m:,}: **{size_s / size_m:.4f}x** (sqar's includes its "
              "manifest trailer)."]
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.out:
        pathlib.Path(args.out).write_text(report)


if __name__ == "__main__":
    sys.exit(main())
