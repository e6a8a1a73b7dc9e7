#!/usr/bin/env python3
"""`sqar create --tar` against the peers that pack a tar stream into SquashFS: sqfstar
(squashfs-tools 4.7) and tar2sqfs (squashfs-tools-ng), both run in the Debian sid chroot
(/work/peers-sid-run.sh). For the ports and log sets (bench gen_data.py), a .tar and a .tar.zst
of each (GNU tar, pax); every tool at zstd level LEVEL, 128 KiB blocks, all cores, an export
table. sqar and tar2sqfs read the .tar.zst themselves; sqfstar reads only plain tar, so it gets
`zstd -dc` through a pipe (which decodes on the other core). Rounds are interleaved so the noise
of a shared machine hits all tools alike; the result is the median of per-round ratios to the
faster peer, for wall time and for image size. Warm page cache (each archive is read once first).
Peer times are measured inside the chroot (its mount setup is not counted).

    python3 bench/create_tar.py --scale 0.1 --runs 3 [--level 15] [--sqar build/tools/sqar] \
        [--work /tmp/x] [--out bench/results/2026-11-25-create-tar.md]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import PEERS_RUN, timed_chroot

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def timed_host(cmd):
    start = time.monotonic()
    sh(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--level", type=int, default=15)
    ap.add_argument("--sqar", default=os.path.join(HERE, "..", "build", "tools", "sqar"))
    ap.add_argument("--gen-data", default="/work/shared/bench/gen_data.py")
    ap.add_argument("--work", default=None)
    ap.add_argument("--sets", default="ports,log")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not os.path.exists(PEERS_RUN):
        sys.exit(f"{PEERS_RUN} is missing: build the newest peers with ../shared/bench/newest-peers.sh")
    sqar = os.path.abspath(args.sqar)
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="sqar-bench-tarin-"))
    data = os.path.join(work, "data")
    sets = args.sets.split(",")
    for s in sets:
        if not os.path.isdir(os.path.join(data, s)):
            sh([sys.executable, args.gen_data, data, "--scale", str(args.scale), "--only", s])
    archives = []
    for s in sets:
        tar = os.path.join(work, f"{s}.tar")
        if not os.path.exists(tar):
            sh(["tar", "--format=posix", "-C", os.path.join(data, s), "-cf", tar, "."])
        if not os.path.exists(tar + ".zst"):
            sh(["zstd", "-q", "-T0", "-3", tar, "-o", tar + ".zst"])
        archives += [tar, tar + ".zst"]
    lv = args.level

    def tools(archive, img):
        zst = archive.endswith(".zst")
        feed = f"zstd -dc {archive!r} |" if zst else ""
        redirect = "" if zst else f"< {archive!r}"
        return {
            "sqar": lambda: timed_host([sqar, "create", "-q", "-f", "-c", "zstd", "-l", str(lv), "-b", "128K", "--tar",
                                        archive, img]),
            "sqfstar": lambda: timed_chroot([work], f"rm -f {img!r}; {feed} sqfstar -quiet -no-progress -comp zstd "
                                                  f"-Xcompression-level {lv} -b 131072 {img!r} {redirect}"),
            "tar2sqfs": lambda: timed_chroot([work], f"tar2sqfs -q -f -e -j 2 -c zstd -X level={lv} -b 131072 "
                                                   f"{img!r} < {archive!r}"),
        }

    rows = []
    for archive in archives:
        sh(["cat", archive], stdout=subprocess.DEVNULL)
        imgs = {t: os.path.join(work, f"out-{t}.sqfs") for t in ("sqar", "sqfstar", "tar2sqfs")}
        wall = {t: [] for t in imgs}
        for r in range(args.runs):
            for t, fn in tools(archive, imgs["sqar"]).items():
                fn_t = tools(archive, imgs[t])[t]
                wall[t].append(fn_t())
            print(f"{os.path.basename(archive)} run {r + 1}: " +
                  ", ".join(f"{t} {w[-1]:.2f} s" for t, w in wall.items()), flush=True)
        size = {t: os.path.getsize(p) for t, p in imgs.items()}
        # Ratios per round against the faster peer of that round, then their median.
        ratios = [wall["sqar"][i] / min(wall["sqfstar"][i], wall["tar2sqfs"][i]) for i in range(args.runs)]
        faster = "sqfstar" if statistics.median(wall["sqfstar"]) <= statistics.median(wall["tar2sqfs"]) else "tar2sqfs"
        rows.append((os.path.basename(archive), os.path.getsize(archive), {t: statistics.median(w) for t, w in wall.items()},
                     statistics.median(ratios), size, size["sqar"] / size[faster], faster))
        # The peers' images hold the same tree: unsquashfs -lls listings must agree.
        listing = {t: sh(["unsquashfs", "-lln", "-d", "", p], stdout=subprocess.PIPE).stdout for t, p in imgs.items()}
        for t in ("sqfstar", "tar2sqfs"):
            a = set(l.split()[-1] for l in listing["sqar"].decode(errors="replace").splitlines()[1:] if l)
            b = set(l.split()[-1] for l in listing[t].decode(errors="replace").splitlines()[1:] if l)
            if a != b:
                print(f"warning: {t}'s image lists {len(a ^ b)} names differently from sqar's", file=sys.stderr)
    load = os.getloadavg()
    lines = [f"# create --tar against sqfstar 4.7.5 and tar2sqfs 1.3.2 (scale {args.scale})", "",
             f"zstd level {lv}, 128 KiB blocks, all cores (2), export table; medians of {args.runs} interleaved rounds;",
             "ratios are medians of per-round ratios to the faster peer of that round (wall) and to the image",
             f"of the peer faster overall (size). Load average {load[0]:.1f} / {load[1]:.1f} / "
             f"{load[2]:.1f} (1, 5, 15 min) at the end.", "",
             "| archive | MB | sqar s | sqfstar s | tar2sqfs s | sqar / faster peer | sqar MB | sqfstar MB | tar2sqfs MB | size vs faster |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, asize, med, ratio, size, sratio, faster in rows:
        lines.append(f"| {name} | {asize / 1e6:.1f} | {med['sqar']:.2f} | {med['sqfstar']:.2f} | {med['tar2sqfs']:.2f} | "
                     f"{ratio:.2f}x ({faster}) | {size['sqar'] / 1e6:.2f} | {size['sqfstar'] / 1e6:.2f} | "
                     f"{size['tar2sqfs'] / 1e6:.2f} | {sratio:.3f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
