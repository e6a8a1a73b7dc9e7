#!/usr/bin/env python3
"""sqar benchmark: packing a tar of sparse members (mostly holes) against sqfstar and tar2sqfs.

    python3 bench/sparse_tar.py [--sqar build/tools/sqar] [--before OTHER_SQAR] [--runs 5]
                                [--members 2] [--gib 64] [--dir /tmp] [--out FILE]

Each member is --gib GiB of holes with a few KiB of data at three places, archived by GNU tar
as pax sparse members (a few KB of tar). `sqar create --tar` packs it at zstd with 1 MiB
blocks, and sqfstar (squashfs-tools) and tar2sqfs (squashfs-tools-ng), run in the newest
peers' chroot (../shared/bench/newest-peers.sh), pack the same tar with the same compressor and
block size; --before adds another sqar binary (an older build). Runs are interleaved
round-robin; the report gives medians and each one's ratio to the faster peer. A hole costs
nothing to store, so what this measures is how each tool's time follows the holes' length. A
benchmark, not a test: it never fails on speed.
"""
import argparse
import datetime
import os
import shutil
import subprocess
import tempfile

from benchlib import PEERS_RUN, interleaved, machine_line, medians, timed, timed_chroot, write_report


def make_tar(work, members, size):
    src = f"{work}/src"
    os.makedirs(src)
    for i in range(members):
        with open(f"{src}/sparse{i}", "wb") as f:
            f.truncate(size)
            for off in (4096 * i, size // 3 + 12345 * i, size - 4096):
                f.seek(off)
                f.write(b"data%d" % i * 800)
    tar = f"{work}/sparse.tar"
    # Members by name: sqfstar refuses a member named "." (GNU tar's for the top directory).
    subprocess.run(["tar", "--format=posix", "--sparse", "-C", src, "-cf", tar] + sorted(os.listdir(src)), check=True)
    return tar


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sqar", default="build/tools/sqar")
    ap.add_argument("--before", help="another sqar binary to compare with")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--members", type=int, default=2)
    ap.add_argument("--gib", type=int, default=64)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--out")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sqar-bench-sparse-tar-", dir=a.dir)
    try:
        tar = make_tar(work, a.members, a.gib << 30)
        img = f"{work}/img.sqfs"
        sqar_cmd = ["create", "-q", "-c", "zstd", "-l", "15", "-b", "1M", "--tar", tar, img]
        cases = {"sqar create --tar": lambda: timed([os.path.abspath(a.sqar)] + sqar_cmd)}
        if a.before:
            cases["before: sqar create --tar"] = lambda: timed([os.path.abspath(a.before)] + sqar_cmd)
        have_peers = os.path.exists(PEERS_RUN)
        if have_peers:
            cases["sqfstar"] = lambda: timed_chroot(
                [work], f"sqfstar -quiet -no-progress -comp zstd -Xcompression-level 15 -b 1M {img} < {tar}")
            cases["tar2sqfs"] = lambda: timed_chroot(
                [work], f"tar2sqfs -q -f -j 2 -c zstd -X level=15 -b 1048576 {img} < {tar}")
        times = interleaved(cases, a.runs, lambda _: os.path.exists(img) and os.unlink(img))
        med = medians(times)
        lines = [f"# Packing a tar of sparse members ({datetime.date.today()})", "", machine_line(),
                 f"{a.members} members of {a.gib} GiB each, a few KiB of data apiece; the tar is "
                 f"{os.path.getsize(tar)} bytes. zstd level 15, 1 MiB blocks.",
                 f"Medians of {a.runs} interleaved runs (`python3 bench/sparse_tar.py --gib {a.gib}`).", ""]
        if not have_peers:
            lines += [f"The peers were not run: {PEERS_RUN} is missing (../shared/bench/newest-peers.sh makes it).", ""]
        faster_peer = min((med[p] for p in ("sqfstar", "tar2sqfs") if p in med), default=None)
        lines += ["| command | median s | vs faster peer | runs |", "|---|---:|---:|---|"]
        for name in cases:
            ratio = f"{med[name] / faster_peer:.3f}x" if faster_peer else "-"
            lines.append(f"| {name} | {med[name]:.2f} | {ratio} | {', '.join(f'{t:.2f}' for t in times[name])} |")
        write_report(lines, a.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
