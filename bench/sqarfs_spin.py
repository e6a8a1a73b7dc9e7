#!/usr/bin/env python3
"""How much CPU sqarfs's adaptive spin takes under a client too slow for spinning to pay: a
LOOKUP every millisecond, longer than the spin window, so spinning would only burn CPU. The
window must shrink away (a fixed 500 us spin used 43% of a core; adapted, under 20%). A figure
for a quiet machine, not a test: run as root, with the tree built by the e2e helpers.

    SQARFS=build/fuse/sqarfs python3 bench/sqarfs_spin.py [--spin 500] [--lookups 800]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from sqarfs_common import make_tree, sqarfs_binary  # noqa: E402
from sqarfs_foreground import ForegroundMount  # noqa: E402
from sqartest import mksquashfs, tempdir  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spin", type=int, default=500, help="sqarfs -o spin=US (default 500)")
    ap.add_argument("--lookups", type=int, default=800, help="lookups, 1 ms apart (default 800)")
    args = ap.parse_args()
    with tempdir() as tmp:
        src, mnt, img = f"{tmp}/src", f"{tmp}/mnt", f"{tmp}/img.sqfs"
        make_tree(src)
        mksquashfs(src, img, "-comp", "zstd")
        os.makedirs(mnt)
        with ForegroundMount([sqarfs_binary(), img, mnt, "-o", f"spin={args.spin}"], mnt) as m:
            if not m.mounted:
                sys.exit(f"sqarfs did not mount: {m.stderr[-500:]}")
            before, t0 = cpu_seconds(m.proc.pid), time.monotonic()
            for i in range(args.lookups):
                try:
                    os.stat(f"{mnt}/no-such-entry-{i}")  # a new name: always a LOOKUP
                except FileNotFoundError:
                    pass
                time.sleep(0.001)
            share = (cpu_seconds(m.proc.pid) - before) / (time.monotonic() - t0)
        print(f"lookups 1 ms apart, spin={args.spin}: daemon CPU {share:.0%} of wall time")
        if m.problem():
            sys.exit(m.problem())


if __name__ == "__main__":
    main()
