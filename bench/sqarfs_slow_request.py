#!/usr/bin/env python3
"""Whether one slow request holds up every other client of a sqarfs mount. One thread reads a
small file every millisecond (O_DIRECT, so each read is a FUSE request) while another asks
SEEK_DATA on three files whose block lists are 2^25 words of holes each (128 MiB of metadata
to walk, about a second per call). The figure is the longest wait of a small read: with the
listener handing its role on only before data blocks, a request that reads nothing but
metadata kept the others waiting for its whole length.

Runs the builds given interleaved, a fresh mount each round; run as root:

    python3 bench/sqarfs_slow_request.py --sqarfs old=/tmp/sqarfs-old --sqarfs new=build/fuse/sqarfs \\
        [--rounds 7] [--out bench/results/DATE-sqarfs-slow-request.md]
"""
import argparse
import errno
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from craftfs import Image  # noqa: E402
from sqarfs_foreground import ForegroundMount  # noqa: E402
from sqartest import tempdir  # noqa: E402

from benchlib import machine_line, write_report  # noqa: E402

HUGE_FILES = 3


def make_image(path):
    """Three files of 2^25 hole blocks of 1 MiB (a 32 TiB sparse file each) and a small one."""
    img = Image(block_size=1 << 20, compress_meta=True)
    files = {f"huge{i}": img.file(blocks=1 << 25, extended=True) for i in range(HUGE_FILES)}
    files["small"] = img.file(b"s" * 100)
    with open(path, "wb") as f:
        f.write(img.build(img.dir(files)))


def one_round(mnt):
    """(seconds of the SEEK_DATA calls, longest small-read wait in seconds, small reads done)."""
    waits, stop = [], threading.Event()

    def small_reader():
        fd = os.open(f"{mnt}/small", os.O_RDONLY | os.O_DIRECT)
        try:
            while not stop.is_set():
                t = time.monotonic()
                os.pread(fd, 100, 0)
                waits.append(time.monotonic() - t)
                time.sleep(0.001)
        finally:
            os.close(fd)

    reader = threading.Thread(target=small_reader)
    reader.start()
    time.sleep(0.3)
    start = time.monotonic()
    for i in range(HUGE_FILES):
        fd = os.open(f"{mnt}/huge{i}", os.O_RDONLY)
        try:
            os.lseek(fd, 0, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # all holes: no data after offset 0
                raise
        finally:
            os.close(fd)
    seek_seconds = time.monotonic() - start
    time.sleep(0.2)
    stop.set()
    reader.join()
    return seek_seconds, max(waits), len(waits)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sqarfs", action="append", required=True, help="NAME=BINARY [options after spaces]")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out")
    args = ap.parse_args()
    builds = {}
    for spec in args.sqarfs:
        name, _, cmd = spec.partition("=")
        builds[name] = cmd.split()
    results = {name: [] for name in builds}
    with tempdir() as tmp:
        image, mnt = f"{tmp}/slow.sqfs", f"{tmp}/mnt"
        make_image(image)
        os.makedirs(mnt)
        for r in range(args.rounds):
            for name, cmd in builds.items():
                with ForegroundMount(cmd[:1] + [image, mnt] + cmd[1:], mnt) as m:
                    if not m.mounted:
                        sys.exit(f"{name} did not mount: {m.stderr[-500:]}")
                    results[name].append(one_round(mnt))
                seek, wait, n = results[name][-1]
                print(f"round {r + 1} {name}: SEEK_DATA x{HUGE_FILES} {seek:.2f} s, "
                      f"longest small read {wait * 1000:.0f} ms of {n}", flush=True)
    lines = [
        "# sqarfs: small reads beside a slow metadata-only request",
        "",
        f"`python3 bench/sqarfs_slow_request.py --rounds {args.rounds} "
        + " ".join(f"--sqarfs {s}" for s in args.sqarfs) + "`",
        "",
        machine_line(),
        "",
        "| build | SEEK_DATA x3, median s | longest small-read wait per round, ms | median ms | rounds over 100 ms |",
        "|---|---:|---|---:|---:|",
    ]
    for name, rows in results.items():
        waits = [w * 1000 for _, w, _ in rows]
        lines.append(f"| {name} | {statistics.median(s for s, _, _ in rows):.2f} | "
                     + " ".join(f"{w:.0f}" for w in waits)
                     + f" | {statistics.median(waits):.0f} | {sum(w > 100 for w in waits)} of {len(waits)} |")
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
